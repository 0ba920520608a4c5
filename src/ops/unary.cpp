// Unary math and activations (neg, abs, sqrt, exp, trigonometric and hyperbolic functions and
// their inverses, expm1 / log1p / log2 / log10, ..., gelu, silu), logical / bitwise not.
// Casts, copies and no-ops (to.*, _to_copy, clone, alias, dropout, _assert_tensor_metadata) live
// in cast.cpp. Part of the "unary.cpp" rows of ops.def.
#include <cmath>
#include <complex>
#include <type_traits>

#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {
namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;

/// The floating unary functions: integer and bool inputs compute in float32.
enum class FloatFn {
  kRsqrt,
  kSqrt,
  kReciprocal,
  kExp,
  kLog,
  kCos,
  kSin,
  kTanh,
  kErf,
  kSigmoid,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kExpm1,
  kLog1p,
  kLog2,
  kLog10
};

/// One element of a floating unary function, in compute type C (float or double).
template <typename C>
C float_fn(C x, FloatFn fn) {
  switch (fn) {
    case FloatFn::kRsqrt:
      return C(1) / std::sqrt(x);
    case FloatFn::kSqrt:
      return std::sqrt(x);
    case FloatFn::kReciprocal:
      return C(1) / x;
    case FloatFn::kExp:
      return std::exp(x);
    case FloatFn::kLog:
      return std::log(x);
    case FloatFn::kCos:
      return std::cos(x);
    case FloatFn::kSin:
      return std::sin(x);
    case FloatFn::kTanh:
      return std::tanh(x);
    case FloatFn::kErf:
      return std::erf(x);
    case FloatFn::kSigmoid:
      return C(1) / (C(1) + std::exp(-x));
    case FloatFn::kTan:
      return std::tan(x);
    case FloatFn::kAsin:
      return std::asin(x);
    case FloatFn::kAcos:
      return std::acos(x);
    case FloatFn::kAtan:
      return std::atan(x);
    case FloatFn::kSinh:
      return std::sinh(x);
    case FloatFn::kCosh:
      return std::cosh(x);
    case FloatFn::kAsinh:
      return std::asinh(x);
    case FloatFn::kAcosh:
      return std::acosh(x);
    case FloatFn::kAtanh:
      return std::atanh(x);
    case FloatFn::kExpm1:
      return std::expm1(x);
    case FloatFn::kLog1p:
      return std::log1p(x);
    case FloatFn::kLog2:
      return std::log2(x);
    case FloatFn::kLog10:
      return std::log10(x);
  }
  return x;
}

/// Activations that need a floating input (torch has no integer kernels for them).
enum class Activation { kGeluNone, kGeluTanh, kSilu, kHardswish, kHardsigmoid };

template <typename C>
C activation(C x, Activation fn) {
  switch (fn) {
    case Activation::kGeluNone:
      return x * C(0.5) * (C(1) + std::erf(x * C(M_SQRT1_2)));
    case Activation::kGeluTanh: {
      const C k_beta = C(M_SQRT2 * M_2_SQRTPI * 0.5);  // sqrt(2 / pi)
      const C inner = k_beta * (x + C(0.044715) * x * x * x);
      return C(0.5) * x * (C(1) + std::tanh(inner));
    }
    case Activation::kSilu:
      return x / (C(1) + std::exp(-x));
    case Activation::kHardsigmoid:  // relu6(x + 3) / 6
      return std::min(std::max(x + C(3), C(0)), C(6)) / C(6);
    case Activation::kHardswish:  // x * relu6(x + 3) / 6
      return x * std::min(std::max(x + C(3), C(0)), C(6)) / C(6);
  }
  return x;
}

/// The sign-preserving integer-or-float unary ops.
enum class SignedFn { kNeg, kAbs, kRelu };

template <typename C>
C signed_fn(C x, SignedFn fn) {
  switch (fn) {
    case SignedFn::kNeg:
      if constexpr (std::is_integral_v<C>)
        return static_cast<C>(0 - static_cast<uint64_t>(x));
      else
        return -x;
    case SignedFn::kAbs:
      if constexpr (std::is_integral_v<C>)
        return x < 0 ? static_cast<C>(0 - static_cast<uint64_t>(x)) : x;
      else
        return std::abs(x);
    case SignedFn::kRelu:
      return x < C(0) ? C(0) : x;  // NaN stays NaN
  }
  return x;
}

const char* signed_fn_name(SignedFn fn) {
  switch (fn) {
    case SignedFn::kNeg:
      return "neg";
    case SignedFn::kAbs:
      return "abs";
    case SignedFn::kRelu:
      return "relu";
  }
  return "?";
}

/// The input tensor's type of a unary node (argument `self`).
const TensorType& self_type(const Node& node) { return ir::shape_args::type(node, "self"); }

/// Output type: self's sizes and device with `dtype`.
TensorType with_dtype(const TensorType& t, DType dtype) {
  TensorType out;
  out.dtype = dtype;
  out.sizes = t.sizes;
  out.device = t.device;
  return out;
}

// ---- kernels and rules by family

TensorType float_fn_type(const Node& node) {
  const TensorType& t = self_type(node);
  const DType rt = float_result_dtype(t.dtype);
  compute_dtype(rt, node_where(node));
  return with_dtype(t, rt);
}

std::vector<RValue> float_fn_kernel(KernelContext& ctx, FloatFn fn) {
  const Tensor& x = ctx.tensor("self");
  const DType rt = float_result_dtype(x.dtype());
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(rt, ctx.where(), C, {
    if constexpr (std::is_floating_point_v<C>)
      out = map1<C, C>(x, [=](C v) { return float_fn(v, fn); });
  });
  return {to_preserving(out, rt)};
}

/// Throws unless `dtype` is floating (gelu, silu).
void check_floating(DType dtype, const std::string& what, const std::string& where) {
  if (!is_floating(dtype))
    throw Error(what + " is only implemented for floating dtypes", where, "a floating dtype",
                dtype_name(dtype));
}

TensorType activation_type(const Node& node, const std::string& what) {
  const TensorType& t = self_type(node);
  check_floating(t.dtype, what, node_where(node));
  return with_dtype(t, t.dtype);
}

std::vector<RValue> activation_kernel(KernelContext& ctx, Activation fn, const std::string& what) {
  const Tensor& x = ctx.tensor("self");
  check_floating(x.dtype(), what, ctx.where());
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(x.dtype(), ctx.where(), C, {
    if constexpr (std::is_floating_point_v<C>)
      out = map1<C, C>(x, [=](C v) { return activation(v, fn); });
  });
  return {to_preserving(out, x.dtype())};
}

/// gelu's `approximate`: "none" (erf) or "tanh".
Activation gelu_mode(const std::string& approximate, const std::string& where) {
  if (approximate == "none") return Activation::kGeluNone;
  if (approximate == "tanh") return Activation::kGeluTanh;
  throw Error("gelu: unknown approximate mode", where, "'none' or 'tanh'", "'" + approximate + "'");
}

/// Throws for bool inputs of neg / abs / relu (torch has no bool kernels for them).
void check_not_bool(DType dtype, SignedFn fn, const std::string& where) {
  if (dtype == DType::kBool)
    throw Error(std::string(signed_fn_name(fn)) + " is not supported for bool tensors", where,
                "a numeric dtype", "bool");
}

/// neg / abs of a complex tensor (abs gives the real dtype, |z|); relu has no complex kernel.
template <typename CT>
Tensor complex_signed_fn(const Tensor& x, SignedFn fn) {
  using R = typename CT::value_type;
  if (fn == SignedFn::kAbs)
    return map1<CT, R>(x, [](CT v) { return std::abs(v); }).to(complex_to_real(x.dtype()));
  return map1<CT, CT>(x, [](CT v) { return -v; }).to(x.dtype());
}

TensorType signed_fn_type(const Node& node, SignedFn fn) {
  const TensorType& t = self_type(node);
  if (is_complex(t.dtype) && fn != SignedFn::kRelu)
    return with_dtype(t, fn == SignedFn::kAbs ? complex_to_real(t.dtype) : t.dtype);
  check_not_bool(t.dtype, fn, node_where(node));
  compute_dtype(t.dtype, node_where(node));
  return with_dtype(t, t.dtype);
}

std::vector<RValue> signed_fn_kernel(KernelContext& ctx, SignedFn fn) {
  const Tensor& x = ctx.tensor("self");
  if (is_complex(x.dtype()) && fn != SignedFn::kRelu)
    return {x.dtype() == DType::kComplex128 ? complex_signed_fn<std::complex<double>>(x, fn)
                                            : complex_signed_fn<std::complex<float>>(x, fn)};
  check_not_bool(x.dtype(), fn, ctx.where());
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(x.dtype(), ctx.where(), C,
                         { out = map1<C, C>(x, [=](C v) { return signed_fn(v, fn); }); });
  return {to_preserving(out, x.dtype())};
}

}  // namespace

// ---- floating unary functions

#define ANVIL_FLOAT_FN_(ID, FN)                                                    \
  std::vector<TensorType> shape_##ID(const Node& n) { return {float_fn_type(n)}; } \
  std::vector<RValue> kernel_##ID(KernelContext& c) { return float_fn_kernel(c, FN); }
ANVIL_FLOAT_FN_(rsqrt, FloatFn::kRsqrt)
ANVIL_FLOAT_FN_(sqrt, FloatFn::kSqrt)
ANVIL_FLOAT_FN_(reciprocal, FloatFn::kReciprocal)
ANVIL_FLOAT_FN_(exp, FloatFn::kExp)
ANVIL_FLOAT_FN_(log, FloatFn::kLog)
ANVIL_FLOAT_FN_(cos, FloatFn::kCos)
ANVIL_FLOAT_FN_(sin, FloatFn::kSin)
ANVIL_FLOAT_FN_(tanh, FloatFn::kTanh)
ANVIL_FLOAT_FN_(erf, FloatFn::kErf)
ANVIL_FLOAT_FN_(sigmoid, FloatFn::kSigmoid)
ANVIL_FLOAT_FN_(tan, FloatFn::kTan)
ANVIL_FLOAT_FN_(asin, FloatFn::kAsin)
ANVIL_FLOAT_FN_(acos, FloatFn::kAcos)
ANVIL_FLOAT_FN_(atan, FloatFn::kAtan)
ANVIL_FLOAT_FN_(sinh, FloatFn::kSinh)
ANVIL_FLOAT_FN_(cosh, FloatFn::kCosh)
ANVIL_FLOAT_FN_(asinh, FloatFn::kAsinh)
ANVIL_FLOAT_FN_(acosh, FloatFn::kAcosh)
ANVIL_FLOAT_FN_(atanh, FloatFn::kAtanh)
ANVIL_FLOAT_FN_(expm1, FloatFn::kExpm1)
ANVIL_FLOAT_FN_(log1p, FloatFn::kLog1p)
ANVIL_FLOAT_FN_(log2, FloatFn::kLog2)
ANVIL_FLOAT_FN_(log10, FloatFn::kLog10)
#undef ANVIL_FLOAT_FN_

// ---- floor / ceil / round / trunc: integers and their dtype unchanged (PyTorch returns a copy),
// floating values rounded in their compute type; round is half-to-even, as torch.round.

namespace {
enum class RoundFn { kFloor, kCeil, kRound, kTrunc };

TensorType round_type(const Node& node) {
  TensorType t = ir::shape_args::type(node, "self");
  if (t.dtype == DType::kBool || is_complex(t.dtype))
    ir::shape_args::fail(node, "rounding of a bool or complex tensor",
                         "a real numeric tensor (PyTorch refuses these too)", dtype_name(t.dtype));
  t.strides.clear();
  return t;
}

std::vector<RValue> round_kernel(KernelContext& ctx, RoundFn fn) {
  round_type(ctx.node());
  const Tensor& x = ctx.tensor("self");
  if (!is_floating(x.dtype())) return {x.contiguous().clone()};
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(x.dtype(), ctx.where(), C, {
    out = map1<C, C>(x, [fn](C v) -> C {
      switch (fn) {
        case RoundFn::kFloor: return std::floor(v);
        case RoundFn::kCeil: return std::ceil(v);
        case RoundFn::kRound: return std::nearbyint(v);
        default: return std::trunc(v);
      }
    });
  });
  return {to_preserving(out, x.dtype())};
}
}  // namespace

std::vector<TensorType> shape_floor(const Node& n) { return {round_type(n)}; }
std::vector<RValue> kernel_floor(KernelContext& c) { return round_kernel(c, RoundFn::kFloor); }
std::vector<TensorType> shape_ceil(const Node& n) { return {round_type(n)}; }
std::vector<RValue> kernel_ceil(KernelContext& c) { return round_kernel(c, RoundFn::kCeil); }
std::vector<TensorType> shape_round(const Node& n) { return {round_type(n)}; }
std::vector<RValue> kernel_round(KernelContext& c) { return round_kernel(c, RoundFn::kRound); }
std::vector<TensorType> shape_trunc(const Node& n) { return {round_type(n)}; }
std::vector<RValue> kernel_trunc(KernelContext& c) { return round_kernel(c, RoundFn::kTrunc); }

// ---- neg / abs / relu

std::vector<TensorType> shape_neg(const Node& n) { return {signed_fn_type(n, SignedFn::kNeg)}; }
std::vector<RValue> kernel_neg(KernelContext& c) { return signed_fn_kernel(c, SignedFn::kNeg); }
std::vector<TensorType> shape_abs(const Node& n) { return {signed_fn_type(n, SignedFn::kAbs)}; }
std::vector<RValue> kernel_abs(KernelContext& c) { return signed_fn_kernel(c, SignedFn::kAbs); }
std::vector<TensorType> shape_relu(const Node& n) { return {signed_fn_type(n, SignedFn::kRelu)}; }
std::vector<RValue> kernel_relu(KernelContext& c) { return signed_fn_kernel(c, SignedFn::kRelu); }

// ---- gelu / silu

std::vector<TensorType> shape_gelu(const Node& node) {
  const std::string mode =
      ir::shape_args::has(node, "approximate") ? node.arg("approximate")->s : "none";
  gelu_mode(mode, node_where(node));
  return {activation_type(node, "gelu")};
}

std::vector<RValue> kernel_gelu(KernelContext& ctx) {
  return activation_kernel(ctx, gelu_mode(ctx.string_arg("approximate", "none"), ctx.where()),
                           "gelu");
}

std::vector<TensorType> shape_silu(const Node& n) { return {activation_type(n, "silu")}; }
std::vector<RValue> kernel_silu(KernelContext& c) {
  return activation_kernel(c, Activation::kSilu, "silu");
}

std::vector<TensorType> shape_hardswish(const Node& n) { return {activation_type(n, "hardswish")}; }
std::vector<RValue> kernel_hardswish(KernelContext& c) {
  return activation_kernel(c, Activation::kHardswish, "hardswish");
}
std::vector<TensorType> shape_hardsigmoid(const Node& n) {
  return {activation_type(n, "hardsigmoid")};
}
std::vector<RValue> kernel_hardsigmoid(KernelContext& c) {
  return activation_kernel(c, Activation::kHardsigmoid, "hardsigmoid");
}

// ---- logical_not / bitwise_not

std::vector<TensorType> shape_logical_not(const Node& node) {
  return {with_dtype(self_type(node), DType::kBool)};
}

std::vector<RValue> kernel_logical_not(KernelContext& ctx) {
  return {map1<bool, bool>(ctx.tensor("self"), [](bool v) { return !v; })};
}

std::vector<TensorType> shape_bitwise_not(const Node& node) {
  const TensorType& t = self_type(node);
  if (!is_integral(t.dtype, /*include_bool=*/true))
    ir::shape_args::fail(node, "bitwise_not needs a bool or integer tensor",
                         "bool or integer dtype", dtype_name(t.dtype));
  return {with_dtype(t, t.dtype)};
}

std::vector<RValue> kernel_bitwise_not(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  if (x.dtype() == DType::kBool) return {map1<bool, bool>(x, [](bool v) { return !v; })};
  if (!is_integral(x.dtype()))
    ctx.fail("bitwise_not needs a bool or integer tensor", "bool or integer dtype",
             dtype_name(x.dtype()));
  return {map1<int64_t, int64_t>(x, [](int64_t v) { return ~v; }).to(x.dtype())};
}

}  // namespace anvil::ops
