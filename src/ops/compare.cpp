// Comparisons (eq / ne / lt / le / gt / ge), bitwise and logical and / or / xor, selection (where,
// masked_fill), clamp, and the in-place copy_ / fill_ / relu_. Part of the "binary.cpp" rows of
// ops.def.
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

// ---- comparisons

enum class Cmp { kEq, kNe, kLt, kLe, kGt, kGe };

/// One comparison of two values of the compute type.
template <typename C>
bool compare_elem(C x, C y, Cmp op) {
  switch (op) {
    case Cmp::kEq:
      return x == y;
    case Cmp::kNe:
      return x != y;
    case Cmp::kLt:
      return x < y;
    case Cmp::kLe:
      return x <= y;
    case Cmp::kGt:
      return x > y;
    case Cmp::kGe:
      return x >= y;
  }
  return false;
}

/// Compares in the promoted dtype (numbers are first rounded to it, as torch casts its inputs to
/// the common dtype); the result is bool.
Tensor compare(Cmp op, const Operand& a, const Operand& b, const std::string& where) {
  const DType rt = result_type({a, b});
  const Tensor ta = as_input(a, rt, /*exact_scalar=*/false);
  const Tensor tb = as_input(b, rt, /*exact_scalar=*/false);
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(rt, where, C, {
    out = map2<C, C, bool>(
        ta, tb, [=](C x, C y) { return compare_elem(x, y, op); }, where);
  });
  return out;
}

TensorType compare_type(const Node& node) {
  const TypeOperand a = type_operand(node, "self"), b = type_operand(node, "other");
  return pointwise_type(node, {a, b}, DType::kBool);
}

std::vector<RValue> compare_kernel(KernelContext& ctx, Cmp op) {
  return {compare(op, operand_arg(ctx, "self"), operand_arg(ctx, "other"), ctx.where())};
}

// ---- bitwise and logical and / or / xor

enum class Bitwise { kAnd, kOr, kXor };

/// The message for operands that are not bool or integers (torch: "not implemented for 'Float'").
const char* bitwise_dtype_error(Bitwise op) {
  return op == Bitwise::kXor ? "bitwise xor needs bool or integer operands"
                             : "bitwise and / or need bool or integer operands";
}

/// Bitwise and / or / xor in the promoted dtype (bool or integers only; a Python int with a
/// bool tensor gives int64, as torch.result_type says).
Tensor bitwise(Bitwise op, const Operand& a, const Operand& b, const std::string& where) {
  const DType rt = result_type({a, b});
  if (!is_integral(rt, /*include_bool=*/true))
    throw Error(bitwise_dtype_error(op), where, "bool or integer dtype", dtype_name(rt));
  Tensor out = map2<int64_t, int64_t, int64_t>(
      as_input(a, rt, true), as_input(b, rt, true),
      [=](int64_t x, int64_t y) {
        return op == Bitwise::kAnd ? (x & y) : op == Bitwise::kOr ? (x | y) : (x ^ y);
      },
      where);
  return to_preserving(out, rt);
}

TensorType bitwise_type(const Node& node, Bitwise op = Bitwise::kAnd) {
  const TypeOperand a = type_operand(node, "self"), b = type_operand(node, "other");
  const DType rt = result_type({a, b});
  if (!is_integral(rt, /*include_bool=*/true))
    ir::shape_args::fail(node, bitwise_dtype_error(op), "bool or integer dtype", dtype_name(rt));
  return pointwise_type(node, {a, b}, rt);
}

std::vector<RValue> bitwise_kernel(KernelContext& c, Bitwise op) {
  return {bitwise(op, operand_arg(c, "self"), operand_arg(c, "other"), c.where())};
}

/// An operand as a bool tensor (nonzero -> true).
Tensor truth(const Operand& op) {
  return op.is_tensor() ? op.tensor->to(DType::kBool) : scalar_tensor(op.scalar, DType::kBool);
}

/// Logical and / or / xor: operands as truth values, a bool result.
Tensor logical(Bitwise op, const Operand& a, const Operand& b, const std::string& where) {
  return map2<bool, bool, bool>(
      truth(a), truth(b),
      [=](bool x, bool y) {
        return op == Bitwise::kAnd ? (x && y) : op == Bitwise::kOr ? (x || y) : (x != y);
      },
      where);
}

TensorType logical_type(const Node& node) {
  return pointwise_type(node, {type_operand(node, "self"), type_operand(node, "other")},
                        DType::kBool);
}

// ---- where / masked_fill

/// Throws unless `dtype` (of argument `name`) is bool.
void check_bool_arg(DType dtype, const std::string& name, const std::string& where) {
  if (dtype != DType::kBool)
    throw Error("argument '" + name + "' must be a bool tensor", where, "bool", dtype_name(dtype));
}

/// Selects a where cond is true, else b, in the promoted dtype of a and b.
Tensor select(const Tensor& cond, const Operand& a, const Operand& b, const std::string& where) {
  check_bool_arg(cond.dtype(), "condition", where);
  const DType rt = result_type({a, b});
  const Tensor ta = as_input(a, rt, false), tb = as_input(b, rt, false);
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(rt, where, C, {
    out = map3<bool, C, C, C>(
        cond, ta, tb, [](bool c, C x, C y) { return c ? x : y; }, where);
  });
  return to_preserving(out, rt);
}

TensorType where_type(const Node& node) {
  const TypeOperand c = type_operand(node, "condition");
  const TypeOperand a = type_operand(node, "self"), b = type_operand(node, "other");
  if (!c.is_tensor())
    ir::shape_args::fail(node, "condition must be a tensor", "Tensor", "a number");
  if (c.type->dtype != DType::kBool)
    ir::shape_args::fail(node, "argument 'condition' must be a bool tensor", "bool",
                         dtype_name(c.type->dtype));
  return pointwise_type(node, {c, a, b}, result_type({a, b}));
}

std::vector<RValue> where_kernel(KernelContext& ctx) {
  return {select(ctx.tensor("condition"), operand_arg(ctx, "self"), operand_arg(ctx, "other"),
                 ctx.where())};
}

/// Throws when a non-finite float is written into an integer dtype (torch: "value cannot be
/// converted ... without overflow").
void check_fill_value(const Scalar& v, DType dtype, const std::string& where) {
  if (v.is_float() && is_integral(dtype, /*include_bool=*/false) && !std::isfinite(v.f))
    throw Error("fill value cannot be converted to an integer dtype without overflow", where,
                str("a finite value for ", dtype_name(dtype)), v.str());
}

/// self with `value` where mask is true; dtype is self's, shape the broadcast of self and mask.
Tensor masked_fill(const Tensor& self, const Tensor& mask, const Scalar& value,
                   const std::string& where) {
  check_bool_arg(mask.dtype(), "mask", where);
  check_fill_value(value, self.dtype(), where);
  const DType rt = self.dtype();
  const Tensor tv = scalar_tensor(value, rt);
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(rt, where, C, {
    out = map3<bool, C, C, C>(
        mask, self, tv, [](bool m, C x, C v) { return m ? v : x; }, where);
  });
  // PyTorch's masked_fill clones self with MemoryFormat::Contiguous first: row-major result
  return out.contiguous().to(rt);
}

TensorType masked_fill_type(const Node& node, bool tensor_value) {
  const TypeOperand self = type_operand(node, "self"), mask = type_operand(node, "mask");
  if (!self.is_tensor() || !mask.is_tensor())
    ir::shape_args::fail(node, "masked_fill needs tensors self and mask", "Tensor", "a number");
  if (mask.type->dtype != DType::kBool)
    ir::shape_args::fail(node, "argument 'mask' must be a bool tensor", "bool",
                         dtype_name(mask.type->dtype));
  if (tensor_value) {
    const TensorType& v = ir::shape_args::type(node, "value");
    if (!v.sizes.empty())
      ir::shape_args::fail(node, "masked_fill only supports a 0-dimensional value tensor",
                           "a 0-dim tensor", sym_shape_str(v.sizes));
  }
  return pointwise_type(node, {self, mask}, self.type->dtype);
}

// ---- clamp

/// clamp(x, lo, hi) of one value: NaN stays NaN; only the given bounds apply.
template <typename C>
C clamp_elem(C x, bool has_lo, C lo, bool has_hi, C hi) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(x)) return x;
  }
  if (has_lo && x < lo) x = lo;
  if (has_hi && x > hi) x = hi;
  return x;
}

}  // namespace

// ---- comparisons

std::vector<TensorType> shape_eq_Tensor(const Node& n) { return {compare_type(n)}; }
std::vector<RValue> kernel_eq_Tensor(KernelContext& c) { return compare_kernel(c, Cmp::kEq); }
std::vector<TensorType> shape_eq_Scalar(const Node& n) { return {compare_type(n)}; }
std::vector<RValue> kernel_eq_Scalar(KernelContext& c) { return compare_kernel(c, Cmp::kEq); }
std::vector<TensorType> shape_ne_Tensor(const Node& n) { return {compare_type(n)}; }
std::vector<RValue> kernel_ne_Tensor(KernelContext& c) { return compare_kernel(c, Cmp::kNe); }
std::vector<TensorType> shape_ne_Scalar(const Node& n) { return {compare_type(n)}; }
std::vector<RValue> kernel_ne_Scalar(KernelContext& c) { return compare_kernel(c, Cmp::kNe); }
std::vector<TensorType> shape_lt_Tensor(const Node& n) { return {compare_type(n)}; }
std::vector<RValue> kernel_lt_Tensor(KernelContext& c) { return compare_kernel(c, Cmp::kLt); }
std::vector<TensorType> shape_lt_Scalar(const Node& n) { return {compare_type(n)}; }
std::vector<RValue> kernel_lt_Scalar(KernelContext& c) { return compare_kernel(c, Cmp::kLt); }
std::vector<TensorType> shape_le_Tensor(const Node& n) { return {compare_type(n)}; }
std::vector<RValue> kernel_le_Tensor(KernelContext& c) { return compare_kernel(c, Cmp::kLe); }
std::vector<TensorType> shape_le_Scalar(const Node& n) { return {compare_type(n)}; }
std::vector<RValue> kernel_le_Scalar(KernelContext& c) { return compare_kernel(c, Cmp::kLe); }
std::vector<TensorType> shape_gt_Tensor(const Node& n) { return {compare_type(n)}; }
std::vector<RValue> kernel_gt_Tensor(KernelContext& c) { return compare_kernel(c, Cmp::kGt); }
std::vector<TensorType> shape_gt_Scalar(const Node& n) { return {compare_type(n)}; }
std::vector<RValue> kernel_gt_Scalar(KernelContext& c) { return compare_kernel(c, Cmp::kGt); }
std::vector<TensorType> shape_ge_Tensor(const Node& n) { return {compare_type(n)}; }
std::vector<RValue> kernel_ge_Tensor(KernelContext& c) { return compare_kernel(c, Cmp::kGe); }
std::vector<TensorType> shape_ge_Scalar(const Node& n) { return {compare_type(n)}; }
std::vector<RValue> kernel_ge_Scalar(KernelContext& c) { return compare_kernel(c, Cmp::kGe); }

// ---- bitwise / logical

std::vector<TensorType> shape_and_Tensor(const Node& n) { return {bitwise_type(n)}; }
std::vector<RValue> kernel_and_Tensor(KernelContext& c) { return bitwise_kernel(c, Bitwise::kAnd); }
std::vector<TensorType> shape_or_Tensor(const Node& n) { return {bitwise_type(n)}; }
std::vector<RValue> kernel_or_Tensor(KernelContext& c) { return bitwise_kernel(c, Bitwise::kOr); }
std::vector<TensorType> shape_bitwise_and_Tensor(const Node& n) { return {bitwise_type(n)}; }
std::vector<RValue> kernel_bitwise_and_Tensor(KernelContext& c) { return kernel_and_Tensor(c); }
std::vector<TensorType> shape_bitwise_or_Tensor(const Node& n) { return {bitwise_type(n)}; }
std::vector<RValue> kernel_bitwise_or_Tensor(KernelContext& c) { return kernel_or_Tensor(c); }
// The Scalar overloads (a Python number `other`) and xor share the rule and the loop; `x & 3`,
// `x | 3`, `x ^ y` export as the __and__ / __or__ / __xor__ names.
#define ANVIL_BITWISE_(ID, OP)                                                        \
  std::vector<TensorType> shape_##ID(const Node& n) { return {bitwise_type(n, OP)}; } \
  std::vector<RValue> kernel_##ID(KernelContext& c) { return bitwise_kernel(c, OP); }
ANVIL_BITWISE_(bitwise_and_Scalar, Bitwise::kAnd)
ANVIL_BITWISE_(bitwise_or_Scalar, Bitwise::kOr)
ANVIL_BITWISE_(bitwise_xor_Tensor, Bitwise::kXor)
ANVIL_BITWISE_(bitwise_xor_Scalar, Bitwise::kXor)
ANVIL_BITWISE_(and_Scalar, Bitwise::kAnd)
ANVIL_BITWISE_(or_Scalar, Bitwise::kOr)
ANVIL_BITWISE_(xor_Tensor, Bitwise::kXor)
ANVIL_BITWISE_(xor_Scalar, Bitwise::kXor)
#undef ANVIL_BITWISE_

std::vector<TensorType> shape_logical_and(const Node& n) { return {logical_type(n)}; }
std::vector<RValue> kernel_logical_and(KernelContext& c) {
  return {logical(Bitwise::kAnd, operand_arg(c, "self"), operand_arg(c, "other"), c.where())};
}
std::vector<TensorType> shape_logical_or(const Node& n) { return {logical_type(n)}; }
std::vector<RValue> kernel_logical_or(KernelContext& c) {
  return {logical(Bitwise::kOr, operand_arg(c, "self"), operand_arg(c, "other"), c.where())};
}
std::vector<TensorType> shape_logical_xor(const Node& n) { return {logical_type(n)}; }
std::vector<RValue> kernel_logical_xor(KernelContext& c) {
  return {logical(Bitwise::kXor, operand_arg(c, "self"), operand_arg(c, "other"), c.where())};
}

// ---- where / masked_fill

std::vector<TensorType> shape_where_self(const Node& n) { return {where_type(n)}; }
std::vector<RValue> kernel_where_self(KernelContext& c) { return where_kernel(c); }
std::vector<TensorType> shape_where_ScalarOther(const Node& n) { return {where_type(n)}; }
std::vector<RValue> kernel_where_ScalarOther(KernelContext& c) { return where_kernel(c); }
std::vector<TensorType> shape_where_ScalarSelf(const Node& n) { return {where_type(n)}; }
std::vector<RValue> kernel_where_ScalarSelf(KernelContext& c) { return where_kernel(c); }

std::vector<TensorType> shape_masked_fill_Scalar(const Node& n) {
  return {masked_fill_type(n, false)};
}
std::vector<RValue> kernel_masked_fill_Scalar(KernelContext& ctx) {
  return {
      masked_fill(ctx.tensor("self"), ctx.tensor("mask"), scalar_arg(ctx, "value"), ctx.where())};
}
std::vector<TensorType> shape_masked_fill_Tensor(const Node& n) {
  return {masked_fill_type(n, true)};
}
std::vector<RValue> kernel_masked_fill_Tensor(KernelContext& ctx) {
  const Tensor& v = ctx.tensor("value");
  if (v.dim() != 0)
    ctx.fail("masked_fill only supports a 0-dimensional value tensor", "a 0-dim tensor",
             shape_str(v.sizes()));
  Scalar s = is_floating(v.dtype()) ? Scalar::from_float(v.item())
                                    : Scalar::from_int(v.to(DType::kInt64).data<int64_t>()[0]);
  if (v.dtype() == DType::kBool) s = Scalar::from_bool(s.i != 0);
  return {masked_fill(ctx.tensor("self"), ctx.tensor("mask"), s, ctx.where())};
}

// ---- clamp

std::vector<TensorType> shape_clamp(const Node& node) {
  std::vector<TypeOperand> ops = {type_operand(node, "self")};
  if (!ops[0].is_tensor())
    ir::shape_args::fail(node, "clamp needs a tensor self", "Tensor", "a number");
  const bool has_min = ir::shape_args::has(node, "min"), has_max = ir::shape_args::has(node, "max");
  if (!has_min && !has_max)
    ir::shape_args::fail(node, "clamp: at least one of 'min' or 'max' must not be None",
                         "min or max", "both None");
  if (has_min) ops.push_back(type_operand(node, "min"));
  if (has_max) ops.push_back(type_operand(node, "max"));
  return {pointwise_type(node, ops, result_type(ops))};
}

std::vector<RValue> kernel_clamp(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const std::optional<Scalar> lo = opt_scalar_arg(ctx, "min"), hi = opt_scalar_arg(ctx, "max");
  if (!lo && !hi)
    ctx.fail("clamp: at least one of 'min' or 'max' must not be None", "min or max", "both None");
  std::vector<Operand> ops = {Operand{self, {}}};
  if (lo) ops.push_back(Operand{std::nullopt, *lo});
  if (hi) ops.push_back(Operand{std::nullopt, *hi});
  const DType rt = result_type(ops);
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(rt, ctx.where(), C, {
    const C l = lo ? lo->as<C>() : C(0), h = hi ? hi->as<C>() : C(0);
    const bool has_lo = lo.has_value(), has_hi = hi.has_value();
    out = map1<C, C>(self.to(rt), [=](C x) { return clamp_elem(x, has_lo, l, has_hi, h); });
  });
  return {to_preserving(out, rt)};
}

// clamp_min / clamp_max: clamp with one bound (the argument names match clamp's).
std::vector<TensorType> shape_clamp_min(const Node& n) { return shape_clamp(n); }
std::vector<RValue> kernel_clamp_min(KernelContext& c) { return kernel_clamp(c); }
std::vector<TensorType> shape_clamp_max(const Node& n) { return shape_clamp(n); }
std::vector<RValue> kernel_clamp_max(KernelContext& c) { return kernel_clamp(c); }

// hardtanh(self, min_val=-1, max_val=1) and relu6 = hardtanh(self, 0, 6): clamps to fixed
// bounds in self's dtype (bool refused, as PyTorch does).
namespace {
std::pair<double, double> hardtanh_bounds(const Node& node) {
  if (node.target == "aten.relu6.default") return {0.0, 6.0};
  return {ir::shape_args::float_(node, "min_val", -1.0), ir::shape_args::float_(node, "max_val", 1.0)};
}
}  // namespace


std::vector<TensorType> shape_hardtanh(const Node& node) {
  const TensorType& self = ir::shape_args::type(node, "self");
  if (self.dtype == DType::kBool)
    ir::shape_args::fail(node, "hardtanh of a bool tensor", "a numeric tensor", "bool");
  hardtanh_bounds(node);
  TensorType t = self;
  t.strides.clear();
  return {t};
}

std::vector<RValue> kernel_hardtanh(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  shape_hardtanh(ctx.node());
  const auto [lo, hi] = hardtanh_bounds(ctx.node());
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(self.dtype(), ctx.where(), C, {
    const C l = static_cast<C>(lo), h = static_cast<C>(hi);
    out = map1<C, C>(self, [=](C x) { return clamp_elem(x, true, l, true, h); });
  });
  return {to_preserving(out, self.dtype())};
}
std::vector<TensorType> shape_relu6(const Node& n) { return shape_hardtanh(n); }
std::vector<RValue> kernel_relu6(KernelContext& c) { return kernel_hardtanh(c); }

// ---- copy_ / fill_ (in place: write into self, return self)

std::vector<TensorType> shape_copy_(const Node& node) {
  const TensorType& self = ir::shape_args::type(node, "self");
  return {inplace_type(node, self, {type_operand(node, "src")}, self.dtype)};
}

std::vector<RValue> kernel_copy_(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  assign_inplace(self, ctx.tensor("src"), ctx.where(), /*any_cast=*/true);
  return {self};
}

// fill.Scalar / fill.Tensor: a tensor of self's type holding one value (the functional form of
// fill_, which ir/inplace.h writes back into self). fill.Tensor's value is a 0-dim tensor.
std::vector<TensorType> shape_fill_Scalar(const Node& node) {
  TensorType t = ir::shape_args::type(node, "self");
  scalar_kind(node, "value");
  t.strides.clear();
  return {t};
}

std::vector<RValue> kernel_fill_Scalar(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const Scalar v = scalar_arg(ctx, "value");
  check_fill_value(v, self.dtype(), ctx.where());
  // empty_like(self).fill_(value): self's layout when it is dense, as in PyTorch
  return {layout_like(scalar_tensor(v, self.dtype()).expand(self.sizes()).contiguous(), self)};
}

std::vector<TensorType> shape_fill_Tensor(const Node& node) {
  TensorType t = ir::shape_args::type(node, "self");
  const TensorType& v = ir::shape_args::type(node, "value");
  if (!v.sizes.empty())
    ir::shape_args::fail(node, "fill's value is not a 0-dim tensor", "a 0-dim tensor",
                         v.str());
  t.strides.clear();
  return {t};
}

std::vector<RValue> kernel_fill_Tensor(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const Tensor& v = ctx.tensor("value");
  if (v.dim() != 0)
    ctx.fail("fill's value is not a 0-dim tensor", "a 0-dim tensor",
             std::to_string(v.dim()) + " dimensions");
  return {layout_like(v.to(self.dtype()).expand(self.sizes()).contiguous(), self)};
}

}  // namespace anvil::ops
