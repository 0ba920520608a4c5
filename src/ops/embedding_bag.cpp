// embedding_bag.padding_idx and repeat_interleave.Tensor: shape rules and reference kernels. The
// loops are the runtime's (runtime/kernels/embedding_bag.h, which documents embedding_bag's four
// outputs), shared so that the interpreter and compiled models agree.
#include "runtime/kernels/embedding_bag.h"

#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

namespace sa = ir::shape_args;
namespace rk = runtime::kern;

/// The dtype of embedding_bag's index outputs: int32 when indices and offsets are both int32,
/// else int64 (PyTorch promotes them together).
DType bag_index_dtype(DType indices, std::optional<DType> offsets) {
  return indices == DType::kInt32 && (!offsets || *offsets == DType::kInt32) ? DType::kInt32
                                                                             : DType::kInt64;
}

/// A tensor type of `dtype` and `sizes` on `device`.
ir::TensorType make_type(DType dtype, std::vector<SymInt> sizes, Device device) {
  ir::TensorType t;
  t.dtype = dtype;
  t.sizes = std::move(sizes);
  t.device = device;
  return t;
}

}  // namespace

std::vector<ir::TensorType> shape_embedding_bag_padding_idx(const ir::Node& node) {
  const ir::TensorType& w = sa::type(node, "weight");
  const ir::TensorType& idx = sa::type(node, "indices");
  const bool has_off = sa::has(node, "offsets");
  const int64_t mode = sa::int_(node, "mode", 0);
  const bool last = sa::bool_(node, "include_last_offset", false);
  const int64_t padding_idx = sa::has(node, "padding_idx") ? sa::int_(node, "padding_idx") : -1;
  if (w.sizes.size() != 2) sa::fail(node, "weight has to be a 2-D tensor", "[N, D]", w.str());
  if (mode < 0 || mode > 2)
    sa::fail(node, "unknown embedding_bag mode", "0 (sum), 1 (mean) or 2 (max)", str(mode));
  if (!is_floating(w.dtype))
    sa::fail(node, "embedding_bag needs a floating weight", "a float dtype", dtype_name(w.dtype));
  if (idx.dtype != DType::kInt64 && idx.dtype != DType::kInt32)
    sa::fail(node, "indices must be int64 or int32", "int64 or int32", dtype_name(idx.dtype));
  SymInt bags;
  std::optional<DType> off_dtype;
  if (idx.sizes.size() == 2) {
    bags = idx.sizes[0];
  } else if (idx.sizes.size() == 1) {
    if (!has_off) sa::fail(node, "offsets has to be given for a 1-D input", "offsets", "None");
    const ir::TensorType& off = sa::type(node, "offsets");
    if (off.sizes.size() != 1) sa::fail(node, "offsets has to be a 1-D tensor", "1-D", off.str());
    off_dtype = off.dtype;
    bags = last ? off.sizes[0] - 1 : off.sizes[0];
  } else {
    sa::fail(node, "input has to be a 1-D or 2-D tensor", "1-D or 2-D", idx.str());
  }
  if (has_off && !off_dtype) off_dtype = sa::type(node, "offsets").dtype;
  const DType it = bag_index_dtype(idx.dtype, off_dtype);
  SymInt n = 1;
  for (const SymInt& s : idx.sizes) n = n * s;
  // PyTorch skips offset2bag on the sum fast path (see runtime/kernels/embedding_bag.h).
  const bool fast_sum =
      mode == 0 && padding_idx < 0 &&
      (w.dtype == DType::kFloat32 || w.dtype == DType::kFloat16 || w.dtype == DType::kBFloat16);
  std::vector<ir::TensorType> out;
  out.push_back(make_type(w.dtype, {bags, w.sizes[1]}, w.device));
  out.push_back(make_type(it, {fast_sum ? SymInt(0) : n}, w.device));
  out.push_back(make_type(it, {bags}, w.device));
  out.push_back(make_type(
      it, mode == 2 ? std::vector<SymInt>{bags, w.sizes[1]} : std::vector<SymInt>{bags}, w.device));
  return out;
}

std::vector<ir::RValue> kernel_embedding_bag_padding_idx(ir::KernelContext& ctx) {
  const Tensor& w = ctx.tensor("weight");
  const Tensor& idx = ctx.tensor("indices");
  const std::optional<Tensor> off = ctx.opt_tensor("offsets");
  rk::EmbeddingBagArgs a;
  a.mode = ctx.int_arg("mode", 0);
  a.include_last_offset = ctx.bool_arg("include_last_offset", false);
  a.padding_idx = ctx.has("padding_idx") ? ctx.int_arg("padding_idx") : -1;
  const std::string where = ctx.where();
  const Shape osz = off ? off->sizes() : Shape{};
  const int64_t bags =
      rk::embedding_bag_num_bags(w.sizes(), idx.sizes(), off ? &osz : nullptr, a, where);
  const DType it =
      bag_index_dtype(idx.dtype(), off ? std::optional<DType>(off->dtype()) : std::nullopt);
  // Default sizes of the index outputs (see the shape rule); the graph's static types win when
  // they are known (PyTorch's meta function decides, e.g. offset2bag [0] on the sum fast path).
  const bool fast_sum = a.mode == 0 && a.padding_idx < 0 &&
                        (w.dtype() == DType::kFloat32 || w.dtype() == DType::kFloat16 ||
                         w.dtype() == DType::kBFloat16);
  std::vector<Shape> sizes = {Shape{fast_sum ? 0 : idx.numel()}, Shape{bags},
                              a.mode == 2 ? Shape{bags, w.size(1)} : Shape{bags}};
  const auto& outs = ctx.node().outputs;
  for (size_t k = 1; k < 4 && k < outs.size(); ++k) {
    if (!outs[k]) continue;
    Shape s;
    for (const SymInt& d : outs[k]->type.sizes)
      if (auto c = d.maybe_constant()) s.push_back(*c);
    if (s.size() == outs[k]->type.sizes.size()) sizes[k - 1] = s;
  }
  Tensor output = Tensor::empty({bags, w.size(1)}, w.dtype());
  Tensor offset2bag = Tensor::empty(sizes[0], it);
  Tensor bag_size = Tensor::empty(sizes[1], it);
  Tensor max_indices = Tensor::empty(sizes[2], it);
  rk::embedding_bag(w, idx, off, ctx.opt_tensor("per_sample_weights"), a, output, offset2bag,
                    bag_size, max_indices, where);
  return {output, offset2bag, bag_size, max_indices};
}

std::vector<ir::TensorType> shape_repeat_interleave_Tensor(const ir::Node& node) {
  const ir::TensorType& r = sa::type(node, "repeats");
  if (r.sizes.size() > 1) sa::fail(node, "repeats has to be a 1-D tensor", "1-D", r.str());
  if (r.dtype != DType::kInt64 && r.dtype != DType::kInt32)
    sa::fail(node, "repeats has to be an int64 or int32 tensor", "int64 or int32",
             dtype_name(r.dtype));
  // Without output_size the length is the sum of the repeats: known only at run time (a fresh
  // unbacked size, which the interpreter binds and the compiler rejects).
  const SymInt size = sa::has(node, "output_size") ? sa::symint(node, "output_size")
                                                   : SymInt::symbol("u_" + node.name);
  return {make_type(r.dtype, {size}, r.device)};
}

std::vector<ir::RValue> kernel_repeat_interleave_Tensor(ir::KernelContext& ctx) {
  const Tensor& r = ctx.tensor("repeats");
  const int64_t total = rk::repeat_interleave_size(r, ctx.where());
  if (ctx.has("output_size") && ctx.int_arg("output_size") != total)
    ctx.fail("the sum of repeats does not match output_size", str(ctx.int_arg("output_size")),
             str(total));
  Tensor out = Tensor::empty({total}, r.dtype());
  rk::repeat_interleave(r, out, ctx.where());
  return {out};
}

}  // namespace anvil::ops
