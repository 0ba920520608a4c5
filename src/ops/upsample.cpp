// 2-D upsampling as F.interpolate exports it: upsample_bilinear2d (.vec / .default, with
// align_corners) and upsample_nearest2d (.vec / .default) on (N, C, H, W) tensors. The reference
// kernels follow PyTorch's CPU kernels: the source scale is (in-1)/(out-1) with align_corners,
// else 1/scale_factor when one is given, else in/out; bilinear reads
//   src = scale * (dst + 0.5) - 0.5 (clamped at 0), h0 = floor(src), h1 = min(h0 + 1, in - 1)
// and blends with (1 - l, l), l = src - h0; nearest reads min(floor(dst * scale), in - 1).
// Computed in float for float / 16-bit inputs (double for float64). The compiler lowers them as
// index maps (passes/lower_pad.cpp), with the scale as the exact ratio of sizes.
#include <cmath>

#include "ops/common.h"
#include "ops/pad.h"
#include "ops/registry.h"

namespace anvil::ops {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
namespace sa = ir::shape_args;

namespace {

bool is_vec(const Node& node) { return node.target.size() > 4 && node.target.substr(node.target.size() - 4) == ".vec"; }
bool is_bilinear(const Node& node) { return node.target.rfind("aten.upsample_bilinear2d", 0) == 0; }

}  // namespace

UpsampleInfo upsample_info(const Node& node) {
  const char* self = is_vec(node) ? "input" : "self";
  const TensorType& x = sa::type(node, self);
  if (x.sizes.size() != 4)
    sa::fail(node, "2-D upsampling needs an (N, C, H, W) input", "rank 4", x.str());
  if (!is_floating(x.dtype))
    sa::fail(node, "upsampling needs a floating input", "a floating dtype", dtype_name(x.dtype));
  UpsampleInfo u;
  u.bilinear = is_bilinear(node);
  u.align_corners = u.bilinear && sa::bool_(node, "align_corners", false);
  u.in = {x.sizes[2], x.sizes[3]};
  std::vector<double> scales;
  if (is_vec(node)) {
    if (sa::has(node, "scale_factors")) {
      const ir::Arg* a = node.arg("scale_factors");
      scales = a->floats;
      if (scales.size() != 2)
        sa::fail(node, "scale_factors must hold 2 values", "[scale_h, scale_w]",
                 std::to_string(scales.size()) + " values");
    }
  } else {
    for (const char* name : {"scales_h", "scales_w"})
      scales.push_back(sa::has(node, name) ? sa::float_(node, name) : 0.0);
  }
  const bool has_size = sa::has(node, "output_size");
  if (has_size) {
    u.out = sa::symints(node, "output_size");
    if (u.out.size() != 2)
      sa::fail(node, "output_size must hold 2 values", "[out_h, out_w]",
               std::to_string(u.out.size()) + " values");
  } else if (scales.empty()) {
    sa::fail(node, "upsampling needs output_size or scale_factors", "one of them", "neither");
  } else {
    for (size_t k = 0; k < 2; ++k) {
      const double s = scales[k];
      if (auto c = u.in[k].maybe_constant()) {
        u.out.emplace_back(static_cast<int64_t>(std::floor(static_cast<double>(*c) * s)));
      } else if (s == std::floor(s) && s >= 1) {
        u.out.push_back(u.in[k] * SymInt(static_cast<int64_t>(s)));
      } else {
        sa::fail(node, "a fractional scale factor over a symbolic size",
                 "an integer scale factor or output_size", str(s));
      }
    }
  }
  for (size_t k = 0; k < 2; ++k) {
    if (auto c = u.out[k].maybe_constant(); c && *c <= 0)
      sa::fail(node, "upsampling to an empty size", "output sizes > 0", std::to_string(*c));
    u.scale.push_back(k < scales.size() && scales[k] > 0 && !has_size ? scales[k] : 0.0);
  }
  // The .default forms pass the scales the kernel uses even with an output_size.
  if (!is_vec(node))
    for (size_t k = 0; k < 2; ++k) u.scale[k] = scales[k] > 0 ? scales[k] : 0.0;
  return u;
}

namespace {

std::vector<TensorType> upsample_shape(const Node& node) {
  const UpsampleInfo u = upsample_info(node);
  TensorType t = sa::type(node, is_vec(node) ? "input" : "self");
  t.sizes[2] = u.out[0];
  t.sizes[3] = u.out[1];
  t.strides.clear();
  return {t};
}

/// PyTorch's area_pixel_compute_scale in compute type C.
template <typename C>
C source_scale(int64_t in, int64_t out, bool align, double scale) {
  if (align) return out > 1 ? static_cast<C>(in - 1) / static_cast<C>(out - 1) : C(0);
  return scale > 0 ? static_cast<C>(1.0 / scale) : static_cast<C>(in) / static_cast<C>(out);
}

std::vector<RValue> upsample_kernel(KernelContext& ctx) {
  const UpsampleInfo u = upsample_info(ctx.node());
  const Tensor& input = ctx.tensor(is_vec(ctx.node()) ? "input" : "self");
  const int64_t n = input.size(0), c = input.size(1), ih = input.size(2), iw = input.size(3);
  const int64_t oh = u.out[0].constant(), ow = u.out[1].constant();
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(input.dtype(), ctx.where(), C, {
    const Tensor x = input.contiguous().to(dtype_of<C>());
    Tensor y = Tensor::empty({n, c, oh, ow}, dtype_of<C>());
    const C* px = x.data<C>();
    C* py = y.data<C>();
    const C sh = source_scale<C>(ih, oh, u.align_corners, u.scale[0]);
    const C sw = source_scale<C>(iw, ow, u.align_corners, u.scale[1]);
    auto src = [&](C scale, int64_t dst) {
      if (u.align_corners) return scale * static_cast<C>(dst);
      const C s = scale * (static_cast<C>(dst) + C(0.5)) - C(0.5);
      return s < 0 ? C(0) : s;
    };
    auto nearest = [&](int64_t dst, int64_t in, int64_t o, double given) -> int64_t {
      if (o == in) return dst;
      if (o == 2 * in) return dst >> 1;
      const float scale = given > 0 ? static_cast<float>(1.0 / given)
                                    : static_cast<float>(in) / static_cast<float>(o);
      return std::min(static_cast<int64_t>(std::floor(static_cast<float>(dst) * scale)), in - 1);
    };
    for (int64_t p = 0; p < n * c; ++p) {
      const C* plane = px + p * ih * iw;
      C* op = py + p * oh * ow;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          if (!u.bilinear) {
            op[i * ow + j] = plane[nearest(i, ih, oh, u.scale[0]) * iw + nearest(j, iw, ow, u.scale[1])];
            continue;
          }
          const C hr = src(sh, i), wr = src(sw, j);
          const int64_t h0 = static_cast<int64_t>(hr), w0 = static_cast<int64_t>(wr);
          const int64_t h1 = h0 + (h0 < ih - 1 ? 1 : 0), w1 = w0 + (w0 < iw - 1 ? 1 : 0);
          const C l1h = hr - static_cast<C>(h0), l0h = C(1) - l1h;
          const C l1w = wr - static_cast<C>(w0), l0w = C(1) - l1w;
          op[i * ow + j] = l0h * (l0w * plane[h0 * iw + w0] + l1w * plane[h0 * iw + w1]) +
                           l1h * (l0w * plane[h1 * iw + w0] + l1w * plane[h1 * iw + w1]);
        }
    }
    out = y;
  });
  return {channels_last_like(out.to(input.dtype()), input)};
}

}  // namespace

std::vector<TensorType> shape_upsample_bilinear2d_vec(const Node& n) { return upsample_shape(n); }
std::vector<RValue> kernel_upsample_bilinear2d_vec(KernelContext& c) { return upsample_kernel(c); }
std::vector<TensorType> shape_upsample_bilinear2d(const Node& n) { return upsample_shape(n); }
std::vector<RValue> kernel_upsample_bilinear2d(KernelContext& c) { return upsample_kernel(c); }
std::vector<TensorType> shape_upsample_nearest2d_vec(const Node& n) { return upsample_shape(n); }
std::vector<RValue> kernel_upsample_nearest2d_vec(KernelContext& c) { return upsample_kernel(c); }
std::vector<TensorType> shape_upsample_nearest2d(const Node& n) { return upsample_shape(n); }
std::vector<RValue> kernel_upsample_nearest2d(KernelContext& c) { return upsample_kernel(c); }

}  // namespace anvil::ops
