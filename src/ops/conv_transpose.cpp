// Transposed convolution (conv_transpose1d, conv_transpose2d.input, and convolution with
// transposed=True through conv.cpp): shape rules and reference kernels with PyTorch's semantics:
// weight [C_in, C_out / groups, (kH,) kW], output size
// (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
// The reference kernel is the scatter form of the definition: every input element, times every
// kernel tap, is added into the output element it lands on. It computes in double (int64,
// wrapping, for integer dtypes), adds the bias and rounds once to the input dtype.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/conv_transpose_geometry.h"
#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace conv_transpose_detail {

using Args = ConvTransposeArgs;  // core/conv_transpose_geometry.h: checks and sizes
using Geom = ConvTransposeGeom;

namespace {

/// acc + a * b, wrapping for integers.
template <typename A>
A mul_add(A acc, A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<uint64_t>(acc) +
                          static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return acc + a * b;
}

/// The scatter form in type A (double or int64_t) over contiguous A tensors x [N, C, H, W] and
/// w [C, O / groups, kH, kW]; returns [N, O, OH, OW] (bias added last when given).
template <typename A>
Tensor scatter_form(const Geom& g, const Tensor& x, const Tensor& w, const Tensor* bias) {
  Tensor out = Tensor::zeros({g.n, g.o, g.oh, g.ow}, dtype_of<A>());
  A* y = out.data<A>();
  const A* xp = x.data<A>();
  const A* wp = w.data<A>();
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  auto X = [&](int64_t n, int64_t c, int64_t i, int64_t j) {
    return xp[((n * g.c + c) * g.h + i) * g.w + j];
  };
  auto W = [&](int64_t c, int64_t o, int64_t i, int64_t j) {
    return wp[((c * og + o) * g.kh + i) * g.kw + j];
  };
  auto Y = [&](int64_t n, int64_t o, int64_t i, int64_t j) -> A& {
    return y[((n * g.o + o) * g.oh + i) * g.ow + j];
  };
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c) {
      const int64_t grp = c / cg;  // input channel c feeds output channels grp * og + [0, og)
      for (int64_t ih = 0; ih < g.h; ++ih)
        for (int64_t iw = 0; iw < g.w; ++iw)
          for (int64_t oc = 0; oc < og; ++oc)
            for (int64_t ki = 0; ki < g.kh; ++ki)
              for (int64_t kj = 0; kj < g.kw; ++kj) {
                const int64_t oy = ih * g.sh - g.ph + ki * g.dh;
                const int64_t ox = iw * g.sw - g.pw + kj * g.dw;
                if (oy < 0 || oy >= g.oh || ox < 0 || ox >= g.ow) continue;
                A& dst = Y(n, grp * og + oc, oy, ox);
                dst = mul_add<A>(dst, X(n, c, ih, iw), W(c, oc, ki, kj));
              }
    }
  if (bias) {
    const A* bp = bias->data<A>();
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t o = 0; o < g.o; ++o)
        for (int64_t i = 0; i < g.oh; ++i)
          for (int64_t j = 0; j < g.ow; ++j) Y(n, o, i, j) = mul_add<A>(Y(n, o, i, j), A(1), bp[o]);  // + bias
  }
  return out;
}

}  // namespace

/// Constant int list argument `name` of a shape rule (a single value stays one value).
std::vector<int64_t> const_ints(const ir::Node& node, const char* name,
                                const std::vector<int64_t>& dflt) {
  std::vector<SymInt> d(dflt.begin(), dflt.end());
  std::vector<int64_t> out;
  for (const SymInt& s : ir::shape_args::symints(node, name, d)) {
    if (!s.is_constant())
      ir::shape_args::fail(node, str("'", name, "' must be constant"), "ints", s.str());
    out.push_back(s.constant());
  }
  return out;
}

/// The transposed-convolution arguments of a shape rule.
Args static_args(const ir::Node& node) {
  Args a;
  a.stride = const_ints(node, "stride", {1});
  a.padding = const_ints(node, "padding", {0});
  a.output_padding = const_ints(node, "output_padding", {0});
  a.dilation = const_ints(node, "dilation", {1});
  a.groups = ir::shape_args::int_(node, "groups", 1);
  return a;
}

/// Output type of a transposed convolution node (input, weight, bias?, stride, padding,
/// output_padding, groups, dilation): weight sizes must be static; spatial input sizes may be
/// symbolic.
ir::TensorType shape(const ir::Node& node) {
  const ir::TensorType& x = ir::shape_args::type(node, "input");
  const ir::TensorType& wt = ir::shape_args::type(node, "weight");
  if (x.dtype != wt.dtype)
    ir::shape_args::fail(node, "input and weight dtypes differ", dtype_name(x.dtype),
                         dtype_name(wt.dtype));
  Shape ws, xs;
  for (const SymInt& s : wt.sizes) {
    if (!s.is_constant())
      ir::shape_args::fail(node, "weight sizes must be static", "ints", wt.str());
    ws.push_back(s.constant());
  }
  // Validate with the spatial sizes replaced by 1 (the real sizes may be symbolic).
  for (const SymInt& s : x.sizes) xs.push_back(s.maybe_constant().value_or(1));
  const Args a = static_args(node);
  const std::string where = node_where(node);
  (void)conv_transpose_sizes(xs, ws, a, where);
  const size_t sp = ws.size() - 2, first = x.sizes.size() - sp;
  auto pick = [&](const std::vector<int64_t>& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; };
  ir::TensorType t;
  t.dtype = x.dtype;
  t.device = x.device;
  for (size_t d = 0; d + sp + 1 < x.sizes.size(); ++d) t.sizes.push_back(x.sizes[d]);  // batch
  t.sizes.push_back(SymInt(ws[1] * a.groups));
  for (size_t i = 0; i < sp; ++i) {
    const int64_t k = ws[2 + i];
    const int64_t s = pick(a.stride, i), p = pick(a.padding, i), op = pick(a.output_padding, i),
                  dl = pick(a.dilation, i);
    t.sizes.push_back((x.sizes[first + i] - 1) * s + (-2 * p + dl * (k - 1) + op + 1));
  }
  return t;
}

/// Reference kernel body shared by conv_transpose{1d,2d} and convolution(transposed=True).
Tensor run(const ir::KernelContext& ctx, const Args& a) {
  const Tensor& x = ctx.tensor("input");
  const Tensor& w = ctx.tensor("weight");
  const std::optional<Tensor> bias = ctx.opt_tensor("bias");
  const std::string where = ctx.where();
  const Shape sizes = conv_transpose_sizes(x.sizes(), w.sizes(), a, where);
  const Geom g = conv_transpose_geometry(x.sizes(), w.sizes(), a, where);
  ANVIL_CHECK(x.dtype() == w.dtype(), where, "input and weight dtypes differ",
              dtype_name(x.dtype()), dtype_name(w.dtype()));
  ANVIL_CHECK(!bias || bias->dtype() == x.dtype(), where, "input and bias dtypes differ",
              dtype_name(x.dtype()), bias ? dtype_name(bias->dtype()) : "");
  ANVIL_CHECK(!bias || (bias->dim() == 1 && bias->size(0) == g.o), where,
              "bias must be 1-D with one value per output channel", str("[", g.o, "]"),
              bias ? bias->type_str() : "");
  ANVIL_CHECK(x.dtype() != DType::kBool && !is_complex(x.dtype()) && is_supported(x.dtype()) &&
                  !is_float8(x.dtype()),
              where, "transposed convolution does not support this dtype",
              "an integer or floating dtype", dtype_name(x.dtype()));
  if (shape_numel(sizes) == 0) return Tensor::empty(sizes, x.dtype());
  const DType wdt = is_floating(x.dtype()) ? DType::kFloat64 : DType::kInt64;
  const Tensor xa = x.to(wdt).contiguous().reshape({g.n, g.c, g.h, g.w});
  const Tensor wa = w.to(wdt).contiguous();
  std::optional<Tensor> ba;
  if (bias) ba = bias->to(wdt).contiguous();
  const Tensor acc = wdt == DType::kFloat64 ? scatter_form<double>(g, xa, wa, ba ? &*ba : nullptr)
                                            : scatter_form<int64_t>(g, xa, wa, ba ? &*ba : nullptr);
  return acc.reshape(sizes).to(x.dtype(), true).contiguous();
}

/// The arguments of a reference kernel.
Args kernel_args(const ir::KernelContext& ctx) {
  Args a;
  a.stride = ctx.ints("stride", {1});
  a.padding = ctx.ints("padding", {0});
  a.output_padding = ctx.ints("output_padding", {0});
  a.dilation = ctx.ints("dilation", {1});
  a.groups = ctx.int_arg("groups", 1);
  return a;
}

/// The reference kernel of a transposed-convolution node (its arguments read from `ctx`).
Tensor run_kernel(const ir::KernelContext& ctx) { return run(ctx, kernel_args(ctx)); }

}  // namespace conv_transpose_detail

std::vector<ir::TensorType> shape_conv_transpose1d(const ir::Node& node) {
  return {conv_transpose_detail::shape(node)};
}
std::vector<ir::RValue> kernel_conv_transpose1d(ir::KernelContext& ctx) {
  return {conv_transpose_detail::run(ctx, conv_transpose_detail::kernel_args(ctx))};
}

std::vector<ir::TensorType> shape_conv_transpose2d(const ir::Node& node) {
  return {conv_transpose_detail::shape(node)};
}
std::vector<ir::RValue> kernel_conv_transpose2d(ir::KernelContext& ctx) {
  return {conv_transpose_detail::run(ctx, conv_transpose_detail::kernel_args(ctx))};
}

}  // namespace anvil::ops
