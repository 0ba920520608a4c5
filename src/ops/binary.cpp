// Binary arithmetic: add / sub / rsub (with alpha), mul, div (true, trunc, floor), pow,
// maximum / minimum, and the in-place forms add_ / sub_ / mul_ / div_. Comparisons, logic,
// selection, clamp, copy_ and fill_ live in compare.cpp.
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {
namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;

/// The arithmetic families that share type rules and a loop.
enum class Arith { kAdd, kSub, kRsub, kMul, kDiv, kDivTrunc, kDivFloor };

/// Two's-complement wrapping add / mul for int64 (torch integer ops wrap; signed overflow is UB).
template <typename C>
C wrap_add(C x, C y) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
  else
    return x + y;
}
template <typename C>
C wrap_sub(C x, C y) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
  else
    return x - y;
}
template <typename C>
C wrap_mul(C x, C y) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
  else
    return x * y;
}

/// Integer division rounding toward zero / toward -inf (Python //); throws on division by zero.
template <typename C>
C int_div(C a, C b, bool floor, const std::string& where) {
  if (b == 0) throw Error("ZeroDivisionError: integer division by zero", where);
  if (b == -1) return wrap_sub<C>(0, a);  // avoids INT64_MIN / -1
  C q = a / b;
  if (floor && (a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

/// torch's div_floor_floating: floor(a / b) computed through fmod so that it matches Python.
template <typename C>
C float_floor_div(C a, C b) {
  if (b == 0) return a / b;
  C mod = std::fmod(a, b);
  C div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= C(1);
  if (div == 0) return std::copysign(C(0), a / b);
  C floordiv = std::floor(div);
  if (div - floordiv > C(0.5)) floordiv += C(1);
  return floordiv;
}

/// Division rounding toward zero (trunc) or -inf (floor), for the float or integer compute type.
template <typename C>
C rounding_div(C a, C b, bool floor, const std::string& where) {
  if constexpr (std::is_floating_point_v<C>)
    return floor ? float_floor_div(a, b) : std::trunc(a / b);
  else
    return int_div(a, b, floor, where);
}

/// Integer power by squaring with torch's rules for negative exponents (1, -1, else 0).
inline int64_t int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp & 1) ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  while (exp) {
    if (exp & 1) result *= b;
    b *= b;
    exp >>= 1;
  }
  return static_cast<int64_t>(result);
}

/// Result dtype of arithmetic on promoted dtype `promoted`: true division of integers gives
/// float32.
DType arith_dtype(Arith op, DType promoted) {
  if (op == Arith::kDiv && is_integral(promoted, /*include_bool=*/true)) return DType::kFloat32;
  return promoted;
}

/// torch's argument checks: no subtraction with a bool operand, no rounding division of bools,
/// and alpha's kind must suit the result.
void check_arith(Arith op, DType result, bool bool_operand, std::optional<Scalar::Kind> alpha,
                 const std::string& where) {
  if ((op == Arith::kSub || op == Arith::kRsub) && bool_operand)
    throw Error("subtraction with a bool tensor is not supported (use ~ or logical_not)", where,
                "non-bool operands", "a bool operand");
  if ((op == Arith::kDivTrunc || op == Arith::kDivFloor) && result == DType::kBool)
    throw Error("rounding division is not implemented for bool", where, "numeric operands", "bool");
  if (!alpha) return;
  if (is_integral(result, /*include_bool=*/true) && *alpha == Scalar::Kind::kFloat)
    throw Error("for integral input tensors, argument alpha must not be a floating point number",
                where, "an int alpha", "a float alpha");
  if (result != DType::kBool && *alpha == Scalar::Kind::kBool)
    throw Error("boolean alpha only supported for boolean results", where, "an int or float alpha",
                "a bool alpha");
}

/// `a OP b` for a complex result: computed in CT (std::complex<float> for c32 / c64,
/// std::complex<double> for c128), numbers and alpha taken as complex numbers with imaginary part
/// 0. Rounding divisions are not defined for complex numbers (torch refuses them too).
template <typename CT>
Tensor complex_arith(Arith op, const Operand& a, const Operand& b, std::optional<Scalar> alpha,
                     const std::string& where) {
  constexpr DType kCt = dtype_of<CT>();
  auto in = [&](const Operand& o) {
    return o.is_tensor() ? o.tensor->to(kCt) : Tensor::scalar(o.scalar.to_double(), kCt);
  };
  const Tensor ta = in(a), tb = in(b);
  const bool has_alpha = alpha.has_value();
  const CT al = has_alpha ? CT(static_cast<typename CT::value_type>(alpha->to_double())) : CT(1);
  switch (op) {
    case Arith::kAdd:
      return map2<CT, CT, CT>(
          ta, tb, [=](CT x, CT y) { return x + (has_alpha ? al * y : y); }, where);
    case Arith::kSub:
      return map2<CT, CT, CT>(
          ta, tb, [=](CT x, CT y) { return x - (has_alpha ? al * y : y); }, where);
    case Arith::kRsub:
      return map2<CT, CT, CT>(
          ta, tb, [=](CT x, CT y) { return y - (has_alpha ? al * x : x); }, where);
    case Arith::kMul:
      return map2<CT, CT, CT>(ta, tb, [](CT x, CT y) { return x * y; }, where);
    case Arith::kDiv:
      return map2<CT, CT, CT>(ta, tb, [](CT x, CT y) { return x / y; }, where);
    case Arith::kDivTrunc:
    case Arith::kDivFloor:
      break;
  }
  throw Error("rounding division is not defined for complex tensors", where,
              "a real dtype for div with rounding_mode", dtype_name(kCt));
}

/// Computes `a OP b` (with alpha for add / sub / rsub) in the promoted dtype; returns a new tensor
/// of the result dtype.
Tensor arith(Arith op, const Operand& a, const Operand& b, std::optional<Scalar> alpha,
             const std::string& where) {
  const DType rt = arith_dtype(op, result_type({a, b}));
  auto is_bool = [](const Operand& o) {
    return o.is_tensor() ? o.tensor->dtype() == DType::kBool : o.scalar.kind == Scalar::Kind::kBool;
  };
  check_arith(op, rt, is_bool(a) || is_bool(b),
              alpha ? std::optional<Scalar::Kind>(alpha->kind) : std::nullopt, where);
  if (rt == DType::kComplex128)
    return complex_arith<std::complex<double>>(op, a, b, alpha, where);
  if (is_complex(rt)) return complex_arith<std::complex<float>>(op, a, b, alpha, where).to(rt);
  const Tensor ta = as_input(a, rt, /*exact_scalar=*/true);
  const Tensor tb = as_input(b, rt, /*exact_scalar=*/true);
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(rt, where, C, {
    const C al = alpha ? alpha->as<C>() : C(1);
    const bool has_alpha = alpha.has_value();
    switch (op) {
      case Arith::kAdd:
        out = map2<C, C, C>(
            ta, tb, [=](C x, C y) { return wrap_add(x, has_alpha ? wrap_mul(al, y) : y); }, where);
        break;
      case Arith::kSub:
        out = map2<C, C, C>(
            ta, tb, [=](C x, C y) { return wrap_sub(x, has_alpha ? wrap_mul(al, y) : y); }, where);
        break;
      case Arith::kRsub:
        out = map2<C, C, C>(
            ta, tb, [=](C x, C y) { return wrap_sub(y, has_alpha ? wrap_mul(al, x) : x); }, where);
        break;
      case Arith::kMul:
        out = map2<C, C, C>(
            ta, tb, [](C x, C y) { return wrap_mul(x, y); }, where);
        break;
      case Arith::kDiv:  // rt is floating here
        out = map2<C, C, C>(
            ta, tb, [](C x, C y) { return x / y; }, where);
        break;
      case Arith::kDivTrunc:
      case Arith::kDivFloor: {
        const bool floor = op == Arith::kDivFloor;
        out = map2<C, C, C>(
            ta, tb, [&](C x, C y) { return rounding_div(x, y, floor, where); }, where);
        break;
      }
    }
  });
  return to_preserving(out, rt);
}

/// Shape rule shared by the arithmetic ops: `self` and `other` (tensor or number), optional alpha.
TensorType arith_type(const Node& node, Arith op, bool inplace) {
  const TypeOperand a = type_operand(node, "self"), b = type_operand(node, "other");
  const DType rt = arith_dtype(op, result_type({a, b}));
  std::optional<Scalar::Kind> alpha;
  if (ir::shape_args::has(node, "alpha")) alpha = scalar_kind(node, "alpha");
  auto is_bool = [](const TypeOperand& o) {
    return o.is_tensor() ? o.type->dtype == DType::kBool : o.kind == Scalar::Kind::kBool;
  };
  check_arith(op, rt, is_bool(a) || is_bool(b), alpha, node_where(node));
  if (inplace) {
    if (!a.is_tensor())
      ir::shape_args::fail(node, "in-place ops need a tensor self", "Tensor", "a number");
    return inplace_type(node, *a.type, {b}, rt);
  }
  return pointwise_type(node, {a, b}, rt);
}

/// Kernel shared by the arithmetic ops.
std::vector<RValue> arith_kernel(KernelContext& ctx, Arith op, bool inplace) {
  const Operand a = operand_arg(ctx, "self"), b = operand_arg(ctx, "other");
  std::optional<Scalar> alpha = opt_scalar_arg(ctx, "alpha");
  Tensor out = arith(op, a, b, alpha, ctx.where());
  if (!inplace) return {out};
  const Tensor& self = ctx.tensor("self");
  assign_inplace(self, out, ctx.where());
  return {self};
}

/// div.Tensor_mode's rounding mode: none (true division), "trunc" or "floor".
Arith div_mode(const std::optional<std::string>& mode, const std::string& where) {
  if (!mode) return Arith::kDiv;
  if (*mode == "trunc") return Arith::kDivTrunc;
  if (*mode == "floor") return Arith::kDivFloor;
  throw Error("div expected rounding_mode to be one of None, 'trunc', or 'floor'", where,
              "None, 'trunc' or 'floor'", "'" + *mode + "'");
}

// ---- pow

/// x ** e for a fixed exponent, with torch's exact shortcuts for 2, 3, 0.5, -0.5, -1, -2.
template <typename C>
C pow_scalar_exp(C x, C e) {
  if (e == C(2)) return x * x;
  if (e == C(3)) return x * x * x;
  if (e == C(0.5)) return std::sqrt(x);
  if (e == C(-0.5)) return C(1) / std::sqrt(x);
  if (e == C(-1)) return C(1) / x;
  if (e == C(-2)) return C(1) / (x * x);
  return std::pow(x, e);
}

/// One element of pow: integer power for integer C, else std::pow (with the shortcuts of a
/// number exponent when `scalar_exp`).
template <typename C>
C pow_elem(C x, C e, bool scalar_exp) {
  if constexpr (std::is_floating_point_v<C>)
    return scalar_exp ? pow_scalar_exp(x, e) : std::pow(x, e);
  else
    return int_pow(x, e);
}

/// maximum / minimum of one pair, propagating NaN.
template <typename C>
C extremum_elem(C x, C y, bool is_max) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<C>::quiet_NaN();
  }
  return is_max ? (x > y ? x : y) : (x < y ? x : y);
}

/// base ** exponent elementwise in the promoted dtype (a number exponent uses the shortcuts).
Tensor pow_impl(const Operand& base, const Operand& exp, const std::string& where) {
  const DType rt = result_type({base, exp});
  if (rt == DType::kBool)
    throw Error("pow is not supported for bool results", where, "a numeric dtype", "bool");
  if (!exp.is_tensor() && is_integral(rt) && !exp.scalar.is_float() && exp.scalar.i < 0)
    throw Error("integers to negative integer powers are not allowed", where, "an exponent >= 0",
                exp.scalar.str());
  const Tensor tb = as_input(base, rt, /*exact_scalar=*/true);
  const Tensor te = as_input(exp, rt, /*exact_scalar=*/true);
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(rt, where, C, {
    const bool scalar_exp = !exp.is_tensor();
    out = map2<C, C, C>(
        tb, te, [=](C x, C e) { return pow_elem(x, e, scalar_exp); }, where);
  });
  return to_preserving(out, rt);
}

/// Shape rule of the pow overloads (arguments `self` and `exponent`).
TensorType pow_type(const Node& node) {
  const TypeOperand a = type_operand(node, "self"), b = type_operand(node, "exponent");
  const DType rt = result_type({a, b});
  if (rt == DType::kBool)
    ir::shape_args::fail(node, "pow is not supported for bool results", "a numeric dtype", "bool");
  return pointwise_type(node, {a, b}, rt);
}

std::vector<RValue> pow_kernel(KernelContext& ctx) {
  return {pow_impl(operand_arg(ctx, "self"), operand_arg(ctx, "exponent"), ctx.where())};
}

// ---- maximum / minimum

/// maximum (or minimum) with NaN propagation.
Tensor extremum(const Tensor& a, const Tensor& b, bool is_max, const std::string& where) {
  const DType rt = result_type({Operand{a, {}}, Operand{b, {}}});
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(rt, where, C, {
    out = map2<C, C, C>(
        a.to(rt), b.to(rt), [=](C x, C y) { return extremum_elem(x, y, is_max); }, where);
  });
  return to_preserving(out, rt);
}

TensorType extremum_type(const Node& node) {
  const TypeOperand a = type_operand(node, "self"), b = type_operand(node, "other");
  if (!a.is_tensor() || !b.is_tensor())
    ir::shape_args::fail(node, "maximum / minimum need two tensors", "Tensor, Tensor",
                         "a number argument");
  return pointwise_type(node, {a, b}, result_type({a, b}));
}

}  // namespace

// ---- add / sub / rsub / mul / div

std::vector<TensorType> shape_add_Tensor(const Node& n) {
  return {arith_type(n, Arith::kAdd, false)};
}
std::vector<RValue> kernel_add_Tensor(KernelContext& c) {
  return arith_kernel(c, Arith::kAdd, false);
}
std::vector<TensorType> shape_add_Scalar(const Node& n) {
  return {arith_type(n, Arith::kAdd, false)};
}
std::vector<RValue> kernel_add_Scalar(KernelContext& c) {
  return arith_kernel(c, Arith::kAdd, false);
}
std::vector<TensorType> shape_sub_Tensor(const Node& n) {
  return {arith_type(n, Arith::kSub, false)};
}
std::vector<RValue> kernel_sub_Tensor(KernelContext& c) {
  return arith_kernel(c, Arith::kSub, false);
}
std::vector<TensorType> shape_sub_Scalar(const Node& n) {
  return {arith_type(n, Arith::kSub, false)};
}
std::vector<RValue> kernel_sub_Scalar(KernelContext& c) {
  return arith_kernel(c, Arith::kSub, false);
}
std::vector<TensorType> shape_rsub_Scalar(const Node& n) {
  return {arith_type(n, Arith::kRsub, false)};
}
std::vector<RValue> kernel_rsub_Scalar(KernelContext& c) {
  return arith_kernel(c, Arith::kRsub, false);
}
std::vector<TensorType> shape_rsub_Tensor(const Node& n) {
  return {arith_type(n, Arith::kRsub, false)};
}
std::vector<RValue> kernel_rsub_Tensor(KernelContext& c) {
  return arith_kernel(c, Arith::kRsub, false);
}
std::vector<TensorType> shape_mul_Tensor(const Node& n) {
  return {arith_type(n, Arith::kMul, false)};
}
std::vector<RValue> kernel_mul_Tensor(KernelContext& c) {
  return arith_kernel(c, Arith::kMul, false);
}
std::vector<TensorType> shape_mul_Scalar(const Node& n) {
  return {arith_type(n, Arith::kMul, false)};
}
std::vector<RValue> kernel_mul_Scalar(KernelContext& c) {
  return arith_kernel(c, Arith::kMul, false);
}
std::vector<TensorType> shape_div_Tensor(const Node& n) {
  return {arith_type(n, Arith::kDiv, false)};
}
std::vector<RValue> kernel_div_Tensor(KernelContext& c) {
  return arith_kernel(c, Arith::kDiv, false);
}
std::vector<TensorType> shape_div_Scalar(const Node& n) {
  return {arith_type(n, Arith::kDiv, false)};
}
std::vector<RValue> kernel_div_Scalar(KernelContext& c) {
  return arith_kernel(c, Arith::kDiv, false);
}

// div.Scalar_mode: a Python number `other`; div.Tensor_mode's rule and kernel (declared by
// registry.h) take tensors and numbers alike.
std::vector<TensorType> shape_div_Scalar_mode(const Node& n) { return shape_div_Tensor_mode(n); }
std::vector<RValue> kernel_div_Scalar_mode(KernelContext& c) { return kernel_div_Tensor_mode(c); }

std::vector<TensorType> shape_div_Tensor_mode(const Node& node) {
  std::optional<std::string> mode;
  if (ir::shape_args::has(node, "rounding_mode")) {
    const ir::Arg* a = node.arg("rounding_mode");
    if (a->kind != ir::Arg::Kind::kString)
      ir::shape_args::fail(node, "argument 'rounding_mode' is not a string", "str or None",
                           "another kind");
    mode = a->s;
  }
  return {arith_type(node, div_mode(mode, node_where(node)), false)};
}

std::vector<RValue> kernel_div_Tensor_mode(KernelContext& ctx) {
  std::optional<std::string> mode;
  if (ctx.has("rounding_mode")) mode = ctx.string_arg("rounding_mode", "");
  return arith_kernel(ctx, div_mode(mode, ctx.where()), false);
}

// ---- pow

std::vector<TensorType> shape_pow_Tensor_Scalar(const Node& n) { return {pow_type(n)}; }
std::vector<RValue> kernel_pow_Tensor_Scalar(KernelContext& c) { return pow_kernel(c); }
std::vector<TensorType> shape_pow_Tensor_Tensor(const Node& n) { return {pow_type(n)}; }
std::vector<RValue> kernel_pow_Tensor_Tensor(KernelContext& c) { return pow_kernel(c); }
std::vector<TensorType> shape_pow_Scalar(const Node& n) { return {pow_type(n)}; }
std::vector<RValue> kernel_pow_Scalar(KernelContext& c) { return pow_kernel(c); }

// ---- maximum / minimum

std::vector<TensorType> shape_maximum(const Node& n) { return {extremum_type(n)}; }
std::vector<RValue> kernel_maximum(KernelContext& c) {
  return {extremum(c.tensor("self"), c.tensor("other"), true, c.where())};
}
std::vector<TensorType> shape_minimum(const Node& n) { return {extremum_type(n)}; }
std::vector<RValue> kernel_minimum(KernelContext& c) {
  return {extremum(c.tensor("self"), c.tensor("other"), false, c.where())};
}
// torch.max(a, b) / torch.min(a, b): the same ops under their other export names
std::vector<TensorType> shape_max_other(const Node& n) { return shape_maximum(n); }
std::vector<RValue> kernel_max_other(KernelContext& c) { return kernel_maximum(c); }
std::vector<TensorType> shape_min_other(const Node& n) { return shape_minimum(n); }
std::vector<RValue> kernel_min_other(KernelContext& c) { return kernel_minimum(c); }

}  // namespace anvil::ops
