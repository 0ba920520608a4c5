// Grid sampling and sliding blocks: grid_sampler (F.grid_sample as exports keep it; 4-D inputs)
// and grid_sampler_2d (its Core ATen form), im2col (F.unfold) and col2im (F.fold). The
// computation is core/sample.h, which the runtime externs share (runtime/kernels/sample.cpp);
// results are contiguous, as PyTorch's CPU kernels give them.
#include "core/sample.h"

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

/// Shape rule of grid_sampler / grid_sampler_2d: [N, C, H_out, W_out].
std::vector<TensorType> grid_type(const Node& node) {
  const TensorType& x = sa::type(node, "input");
  const TensorType& g = sa::type(node, "grid");
  if (x.sizes.size() == 5)
    sa::fail(node, "3-D grid sampling (a 5-D input) is not supported", "a 4-D input", x.str());
  if (x.sizes.size() != 4)
    sa::fail(node, "2-D grid sampling needs a 4-D input", "[N, C, H, W]", x.str());
  if (g.sizes.size() != 4 || g.sizes[3] != SymInt(2))
    sa::fail(node, "the grid must be [N, H_out, W_out, 2]", "[N, H_out, W_out, 2]", g.str());
  if (!is_floating(x.dtype) || is_float8(x.dtype) || g.dtype != x.dtype)
    sa::fail(node, "grid sampling needs a floating input and a grid of its dtype",
             "matching f16, bf16, f32 or f64",
             str(dtype_name(x.dtype), " and ", dtype_name(g.dtype)));
  const int64_t mode = sa::int_(node, "interpolation_mode");
  const int64_t pad = sa::int_(node, "padding_mode");
  if (mode < 0 || mode > 2)
    sa::fail(node, "unknown interpolation_mode", "0 (bilinear), 1 (nearest) or 2 (bicubic)",
             str(mode));
  if (pad < 0 || pad > 2)
    sa::fail(node, "unknown padding_mode", "0 (zeros), 1 (border) or 2 (reflection)", str(pad));
  TensorType t = x;
  t.strides.clear();
  t.sizes = {x.sizes[0], x.sizes[1], g.sizes[1], g.sizes[2]};
  return {t};
}

std::vector<RValue> grid_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("input");
  const Tensor& g = ctx.tensor("grid");
  const int64_t mode = ctx.int_arg("interpolation_mode"), pad = ctx.int_arg("padding_mode");
  if (x.dim() == 5)
    ctx.fail("3-D grid sampling (a 5-D input) is not supported", "a 4-D input", x.type_str());
  Tensor out = Tensor::empty(sample::grid_sample_sizes(x, g, mode, pad, ctx.where()), x.dtype());
  sample::grid_sample_2d(x, g, mode, pad, ctx.bool_arg("align_corners", false), out, ctx.where());
  return {out};
}

/// A constant int list argument with exactly 2 values.
std::vector<int64_t> pair_arg(const Node& node, const char* name) {
  std::vector<int64_t> out;
  for (const SymInt& s : sa::symints(node, name)) {
    if (!s.is_constant()) sa::fail(node, str("'", name, "' must be constant"), "ints", s.str());
    out.push_back(s.constant());
  }
  return out;
}

sample::Blocks blocks_of(const Node& node) {
  return sample::make_blocks(pair_arg(node, "kernel_size"), pair_arg(node, "dilation"),
                             pair_arg(node, "padding"), pair_arg(node, "stride"), node_where(node));
}

sample::Blocks blocks_of(const KernelContext& ctx) {
  return sample::make_blocks(ctx.ints("kernel_size"), ctx.ints("dilation"), ctx.ints("padding"),
                             ctx.ints("stride"), ctx.where());
}

/// Symbolic block count along dim i of a plane of size `in`.
SymInt block_count(const sample::Blocks& b, int i, const SymInt& in) {
  if (auto c = in.maybe_constant()) return b.count(i, *c);
  return (in + (2 * b.pad[i] - (b.dilation[i] * (b.kernel[i] - 1) + 1))).floordiv(b.stride[i]) + 1;
}

void check_floating_type(const Node& node, const TensorType& x) {
  if (!is_floating(x.dtype) || is_float8(x.dtype))
    sa::fail(node, "the input must be floating", "f16, bf16, f32 or f64", dtype_name(x.dtype));
}

}  // namespace

std::vector<TensorType> shape_grid_sampler(const Node& n) { return grid_type(n); }
std::vector<RValue> kernel_grid_sampler(KernelContext& ctx) { return grid_kernel(ctx); }
std::vector<TensorType> shape_grid_sampler_2d(const Node& n) { return grid_type(n); }
std::vector<RValue> kernel_grid_sampler_2d(KernelContext& ctx) { return grid_kernel(ctx); }

std::vector<TensorType> shape_im2col(const Node& node) {
  const TensorType& x = sa::type(node, "self");
  const size_t nd = x.sizes.size();
  if (nd != 3 && nd != 4)
    sa::fail(node, "im2col needs a 3-D or 4-D input", "[N, C, H, W] or [C, H, W]", x.str());
  check_floating_type(node, x);
  const sample::Blocks b = blocks_of(node);
  const SymInt bh = block_count(b, 0, x.sizes[nd - 2]), bw = block_count(b, 1, x.sizes[nd - 1]);
  if ((bh.is_constant() && bh.constant() < 1) || (bw.is_constant() && bw.constant() < 1))
    sa::fail(node, "the input plane holds no block", "at least one block along H and W", x.str());
  TensorType t = x;
  t.strides.clear();
  t.sizes.clear();
  if (nd == 4) t.sizes.push_back(x.sizes[0]);
  t.sizes.push_back(x.sizes[nd - 3] * (b.kernel[0] * b.kernel[1]));
  t.sizes.push_back(bh * bw);
  return {t};
}

std::vector<RValue> kernel_im2col(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  const sample::Blocks b = blocks_of(ctx);
  Tensor out = Tensor::empty(sample::im2col_sizes(x, b, ctx.where()), x.dtype());
  sample::im2col(x, b, out, ctx.where());
  return {out};
}

std::vector<TensorType> shape_col2im(const Node& node) {
  const TensorType& x = sa::type(node, "self");
  const size_t nd = x.sizes.size();
  if (nd != 2 && nd != 3)
    sa::fail(node, "col2im needs a 2-D or 3-D input", "[N, C * kh * kw, L] or [C * kh * kw, L]",
             x.str());
  check_floating_type(node, x);
  const sample::Blocks b = blocks_of(node);
  const std::vector<SymInt> os = sa::symints(node, "output_size");
  if (os.size() != 2)
    sa::fail(node, "'output_size' must have 2 values", "2 values", str(os.size()));
  const int64_t kk = b.kernel[0] * b.kernel[1];
  const SymInt& rows = x.sizes[nd - 2];
  if (rows.is_constant() && rows.constant() % kk != 0)
    sa::fail(node, "the input's rows must be divisible by the product of kernel_size",
             str("a multiple of ", kk), rows.str());
  const SymInt blocks = block_count(b, 0, os[0]) * block_count(b, 1, os[1]);
  if (blocks.is_constant() && x.sizes[nd - 1].is_constant() &&
      blocks.constant() != x.sizes[nd - 1].constant())
    sa::fail(node, "the input's columns must be the number of sliding blocks of output_size",
             blocks.str(), x.sizes[nd - 1].str());
  TensorType t = x;
  t.strides.clear();
  t.sizes.clear();
  if (nd == 3) t.sizes.push_back(x.sizes[0]);
  t.sizes.push_back(rows.floordiv(kk));
  t.sizes.push_back(os[0]);
  t.sizes.push_back(os[1]);
  return {t};
}

std::vector<RValue> kernel_col2im(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  const sample::Blocks b = blocks_of(ctx);
  Tensor out =
      Tensor::empty(sample::col2im_sizes(x, ctx.ints("output_size"), b, ctx.where()), x.dtype());
  sample::col2im(x, b, out, ctx.where());
  return {out};
}

}  // namespace anvil::ops
