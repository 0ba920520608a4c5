// More views and functional writes: diagonal (a view), select_scatter / slice_scatter (self with
// one index or slice of `dim` replaced by src), copy (src broadcast into a new tensor of self's
// sizes and dtype) and masked_scatter (self with the positions where mask is True filled from
// source's elements in row-major order). The compiler lowers diagonal as a strided view,
// select_scatter / slice_scatter / copy as index maps (passes/lower_pad.cpp) and masked_scatter
// as an extern call (runtime/kernels/shape.cpp).
#include <cstring>
#include <limits>

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

/// Normalised dim1 / dim2 of diagonal (distinct), and its offset.
struct Diag {
  int64_t d1, d2, offset;
};

Diag diag_args(int64_t offset, int64_t dim1, int64_t dim2, int64_t rank, const std::string& where) {
  if (rank < 2) throw Error("diagonal needs a tensor with at least 2 dims", where, "rank >= 2", str(rank));
  Diag d{wrap_dim(dim1, rank, where), wrap_dim(dim2, rank, where), offset};
  if (d.d1 == d.d2)
    throw Error("diagonal dimensions cannot be identical", where, "dim1 != dim2",
                str(dim1, ", ", dim2));
  return d;
}

/// The diagonal's length for sizes n1 (dim1) and n2 (dim2).
int64_t diag_len(int64_t n1, int64_t n2, int64_t offset) {
  return std::max<int64_t>(0, offset >= 0 ? std::min(n1, n2 - offset) : std::min(n1 + offset, n2));
}

}  // namespace

// ---- diagonal(self, offset=0, dim1=0, dim2=1): dims dim1 and dim2 removed, the diagonal last.

std::vector<TensorType> shape_diagonal(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  const Diag d = diag_args(sa::int_(node, "offset", 0), sa::int_(node, "dim1", 0),
                           sa::int_(node, "dim2", 1), static_cast<int64_t>(in.sizes.size()),
                           node_where(node));
  const SymInt& n1 = in.sizes[static_cast<size_t>(d.d1)];
  const SymInt& n2 = in.sizes[static_cast<size_t>(d.d2)];
  SymInt len;
  if (n1.is_constant() && n2.is_constant())
    len = SymInt(diag_len(n1.constant(), n2.constant(), d.offset));
  else if (d.offset == 0)
    len = SymInt::min(n1, n2);
  else
    sa::fail(node, "diagonal with an offset over symbolic sizes is not supported",
             "static sizes", in.str());
  std::vector<SymInt> out;
  for (size_t k = 0; k < in.sizes.size(); ++k)
    if (static_cast<int64_t>(k) != d.d1 && static_cast<int64_t>(k) != d.d2) out.push_back(in.sizes[k]);
  out.push_back(len);
  return {typed(in, out)};
}

std::vector<RValue> kernel_diagonal(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  const Diag d = diag_args(ctx.int_arg("offset", 0), ctx.int_arg("dim1", 0), ctx.int_arg("dim2", 1),
                           t.dim(), ctx.where());
  const int64_t len = diag_len(t.size(d.d1), t.size(d.d2), d.offset);
  Shape sizes, strides;
  for (int64_t k = 0; k < t.dim(); ++k)
    if (k != d.d1 && k != d.d2) {
      sizes.push_back(t.size(k));
      strides.push_back(t.stride(k));
    }
  sizes.push_back(len);
  strides.push_back(t.stride(d.d1) + t.stride(d.d2));
  int64_t off = t.storage_offset();
  if (len > 0) off += d.offset >= 0 ? d.offset * t.stride(d.d2) : -d.offset * t.stride(d.d1);
  return {t.as_strided(sizes, strides, off)};
}

// ---- select_scatter(self, src, dim, index) / slice_scatter(self, src, dim=0, start, end, step)

namespace {

/// Checks that src has the sizes of the part of self it replaces.
void check_scatter_src(const Node& node, const std::vector<SymInt>& want, const TensorType& src) {
  bool ok = want.size() == src.sizes.size();
  for (size_t i = 0; ok && i < want.size(); ++i) {
    auto a = want[i].maybe_constant(), b = src.sizes[i].maybe_constant();
    if (a && b && *a != *b) ok = false;
  }
  if (!ok)
    sa::fail(node, "src must have the sizes of the slice it replaces", sym_shape_str(want),
             sym_shape_str(src.sizes));
}

/// A copy of self with `part` (a view of the copy) overwritten by src.
template <typename F>
Tensor scatter_into(const KernelContext& ctx, F&& part) {
  const Tensor& self = ctx.tensor("self");
  Tensor out = self.contiguous().clone();
  Tensor dst = part(out);
  const Tensor& src = ctx.tensor("src");
  if (dst.sizes() != src.sizes())
    ctx.fail("src must have the sizes of the slice it replaces", shape_str(dst.sizes()),
             shape_str(src.sizes()));
  dst.copy_from(src);
  return out;
}

}  // namespace

std::vector<TensorType> shape_select_scatter(const Node& node) {
  TensorType in = sa::type(node, "self");
  const std::string where = node_where(node);
  if (in.sizes.empty()) sa::fail(node, "select_scatter needs a tensor with dims", "rank >= 1", "0");
  const int64_t d = wrap_dim(sa::int_(node, "dim"), static_cast<int64_t>(in.sizes.size()), where);
  std::vector<SymInt> want = in.sizes;
  want.erase(want.begin() + d);
  check_scatter_src(node, want, sa::type(node, "src"));
  in.strides.clear();
  return {in};
}

std::vector<RValue> kernel_select_scatter(KernelContext& ctx) {
  return {scatter_into(ctx, [&](const Tensor& out) {
    return out.select(ctx.int_arg("dim"), ctx.int_arg("index"));
  })};
}

std::vector<TensorType> shape_slice_scatter(const Node& node) {
  TensorType in = sa::type(node, "self");
  if (in.sizes.empty()) sa::fail(node, "slice_scatter needs a tensor with dims", "rank >= 1", "0");
  if (sa::int_(node, "step", 1) <= 0) sa::fail(node, "slice step must be positive", "step > 0",
                                               str(sa::int_(node, "step", 1)));
  wrap_dim(sa::int_(node, "dim", 0), static_cast<int64_t>(in.sizes.size()), node_where(node));
  in.strides.clear();
  return {in};
}

std::vector<RValue> kernel_slice_scatter(KernelContext& ctx) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return {scatter_into(ctx, [&](const Tensor& out) {
    return out.slice(ctx.int_arg("dim", 0), ctx.has("start") ? ctx.int_arg("start") : 0,
                     ctx.has("end") ? ctx.int_arg("end") : kMax, ctx.int_arg("step", 1));
  })};
}

// ---- copy(self, src, non_blocking): src broadcast to self's sizes, in self's dtype.

std::vector<TensorType> shape_copy(const Node& node) {
  TensorType self = sa::type(node, "self");
  const TensorType& src = sa::type(node, "src");
  const std::vector<SymInt> b = broadcast_sym_shapes(self.sizes, src.sizes, node_where(node));
  if (b.size() != self.sizes.size())
    sa::fail(node, "copy: src must broadcast to self's sizes", sym_shape_str(self.sizes),
             sym_shape_str(src.sizes));
  self.strides.clear();
  return {self};
}

std::vector<RValue> kernel_copy(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const Tensor& src = ctx.tensor("src");
  Tensor out = Tensor::empty(self.sizes(), self.dtype());
  if (src.dim() > self.dim())
    ctx.fail("copy: src must broadcast to self's sizes", shape_str(self.sizes()),
             shape_str(src.sizes()));
  out.copy_from(src.expand(self.sizes()));
  return {out};
}

// ---- masked_scatter(self, mask, source): the broadcast of self and mask; where mask is True,
// the next element of source (row-major) is taken.

std::vector<TensorType> shape_masked_scatter(const Node& node) {
  TensorType self = sa::type(node, "self");
  const TensorType& mask = sa::type(node, "mask");
  if (mask.dtype != DType::kBool)
    sa::fail(node, "masked_scatter needs a bool mask", "bool", dtype_name(mask.dtype));
  const TensorType& source = sa::type(node, "source");
  if (source.dtype != self.dtype)
    sa::fail(node, "masked_scatter: self and source must have the same dtype",
             dtype_name(self.dtype), dtype_name(source.dtype));
  self.sizes = broadcast_sym_shapes(self.sizes, mask.sizes, node_where(node));
  self.strides.clear();
  return {self};
}

std::vector<RValue> kernel_masked_scatter(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const Tensor& mask = ctx.tensor("mask");
  const Tensor source = ctx.tensor("source").contiguous();
  const Shape sizes = broadcast_shapes(self.sizes(), mask.sizes(), ctx.where());
  Tensor out = Tensor::empty(sizes, self.dtype());
  out.copy_from(self.expand(sizes));
  const Tensor m = mask.expand(sizes).contiguous();
  const bool* pm = m.data<bool>();
  const size_t es = out.element_size();
  char* po = static_cast<char*>(out.data_ptr());
  const char* ps = static_cast<const char*>(source.data_ptr());
  int64_t k = 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (!pm[i]) continue;
    if (k >= source.numel())
      ctx.fail("masked_scatter: source has fewer elements than mask has True values",
               str(">= ", k + 1, " elements"), str(source.numel()));
    std::memcpy(po + i * es, ps + k * es, es);
    ++k;
  }
  return {out};
}

}  // namespace anvil::ops
