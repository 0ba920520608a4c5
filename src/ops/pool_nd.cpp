// Pooling with indices and 3-D pooling: max_pool2d_with_indices (values and int64 flat indices
// h * W + w within each input plane), max_pool3d / max_pool3d_with_indices (indices
// d * H * W + h * W + w), avg_pool3d, adaptive_avg_pool3d / _adaptive_avg_pool3d. The windows
// follow max_pool2d's (conv.cpp): PyTorch's pooling_output_shape with ceil_mode, padding at most
// half the kernel. The computation is core/pool_nd.h, which the runtime externs share
// (runtime/kernels/pool_nd.cpp). Max pooling keeps a channels-last (3-D: channels_last_3d)
// input's layout as PyTorch's CPU kernels do; avg_pool3d and adaptive_avg_pool3d results are
// contiguous whatever the input's layout, as PyTorch's are.
#include "core/pool_nd.h"

#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace conv_detail {  // defined in conv.cpp
SymInt pool_out_sym(const SymInt& in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode);
}  // namespace conv_detail

namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
namespace sa = ir::shape_args;

/// A constant int list argument of a shape rule (default `dflt` when absent).
std::vector<int64_t> const_ints(const Node& node, const char* name,
                                std::optional<std::vector<int64_t>> dflt) {
  std::optional<std::vector<SymInt>> d;
  if (dflt) d = std::vector<SymInt>(dflt->begin(), dflt->end());
  std::vector<int64_t> out;
  for (const SymInt& s : sa::symints(node, name, d)) {
    if (!s.is_constant()) sa::fail(node, str("'", name, "' must be constant"), "ints", s.str());
    out.push_back(s.constant());
  }
  return out;
}

/// The window of a pooling node's arguments (dilation 1 for average pooling).
pool::Window window_of(const Node& node, int rank, bool with_dilation) {
  return pool::make_window(rank, const_ints(node, "kernel_size", std::nullopt),
                           const_ints(node, "stride", std::vector<int64_t>{}),
                           const_ints(node, "padding", std::vector<int64_t>{0}),
                           with_dilation ? const_ints(node, "dilation", std::vector<int64_t>{1})
                                         : std::vector<int64_t>{1},
                           node_where(node));
}

/// Output type of a `rank`-D pooling node: self's with the pooled dims resized.
TensorType pooled_type(const Node& node, int rank, bool with_dilation) {
  const TensorType& x = sa::type(node, "self");
  const size_t nd = x.sizes.size();
  if (nd != static_cast<size_t>(rank) + 1 && nd != static_cast<size_t>(rank) + 2)
    sa::fail(node, str(rank, "-D pooling needs a ", rank + 1, "-D or ", rank + 2, "-D input"),
             rank == 3 ? "[N, C, D, H, W] or [C, D, H, W]" : "[N, C, H, W] or [C, H, W]", x.str());
  if (x.dtype == DType::kBool) sa::fail(node, "pooling does not support bool", "a number", "bool");
  const pool::Window w = window_of(node, rank, with_dilation);
  const bool ceil_mode = sa::bool_(node, "ceil_mode", false);
  TensorType t = x;
  t.strides.clear();
  for (size_t i = 0; i < static_cast<size_t>(rank); ++i) {
    SymInt& s = t.sizes[nd - static_cast<size_t>(rank) + i];
    s = conv_detail::pool_out_sym(s, w.kernel[i], w.pad[i], w.stride[i], w.dilation[i], ceil_mode);
    if (s.is_constant() && s.constant() < 1)
      sa::fail(node, "output size is too small", "an output of at least 1 along every pooled dim",
               x.str());
  }
  return t;
}

/// Values (and int64 indices) of a max pooling node.
std::vector<TensorType> max_pool_types(const Node& node, int rank, bool with_indices) {
  TensorType v = pooled_type(node, rank, true);
  if (!with_indices) return {v};
  TensorType i = v;
  i.dtype = DType::kInt64;
  return {v, i};
}

/// `t` in channels-last (3-D: channels_last_3d) layout when `x` is, as PyTorch's CPU pooling.
Tensor layout_of_input(const Tensor& t, const Tensor& x, int rank) {
  if (rank == 2) return channels_last_like(t, x);
  if (x.dim() == 5 && !x.is_contiguous() && x.strides() == memory_format_strides(x.sizes(), 3))
    return copy_in_format(t, t.dtype(), 3);
  return t;
}

/// Runs max pooling; returns values (and indices when asked).
std::vector<RValue> max_pool_kernel(KernelContext& ctx, int rank, bool with_indices) {
  const Tensor& x = ctx.tensor("self");
  const pool::Window w =
      pool::make_window(rank, ctx.ints("kernel_size"), ctx.ints("stride", {}),
                        ctx.ints("padding", {0}), ctx.ints("dilation", {1}), ctx.where());
  const bool ceil_mode = ctx.bool_arg("ceil_mode", false);
  const Shape sizes = pool::output_sizes(x, w, ceil_mode, ctx.where());
  Tensor values = Tensor::empty(sizes, x.dtype());
  Tensor indices = Tensor::empty(sizes, DType::kInt64);
  pool::max_pool(x, w, ceil_mode, values, with_indices ? &indices : nullptr, ctx.where());
  if (!with_indices) return {layout_of_input(values, x, rank)};
  return {layout_of_input(values, x, rank), layout_of_input(indices, x, rank)};
}

/// Runs 3-D average pooling.
std::vector<RValue> avg_pool3d_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  const pool::Window w = pool::make_window(3, ctx.ints("kernel_size"), ctx.ints("stride", {}),
                                           ctx.ints("padding", {0}), {1}, ctx.where());
  const bool ceil_mode = ctx.bool_arg("ceil_mode", false);
  const int64_t divisor = ctx.int_arg("divisor_override", 0);
  if (ctx.has("divisor_override") && divisor == 0)
    ctx.fail("divisor must be non-zero", "divisor_override != 0", "0");
  Tensor out = Tensor::empty(pool::output_sizes(x, w, ceil_mode, ctx.where()), x.dtype());
  pool::avg_pool(x, w, ceil_mode, ctx.bool_arg("count_include_pad", true), divisor, out,
                 ctx.where());
  return {out};  // contiguous, as PyTorch gives it even for a channels_last_3d input
}

/// Output type of adaptive_avg_pool3d.
std::vector<TensorType> adaptive3d_type(const Node& node) {
  const TensorType& x = sa::type(node, "self");
  if (x.sizes.size() != 4 && x.sizes.size() != 5)
    sa::fail(node, "3-D pooling needs a 4-D or 5-D input", "[N, C, D, H, W] or [C, D, H, W]",
             x.str());
  if (!is_floating(x.dtype) || is_float8(x.dtype))
    sa::fail(node, "adaptive average pooling needs a floating input", "a float dtype",
             dtype_name(x.dtype));
  std::vector<SymInt> os = sa::symints(node, "output_size");
  if (os.size() == 1) os = std::vector<SymInt>(3, os[0]);
  if (os.size() != 3)
    sa::fail(node, "'output_size' must have 1 or 3 values", "3 values", str(os.size()));
  TensorType t = x;
  t.strides.clear();
  for (size_t i = 0; i < 3; ++i) t.sizes[x.sizes.size() - 3 + i] = os[i];
  return {t};
}

/// Runs adaptive_avg_pool3d.
std::vector<RValue> adaptive3d_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  Tensor out =
      Tensor::empty(pool::adaptive_sizes(x, 3, ctx.ints("output_size"), ctx.where()), x.dtype());
  pool::adaptive_avg_pool(x, 3, out, ctx.where());
  return {out};  // contiguous, as PyTorch gives it even for a channels_last_3d input
}

}  // namespace

std::vector<TensorType> shape_max_pool2d_with_indices(const Node& n) {
  return max_pool_types(n, 2, true);
}
std::vector<RValue> kernel_max_pool2d_with_indices(KernelContext& ctx) {
  return max_pool_kernel(ctx, 2, true);
}
std::vector<TensorType> shape_max_pool3d(const Node& n) { return max_pool_types(n, 3, false); }
std::vector<RValue> kernel_max_pool3d(KernelContext& ctx) { return max_pool_kernel(ctx, 3, false); }
std::vector<TensorType> shape_max_pool3d_with_indices(const Node& n) {
  return max_pool_types(n, 3, true);
}
std::vector<RValue> kernel_max_pool3d_with_indices(KernelContext& ctx) {
  return max_pool_kernel(ctx, 3, true);
}
std::vector<TensorType> shape_avg_pool3d(const Node& n) { return {pooled_type(n, 3, false)}; }
std::vector<RValue> kernel_avg_pool3d(KernelContext& ctx) { return avg_pool3d_kernel(ctx); }
std::vector<TensorType> shape_adaptive_avg_pool3d(const Node& n) { return adaptive3d_type(n); }
std::vector<RValue> kernel_adaptive_avg_pool3d(KernelContext& ctx) {
  return adaptive3d_kernel(ctx);
}
// _adaptive_avg_pool3d: the same op under its ATen-internal name (run_decompositions gives it).
std::vector<TensorType> shape_adaptive_avg_pool3d_internal(const Node& n) {
  return adaptive3d_type(n);
}
std::vector<RValue> kernel_adaptive_avg_pool3d_internal(KernelContext& ctx) {
  return adaptive3d_kernel(ctx);
}

}  // namespace anvil::ops
