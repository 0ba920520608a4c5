// Convolution (conv2d, convolution: 2-D, and 1-D through a height-1 2-D convolution) and pooling
// (max_pool2d, avg_pool2d, adaptive_avg_pool2d): shape rules and reference kernels with
// PyTorch's semantics. Convolution is im2col + one batched GEMM (linalg.cpp's matmul_fused), so
// it accumulates in fp32 (f64 for double, wrapping int64 for integers) and adds the bias before
// the single rounding to the input dtype.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/pool_nd.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace linalg_detail {  // defined in linalg.cpp
Tensor matmul_fused(const Tensor& a, const Tensor& b, const Tensor& addend, double alpha,
                    double beta, const std::string& where);
}  // namespace linalg_detail

namespace conv_transpose_detail {  // defined in conv_transpose.cpp
ir::TensorType shape(const ir::Node& node);
Tensor run_kernel(const ir::KernelContext& ctx);
}  // namespace conv_transpose_detail

namespace {

using ir::TensorType;

/// Spatial parameters of a 2-D convolution or pooling window (index 0 = height, 1 = width).
struct Window2d {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t dilation[2] = {1, 1};
  int64_t pad_lo[2] = {0, 0};  // top / left
  int64_t pad_hi[2] = {0, 0};  // bottom / right
};

/// Expands an int list argument to `n` spatial values (a single value applies to every dim).
std::vector<int64_t> expand_list(const std::vector<int64_t>& v, size_t n, const char* name,
                                 const std::string& where) {
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  if (v.size() != n)
    throw Error(str("'", name, "' must have 1 or ", n, " values"), where, str(n, " values"),
                str(v.size()));
  return v;
}

/// Same for symbolic int lists.
std::vector<SymInt> expand_sym(const std::vector<SymInt>& v, size_t n, const char* name,
                               const ir::Node& node) {
  if (v.size() == 1) return std::vector<SymInt>(n, v[0]);
  if (v.size() != n)
    ir::shape_args::fail(node, str("'", name, "' must have 1 or ", n, " values"), str(n, " values"),
                         str(v.size()));
  return v;
}

/// Constant int list argument of a shape rule.
std::vector<int64_t> const_list(const ir::Node& node, const char* name,
                                const std::vector<int64_t>& dflt, size_t n) {
  std::vector<SymInt> d(dflt.begin(), dflt.end());
  std::vector<int64_t> out;
  for (const SymInt& s : expand_sym(ir::shape_args::symints(node, name, d), n, name, node)) {
    if (!s.is_constant())
      ir::shape_args::fail(node, str("'", name, "' must be constant"), "ints", s.str());
    out.push_back(s.constant());
  }
  return out;
}

/// torch's pooling_output_shape: floor (or ceil) division; in ceil mode the last window must
/// start inside the input or its left padding.
int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode) {
  return pool::output_size(in, k, pad, s, d, ceil_mode);
}

/// Symbolic pooling_output_shape; a constant input size uses the exact integer rule.
SymInt pool_out_sym(const SymInt& in, int64_t k, int64_t pad, int64_t s, int64_t d,
                    bool ceil_mode) {
  if (auto c = in.maybe_constant()) return pool_out(*c, k, pad, s, d, ceil_mode);
  SymInt out = (in + (2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0))).floordiv(s) + 1;
  if (ceil_mode) out = SymInt::min(out, (in + (pad - 1)).floordiv(s) + 1);
  return out;
}

/// Output size of a convolution along one dim.
SymInt conv_out_sym(const SymInt& in, const SymInt& k, int64_t pad_total, int64_t s, int64_t d) {
  return (in + pad_total - (k - 1) * d - 1).floordiv(s) + 1;
}

// ---------------------------------------------------------------------------------------------
// Convolution
// ---------------------------------------------------------------------------------------------

/// Reads the padding argument: ints, or the strings "valid" / "same" (torch's conv2d.padding).
/// Fills pad_lo / pad_hi of `w` (kernel and dilation must already be set); `spatial` = 1 or 2.
void read_padding(const ir::Node& node, const std::string& where, const std::string* str_pad,
                  const std::vector<int64_t>& int_pad, size_t spatial, Window2d& w) {
  const size_t first = 2 - spatial;  // 1-D convolutions use only the width slot
  if (str_pad) {
    if (*str_pad == "valid") return;
    if (*str_pad != "same")
      throw Error("unknown padding string", where, "\"valid\" or \"same\"", *str_pad);
    for (size_t i = first; i < 2; ++i) {
      if (w.stride[i] != 1)
        throw Error("padding='same' is not supported for strided convolutions", where, "stride 1",
                    str(w.stride[i]));
      const int64_t total = w.dilation[i] * (w.kernel[i] - 1);
      w.pad_lo[i] = total / 2;
      w.pad_hi[i] = total - total / 2;
    }
    return;
  }
  const std::vector<int64_t> p = expand_list(int_pad, spatial, "padding", where);
  for (size_t i = 0; i < spatial; ++i) {
    if (p[i] < 0) throw Error("negative padding", where, ">= 0", str(p[i]));
    w.pad_lo[first + i] = w.pad_hi[first + i] = p[i];
  }
}

/// The padding argument as it appears on the node: a string pointer (else null) and ints.
const std::string* padding_string(const ir::Node& node) {
  const ir::Arg* a = node.arg("padding");
  return a && a->kind == ir::Arg::Kind::kString ? &a->s : nullptr;
}

/// Fills stride / dilation / kernel of a convolution window; `spatial` = 1 or 2.
void read_conv_window(const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                      const std::vector<int64_t>& ksizes, const std::string& where, Window2d& w) {
  const size_t spatial = ksizes.size(), first = 2 - spatial;
  const auto s = expand_list(stride, spatial, "stride", where);
  const auto d = expand_list(dilation, spatial, "dilation", where);
  for (size_t i = 0; i < spatial; ++i) {
    if (s[i] <= 0) throw Error("stride must be positive", where, "> 0", str(s[i]));
    if (d[i] <= 0) throw Error("dilation must be positive", where, "> 0", str(d[i]));
    w.stride[first + i] = s[i];
    w.dilation[first + i] = d[i];
    w.kernel[first + i] = ksizes[i];
  }
}

/// im2col: x [n, c, h, w] (contiguous) -> cols [n, groups, c/groups * kh * kw, oh * ow], zeros
/// where the window reads padding.
template <typename T>
void im2col(const Tensor& x, const Window2d& w, int64_t oh, int64_t ow, Tensor& cols) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t kh = w.kernel[0], kw = w.kernel[1], l = oh * ow;
  const T* xp = x.data<T>();
  T* cp = cols.data<T>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      const T* plane = xp + (b * c + ch) * h * wd;
      for (int64_t ki = 0; ki < kh; ++ki)
        for (int64_t kj = 0; kj < kw; ++kj) {
          // Channels of one group are consecutive, so row (ch*kh + ki)*kw + kj of [n, c*kh*kw, l]
          // is exactly row of group ch / (c/groups) in [n, groups, c/groups*kh*kw, l].
          T* row = cp + ((b * c + ch) * kh * kw + ki * kw + kj) * l;
          for (int64_t y = 0; y < oh; ++y) {
            const int64_t iy = y * w.stride[0] - w.pad_lo[0] + ki * w.dilation[0];
            T* dst = row + y * ow;
            if (iy < 0 || iy >= h) {
              std::fill(dst, dst + ow, T(0));
              continue;
            }
            for (int64_t xo = 0; xo < ow; ++xo) {
              const int64_t ix = xo * w.stride[1] - w.pad_lo[1] + kj * w.dilation[1];
              dst[xo] = (ix < 0 || ix >= wd) ? T(0) : plane[iy * wd + ix];
            }
          }
        }
    }
}

/// 2-D (or, with a 3-D weight, 1-D) convolution; input batched or (2-D only) unbatched.
Tensor conv_forward(const ir::KernelContext& ctx, const Tensor& input, const Tensor& weight,
                    const std::optional<Tensor>& bias, const std::vector<int64_t>& stride,
                    const std::string* str_pad, const std::vector<int64_t>& int_pad,
                    const std::vector<int64_t>& dilation, int64_t groups) {
  const std::string where = ctx.where();
  if (weight.dim() != 3 && weight.dim() != 4)
    ctx.fail("only 1-D and 2-D convolutions are supported", "a 3-D or 4-D weight",
             weight.type_str());
  const size_t spatial = static_cast<size_t>(weight.dim() - 2);
  const bool unbatched = input.dim() == static_cast<int64_t>(spatial) + 1;
  if (input.dim() != static_cast<int64_t>(spatial) + 2 && !unbatched)
    ctx.fail(str("a ", spatial, "-D convolution needs a ", spatial + 2, "-D (or unbatched ",
                 spatial + 1, "-D) input"),
             str(spatial + 2, "-D"), input.type_str());
  if (input.dtype() != weight.dtype())
    ctx.fail(str("input and weight dtypes differ (", dtype_name(input.dtype()), " vs ",
                 dtype_name(weight.dtype()), ")"),
             dtype_name(input.dtype()), dtype_name(weight.dtype()));
  if (bias && bias->dtype() != input.dtype())
    ctx.fail(str("input and bias dtypes differ (", dtype_name(input.dtype()), " vs ",
                 dtype_name(bias->dtype()), ")"),
             dtype_name(input.dtype()), dtype_name(bias->dtype()));
  if (groups <= 0) ctx.fail("groups must be positive", "> 0", str(groups));
  // Lift to batched 2-D: [n, c, h, w] and weight [o, c/g, kh, kw].
  Tensor x = unbatched ? input.unsqueeze(0) : input;
  Tensor wt = weight;
  if (spatial == 1) {
    x = x.unsqueeze(2);
    wt = wt.unsqueeze(2);
  }
  const int64_t n = x.size(0), c = x.size(1), o = wt.size(0);
  if (wt.size(1) * groups != c || o % groups != 0)
    ctx.fail(str("weight does not fit the input with groups=", groups),
             str("weight [O divisible by ", groups, ", ", c / std::max<int64_t>(groups, 1),
                 ", ...] for ", c, " input channels"),
             weight.type_str());
  if (bias && (bias->dim() != 1 || bias->size(0) != o))
    ctx.fail("bias must be 1-D with one value per output channel", str("[", o, "]"),
             bias->type_str());
  std::vector<int64_t> ks;
  for (int64_t i = 2; i < weight.dim(); ++i) ks.push_back(weight.size(i));
  Window2d w;
  read_conv_window(stride, dilation, ks, where, w);
  read_padding(ctx.node(), where, str_pad, int_pad, spatial, w);
  const int64_t ih = x.size(2), iw = x.size(3);
  const int64_t oh =
      (ih + w.pad_lo[0] + w.pad_hi[0] - w.dilation[0] * (w.kernel[0] - 1) - 1) / w.stride[0] + 1;
  const int64_t ow =
      (iw + w.pad_lo[1] + w.pad_hi[1] - w.dilation[1] * (w.kernel[1] - 1) - 1) / w.stride[1] + 1;
  if (ih + w.pad_lo[0] + w.pad_hi[0] < w.dilation[0] * (w.kernel[0] - 1) + 1 ||
      iw + w.pad_lo[1] + w.pad_hi[1] < w.dilation[1] * (w.kernel[1] - 1) + 1)
    ctx.fail("kernel size can't be greater than the (padded) input size",
             str("padded input >= dilated kernel ", w.kernel[0], "x", w.kernel[1]),
             input.type_str());
  const int64_t ckk = (c / groups) * w.kernel[0] * w.kernel[1];
  if (x.dtype() == DType::kBool || is_complex(x.dtype()))
    ctx.fail("convolution does not support this dtype", "an integer or floating dtype",
             dtype_name(x.dtype()));
  Tensor xc = x.contiguous();
  Tensor cols = Tensor::empty({n, groups, ckk, oh * ow}, x.dtype());
  ANVIL_DISPATCH_REAL(x.dtype(), where, T, im2col<T>(xc, w, oh, ow, cols));
  const Tensor w3 = wt.reshape({groups, o / groups, ckk});
  const Tensor addend = bias ? bias->reshape({groups, o / groups, 1}) : Tensor();
  Tensor out = linalg_detail::matmul_fused(w3, cols, addend, 1.0, 1.0, where);  // [n,g,o/g,l]
  out = out.reshape({n, o, oh, ow});
  if (spatial == 1) out = out.squeeze(2);
  if (unbatched) out = out.squeeze(0);
  return out;
}

/// Output type of a convolution from the node's static arguments.
TensorType conv_shape(const ir::Node& node, const std::vector<int64_t>& stride_d, bool transposed) {
  const TensorType& x = ir::shape_args::type(node, "input");
  const TensorType& wt = ir::shape_args::type(node, "weight");
  if (transposed)
    ir::shape_args::fail(node, "transposed convolution is not supported", "transposed=False",
                         "transposed=True");
  if (wt.sizes.size() != 3 && wt.sizes.size() != 4)
    ir::shape_args::fail(node, "only 1-D and 2-D convolutions are supported", "a 3-D or 4-D weight",
                         wt.str());
  const size_t spatial = wt.sizes.size() - 2;
  const bool unbatched = x.sizes.size() == spatial + 1;
  if (x.sizes.size() != spatial + 2 && !unbatched)
    ir::shape_args::fail(node, "input rank does not match the weight", str(spatial + 2, "-D"),
                         x.str());
  if (x.dtype != wt.dtype)
    ir::shape_args::fail(node, "input and weight dtypes differ", dtype_name(x.dtype),
                         dtype_name(wt.dtype));
  const std::string where = "node " + node.name + " (" + node.target + ")";
  std::vector<int64_t> ks;
  for (size_t i = 2; i < wt.sizes.size(); ++i) {
    if (!wt.sizes[i].is_constant())
      ir::shape_args::fail(node, "kernel size must be static", "ints", wt.str());
    ks.push_back(wt.sizes[i].constant());
  }
  Window2d w;
  read_conv_window(const_list(node, "stride", stride_d, spatial),
                   const_list(node, "dilation", {1}, spatial), ks, where, w);
  const std::string* sp = padding_string(node);
  read_padding(node, where, sp,
               sp ? std::vector<int64_t>{} : const_list(node, "padding", {0}, spatial), spatial, w);
  std::vector<SymInt> out;
  if (!unbatched) out.push_back(x.sizes[0]);
  out.push_back(wt.sizes[0]);
  const size_t first = 2 - spatial, xs = x.sizes.size() - spatial;
  for (size_t i = 0; i < spatial; ++i) {
    const size_t wi = first + i;
    out.push_back(conv_out_sym(x.sizes[xs + i], wt.sizes[2 + i], w.pad_lo[wi] + w.pad_hi[wi],
                               w.stride[wi], w.dilation[wi]));
  }
  TensorType t;
  t.dtype = x.dtype;
  t.sizes = out;
  t.device = x.device;
  return t;
}

// ---------------------------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------------------------

/// Accumulator for averaging: fp32 for 16/32-bit floats, f64 for f64, int64 for integers.
template <typename T>
using PoolAcc = std::conditional_t<std::is_same_v<T, double>, double,
                                   std::conditional_t<std::is_integral_v<T>, int64_t, float>>;

/// Pooling window from kernel_size / stride / padding / dilation arguments (kernel kernel).
Window2d pool_window(const std::vector<int64_t>& k, const std::vector<int64_t>& s,
                     const std::vector<int64_t>& p, const std::vector<int64_t>& d,
                     const std::string& where) {
  Window2d w;
  const auto kk = expand_list(k, 2, "kernel_size", where);
  const auto ss = s.empty() ? kk : expand_list(s, 2, "stride", where);
  const auto pp = expand_list(p, 2, "padding", where);
  const auto dd = expand_list(d, 2, "dilation", where);
  for (int i = 0; i < 2; ++i) {
    if (kk[i] <= 0) throw Error("kernel_size must be positive", where, "> 0", str(kk[i]));
    if (ss[i] <= 0) throw Error("stride must be positive", where, "> 0", str(ss[i]));
    if (dd[i] <= 0) throw Error("dilation must be positive", where, "> 0", str(dd[i]));
    if (pp[i] < 0 || pp[i] > kk[i] / 2)
      throw Error("pad should be at most half of kernel size", where,
                  str("0 <= pad <= ", kk[i] / 2), str(pp[i]));
    w.kernel[i] = kk[i];
    w.stride[i] = ss[i];
    w.pad_lo[i] = w.pad_hi[i] = pp[i];
    w.dilation[i] = dd[i];
  }
  return w;
}

/// Symbolic output type of a 2-D pooling op over `self` ([C, H, W] or [N, C, H, W]).
TensorType pool_shape(const ir::Node& node, const Window2d& w, bool ceil_mode) {
  const TensorType& x = ir::shape_args::type(node, "self");
  if (x.sizes.size() != 3 && x.sizes.size() != 4)
    ir::shape_args::fail(node, "pooling needs a 3-D or 4-D input", "[N, C, H, W]", x.str());
  TensorType t = x;
  t.strides.clear();
  const size_t h = x.sizes.size() - 2;
  for (int i = 0; i < 2; ++i)
    t.sizes[h + i] = pool_out_sym(x.sizes[h + i], w.kernel[i], w.pad_lo[i], w.stride[i],
                                  w.dilation[i], ceil_mode);
  return t;
}

/// Reads the pooling window arguments of a shape rule (constants only).
Window2d pool_window_static(const ir::Node& node, bool with_dilation) {
  const std::string where = "node " + node.name + " (" + node.target + ")";
  std::vector<int64_t> k = const_list(node, "kernel_size", {}, 2);
  std::vector<SymInt> s_sym = ir::shape_args::symints(node, "stride", std::vector<SymInt>{});
  std::vector<int64_t> s =
      s_sym.empty() ? std::vector<int64_t>{} : const_list(node, "stride", {}, 2);
  return pool_window(k, s, const_list(node, "padding", {0}, 2),
                     with_dilation ? const_list(node, "dilation", {1}, 2) : std::vector<int64_t>{1},
                     where);
}

/// Runs `per_plane(src, dst)` for every (n, c) plane of a [.., H, W] input; returns the output.
template <typename F>
Tensor for_planes(const Tensor& input, int64_t oh, int64_t ow, F&& per_plane) {
  const Tensor x = input.contiguous();
  Shape out_sizes = x.sizes();
  out_sizes[out_sizes.size() - 2] = oh;
  out_sizes[out_sizes.size() - 1] = ow;
  Tensor out = Tensor::empty(out_sizes, x.dtype());
  const int64_t h = x.size(-2), w = x.size(-1);
  const int64_t planes = h * w == 0 ? 0 : x.numel() / (h * w);
  ANVIL_DISPATCH_REAL(x.dtype(), "pooling", T, {
    const T* xp = x.data<T>();
    T* op = out.data<T>();
    for (int64_t p = 0; p < planes; ++p) per_plane(xp + p * h * w, op + p * oh * ow, h, w);
  });
  return out;
}

/// Validates a pooling input and computes its output sizes.
void pool_sizes(const ir::KernelContext& ctx, const Tensor& x, const Window2d& w, bool ceil_mode,
                int64_t& oh, int64_t& ow) {
  if (x.dim() != 3 && x.dim() != 4)
    ctx.fail("pooling needs a 3-D or 4-D input", "[N, C, H, W] or [C, H, W]", x.type_str());
  oh = pool_out(x.size(-2), w.kernel[0], w.pad_lo[0], w.stride[0], w.dilation[0], ceil_mode);
  ow = pool_out(x.size(-1), w.kernel[1], w.pad_lo[1], w.stride[1], w.dilation[1], ceil_mode);
  if (oh < 1 || ow < 1)
    ctx.fail("output size is too small", "an output of at least 1x1",
             str(x.type_str(), " gives ", oh, "x", ow));
}

}  // namespace

std::vector<TensorType> shape_conv2d(const ir::Node& node) {
  return {conv_shape(node, {1}, false)};
}

// conv1d: the same rule and kernel with a 3-D weight (conv_forward handles 1 or 2 spatial dims).
std::vector<TensorType> shape_conv1d(const ir::Node& node) {
  if (ir::shape_args::type(node, "weight").sizes.size() != 3)
    ir::shape_args::fail(node, "conv1d needs a 3-D weight", "[out, in / groups, k]",
                         ir::shape_args::type(node, "weight").str());
  return shape_conv2d(node);
}

std::vector<TensorType> shape_convolution(const ir::Node& node) {
  if (ir::shape_args::bool_(node, "transposed", false))
    return {conv_transpose_detail::shape(node)};
  return {conv_shape(node, {1}, false)};
}

std::vector<TensorType> shape_max_pool2d(const ir::Node& node) {
  return {pool_shape(node, pool_window_static(node, true),
                     ir::shape_args::bool_(node, "ceil_mode", false))};
}

std::vector<TensorType> shape_avg_pool2d(const ir::Node& node) {
  return {pool_shape(node, pool_window_static(node, false),
                     ir::shape_args::bool_(node, "ceil_mode", false))};
}

std::vector<TensorType> shape_adaptive_avg_pool2d(const ir::Node& node) {
  const TensorType& x = ir::shape_args::type(node, "self");
  if (x.sizes.size() != 3 && x.sizes.size() != 4)
    ir::shape_args::fail(node, "pooling needs a 3-D or 4-D input", "[N, C, H, W]", x.str());
  const std::vector<SymInt> os =
      expand_sym(ir::shape_args::symints(node, "output_size"), 2, "output_size", node);
  TensorType t = x;
  t.strides.clear();
  t.sizes[x.sizes.size() - 2] = os[0];
  t.sizes[x.sizes.size() - 1] = os[1];
  return {t};
}

static std::vector<ir::RValue> conv2d_rows(ir::KernelContext& ctx) {
  const std::string* sp = padding_string(ctx.node());
  return {conv_forward(ctx, ctx.tensor("input"), ctx.tensor("weight"), ctx.opt_tensor("bias"),
                       ctx.ints("stride", {1}), sp,
                       sp ? std::vector<int64_t>{} : ctx.ints("padding", {0}),
                       ctx.ints("dilation", {1}), ctx.int_arg("groups", 1))};
}

std::vector<ir::RValue> kernel_conv1d(ir::KernelContext& ctx) { return kernel_conv2d(ctx); }

static std::vector<ir::RValue> convolution_rows(ir::KernelContext& ctx) {
  if (ctx.bool_arg("transposed", false))
    return {conv_transpose_detail::run_kernel(ctx)};
  const std::string* sp = padding_string(ctx.node());
  return {conv_forward(ctx, ctx.tensor("input"), ctx.tensor("weight"), ctx.opt_tensor("bias"),
                       ctx.ints("stride", {1}), sp,
                       sp ? std::vector<int64_t>{} : ctx.ints("padding", {0}),
                       ctx.ints("dilation", {1}), ctx.int_arg("groups", 1))};
}

static std::vector<ir::RValue> max_pool2d_rows(ir::KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  const Window2d w = pool_window(ctx.ints("kernel_size"), ctx.ints("stride", {}),
                                 ctx.ints("padding", {0}), ctx.ints("dilation", {1}), ctx.where());
  int64_t oh, ow;
  pool_sizes(ctx, x, w, ctx.bool_arg("ceil_mode", false), oh, ow);
  if (x.dtype() == DType::kBool) ctx.fail("max_pool2d does not support bool", "a number", "bool");
  return {for_planes(x, oh, ow, [&](const auto* src, auto* dst, int64_t h, int64_t wd) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(src)>>;
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xo = 0; xo < ow; ++xo) {
        const int64_t y0 = y * w.stride[0] - w.pad_lo[0], x0 = xo * w.stride[1] - w.pad_lo[1];
        T best = std::numeric_limits<T>::lowest();
        bool any = false, nan = false;
        for (int64_t ki = 0; ki < w.kernel[0]; ++ki) {
          const int64_t iy = y0 + ki * w.dilation[0];
          if (iy < 0 || iy >= h) continue;
          for (int64_t kj = 0; kj < w.kernel[1]; ++kj) {
            const int64_t ix = x0 + kj * w.dilation[1];
            if (ix < 0 || ix >= wd) continue;
            const T v = src[iy * wd + ix];
            if constexpr (!std::is_integral_v<T>) {
              if (std::isnan(static_cast<double>(v))) nan = true;
            }
            if (!any || static_cast<PoolAcc<T>>(v) > static_cast<PoolAcc<T>>(best)) best = v;
            any = true;
          }
        }
        if constexpr (!std::is_integral_v<T>) {
          if (nan) best = T(std::numeric_limits<float>::quiet_NaN());
        }
        dst[y * ow + xo] = best;
      }
  })};
}

static std::vector<ir::RValue> avg_pool2d_rows(ir::KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  const Window2d w = pool_window(ctx.ints("kernel_size"), ctx.ints("stride", {}),
                                 ctx.ints("padding", {0}), {1}, ctx.where());
  int64_t oh, ow;
  pool_sizes(ctx, x, w, ctx.bool_arg("ceil_mode", false), oh, ow);
  if (x.dtype() == DType::kBool) ctx.fail("avg_pool2d does not support bool", "a number", "bool");
  const bool include_pad = ctx.bool_arg("count_include_pad", true);
  const int64_t divisor = ctx.int_arg("divisor_override", 0);
  if (ctx.has("divisor_override") && divisor == 0)
    ctx.fail("divisor must be non-zero", "divisor_override != 0", "0");
  return {for_planes(x, oh, ow, [&](const auto* src, auto* dst, int64_t h, int64_t wd) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(src)>>;
    using Acc = PoolAcc<T>;
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xo = 0; xo < ow; ++xo) {
        int64_t y0 = y * w.stride[0] - w.pad_lo[0], x0 = xo * w.stride[1] - w.pad_lo[1];
        int64_t y1 = std::min(y0 + w.kernel[0], h + w.pad_hi[0]);
        int64_t x1 = std::min(x0 + w.kernel[1], wd + w.pad_hi[1]);
        const int64_t pool_size = (y1 - y0) * (x1 - x0);
        y0 = std::max<int64_t>(y0, 0);
        x0 = std::max<int64_t>(x0, 0);
        y1 = std::min(y1, h);
        x1 = std::min(x1, wd);
        if (y0 >= y1 || x0 >= x1) {
          dst[y * ow + xo] = T(0);
          continue;
        }
        Acc sum = 0;
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) sum += static_cast<Acc>(src[iy * wd + ix]);
        const int64_t div =
            divisor != 0 ? divisor : (include_pad ? pool_size : (y1 - y0) * (x1 - x0));
        dst[y * ow + xo] = static_cast<T>(sum / static_cast<Acc>(div));
      }
  })};
}

static std::vector<ir::RValue> adaptive_avg_pool2d_rows(ir::KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  if (x.dim() != 3 && x.dim() != 4)
    ctx.fail("pooling needs a 3-D or 4-D input", "[N, C, H, W] or [C, H, W]", x.type_str());
  if (!is_floating(x.dtype()) || is_float8(x.dtype()))
    ctx.fail("adaptive_avg_pool2d needs a floating input", "a float dtype", dtype_name(x.dtype()));
  const std::vector<int64_t> os =
      expand_list(ctx.ints("output_size"), 2, "output_size", ctx.where());
  const int64_t oh = os[0], ow = os[1];
  if (oh < 0 || ow < 0) ctx.fail("output_size must be non-negative", ">= 0", str(oh, "x", ow));
  if ((x.size(-2) == 0 || x.size(-1) == 0) && oh * ow > 0)
    ctx.fail("adaptive pooling needs a non-empty input plane", "H, W > 0", x.type_str());
  return {for_planes(x, oh, ow, [&](const auto* src, auto* dst, int64_t h, int64_t wd) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(src)>>;
    using Acc = PoolAcc<T>;
    for (int64_t y = 0; y < oh; ++y) {
      const int64_t y0 = (y * h) / oh, y1 = ((y + 1) * h + oh - 1) / oh;
      for (int64_t xo = 0; xo < ow; ++xo) {
        const int64_t x0 = (xo * wd) / ow, x1 = ((xo + 1) * wd + ow - 1) / ow;
        Acc sum = 0;
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) sum += static_cast<Acc>(src[iy * wd + ix]);
        dst[y * ow + xo] = static_cast<T>(sum / static_cast<Acc>((y1 - y0) * (x1 - x0)));
      }
    }
  })};
}

// conv2d keeps a channels-last input's layout, as PyTorch's CPU kernel does.
std::vector<ir::RValue> kernel_conv2d(ir::KernelContext& ctx) {
  std::vector<ir::RValue> r = conv2d_rows(ctx);
  if (auto* t = std::get_if<Tensor>(&r[0])) *t = channels_last_like(*t, ctx.tensor("input"));
  return r;
}

// convolution keeps a channels-last input's layout, as PyTorch's CPU kernel does.
std::vector<ir::RValue> kernel_convolution(ir::KernelContext& ctx) {
  std::vector<ir::RValue> r = convolution_rows(ctx);
  if (auto* t = std::get_if<Tensor>(&r[0])) *t = channels_last_like(*t, ctx.tensor("input"));
  return r;
}

// max_pool2d keeps a channels-last input's layout, as PyTorch's CPU kernel does.
std::vector<ir::RValue> kernel_max_pool2d(ir::KernelContext& ctx) {
  std::vector<ir::RValue> r = max_pool2d_rows(ctx);
  if (auto* t = std::get_if<Tensor>(&r[0])) *t = channels_last_like(*t, ctx.tensor("self"));
  return r;
}

// avg_pool2d keeps a channels-last input's layout, as PyTorch's CPU kernel does.
std::vector<ir::RValue> kernel_avg_pool2d(ir::KernelContext& ctx) {
  std::vector<ir::RValue> r = avg_pool2d_rows(ctx);
  if (auto* t = std::get_if<Tensor>(&r[0])) *t = channels_last_like(*t, ctx.tensor("self"));
  return r;
}

// adaptive_avg_pool2d keeps a channels-last input's layout, as PyTorch's CPU kernel does.
std::vector<ir::RValue> kernel_adaptive_avg_pool2d(ir::KernelContext& ctx) {
  std::vector<ir::RValue> r = adaptive_avg_pool2d_rows(ctx);
  if (auto* t = std::get_if<Tensor>(&r[0])) *t = channels_last_like(*t, ctx.tensor("self"));
  return r;
}

namespace conv_detail {
// The symbolic pooling output size of the 2-D pooling rows, for the N-d pooling rows
// (pool_nd.cpp).
SymInt pool_out_sym(const SymInt& in, int64_t k, int64_t pad, int64_t s, int64_t d,
                    bool ceil_mode) {
  return ::anvil::ops::pool_out_sym(in, k, pad, s, d, ceil_mode);
}
}  // namespace conv_detail

// _adaptive_avg_pool2d: the same op under its ATen-internal name (core ATen exports use it).
std::vector<TensorType> shape_adaptive_avg_pool2d_internal(const ir::Node& node) {
  return shape_adaptive_avg_pool2d(node);
}
std::vector<ir::RValue> kernel_adaptive_avg_pool2d_internal(ir::KernelContext& ctx) {
  return kernel_adaptive_avg_pool2d(ctx);
}

}  // namespace anvil::ops
