// Lowering of the pointwise ops of ops/unary_extra.cpp and ops/binary_extra.cpp and of the
// bitwise / logical xor and Scalar forms: each is composed from ExprOps where the composition is
// exact (sign = (x > 0) - (x < 0), isnan = x != x, isinf = |x| == inf, remainder = fmod plus the
// divisor when the signs differ, clamp = min(max(x, lo), hi) with NaN propagation), so it fuses
// with its neighbours on every target.
#include <cmath>
#include <map>

#include "core/error.h"
#include "ops/common.h"
#include "passes/pointwise_operand.h"

namespace anvil::passes::detail {

namespace {

/// A number argument (elu's alpha, leaky_relu's negative_slope) or its default.
double number_arg(Lowerer& L, const std::string& name, double dflt) {
  const auto o = operand(L, name);
  if (!o) return dflt;
  if (o->t || o->symbolic)
    L.fail("argument '" + name + "' must be a number", "a number", "a tensor");
  return o->is_float ? o->f : static_cast<double>(o->i);
}

/// The bitwise and logical ops handled here and their expression op.
const std::map<std::string, ExprOp>& bitwise_ops() {
  static const std::map<std::string, ExprOp> kOps = {
      {"aten.bitwise_and.Scalar", ExprOp::kBitAnd}, {"aten.__and__.Scalar", ExprOp::kBitAnd},
      {"aten.bitwise_or.Scalar", ExprOp::kBitOr},   {"aten.__or__.Scalar", ExprOp::kBitOr},
      {"aten.bitwise_xor.Tensor", ExprOp::kBitXor}, {"aten.bitwise_xor.Scalar", ExprOp::kBitXor},
      {"aten.__xor__.Tensor", ExprOp::kBitXor},     {"aten.__xor__.Scalar", ExprOp::kBitXor},
      {"aten.logical_xor.default", ExprOp::kNe}};
  return kOps;
}

/// fmod(x, y) or Python's remainder: fmod plus y where the result is nonzero and its sign
/// differs from y's (NaN stays NaN).
int modulo(ExprPool& E, int x, int y, DType rt, bool python) {
  const int r = E.binary(ExprOp::kFmod, x, y, rt);
  if (!python) return r;
  const int zero = E.int_constant(0, rt);
  const int nonzero = E.binary(ExprOp::kNe, r, zero, DType::kBool);
  const int signs_differ = E.binary(ExprOp::kNe, E.binary(ExprOp::kLt, r, zero, DType::kBool),
                                    E.binary(ExprOp::kLt, y, zero, DType::kBool), DType::kBool);
  const int fix = E.binary(ExprOp::kLogicalAnd, nonzero, signs_differ, DType::kBool);
  return E.where(fix, E.binary(ExprOp::kAdd, r, y, rt), r, rt);
}

/// The number arguments of elu (alpha, scale, input_scale) and leaky_relu (negative_slope),
/// read while the node is current (the bodies run later, when the scheduler places them).
struct ActivationArgs {
  double alpha = 1, scale = 1, input_scale = 1, slope = 0.01;
};

/// sign / isnan / isinf / elu / leaky_relu of x (dtype `in`) for a result of dtype rt.
int unary_math(ExprPool& E, const std::string& t, int x, DType in, DType rt,
               const ActivationArgs& args) {
  if (t == "aten.isnan.default" || t == "aten.isinf.default") {
    if (!is_floating(in)) return E.int_constant(0, DType::kBool);  // integers are finite
    if (t == "aten.isnan.default") return E.binary(ExprOp::kNe, x, x, DType::kBool);
    return E.binary(ExprOp::kEq, E.unary(ExprOp::kAbs, x, in), E.constant(INFINITY, in),
                    DType::kBool);
  }
  const int zero = E.int_constant(0, rt);
  if (t == "aten.sign.default")  // (0 < x) - (x < 0): NaN and -0.0 give +0
    return E.binary(ExprOp::kSub, E.cast(E.binary(ExprOp::kGt, x, zero, DType::kBool), rt),
                    E.cast(E.binary(ExprOp::kLt, x, zero, DType::kBool), rt), rt);
  auto c = [&](double v) { return E.constant(v, rt); };
  if (t == "aten.leaky_relu.default")
    return E.where(E.binary(ExprOp::kGt, x, zero, DType::kBool), x,
                   E.binary(ExprOp::kMul, x, c(args.slope), rt), rt);
  // elu: x <= 0 ? expm1(x * input_scale) * (alpha * scale) : x * scale
  const int scale = c(args.scale);
  const int neg = E.binary(ExprOp::kMul, c(args.alpha), scale, rt);
  const int below = E.binary(
      ExprOp::kMul, E.unary(ExprOp::kExpm1, E.binary(ExprOp::kMul, x, c(args.input_scale), rt), rt),
      neg, rt);
  return E.where(E.binary(ExprOp::kLe, x, zero, DType::kBool), below,
                 E.binary(ExprOp::kMul, x, scale, rt), rt);
}

}  // namespace

bool lower_math(Lowerer& L, const ir::Node& n) {
  const std::string& t = n.target;
  auto& E = L.ex();
  const ir::TensorType& out = L.out_type();
  const DType rt = out.dtype;
  const auto sizes = out.sizes;

  if (t == "aten.sign.default" || t == "aten.isnan.default" || t == "aten.isinf.default" ||
      t == "aten.elu.default" || t == "aten.leaky_relu.default") {
    const auto x = operand(L, "self");
    if (!x || !x->t) L.fail(t + " needs a tensor self");
    const Operand X = *x;
    const DType in = rt == DType::kBool ? X.t->dtype : rt;  // isnan / isinf test the input
    ActivationArgs args;
    args.alpha = number_arg(L, "alpha", 1.0);
    args.scale = number_arg(L, "scale", 1.0);
    args.input_scale = number_arg(L, "input_scale", 1.0);
    args.slope = number_arg(L, "negative_slope", 0.01);
    L.bind(0, make(L, out, {X}, [&L, &E, X, t, in, rt, sizes, args](const Index& idx) {
             return unary_math(E, t, value(L, X, in, sizes, idx), in, rt, args);
           }));
    return true;
  }
  if (auto it = bitwise_ops().find(t); it != bitwise_ops().end()) {
    const auto a = operand(L, "self"), b = operand(L, "other");
    if (!a || !b) L.fail(t + " needs self and other");
    const Operand A = *a, B = *b;
    const ExprOp op = it->second;
    const DType in = op == ExprOp::kNe ? DType::kBool : rt;  // logical_xor: truth values
    L.bind(0, make(L, out, {A, B}, [&L, &E, A, B, in, rt, sizes, op](const Index& idx) {
             return E.binary(op, value(L, A, in, sizes, idx), value(L, B, in, sizes, idx), rt);
           }));
    return true;
  }
  const bool fmod = t == "aten.fmod.Tensor" || t == "aten.fmod.Scalar";
  const bool python = t == "aten.remainder.Tensor" || t == "aten.remainder.Scalar";
  if (fmod || python || t == "aten.atan2.default") {
    const auto a = operand(L, "self"), b = operand(L, "other");
    if (!a || !b) L.fail(t + " needs self and other");
    const Operand A = *a, B = *b;
    const bool atan2 = !fmod && !python;
    L.bind(0, make(L, out, {A, B}, [&L, &E, A, B, rt, sizes, atan2, python](const Index& idx) {
             // a number divisor is rounded to rt first, as in the reference kernel
             const int x = value(L, A, rt, sizes, idx, atan2),
                       y = value(L, B, rt, sizes, idx, atan2);
             if (atan2) return E.binary(ExprOp::kAtan2, x, y, rt);
             return modulo(E, x, y, rt, python);
           }));
    return true;
  }
  if (t == "aten.clamp.Tensor") {
    const auto x = operand(L, "self");
    if (!x || !x->t) L.fail("clamp needs a tensor self");
    const auto lo = operand(L, "min"), hi = operand(L, "max");
    if (!lo && !hi) L.fail("clamp: at least one of 'min' or 'max' must not be None");
    const Operand X = *x;
    std::vector<Operand> ops = {X};
    if (lo) ops.push_back(*lo);
    if (hi) ops.push_back(*hi);
    // max_nan / min_nan: NaN in x or in a bound gives NaN; lo > hi gives hi
    L.bind(0, make(L, out, ops, [&L, &E, X, lo, hi, rt, sizes](const Index& idx) {
             int v = value(L, X, rt, sizes, idx);
             if (lo) v = E.binary(ExprOp::kMax, v, value(L, *lo, rt, sizes, idx), rt);
             if (hi) v = E.binary(ExprOp::kMin, v, value(L, *hi, rt, sizes, idx), rt);
             return v;
           }));
    return true;
  }
  return false;
}

}  // namespace anvil::passes::detail
