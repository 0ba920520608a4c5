// Data-dependent scalars and scalar comparisons: aten.item (a tensor's single value as a SymInt /
// SymFloat, an unbacked symbol such as u0 in the export), Python's _operator comparisons
// (ge, gt, le, lt, eq, ne) on SymInts, whose SymBool results feed aten._assert_scalar, and
// aten.detach_ (a no-op at inference: the value aliases its input). Part of the sym.cpp rows.
// The compiler rejects aten.item (its value is only known at run time); the interpreter runs it.
#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;

/// A Python number argument of a comparison: an int (compared exactly) or a float.
struct SymNum {
  bool is_float = false;
  int64_t i = 0;
  double f = 0;
};

/// Positional argument `index` of the node as a number; throws Error for other kinds.
SymNum sym_num(const KernelContext& ctx, size_t index) {
  const auto& args = ctx.node().args;
  if (index >= args.size())
    ctx.fail(str("missing argument ", index), str(index + 1, " arguments"), str(args.size()));
  const RValue& v = ctx.raw(args[index].name);
  if (auto* i = std::get_if<int64_t>(&v)) return {false, *i, 0};
  if (auto* b = std::get_if<bool>(&v)) return {false, *b ? 1 : 0, 0};
  if (auto* d = std::get_if<double>(&v)) return {true, 0, *d};
  ctx.fail(str("argument '", args[index].name, "' is not a number"), "int, float or bool",
           "another kind");
}

/// Applies comparison `cmp` (on int64 when both are ints, else on double).
template <typename Cmp>
std::vector<RValue> compare(const KernelContext& ctx, Cmp&& cmp) {
  const SymNum a = sym_num(ctx, 0), b = sym_num(ctx, 1);
  if (!a.is_float && !b.is_float) return {RValue(static_cast<bool>(cmp(a.i, b.i)))};
  const double x = a.is_float ? a.f : static_cast<double>(a.i);
  const double y = b.is_float ? b.f : static_cast<double>(b.i);
  return {RValue(static_cast<bool>(cmp(x, y)))};
}

}  // namespace

// ---- item ------------------------------------------------------------------------------------

std::vector<TensorType> shape_item(const Node& node) {
  const TensorType& t = ir::shape_args::type(node, "self");
  for (const SymInt& s : t.sizes)
    if (auto c = s.maybe_constant(); c && *c != 1)
      ir::shape_args::fail(node, "item() needs a tensor with exactly one element", "1 element",
                           t.str());
  return {};
}
std::vector<RValue> kernel_item(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  if (t.numel() != 1)
    ctx.fail("a Tensor with more than one value cannot be converted to a Scalar", "1 element",
             t.type_str());
  RValue out;
  ANVIL_DISPATCH_REAL(t.dtype(), ctx.where(), T, {
    const T v = *static_cast<const T*>(t.data_ptr());
    if constexpr (std::is_same_v<T, bool>)
      out = static_cast<int64_t>(v ? 1 : 0);
    else if constexpr (std::is_integral_v<T>)
      out = static_cast<int64_t>(v);
    else
      out = cast_value<double, T>(v);
  });
  return {out};
}

// _local_scalar_dense: aten.item's core-ATen form (the same value).
std::vector<TensorType> shape_local_scalar_dense(const Node& node) { return shape_item(node); }
std::vector<RValue> kernel_local_scalar_dense(KernelContext& ctx) { return kernel_item(ctx); }

// ---- _operator comparisons -------------------------------------------------------------------

std::vector<TensorType> shape_op_ge(const Node&) { return {}; }
std::vector<RValue> kernel_op_ge(KernelContext& ctx) {
  return compare(ctx, [](auto a, auto b) { return a >= b; });
}
std::vector<TensorType> shape_op_gt(const Node&) { return {}; }
std::vector<RValue> kernel_op_gt(KernelContext& ctx) {
  return compare(ctx, [](auto a, auto b) { return a > b; });
}
std::vector<TensorType> shape_op_le(const Node&) { return {}; }
std::vector<RValue> kernel_op_le(KernelContext& ctx) {
  return compare(ctx, [](auto a, auto b) { return a <= b; });
}
std::vector<TensorType> shape_op_lt(const Node&) { return {}; }
std::vector<RValue> kernel_op_lt(KernelContext& ctx) {
  return compare(ctx, [](auto a, auto b) { return a < b; });
}
std::vector<TensorType> shape_op_eq(const Node&) { return {}; }
std::vector<RValue> kernel_op_eq(KernelContext& ctx) {
  return compare(ctx, [](auto a, auto b) { return a == b; });
}
std::vector<TensorType> shape_op_ne(const Node&) { return {}; }
std::vector<RValue> kernel_op_ne(KernelContext& ctx) {
  return compare(ctx, [](auto a, auto b) { return a != b; });
}

// ---- detach_ ---------------------------------------------------------------------------------

std::vector<TensorType> shape_detach_(const Node& node) {
  TensorType t = ir::shape_args::type(node, "self");
  return {t};
}
std::vector<RValue> kernel_detach_(KernelContext& ctx) { return {ctx.tensor("self")}; }

}  // namespace anvil::ops
