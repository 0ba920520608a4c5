// More unary pointwise ops: sign, isnan / isinf (bool results), and the activations with
// parameters elu (alpha, scale, input_scale) and leaky_relu (negative_slope), each with
// PyTorch's CPU formula. Part of the "unary.cpp" rows of ops.def.
#include <cmath>
#include <type_traits>

#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {
namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;

/// self's type with `dtype` (contiguous).
TensorType self_with(const Node& node, DType dtype) {
  TensorType t = ir::shape_args::type(node, "self");
  t.dtype = dtype;
  t.strides.clear();
  return t;
}

// ---- sign

/// Throws for complex inputs of sign (PyTorch points to torch.sgn).
void check_sign_dtype(DType dt, const std::string& where) {
  if (is_complex(dt))
    throw Error("sign is not defined for complex tensors (torch.sgn is)", where, "a real dtype",
                dtype_name(dt));
  compute_dtype(dt, where);
}

/// sign keeps the dtype (bool included: sign(True) is True).
TensorType sign_type(const Node& node) {
  const DType dt = ir::shape_args::type(node, "self").dtype;
  check_sign_dtype(dt, node_where(node));
  return self_with(node, dt);
}

/// PyTorch's (0 < x) - (x < 0): NaN and -0.0 give +0.
template <typename C>
C sign_elem(C x) {
  return static_cast<C>(static_cast<int>(C(0) < x) - static_cast<int>(x < C(0)));
}

// ---- isnan / isinf

TensorType float_test_type(const Node& node) {
  const DType dt = ir::shape_args::type(node, "self").dtype;
  compute_dtype(dt, node_where(node));  // refuses complex
  return self_with(node, DType::kBool);
}

/// isnan (or isinf): false for integers and bool.
std::vector<RValue> float_test_kernel(KernelContext& ctx, bool nan) {
  const Tensor& x = ctx.tensor("self");
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(x.dtype(), ctx.where(), C, {
    out = map1<C, bool>(x, [nan](C v) {
      if constexpr (std::is_floating_point_v<C>)
        return nan ? std::isnan(v) : std::isinf(v);
      else
        return false;
    });
  });
  return {out};
}

// ---- elu / leaky_relu

/// Throws unless `dt` is floating (torch: "elu_cpu" not implemented for 'Long').
void check_floating(DType dt, const std::string& what, const std::string& where) {
  if (!is_floating(dt))
    throw Error(what + " is only implemented for floating dtypes", where, "a floating dtype",
                dtype_name(dt));
}

TensorType floating_activation_type(const Node& node, const std::string& what) {
  const DType dt = ir::shape_args::type(node, "self").dtype;
  check_floating(dt, what, node_where(node));
  return self_with(node, dt);
}

/// A number argument with a default (elu's alpha / scale / input_scale, negative_slope).
double number_or(const KernelContext& ctx, const std::string& name, double dflt) {
  const std::optional<Scalar> s = opt_scalar_arg(ctx, name);
  return s ? s->to_double() : dflt;
}

}  // namespace

std::vector<TensorType> shape_sign(const Node& n) { return {sign_type(n)}; }
std::vector<RValue> kernel_sign(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  check_sign_dtype(x.dtype(), ctx.where());
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(x.dtype(), ctx.where(), C,
                         { out = map1<C, C>(x, [](C v) { return sign_elem(v); }); });
  return {to_preserving(out, x.dtype())};
}

std::vector<TensorType> shape_isnan(const Node& n) { return {float_test_type(n)}; }
std::vector<RValue> kernel_isnan(KernelContext& c) { return float_test_kernel(c, true); }
std::vector<TensorType> shape_isinf(const Node& n) { return {float_test_type(n)}; }
std::vector<RValue> kernel_isinf(KernelContext& c) { return float_test_kernel(c, false); }

// elu(x) = x > 0 ? scale * x : expm1(x * input_scale) * (alpha * scale), the coefficients in the
// compute type as PyTorch's kernel forms them; NaN stays NaN.
std::vector<TensorType> shape_elu(const Node& n) { return {floating_activation_type(n, "elu")}; }
std::vector<RValue> kernel_elu(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  check_floating(x.dtype(), "elu", ctx.where());
  const double alpha = number_or(ctx, "alpha", 1.0), scale = number_or(ctx, "scale", 1.0),
               input_scale = number_or(ctx, "input_scale", 1.0);
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(x.dtype(), ctx.where(), C, {
    if constexpr (std::is_floating_point_v<C>) {
      const C neg = C(alpha) * C(scale), pos = C(scale), in = C(input_scale);
      out = map1<C, C>(x, [=](C v) { return v <= C(0) ? std::expm1(v * in) * neg : v * pos; });
    }
  });
  return {to_preserving(out, x.dtype())};
}

// leaky_relu(x) = x > 0 ? x : x * negative_slope (NaN stays NaN, -0.0 stays -0.0).
std::vector<TensorType> shape_leaky_relu(const Node& n) {
  return {floating_activation_type(n, "leaky_relu")};
}
std::vector<RValue> kernel_leaky_relu(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  check_floating(x.dtype(), "leaky_relu", ctx.where());
  const double slope = number_or(ctx, "negative_slope", 0.01);
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(x.dtype(), ctx.where(), C, {
    const C s = static_cast<C>(slope);
    out = map1<C, C>(x, [=](C v) { return v > C(0) ? v : v * s; });
  });
  return {to_preserving(out, x.dtype())};
}

}  // namespace anvil::ops
