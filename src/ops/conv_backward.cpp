// Gradients of convolution and 2-D pooling, as training exports carry them:
// convolution_backward (1-D and 2-D, groups, stride, padding, dilation, transposed or not; each
// of grad_input / grad_weight / grad_bias only where output_mask asks), avg_pool2d_backward,
// _adaptive_avg_pool2d_backward and max_pool2d_with_indices_backward (the indices come from the
// forward: flat positions h * W + w within each plane). Reference kernels written from the
// forward definitions: every term of the forward sum sends grad_output back to the input
// element and the weight tap it read. They compute in double and round once to the input's
// dtype. The compiler decomposes all four into convolutions, matmuls and scatter_add
// (passes/decompose_backward.cpp).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
namespace sa = ir::shape_args;

namespace {

/// An int list argument of `n` spatial values (a single value applies to every dim).
std::vector<int64_t> spatial(const std::vector<int64_t>& v, size_t n, const char* name,
                             const std::string& where, int64_t dflt_if_empty = -1) {
  if (v.empty() && dflt_if_empty >= 0) return std::vector<int64_t>(n, dflt_if_empty);
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  if (v.size() != n)
    throw Error(str("'", name, "' must have 1 or ", n, " values"), where, str(n, " values"),
                str(v.size()));
  return v;
}

/// Constant ints of a shape rule's list argument.
std::vector<int64_t> const_ints(const Node& node, const char* name) {
  std::vector<int64_t> out;
  for (const SymInt& s : sa::symints(node, name, std::vector<SymInt>{})) {
    if (!s.is_constant()) sa::fail(node, str("'", name, "' must be constant"), "ints", s.str());
    out.push_back(s.constant());
  }
  return out;
}

/// The geometry of one convolution (1-D convolutions as 2-D ones of height 1).
struct ConvGeom {
  int64_t n = 0, cin = 0, cout = 0, groups = 1;
  int64_t in[2] = {1, 1}, out[2] = {1, 1}, k[2] = {1, 1};
  int64_t s[2] = {1, 1}, p[2] = {0, 0}, d[2] = {1, 1}, op[2] = {0, 0};
  bool transposed = false;
};

/// Checks convolution_backward's sizes and arguments (constant sizes) and returns the geometry;
/// `gy`, `x`, `w` are the sizes of grad_output, input and weight.
ConvGeom conv_geom(const Shape& gy, const Shape& x, const Shape& w, const std::vector<int64_t>& s,
                   const std::vector<int64_t>& p, const std::vector<int64_t>& d,
                   const std::vector<int64_t>& op, bool transposed, int64_t groups,
                   const std::string& where) {
  if (x.size() != 3 && x.size() != 4)
    throw Error("convolution_backward needs a 3-D or 4-D input", where, "[N, C, (H,) W]",
                shape_str(x));
  if (w.size() != x.size() || gy.size() != x.size())
    throw Error("convolution_backward: grad_output, input and weight must have the same rank",
                where, str(x.size(), " dims"),
                str("grad_output ", shape_str(gy), ", weight ", shape_str(w)));
  if (groups <= 0) throw Error("groups must be positive", where, "> 0", str(groups));
  const size_t sp = x.size() - 2, off = 2 - sp;
  const auto ss = spatial(s, sp, "stride", where), pp = spatial(p, sp, "padding", where);
  const auto dd = spatial(d, sp, "dilation", where);
  const auto oo = spatial(op, sp, "output_padding", where, 0);
  ConvGeom g;
  g.n = x[0];
  g.cin = x[1];
  g.groups = groups;
  g.transposed = transposed;
  g.cout = transposed ? w[1] * groups : w[0];
  const int64_t w_in = transposed ? w[0] : w[1] * groups;
  if (g.cin != w_in || g.cin % groups != 0 || g.cout % groups != 0)
    throw Error("convolution_backward: the weight does not match the input's channels and groups",
                where, str(g.cin, " input channels, groups ", groups),
                str("weight ", shape_str(w)));
  for (size_t i = 0; i < sp; ++i) {
    if (ss[i] <= 0 || dd[i] <= 0 || pp[i] < 0 || oo[i] < 0)
      throw Error("stride and dilation must be positive, padding and output_padding not negative",
                  where, "stride, dilation > 0; padding, output_padding >= 0",
                  str("stride ", ss[i], ", dilation ", dd[i], ", padding ", pp[i]));
    const size_t j = i + off;
    g.in[j] = x[2 + i];
    g.k[j] = w[2 + i];
    g.s[j] = ss[i];
    g.p[j] = pp[i];
    g.d[j] = dd[i];
    g.op[j] = transposed ? oo[i] : 0;
    g.out[j] = transposed
                   ? (g.in[j] - 1) * g.s[j] - 2 * g.p[j] + g.d[j] * (g.k[j] - 1) + g.op[j] + 1
                   : (g.in[j] + 2 * g.p[j] - g.d[j] * (g.k[j] - 1) - 1) / g.s[j] + 1;
    if (g.out[j] <= 0)
      throw Error("convolution_backward: the convolution's output would be empty", where,
                  "an output size >= 1", str(g.out[j]));
  }
  Shape want = {g.n, g.cout};
  for (size_t i = 0; i < sp; ++i) want.push_back(g.out[i + off]);
  if (gy != want)
    throw Error("convolution_backward: grad_output does not have the convolution's output size",
                where, shape_str(want), shape_str(gy));
  return g;
}

/// The three gradients of the convolution `g` in double over contiguous double tensors.
void conv_grads(const ConvGeom& g, const double* gy, const double* x, const double* w, double* gx,
                double* gw, double* gb) {
  const int64_t cig = g.cin / g.groups, cog = g.cout / g.groups;
  const int64_t in_plane = g.in[0] * g.in[1], out_plane = g.out[0] * g.out[1];
  const int64_t taps = g.k[0] * g.k[1];
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp)
      for (int64_t cl = 0; cl < cig; ++cl)
        for (int64_t ol = 0; ol < cog; ++ol) {
          const int64_t ci = grp * cig + cl, co = grp * cog + ol;
          // weight [Cout, Cin / G, k...] or, transposed, [Cin, Cout / G, k...]
          const int64_t wbase = g.transposed ? (ci * cog + ol) * taps : (co * cig + cl) * taps;
          const double* xp = x + (n * g.cin + ci) * in_plane;
          const double* yp = gy + (n * g.cout + co) * out_plane;
          double* gxp = gx + (n * g.cin + ci) * in_plane;
          for (int64_t a = 0; a < g.k[0]; ++a)
            for (int64_t b = 0; b < g.k[1]; ++b) {
              const int64_t t = wbase + a * g.k[1] + b;
              double acc = 0;
              if (!g.transposed) {  // input (o * s - p + k * d) feeds output o
                for (int64_t oh = 0; oh < g.out[0]; ++oh) {
                  const int64_t ih = oh * g.s[0] - g.p[0] + a * g.d[0];
                  if (ih < 0 || ih >= g.in[0]) continue;
                  for (int64_t ow = 0; ow < g.out[1]; ++ow) {
                    const int64_t iw = ow * g.s[1] - g.p[1] + b * g.d[1];
                    if (iw < 0 || iw >= g.in[1]) continue;
                    const double dy = yp[oh * g.out[1] + ow];
                    gxp[ih * g.in[1] + iw] += dy * w[t];
                    acc += dy * xp[ih * g.in[1] + iw];
                  }
                }
              } else {  // input i feeds output (i * s - p + k * d)
                for (int64_t ih = 0; ih < g.in[0]; ++ih) {
                  const int64_t oh = ih * g.s[0] - g.p[0] + a * g.d[0];
                  if (oh < 0 || oh >= g.out[0]) continue;
                  for (int64_t iw = 0; iw < g.in[1]; ++iw) {
                    const int64_t ow = iw * g.s[1] - g.p[1] + b * g.d[1];
                    if (ow < 0 || ow >= g.out[1]) continue;
                    const double dy = yp[oh * g.out[1] + ow];
                    gxp[ih * g.in[1] + iw] += dy * w[t];
                    acc += dy * xp[ih * g.in[1] + iw];
                  }
                }
              }
              gw[t] += acc;
            }
        }
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t co = 0; co < g.cout; ++co)
      for (int64_t i = 0; i < out_plane; ++i) gb[co] += gy[(n * g.cout + co) * out_plane + i];
}

/// A tensor type with `sizes`, `dtype` and the device of `like`.
TensorType type_of(const TensorType& like, std::vector<SymInt> sizes, DType dtype) {
  TensorType t = like;
  t.sizes = std::move(sizes);
  t.dtype = dtype;
  t.strides.clear();
  return t;
}

/// The bool[3] output_mask of a node (all true when absent).
std::vector<bool> output_mask(const Node& node) {
  const ir::Arg* a = node.arg("output_mask");
  if (!a || a->kind != ir::Arg::Kind::kBools) return {true, true, true};
  if (a->bools.size() != 3)
    sa::fail(node, "output_mask must have 3 values", "bool[3]", str(a->bools.size(), " values"));
  return a->bools;
}

/// Checks that `t` is a floating tensor of `dtype` (the input's).
void check_float(const Node& node, const char* what, const TensorType& t, DType dtype) {
  if (!is_floating(t.dtype) || is_float8(t.dtype) || t.dtype != dtype)
    sa::fail(node, str(what, " must be floating and have the input's dtype"), dtype_name(dtype),
             str(what, " ", t.str()));
}

/// Static sizes of `t`, or nullopt when one is symbolic.
std::optional<Shape> static_sizes(const TensorType& t) {
  Shape s;
  for (const SymInt& d : t.sizes) {
    if (!d.is_constant()) return std::nullopt;
    s.push_back(d.constant());
  }
  return s;
}

}  // namespace

// ---- convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
// transposed, output_padding, groups, output_mask) -> (grad_input, grad_weight, grad_bias)

std::vector<TensorType> shape_convolution_backward(const Node& node) {
  const TensorType& gy = sa::type(node, "grad_output");
  const TensorType& x = sa::type(node, "input");
  const TensorType& w = sa::type(node, "weight");
  check_float(node, "input", x, x.dtype);
  check_float(node, "grad_output", gy, x.dtype);
  check_float(node, "weight", w, x.dtype);
  output_mask(node);
  const auto gs = static_sizes(gy), xs = static_sizes(x), ws = static_sizes(w);
  const bool transposed = sa::bool_(node, "transposed", false);
  if (gs && xs && ws) {
    try {
      conv_geom(*gs, *xs, *ws, const_ints(node, "stride"), const_ints(node, "padding"),
                const_ints(node, "dilation"), const_ints(node, "output_padding"), transposed,
                sa::int_(node, "groups"), "node " + node.name + " (" + node.target + ")");
    } catch (const Error& e) {
      sa::fail(node, e.what(), "a consistent convolution", shape_str(*gs));
    }
  } else if (x.sizes.size() != 3 && x.sizes.size() != 4) {
    sa::fail(node, "convolution_backward needs a 3-D or 4-D input", "[N, C, (H,) W]", x.str());
  }
  SymInt cout = transposed ? w.sizes.at(1) * sa::int_(node, "groups") : w.sizes.at(0);
  std::vector<SymInt> bias = {cout};
  if (sa::has(node, "bias_sizes")) {
    bias = sa::symints(node, "bias_sizes");
    if (bias.size() != 1)
      sa::fail(node, "bias_sizes must have one value", "[C_out]", sym_shape_str(bias));
  }
  return {type_of(x, x.sizes, x.dtype), type_of(w, w.sizes, w.dtype), type_of(w, bias, w.dtype)};
}

std::vector<RValue> kernel_convolution_backward(KernelContext& ctx) {
  const Tensor& gy = ctx.tensor("grad_output");
  const Tensor& x = ctx.tensor("input");
  const Tensor& w = ctx.tensor("weight");
  for (const Tensor* t : {&gy, &w})
    if (t->dtype() != x.dtype() || !is_floating(x.dtype()))
      ctx.fail("convolution_backward needs floating tensors of one dtype", dtype_name(x.dtype()),
               t->type_str());
  const ConvGeom g =
      conv_geom(gy.sizes(), x.sizes(), w.sizes(), ctx.ints("stride"), ctx.ints("padding"),
                ctx.ints("dilation"), ctx.ints("output_padding", {0}),
                ctx.bool_arg("transposed", false), ctx.int_arg("groups"), ctx.where());
  const std::vector<bool> mask = output_mask(ctx.node());
  const Tensor gyd = gy.contiguous().to(DType::kFloat64, true);
  const Tensor xd = x.contiguous().to(DType::kFloat64, true);
  const Tensor wd = w.contiguous().to(DType::kFloat64, true);
  Tensor gx = Tensor::zeros(x.sizes(), DType::kFloat64);
  Tensor gw = Tensor::zeros(w.sizes(), DType::kFloat64);
  Tensor gb = Tensor::zeros({g.cout}, DType::kFloat64);
  conv_grads(g, gyd.data<double>(), xd.data<double>(), wd.data<double>(), gx.data<double>(),
             gw.data<double>(), gb.data<double>());
  std::vector<RValue> out(3);
  if (mask[0]) out[0] = channels_last_like(gx.to(x.dtype()), x);
  if (mask[1]) out[1] = gw.to(w.dtype());
  if (mask[2]) out[2] = gb.to(w.dtype());
  return out;
}

// ---- 2-D pooling gradients

namespace {

/// A pooling window in one spatial dim: kernel, stride, padding (and dilation).
struct PoolDim {
  int64_t k = 1, s = 1, p = 0, d = 1;
};

/// torch's pooling output size (floor or ceil mode; in ceil mode the last window starts inside
/// the input or its left padding).
int64_t pool_out(int64_t in, const PoolDim& w, bool ceil_mode) {
  const int64_t num = in + 2 * w.p - w.d * (w.k - 1) - 1 + (ceil_mode ? w.s - 1 : 0);
  int64_t out = (num >= 0 ? num / w.s : -((-num + w.s - 1) / w.s)) + 1;
  if (ceil_mode && (out - 1) * w.s >= in + w.p) --out;
  return out;
}

/// The two window dims of avg_pool2d_backward / max_pool2d_with_indices_backward.
std::vector<PoolDim> pool_dims(const std::vector<int64_t>& k, const std::vector<int64_t>& s,
                               const std::vector<int64_t>& p, const std::vector<int64_t>& d,
                               const std::string& where) {
  const auto kk = spatial(k, 2, "kernel_size", where);
  const auto ss = s.empty() ? kk : spatial(s, 2, "stride", where);
  const auto pp = spatial(p, 2, "padding", where), dd = spatial(d, 2, "dilation", where, 1);
  std::vector<PoolDim> out(2);
  for (int i = 0; i < 2; ++i) {
    if (kk[i] <= 0 || ss[i] <= 0 || dd[i] <= 0)
      throw Error("kernel_size, stride and dilation must be positive", where, "> 0",
                  str("kernel ", kk[i], ", stride ", ss[i], ", dilation ", dd[i]));
    if (pp[i] < 0 || pp[i] > kk[i] / 2)
      throw Error("pad should be at most half of kernel size", where,
                  str("0 <= pad <= ", kk[i] / 2), str(pp[i]));
    out[i] = {kk[i], ss[i], pp[i], dd[i]};
  }
  return out;
}

/// Checks that grad_output has the pooled sizes of `self` ([C, H, W] or [N, C, H, W]).
void check_pooled(const Shape& gy, const Shape& x, int64_t oh, int64_t ow,
                  const std::string& where) {
  if (x.size() != 3 && x.size() != 4)
    throw Error("pooling needs a 3-D or 4-D input", where, "[N, C, H, W] or [C, H, W]",
                shape_str(x));
  Shape want = x;
  want[want.size() - 2] = oh;
  want[want.size() - 1] = ow;
  if (gy != want)
    throw Error("grad_output does not have the pooled size of the input", where, shape_str(want),
                shape_str(gy));
}

/// Rule shared by the pooling gradients: the input's type, after `check(gy, x)` on static sizes.
template <typename F>
std::vector<TensorType> pool_grad_type(const Node& node, F&& check) {
  const TensorType& gy = sa::type(node, "grad_output");
  const TensorType& x = sa::type(node, "self");
  check_float(node, "self", x, x.dtype);
  check_float(node, "grad_output", gy, x.dtype);
  if (x.sizes.size() != 3 && x.sizes.size() != 4)
    sa::fail(node, "pooling needs a 3-D or 4-D input", "[N, C, H, W] or [C, H, W]", x.str());
  const auto gs = static_sizes(gy), xs = static_sizes(x);
  if (gs && xs) {
    try {
      check(*gs, *xs);
    } catch (const Error& e) {
      sa::fail(node, e.what(), "grad_output of the pooled size", gy.str());
    }
  }
  return {type_of(x, x.sizes, x.dtype)};
}

/// Runs `per_plane(gy, gx, h, w, oh, ow)` over every (n, c) plane in double; returns grad_input
/// in self's dtype and layout.
template <typename F>
Tensor pool_grad(const Tensor& gy, const Tensor& x, F&& per_plane) {
  const Tensor gyd = gy.contiguous().to(DType::kFloat64, true);
  Tensor gx = Tensor::zeros(x.sizes(), DType::kFloat64);
  const int64_t h = x.size(-2), w = x.size(-1), oh = gy.size(-2), ow = gy.size(-1);
  const int64_t planes = h * w == 0 ? 0 : x.numel() / (h * w);
  for (int64_t p = 0; p < planes; ++p)
    per_plane(p, gyd.data<double>() + p * oh * ow, gx.data<double>() + p * h * w, h, w, oh, ow);
  return channels_last_like(gx.to(x.dtype()), x);
}

}  // namespace

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override): each output's gradient divided by its divisor, added to
// every input element of its window.
std::vector<TensorType> shape_avg_pool2d_backward(const Node& node) {
  const std::string where = "node " + node.name + " (" + node.target + ")";
  const auto dims = pool_dims(const_ints(node, "kernel_size"), const_ints(node, "stride"),
                              const_ints(node, "padding"), {1}, where);
  const bool ceil_mode = sa::bool_(node, "ceil_mode", false);
  if (sa::has(node, "divisor_override") && sa::int_(node, "divisor_override") == 0)
    sa::fail(node, "divisor must be non-zero", "divisor_override != 0", "0");
  return pool_grad_type(node, [&](const Shape& gy, const Shape& x) {
    check_pooled(gy, x, pool_out(x[x.size() - 2], dims[0], ceil_mode),
                 pool_out(x[x.size() - 1], dims[1], ceil_mode), where);
  });
}

std::vector<RValue> kernel_avg_pool2d_backward(KernelContext& ctx) {
  const Tensor& gy = ctx.tensor("grad_output");
  const Tensor& x = ctx.tensor("self");
  const auto dims = pool_dims(ctx.ints("kernel_size"), ctx.ints("stride", {}),
                              ctx.ints("padding", {0}), {1}, ctx.where());
  const bool ceil_mode = ctx.bool_arg("ceil_mode", false);
  const bool include_pad = ctx.bool_arg("count_include_pad", true);
  const int64_t divisor = ctx.int_arg("divisor_override", 0);
  if (ctx.has("divisor_override") && divisor == 0)
    ctx.fail("divisor must be non-zero", "divisor_override != 0", "0");
  if (!is_floating(x.dtype()) || gy.dtype() != x.dtype())
    ctx.fail("avg_pool2d_backward needs floating tensors of one dtype", dtype_name(x.dtype()),
             gy.type_str());
  check_pooled(gy.sizes(), x.sizes(), x.dim() >= 2 ? pool_out(x.size(-2), dims[0], ceil_mode) : 0,
               x.dim() >= 2 ? pool_out(x.size(-1), dims[1], ceil_mode) : 0, ctx.where());
  return {pool_grad(
      gy, x,
      [&](int64_t, const double* g, double* gx, int64_t h, int64_t w, int64_t oh, int64_t ow) {
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xo = 0; xo < ow; ++xo) {
            int64_t y0 = y * dims[0].s - dims[0].p, x0 = xo * dims[1].s - dims[1].p;
            int64_t y1 = std::min(y0 + dims[0].k, h + dims[0].p);
            int64_t x1 = std::min(x0 + dims[1].k, w + dims[1].p);
            const int64_t pool_size = (y1 - y0) * (x1 - x0);
            y0 = std::max<int64_t>(y0, 0);
            x0 = std::max<int64_t>(x0, 0);
            y1 = std::min(y1, h);
            x1 = std::min(x1, w);
            if (y0 >= y1 || x0 >= x1) continue;
            const int64_t div =
                divisor != 0 ? divisor : (include_pad ? pool_size : (y1 - y0) * (x1 - x0));
            const double share = g[y * ow + xo] / static_cast<double>(div);
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix) gx[iy * w + ix] += share;
          }
      })};
}

// _adaptive_avg_pool2d_backward(grad_output, self): output (y, x) averages rows
// [floor(y * H / OH), ceil((y + 1) * H / OH)) and the columns alike.
std::vector<TensorType> shape_adaptive_avg_pool2d_backward(const Node& node) {
  const TensorType& gy = sa::type(node, "grad_output");
  const TensorType& x = sa::type(node, "self");
  if (gy.sizes.size() != x.sizes.size() || (x.sizes.size() >= 2 && !(gy.sizes[0] == x.sizes[0])))
    sa::fail(node, "grad_output must have the input's rank and leading dims", x.str(), gy.str());
  return pool_grad_type(node, [&](const Shape& g, const Shape& xs) {
    check_pooled(g, xs, g[g.size() - 2], g[g.size() - 1],
                 "node " + node.name + " (" + node.target + ")");
  });
}

std::vector<RValue> kernel_adaptive_avg_pool2d_backward(KernelContext& ctx) {
  const Tensor& gy = ctx.tensor("grad_output");
  const Tensor& x = ctx.tensor("self");
  if (!is_floating(x.dtype()) || gy.dtype() != x.dtype())
    ctx.fail("_adaptive_avg_pool2d_backward needs floating tensors of one dtype",
             dtype_name(x.dtype()), gy.type_str());
  if (gy.dim() != x.dim() || x.dim() < 3)
    ctx.fail("grad_output must have the input's rank (3 or 4)", x.type_str(), gy.type_str());
  check_pooled(gy.sizes(), x.sizes(), gy.size(-2), gy.size(-1), ctx.where());
  return {pool_grad(
      gy, x,
      [&](int64_t, const double* g, double* gx, int64_t h, int64_t w, int64_t oh, int64_t ow) {
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t y0 = (y * h) / oh, y1 = ((y + 1) * h + oh - 1) / oh;
          for (int64_t xo = 0; xo < ow; ++xo) {
            const int64_t x0 = (xo * w) / ow, x1 = ((xo + 1) * w + ow - 1) / ow;
            const double share = g[y * ow + xo] / static_cast<double>((y1 - y0) * (x1 - x0));
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix) gx[iy * w + ix] += share;
          }
        }
      })};
}

// max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
// ceil_mode, indices): each output's gradient added to the input element its index names.
std::vector<TensorType> shape_max_pool2d_with_indices_backward(const Node& node) {
  const std::string where = "node " + node.name + " (" + node.target + ")";
  const auto dims = pool_dims(const_ints(node, "kernel_size"), const_ints(node, "stride"),
                              const_ints(node, "padding"), const_ints(node, "dilation"), where);
  const bool ceil_mode = sa::bool_(node, "ceil_mode", false);
  const TensorType& idx = sa::type(node, "indices");
  if (idx.dtype != DType::kInt64 || idx.sizes.size() != sa::type(node, "grad_output").sizes.size())
    sa::fail(node, "indices must be int64 with grad_output's sizes",
             "i64" + sym_shape_str(sa::type(node, "grad_output").sizes), idx.str());
  return pool_grad_type(node, [&](const Shape& gy, const Shape& x) {
    check_pooled(gy, x, pool_out(x[x.size() - 2], dims[0], ceil_mode),
                 pool_out(x[x.size() - 1], dims[1], ceil_mode), where);
  });
}

std::vector<RValue> kernel_max_pool2d_with_indices_backward(KernelContext& ctx) {
  const Tensor& gy = ctx.tensor("grad_output");
  const Tensor& x = ctx.tensor("self");
  const Tensor& idx = ctx.tensor("indices");
  const auto dims = pool_dims(ctx.ints("kernel_size"), ctx.ints("stride", {}),
                              ctx.ints("padding", {0}), ctx.ints("dilation", {1}), ctx.where());
  const bool ceil_mode = ctx.bool_arg("ceil_mode", false);
  if (!is_floating(x.dtype()) || gy.dtype() != x.dtype())
    ctx.fail("max_pool2d_with_indices_backward needs floating tensors of one dtype",
             dtype_name(x.dtype()), gy.type_str());
  check_pooled(gy.sizes(), x.sizes(), x.dim() >= 2 ? pool_out(x.size(-2), dims[0], ceil_mode) : 0,
               x.dim() >= 2 ? pool_out(x.size(-1), dims[1], ceil_mode) : 0, ctx.where());
  if (idx.dtype() != DType::kInt64 || idx.sizes() != gy.sizes())
    ctx.fail("indices must be int64 with grad_output's sizes", "i64" + shape_str(gy.sizes()),
             idx.type_str());
  const Tensor ic = idx.contiguous();
  const int64_t* ip = ic.data<int64_t>();
  return {pool_grad(
      gy, x,
      [&](int64_t p, const double* g, double* gx, int64_t h, int64_t w, int64_t oh, int64_t ow) {
        for (int64_t o = 0; o < oh * ow; ++o) {
          const int64_t at = ip[p * oh * ow + o];
          if (at < 0 || at >= h * w)
            ctx.fail("max_pool2d_with_indices_backward: an index is outside the input plane",
                     str("0 <= index < ", h * w), str(at));
          gx[at] += g[o];
        }
      })};
}

}  // namespace anvil::ops
