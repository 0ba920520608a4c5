// More binary pointwise ops: atan2, fmod (C's remainder, the sign of the dividend), remainder
// (Python's modulo, the sign of the divisor) and clamp.Tensor (bounds as tensors that
// broadcast). Part of the "binary.cpp" rows of ops.def.
#include <cmath>
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

// ---- atan2

/// torch.result_type of self and other; integers and bool give float32 (as true division).
DType atan2_dtype(DType promoted) {
  return is_integral(promoted, /*include_bool=*/true) ? DType::kFloat32 : promoted;
}

// ---- fmod / remainder

/// fmod (sign of the dividend) or remainder (sign of the divisor) of one pair in compute type C.
/// Integers: division by zero throws like PyTorch ("ZeroDivisionError"); x % -1 is 0 (no
/// INT64_MIN / -1 overflow).
template <typename C>
C modulo_elem(C a, C b, bool python, const std::string& where) {
  C r;
  if constexpr (std::is_floating_point_v<C>) {
    r = std::fmod(a, b);
  } else {
    if (b == 0) throw Error("ZeroDivisionError: integer modulo by zero", where);
    r = b == -1 ? C(0) : a % b;
  }
  if (python && r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/// The promoted dtype of fmod / remainder; bool has no kernel in PyTorch.
DType modulo_dtype(DType rt, const char* what, const std::string& where) {
  if (rt == DType::kBool)
    throw Error(std::string(what) + " is not implemented for bool", where, "a numeric dtype",
                "bool");
  compute_dtype(rt, where);  // refuses complex
  return rt;
}

TensorType modulo_type(const Node& node, const char* what) {
  const TypeOperand a = type_operand(node, "self"), b = type_operand(node, "other");
  return pointwise_type(node, {a, b}, modulo_dtype(result_type({a, b}), what, node_where(node)));
}

/// A number `other` is rounded to the result dtype first, as PyTorch casts it (a bfloat16
/// remainder by 2.1 divides by bfloat16(2.1) = 2.09375).
std::vector<RValue> modulo_kernel(KernelContext& ctx, bool python) {
  const Operand a = operand_arg(ctx, "self"), b = operand_arg(ctx, "other");
  const std::string where = ctx.where();
  const DType rt = modulo_dtype(result_type({a, b}), python ? "remainder" : "fmod", where);
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(rt, where, C, {
    out = map2<C, C, C>(
        as_input(a, rt, false), as_input(b, rt, false),
        [&](C x, C y) { return modulo_elem(x, y, python, where); }, where);
  });
  return {to_preserving(out, rt)};
}

// ---- clamp.Tensor

/// The operands of clamp.Tensor present in the node: self, then min and / or max.
std::vector<TypeOperand> clamp_operands(const Node& node) {
  std::vector<TypeOperand> ops = {type_operand(node, "self")};
  for (const char* name : {"min", "max"})
    if (ir::shape_args::has(node, name)) ops.push_back(type_operand(node, name));
  if (ops.size() == 1)
    ir::shape_args::fail(node, "clamp: at least one of 'min' or 'max' must not be None",
                         "min or max", "both None");
  return ops;
}

/// PyTorch's clamp with tensor bounds: NaN in x or in a given bound gives NaN, else
/// min(max(x, lo), hi) (so lo > hi gives hi).
template <typename C>
C clamp_tensor_elem(C x, bool has_lo, C lo, bool has_hi, C hi) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(x) || (has_lo && std::isnan(lo)) || (has_hi && std::isnan(hi)))
      return std::numeric_limits<C>::quiet_NaN();
  }
  if (has_lo && x < lo) x = lo;
  if (has_hi && x > hi) x = hi;
  return x;
}

}  // namespace

std::vector<TensorType> shape_atan2(const Node& node) {
  const TypeOperand a = type_operand(node, "self"), b = type_operand(node, "other");
  return {pointwise_type(node, {a, b}, atan2_dtype(result_type({a, b})))};
}

std::vector<RValue> kernel_atan2(KernelContext& ctx) {
  const Operand a = operand_arg(ctx, "self"), b = operand_arg(ctx, "other");
  const DType rt = atan2_dtype(result_type({a, b}));
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(rt, ctx.where(), C, {
    if constexpr (std::is_floating_point_v<C>)
      out = map2<C, C, C>(
          as_input(a, rt, true), as_input(b, rt, true), [](C y, C x) { return std::atan2(y, x); },
          ctx.where());
  });
  return {to_preserving(out, rt)};
}

std::vector<TensorType> shape_fmod_Tensor(const Node& n) { return {modulo_type(n, "fmod")}; }
std::vector<RValue> kernel_fmod_Tensor(KernelContext& c) { return modulo_kernel(c, false); }
std::vector<TensorType> shape_fmod_Scalar(const Node& n) { return {modulo_type(n, "fmod")}; }
std::vector<RValue> kernel_fmod_Scalar(KernelContext& c) { return modulo_kernel(c, false); }
std::vector<TensorType> shape_remainder_Tensor(const Node& n) {
  return {modulo_type(n, "remainder")};
}
std::vector<RValue> kernel_remainder_Tensor(KernelContext& c) { return modulo_kernel(c, true); }
std::vector<TensorType> shape_remainder_Scalar(const Node& n) {
  return {modulo_type(n, "remainder")};
}
std::vector<RValue> kernel_remainder_Scalar(KernelContext& c) { return modulo_kernel(c, true); }

std::vector<TensorType> shape_clamp_Tensor(const Node& node) {
  const std::vector<TypeOperand> ops = clamp_operands(node);
  return {pointwise_type(node, ops, result_type(ops))};
}

std::vector<RValue> kernel_clamp_Tensor(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const std::optional<Tensor> lo = ctx.opt_tensor("min"), hi = ctx.opt_tensor("max");
  if (!lo && !hi)
    ctx.fail("clamp: at least one of 'min' or 'max' must not be None", "min or max", "both None");
  std::vector<Operand> ops = {Operand{self, {}}};
  if (lo) ops.push_back(Operand{*lo, {}});
  if (hi) ops.push_back(Operand{*hi, {}});
  const DType rt = result_type(ops);
  const bool has_lo = lo.has_value(), has_hi = hi.has_value();
  // An absent bound is a 0-dim placeholder that the loop ignores.
  const Tensor tl = has_lo ? lo->to(rt) : Tensor::scalar(0.0, rt);
  const Tensor th = has_hi ? hi->to(rt) : Tensor::scalar(0.0, rt);
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(rt, ctx.where(), C, {
    out = map3<C, C, C, C>(
        self.to(rt), tl, th,
        [=](C x, C l, C h) { return clamp_tensor_elem(x, has_lo, l, has_hi, h); }, ctx.where());
  });
  return {to_preserving(out, rt)};
}

}  // namespace anvil::ops
