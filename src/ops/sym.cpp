// Sym family: ops on symbolic ints (aten.sym_size / sym_numel, Python's _operator arithmetic)
// and runtime assertions (_assert_scalar, sym_constrain_range_for_size). Their shape rules
// return no tensor types: the importer records the symbolic value of each SymInt output.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;

/// A Python number argument of a sym op: int (bools count as ints) or float.
struct Num {
  bool is_float = false;
  int64_t i = 0;
  double f = 0;
  double as_double() const { return is_float ? f : static_cast<double>(i); }
};

/// Positional argument `index` of the node as a number. The export names _operator args after
/// the Python signature ("a", "b"), so they are read by position.
Num num_arg(const KernelContext& ctx, size_t index) {
  const auto& args = ctx.node().args;
  if (index >= args.size())
    ctx.fail(str("missing argument ", index), str(index + 1, " arguments"),
             std::to_string(args.size()));
  const RValue& v = ctx.raw(args[index].name);
  if (auto* i = std::get_if<int64_t>(&v)) return {false, *i, 0};
  if (auto* b = std::get_if<bool>(&v)) return {false, *b ? 1 : 0, 0};
  if (auto* d = std::get_if<double>(&v)) return {true, 0, *d};
  ctx.fail(str("argument '", args[index].name, "' is not a number"), "int or float",
           "another kind");
}

/// Python floor division of ints; throws at the node on division by zero.
int64_t py_floordiv(const KernelContext& ctx, int64_t a, int64_t b) {
  if (b == 0) ctx.fail("integer division or modulo by zero", "a non-zero divisor", "0");
  if (a == std::numeric_limits<int64_t>::min() && b == -1)
    ctx.fail("integer overflow in floor division", "a representable result", str(a, " // -1"));
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

/// Applies a binary _operator op to the node's two positional arguments.
template <typename IntF, typename FloatF>
std::vector<RValue> binary_sym(const KernelContext& ctx, IntF&& fi, FloatF&& ff) {
  Num a = num_arg(ctx, 0), b = num_arg(ctx, 1);
  if (!a.is_float && !b.is_float) return {RValue(fi(a.i, b.i))};
  return {RValue(ff(a.as_double(), b.as_double()))};
}

/// The wrapping add/sub/mul of Python-sized ints (overflow is an error, not a wrap).
template <typename F>
int64_t checked(const KernelContext& ctx, const char* op, int64_t a, int64_t b, F&& f) {
  int64_t r;
  if (f(a, b, &r))
    ctx.fail(str("integer overflow in ", op), "a result that fits in int64",
             str(a, " ", op, " ", b));
  return r;
}

}  // namespace

// ---- sym_size / sym_numel --------------------------------------------------------------------

std::vector<TensorType> shape_sym_size_int(const Node&) { return {}; }
std::vector<RValue> kernel_sym_size_int(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  int64_t d = ctx.int_arg("dim"), rank = t.dim();
  if (d < -rank || d >= rank)
    ctx.fail("sym_size: dimension out of range", str("a dim in [", -rank, ", ", rank - 1, "]"),
             std::to_string(d));
  return {RValue(t.size(d))};
}

std::vector<TensorType> shape_sym_numel(const Node&) { return {}; }
std::vector<RValue> kernel_sym_numel(KernelContext& ctx) {
  return {RValue(ctx.tensor("self").numel())};
}

// ---- _operator.add / sub / mul / floordiv / mod ----------------------------------------------

std::vector<TensorType> shape_op_add(const Node&) { return {}; }
std::vector<RValue> kernel_op_add(KernelContext& ctx) {
  return binary_sym(
      ctx,
      [&](int64_t a, int64_t b) {
        return checked(ctx, "+", a, b, [](int64_t x, int64_t y, int64_t* r) {
          return __builtin_add_overflow(x, y, r);
        });
      },
      [](double a, double b) { return a + b; });
}

std::vector<TensorType> shape_op_sub(const Node&) { return {}; }
std::vector<RValue> kernel_op_sub(KernelContext& ctx) {
  return binary_sym(
      ctx,
      [&](int64_t a, int64_t b) {
        return checked(ctx, "-", a, b, [](int64_t x, int64_t y, int64_t* r) {
          return __builtin_sub_overflow(x, y, r);
        });
      },
      [](double a, double b) { return a - b; });
}

std::vector<TensorType> shape_op_mul(const Node&) { return {}; }
std::vector<RValue> kernel_op_mul(KernelContext& ctx) {
  return binary_sym(
      ctx,
      [&](int64_t a, int64_t b) {
        return checked(ctx, "*", a, b, [](int64_t x, int64_t y, int64_t* r) {
          return __builtin_mul_overflow(x, y, r);
        });
      },
      [](double a, double b) { return a * b; });
}

std::vector<TensorType> shape_op_floordiv(const Node&) { return {}; }
std::vector<RValue> kernel_op_floordiv(KernelContext& ctx) {
  return binary_sym(
      ctx, [&](int64_t a, int64_t b) { return py_floordiv(ctx, a, b); },
      [&](double a, double b) {
        if (b == 0) ctx.fail("float floor division by zero", "a non-zero divisor", "0.0");
        return std::floor(a / b);
      });
}

std::vector<TensorType> shape_op_mod(const Node&) { return {}; }
std::vector<RValue> kernel_op_mod(KernelContext& ctx) {
  return binary_sym(
      ctx,
      [&](int64_t a, int64_t b) {
        if (b == -1) return int64_t{0};
        return a - py_floordiv(ctx, a, b) * b;
      },
      [&](double a, double b) {
        if (b == 0) ctx.fail("float modulo by zero", "a non-zero divisor", "0.0");
        double r = std::fmod(a, b);
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
      });
}

// ---- runtime assertions ----------------------------------------------------------------------

std::vector<TensorType> shape_assert_scalar(const Node&) { return {}; }
std::vector<RValue> kernel_assert_scalar(KernelContext& ctx) {
  Num cond = num_arg(ctx, 0);
  bool ok = cond.is_float ? cond.f != 0 : cond.i != 0;
  if (!ok) {
    std::string msg = ctx.node().args.size() > 1
                          ? ctx.string_arg(ctx.node().args[1].name, "assertion failed")
                          : std::string("assertion failed");
    ctx.fail("runtime assertion failed: " + msg, "the condition to hold", "False");
  }
  return {};
}

std::vector<TensorType> shape_sym_constrain_range_for_size(const Node&) { return {}; }
std::vector<RValue> kernel_sym_constrain_range_for_size(KernelContext& ctx) {
  Num size = num_arg(ctx, 0);
  int64_t v = size.is_float ? static_cast<int64_t>(size.f) : size.i;
  int64_t lo = ctx.int_arg("min", 0);
  int64_t hi = ctx.int_arg("max", std::numeric_limits<int64_t>::max());
  if (v < lo || v > hi)
    ctx.fail(str("size ", v, " is outside its constrained range"), str("[", lo, ", ", hi, "]"),
             std::to_string(v));
  return {};
}

}  // namespace anvil::ops
