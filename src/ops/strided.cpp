// Storage-level views and queries: as_strided (a view of self's storage with the given sizes,
// strides and storage offset, the offset defaulting to self's) and the stride queries sym_stride
// / sym_storage_offset (SymInts: the importers record their symbolic value, the reference
// kernels read the tensor). The compiler lowers as_strided as a view over the storage of the
// tensor its input views (passes/lower_view.cpp); sym_stride / sym_storage_offset carry their
// expressions like sym_size.
#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
namespace sa = ir::shape_args;

/// PyTorch's checks of as_strided's sizes / strides / offset that need no storage: equal
/// lengths, sizes >= 0, strides >= 0, offset >= 0 (constants only).
void check_as_strided(const std::string& where, const std::vector<SymInt>& sizes,
                      const std::vector<SymInt>& strides, const std::optional<SymInt>& offset) {
  if (sizes.size() != strides.size())
    throw Error("as_strided: mismatch in length of strides and shape", where,
                str(sizes.size(), " strides for shape ", sym_shape_str(sizes)),
                str(strides.size(), " strides ", sym_shape_str(strides)));
  for (const SymInt& s : sizes)
    if (auto c = s.maybe_constant(); c && *c < 0)
      throw Error("as_strided: negative size", where, "sizes >= 0", sym_shape_str(sizes));
  for (const SymInt& s : strides)
    if (auto c = s.maybe_constant(); c && *c < 0)
      throw Error("as_strided: negative strides are not supported (as in PyTorch)", where,
                  "strides >= 0", sym_shape_str(strides));
  if (offset)
    if (auto c = offset->maybe_constant(); c && *c < 0)
      throw Error("as_strided: invalid storage offset", where, "a storage offset >= 0",
                  str(*c));
}

}  // namespace

// ---- as_strided(self, size, stride, storage_offset=None) --------------------------------------

std::vector<TensorType> shape_as_strided(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  std::vector<SymInt> sizes = sa::symints(node, "size"), strides = sa::symints(node, "stride");
  std::optional<SymInt> offset;
  if (sa::has(node, "storage_offset")) offset = sa::symint(node, "storage_offset");
  check_as_strided(node_where(node), sizes, strides, offset);
  TensorType out = typed(in, sizes);
  out.strides = strides;
  return {out};
}

std::vector<RValue> kernel_as_strided(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  const Shape sizes = ctx.ints("size"), strides = ctx.ints("stride");
  const int64_t offset =
      ctx.has("storage_offset") ? ctx.int_arg("storage_offset") : t.storage_offset();
  check_as_strided(ctx.where(), to_sym(sizes), to_sym(strides), SymInt(offset));
  // PyTorch's setStorage bound: the furthest element reached must lie inside the storage
  const int64_t capacity = static_cast<int64_t>(t.storage()->nbytes() / t.element_size());
  int64_t need = 0;
  if (shape_numel(sizes) > 0) {
    need = offset + 1;
    for (size_t i = 0; i < sizes.size(); ++i) need += (sizes[i] - 1) * strides[i];
  }
  if (need > capacity)
    ctx.fail("as_strided: the view is out of bounds for the storage of self",
             str("a storage of at least ", need, " elements (sizes ", shape_str(sizes),
                 ", strides ", shape_str(strides), ", storage offset ", offset, ")"),
             str("a storage of ", capacity, " elements"));
  return {t.as_strided(sizes, strides, offset)};
}

// ---- sym_stride.int(self, dim) / sym_storage_offset(self) ---------------------------------------

std::vector<TensorType> shape_sym_stride_int(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  const int64_t rank = static_cast<int64_t>(in.sizes.size()), d = sa::int_(node, "dim");
  if (d < -rank || d >= rank)
    sa::fail(node, "sym_stride: dimension out of range",
             rank ? str("a dim in [", -rank, ", ", rank - 1, "]") : "a tensor with dims",
             str("dim ", d, " of ", in.str()));
  return {};
}

std::vector<RValue> kernel_sym_stride_int(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  const int64_t rank = t.dim(), d = ctx.int_arg("dim");
  if (d < -rank || d >= rank)  // a 0-d tensor has no dims to ask about (as in PyTorch)
    ctx.fail("sym_stride: dimension out of range",
             rank ? str("a dim in [", -rank, ", ", rank - 1, "]") : "a tensor with dims",
             str("dim ", d, " of a tensor of sizes ", shape_str(t.sizes())));
  return {RValue(t.stride(d))};
}

std::vector<TensorType> shape_sym_storage_offset(const Node& node) {
  sa::type(node, "self");
  return {};
}

std::vector<RValue> kernel_sym_storage_offset(KernelContext& ctx) {
  return {RValue(ctx.tensor("self").storage_offset())};
}

}  // namespace anvil::ops
