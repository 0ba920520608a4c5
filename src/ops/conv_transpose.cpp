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

#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace conv_transpose_detail {

/// The non-tensor arguments of a transposed convolution (lists of 1 value apply to every dim).
struct Args {
  std::vector<int64_t> stride{1};
  std::vector<int64_t> padding{0};
  std::vector<int64_t> output_padding{0};
  std::vector<int64_t> dilation{1};
  int64_t groups = 1;
};

namespace {

/// `v` expanded to `n` values (one value applies to every dim).
std::vector<int64_t> per_dim(const std::vector<int64_t>& v, size_t n, const char* name,
                             const std::string& where) {
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  ANVIL_CHECK(v.size() == n, where, str("'", name, "' must have 1 or ", n, " values"),
              str(n, " values"), std::to_string(v.size()));
  return v;
}

/// Geometry of one transposed convolution lifted to 2-D (1-D has h = kh = 1).
struct Geom {
  int64_t n = 1, c = 0, h = 1, w = 0, o = 0, groups = 1, kh = 1, kw = 1;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, oh = 1, ow = 0;
  bool unbatched = false;
  size_t spatial = 2;
};

/// Validates the input sizes `x` ([N, C, (H,) W] or unbatched [C, (H,) W]), the weight sizes
/// `wt` ([C, O / groups, (kH,) kW]) and the arguments; computes the lifted geometry.
Geom geometry(const Shape& x, const Shape& wt, const Args& a, const std::string& where) {
  ANVIL_CHECK(wt.size() == 3 || wt.size() == 4, where,
              "only 1-D and 2-D transposed convolutions are supported", "a 3-D or 4-D weight",
              shape_str(wt));
  Geom g;
  g.spatial = wt.size() - 2;
  const size_t sp = g.spatial;
  g.unbatched = x.size() == sp + 1;
  ANVIL_CHECK(x.size() == sp + 2 || g.unbatched, where,
              str("a ", sp, "-D transposed convolution needs a ", sp + 2, "-D (or unbatched ",
                  sp + 1, "-D) input"),
              str(sp + 2, "-D"), shape_str(x));
  const size_t b0 = g.unbatched ? 0 : 1;
  g.n = g.unbatched ? 1 : x[0];
  g.c = x[b0];
  g.w = x.back();
  g.h = sp == 2 ? x[x.size() - 2] : 1;
  g.groups = a.groups;
  ANVIL_CHECK(g.groups > 0, where, "groups must be positive", "> 0", std::to_string(g.groups));
  ANVIL_CHECK(wt[0] == g.c && g.c % g.groups == 0, where,
              str("weight does not fit the input with groups=", g.groups),
              str("weight [", g.c, " (divisible by ", g.groups, "), O/groups, ...]"),
              shape_str(wt));
  g.o = wt[1] * g.groups;
  g.kw = wt.back();
  g.kh = sp == 2 ? wt[2] : 1;
  const auto s = per_dim(a.stride, sp, "stride", where);
  const auto p = per_dim(a.padding, sp, "padding", where);
  const auto op = per_dim(a.output_padding, sp, "output_padding", where);
  const auto d = per_dim(a.dilation, sp, "dilation", where);
  for (size_t i = 0; i < sp; ++i) {
    ANVIL_CHECK(s[i] > 0, where, "stride must be positive", "> 0", str(s[i]));
    ANVIL_CHECK(d[i] > 0, where, "dilation must be positive", "> 0", str(d[i]));
    ANVIL_CHECK(p[i] >= 0, where, "negative padding", ">= 0", str(p[i]));
    ANVIL_CHECK(op[i] >= 0 && (op[i] < s[i] || op[i] < d[i]), where,
                "output padding must be smaller than either stride or dilation",
                str("0 <= output_padding < max(stride, dilation)"), str(op[i]));
  }
  int64_t oph = 0;
  const int64_t opw = op.back();
  g.sw = s.back();
  g.pw = p.back();
  g.dw = d.back();
  if (sp == 2) {
    g.sh = s[0];
    g.ph = p[0];
    oph = op[0];
    g.dh = d[0];
  }
  g.oh = (g.h - 1) * g.sh - 2 * g.ph + g.dh * (g.kh - 1) + oph + 1;
  g.ow = (g.w - 1) * g.sw - 2 * g.pw + g.dw * (g.kw - 1) + opw + 1;
  ANVIL_CHECK(g.oh > 0 && g.ow > 0, where, "the output of the transposed convolution is empty",
              "a positive output size", str(g.oh, "x", g.ow));
  return g;
}

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

/// Output sizes of a transposed convolution (see geometry()); throws Error at `where`.
Shape conv_transpose_sizes(const Shape& x, const Shape& w, const Args& a,
                           const std::string& where) {
  const Geom g = geometry(x, w, a, where);
  Shape s;
  if (!g.unbatched) s.push_back(g.n);
  s.push_back(g.o);
  if (g.spatial == 2) s.push_back(g.oh);
  s.push_back(g.ow);
  return s;
}


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
  const Geom g = geometry(x.sizes(), w.sizes(), a, where);
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
