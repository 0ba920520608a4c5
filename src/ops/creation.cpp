// Creation ops: arange (all overloads), full, zeros, ones, empty, scalar_tensor, the *_like ops
// and the new_* methods. Shape rules (sizes may be symbolic) and reference kernels with torch's
// dtype inference: factories default to float32, full infers from its fill value, arange gives
// int64 for all-int arguments, *_like / new_* take self's dtype unless dtype is given.
#include <cmath>
#include <limits>
#include <optional>

#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
namespace sa = ir::shape_args;

constexpr DType kDefaultFloat = DType::kFloat32;  // torch.get_default_dtype()

/// The device of a factory's output: the `device` argument if given, else `dflt`.
Device shape_device(const Node& node, Device dflt) {
  const ir::Arg* a = node.arg("device");
  return a && a->kind == ir::Arg::Kind::kDevice ? a->device : dflt;
}

/// Checks that no constant size is negative (shape rules).
void check_sizes(const Node& node, const std::vector<SymInt>& sizes) {
  for (const SymInt& s : sizes)
    if (s.is_constant() && s.constant() < 0)
      sa::fail(node, "cannot create a tensor with a negative dimension", "sizes >= 0",
               sym_shape_str(sizes));
}

/// The type of a factory output.
std::vector<TensorType> make_type(DType dtype, std::vector<SymInt> sizes, Device device) {
  TensorType t;
  t.dtype = dtype;
  t.sizes = std::move(sizes);
  t.device = device;
  return {t};
}

/// Dtype a Python scalar infers (torch.full): bool -> bool, int -> int64, float -> default.
DType scalar_arg_dtype(const Node& node, const std::string& name) {
  const ir::Arg* a = node.arg(name);
  if (!a || a->kind == ir::Arg::Kind::kNone)
    sa::fail(node, "argument '" + name + "' is missing", "a number", "absent");
  switch (a->kind) {
    case ir::Arg::Kind::kBool:
      return DType::kBool;
    case ir::Arg::Kind::kInt:
    case ir::Arg::Kind::kSymInt:
      return DType::kInt64;
    case ir::Arg::Kind::kFloat:
      return kDefaultFloat;
    default:
      sa::fail(node, "argument '" + name + "' is not a number", "a number", "another kind");
  }
}

/// The same inference for a resolved kernel argument.
DType scalar_value_dtype(const KernelContext& ctx, const std::string& name) {
  const RValue& v = ctx.raw(name);
  if (std::holds_alternative<bool>(v)) return DType::kBool;
  if (std::holds_alternative<int64_t>(v)) return DType::kInt64;
  if (std::holds_alternative<double>(v)) return kDefaultFloat;
  ctx.fail("argument '" + name + "' is missing or not a number", "a number", "another kind");
}

/// Checks kernel sizes (no negative dims).
const Shape& checked_sizes(const KernelContext& ctx, const Shape& sizes) {
  for (int64_t s : sizes)
    if (s < 0)
      ctx.fail("cannot create a tensor with a negative dimension", "sizes >= 0", shape_str(sizes));
  return sizes;
}

/// A new contiguous tensor filled with the scalar argument `name` (int, float or bool), cast to
/// `dtype` the way torch casts (ints stay exact for int64).
Tensor filled(const KernelContext& ctx, const Shape& sizes, DType dtype, const std::string& name) {
  Tensor out = Tensor::empty(checked_sizes(ctx, sizes), dtype);
  const RValue& v = ctx.raw(name);
  ANVIL_DISPATCH_ALL(dtype, ctx.where(), T, {
    T value{};
    if (auto* i = std::get_if<int64_t>(&v))
      value = cast_value<T, int64_t>(*i);
    else if (auto* b = std::get_if<bool>(&v))
      value = cast_value<T, bool>(*b);
    else
      value = cast_value<T, double>(ctx.float_arg(name));
    T* p = out.data<T>();
    for (int64_t k = 0; k < out.numel(); ++k) p[k] = value;
  });
  return out;
}

/// A new tensor filled with a constant.
Tensor filled_const(const KernelContext& ctx, const Shape& sizes, DType dtype, double value) {
  return Tensor::full(checked_sizes(ctx, sizes), value, dtype);
}

// ---- arange

/// One arange argument: an int (possibly symbolic in shape rules) or a float.
struct Num {
  bool is_float = false;
  SymInt i;
  double f = 0;
  double as_double() const { return is_float ? f : static_cast<double>(i.constant()); }
  /// Truncation toward zero, as Scalar::to<int64_t> does.
  int64_t as_int() const { return is_float ? static_cast<int64_t>(f) : i.constant(); }
};

/// Arange argument `name` of a shape rule (`dflt` when absent).
Num shape_num(const Node& node, const std::string& name, std::optional<int64_t> dflt) {
  const ir::Arg* a = node.arg(name);
  Num n;
  if (a && a->kind == ir::Arg::Kind::kFloat) {
    n.is_float = true;
    n.f = a->f;
  } else {
    n.i = sa::symint(node, name, dflt ? std::optional<SymInt>(*dflt) : std::nullopt);
  }
  return n;
}

/// Arange argument `name` of a kernel (`dflt` when absent).
Num kernel_num(const KernelContext& ctx, const std::string& name, std::optional<int64_t> dflt) {
  Num n;
  if (!ctx.has(name) && dflt) {
    n.i = *dflt;
  } else if (ctx.is_float_scalar(name)) {
    n.is_float = true;
    n.f = ctx.float_arg(name);
  } else {
    n.i = ctx.int_arg(name);
  }
  return n;
}

/// Output dtype of arange: dtype if given, else int64 for all-int arguments, else float32.
DType arange_dtype(std::optional<DType> requested, const Num& start, const Num& end,
                   const Num& step) {
  if (requested) return *requested;
  return start.is_float || end.is_float || step.is_float ? kDefaultFloat : DType::kInt64;
}

/// Length of arange with constant arguments, with torch's checks and its rules: int64 results
/// use integer arithmetic on the truncated arguments, other dtypes ceil((end - start) / step)
/// in double. Throws Error at `where`.
int64_t arange_length(DType dtype, const Num& start, const Num& end, const Num& step,
                      const std::string& where) {
  const bool integral = is_integral(dtype, /*include_bool=*/true);
  const double s = integral ? static_cast<double>(start.as_int()) : start.as_double();
  const double e = integral ? static_cast<double>(end.as_int()) : end.as_double();
  const double st = integral ? static_cast<double>(step.as_int()) : step.as_double();
  if (!(st > 0 || st < 0)) throw Error("arange: step must be nonzero", where, "step != 0", "0");
  if (!std::isfinite(s) || !std::isfinite(e))
    throw Error("arange: unsupported range", where, "finite start and end", str(s, " -> ", e));
  if (!((st > 0 && e >= s) || (st < 0 && e <= s)))
    throw Error("arange: upper bound and lower bound inconsistent with step sign", where,
                "a range in the step's direction", str(s, " -> ", e, " step ", st));
  double size_d;
  if (dtype == DType::kInt64) {
    const int64_t xs = start.as_int(), xe = end.as_int(), xst = step.as_int();
    const int64_t sgn = (xst > 0) - (xst < 0);
    size_d = static_cast<double>((xe - xs + xst - sgn) / xst);
  } else {
    size_d = std::ceil((end.as_double() - start.as_double()) / step.as_double());
  }
  if (!(size_d >= 0 && size_d <= static_cast<double>(std::numeric_limits<int64_t>::max() / 2)))
    throw Error("arange: invalid number of elements", where, "a representable size", str(size_d));
  return static_cast<int64_t>(size_d);
}

/// Shape rule of every arange overload.
std::vector<TensorType> arange_shape(const Node& node, bool has_start, bool has_step) {
  const Num start = has_start ? shape_num(node, "start", std::nullopt) : Num{};
  const Num end = shape_num(node, "end", std::nullopt);
  const Num step = has_step ? shape_num(node, "step", 1) : Num{false, SymInt(1), 0};
  const DType dtype = arange_dtype(sa::dtype(node, "dtype"), start, end, step);
  const Device dev = shape_device(node, Device::cpu());
  const bool symbolic = (!start.is_float && !start.i.is_constant()) ||
                        (!end.is_float && !end.i.is_constant()) ||
                        (!step.is_float && !step.i.is_constant());
  if (!symbolic) {
    const std::string where = "node " + node.name + " (" + node.target + ")";
    return make_type(dtype, {SymInt(arange_length(dtype, start, end, step, where))}, dev);
  }
  if (start.is_float || end.is_float || step.is_float || !step.i.is_constant() ||
      step.i.constant() == 0)
    sa::fail(node, "arange with symbolic bounds needs int arguments and a constant nonzero step",
             "int start/end and a constant step", "a float or symbolic step");
  const int64_t k = step.i.constant();
  // ceil((end - start) / step) for the step's sign.
  const SymInt len = k > 0 ? (end.i - start.i + SymInt(k - 1)).floordiv(SymInt(k))
                           : (start.i - end.i + SymInt(-k - 1)).floordiv(SymInt(-k));
  return make_type(dtype, {len}, dev);
}

/// Kernel of every arange overload: value i is start + i * step computed in the dtype's
/// accumulation type (int64 for integers, float for 16-bit floats, double otherwise).
Tensor arange_kernel(const KernelContext& ctx, bool has_start, bool has_step) {
  const Num start = has_start ? kernel_num(ctx, "start", std::nullopt) : Num{};
  const Num end = kernel_num(ctx, "end", std::nullopt);
  const Num step = has_step ? kernel_num(ctx, "step", 1) : Num{false, SymInt(1), 0};
  const DType dtype = arange_dtype(ctx.dtype_arg("dtype"), start, end, step);
  const int64_t n = arange_length(dtype, start, end, step, ctx.where());
  Tensor out = Tensor::empty({n}, dtype);
  ANVIL_DISPATCH_REAL(dtype, ctx.where(), T, {
    T* p = out.data<T>();
    if constexpr (std::is_integral_v<T>) {
      const int64_t s = start.as_int(), st = step.as_int();
      for (int64_t i = 0; i < n; ++i) p[i] = cast_value<T, int64_t>(s + st * i);
    } else {
      using Acc =
          std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, double>;
      const Acc s = static_cast<Acc>(start.as_double()), st = static_cast<Acc>(step.as_double());
      for (int64_t i = 0; i < n; ++i) p[i] = cast_value<T, Acc>(s + st * static_cast<Acc>(i));
    }
  });
  return out;
}

/// Shape rule of the *_like ops: self's sizes, dtype and device unless overridden.
std::vector<TensorType> like_shape(const Node& node) {
  const TensorType& self = sa::type(node, "self");
  return make_type(sa::dtype(node, "dtype").value_or(self.dtype), self.sizes,
                   shape_device(node, self.device));
}

/// Shape rule of the new_* methods: sizes from `size`, dtype and device from self unless given.
std::vector<TensorType> new_shape(const Node& node) {
  const TensorType& self = sa::type(node, "self");
  std::vector<SymInt> sizes = sa::symints(node, "size");
  check_sizes(node, sizes);
  return make_type(sa::dtype(node, "dtype").value_or(self.dtype), std::move(sizes),
                   shape_device(node, self.device));
}

/// Shape rule of zeros / ones / empty: sizes from `size`, dtype float32 unless given.
std::vector<TensorType> factory_shape(const Node& node) {
  std::vector<SymInt> sizes = sa::symints(node, "size");
  check_sizes(node, sizes);
  return make_type(sa::dtype(node, "dtype").value_or(kDefaultFloat), std::move(sizes),
                   shape_device(node, Device::cpu()));
}

/// Kernel dtype for *_like / new_*.
DType self_dtype(const KernelContext& ctx) {
  return ctx.dtype_arg("dtype").value_or(ctx.tensor("self").dtype());
}

}  // namespace

std::vector<TensorType> shape_arange_default(const Node& node) {
  return arange_shape(node, false, false);
}
std::vector<RValue> kernel_arange_default(KernelContext& ctx) {
  return {arange_kernel(ctx, false, false)};
}

std::vector<TensorType> shape_arange_start(const Node& node) {
  return arange_shape(node, true, false);
}
std::vector<RValue> kernel_arange_start(KernelContext& ctx) {
  return {arange_kernel(ctx, true, false)};
}

std::vector<TensorType> shape_arange_start_step(const Node& node) {
  return arange_shape(node, true, true);
}
std::vector<RValue> kernel_arange_start_step(KernelContext& ctx) {
  return {arange_kernel(ctx, true, true)};
}

// ---- full / zeros / ones / empty / scalar_tensor

std::vector<TensorType> shape_full(const Node& node) {
  std::vector<SymInt> sizes = sa::symints(node, "size");
  check_sizes(node, sizes);
  const DType dtype = sa::dtype(node, "dtype").value_or(scalar_arg_dtype(node, "fill_value"));
  return make_type(dtype, std::move(sizes), shape_device(node, Device::cpu()));
}
std::vector<RValue> kernel_full(KernelContext& ctx) {
  const DType dtype = ctx.dtype_arg("dtype").value_or(scalar_value_dtype(ctx, "fill_value"));
  return {filled(ctx, ctx.ints("size"), dtype, "fill_value")};
}

std::vector<TensorType> shape_zeros(const Node& node) { return factory_shape(node); }
std::vector<RValue> kernel_zeros(KernelContext& ctx) {
  return {filled_const(ctx, ctx.ints("size"), ctx.dtype_arg("dtype").value_or(kDefaultFloat), 0)};
}

std::vector<TensorType> shape_ones(const Node& node) { return factory_shape(node); }
std::vector<RValue> kernel_ones(KernelContext& ctx) {
  return {filled_const(ctx, ctx.ints("size"), ctx.dtype_arg("dtype").value_or(kDefaultFloat), 1)};
}

// empty's memory is uninitialised in torch; here it is zero-filled (deterministic).
std::vector<TensorType> shape_empty_memory_format(const Node& node) { return factory_shape(node); }
std::vector<RValue> kernel_empty_memory_format(KernelContext& ctx) {
  return {filled_const(ctx, ctx.ints("size"), ctx.dtype_arg("dtype").value_or(kDefaultFloat), 0)};
}

// empty_strided(size, stride): zero-filled like empty; the values do not depend on the strides,
// so the result is contiguous.
std::vector<TensorType> shape_empty_strided(const Node& node) {
  const auto sizes = sa::symints(node, "size"), strides = sa::symints(node, "stride");
  if (sizes.size() != strides.size())
    sa::fail(node, "empty_strided: size and stride must have the same length",
             str(sizes.size(), " strides"), str(strides.size()));
  return factory_shape(node);
}
std::vector<RValue> kernel_empty_strided(KernelContext& ctx) {
  const Tensor zeros =
      filled_const(ctx, ctx.ints("size"), ctx.dtype_arg("dtype").value_or(kDefaultFloat), 0);
  // the requested strides when they lay the elements out densely (a permuted layout, as
  // torch.empty_strided((4, 6), (1, 4)) gives); row-major otherwise
  const Shape strides = ctx.ints("stride");
  if (strides.size() != static_cast<size_t>(zeros.dim()) || strides == zeros.strides()) return {zeros};
  const Tensor probe = zeros.as_strided(zeros.sizes(), zeros.strides(), 0);
  Tensor out = Tensor::empty({zeros.numel()}, zeros.dtype());
  int64_t max_off = 0;
  for (size_t d = 0; d < strides.size(); ++d)
    if (strides[d] < 0) return {zeros};
    else if (zeros.size(static_cast<int64_t>(d)) > 0) max_off += strides[d] * (zeros.size(static_cast<int64_t>(d)) - 1);
  if (max_off + 1 != zeros.numel()) return {zeros};  // not dense: keep row-major
  out = out.as_strided(zeros.sizes(), strides, 0);
  out.copy_from(probe);
  return {out};
}

// scalar_tensor: a 0-dim tensor, float32 unless dtype is given (whatever the scalar's type).
std::vector<TensorType> shape_scalar_tensor(const Node& node) {
  scalar_arg_dtype(node, "s");  // checks that s is a number
  return make_type(sa::dtype(node, "dtype").value_or(kDefaultFloat), {},
                   shape_device(node, Device::cpu()));
}
std::vector<RValue> kernel_scalar_tensor(KernelContext& ctx) {
  return {filled(ctx, {}, ctx.dtype_arg("dtype").value_or(kDefaultFloat), "s")};
}

// ---- *_like

namespace {
/// `value` (a filled tensor of self's sizes) in self's layout: the *_like ops' preserve_format
/// (a transposed or channels-last self gives a result laid out the same way), unless the node
/// asks for another memory_format.
Tensor like_layout(const KernelContext& ctx, const Tensor& value) {
  const ir::Arg* mf = ctx.node().arg("memory_format");
  const std::optional<int64_t> code =
      mf && mf->kind == ir::Arg::Kind::kMemoryFormat ? std::optional<int64_t>(mf->i) : std::nullopt;
  if (code && *code != 4) return copy_in_format(value, value.dtype(), code);
  Tensor out = empty_like_layout(ctx.tensor("self"), value.dtype());
  out.copy_from(value);
  return out;
}
}  // namespace

std::vector<TensorType> shape_full_like(const Node& node) {
  scalar_arg_dtype(node, "fill_value");
  return like_shape(node);
}
std::vector<RValue> kernel_full_like(KernelContext& ctx) {
  return {like_layout(ctx, filled(ctx, ctx.tensor("self").sizes(), self_dtype(ctx), "fill_value"))};
}

std::vector<TensorType> shape_zeros_like(const Node& node) { return like_shape(node); }
std::vector<RValue> kernel_zeros_like(KernelContext& ctx) {
  return {like_layout(ctx, filled_const(ctx, ctx.tensor("self").sizes(), self_dtype(ctx), 0))};
}

std::vector<TensorType> shape_ones_like(const Node& node) { return like_shape(node); }
std::vector<RValue> kernel_ones_like(KernelContext& ctx) {
  return {like_layout(ctx, filled_const(ctx, ctx.tensor("self").sizes(), self_dtype(ctx), 1))};
}

// empty_like: zero-filled like empty (torch leaves it uninitialised; exports use it as the
// destination of a non-functional collective's copy_).
std::vector<TensorType> shape_empty_like(const Node& node) { return like_shape(node); }
std::vector<RValue> kernel_empty_like(KernelContext& ctx) {
  return {like_layout(ctx, filled_const(ctx, ctx.tensor("self").sizes(), self_dtype(ctx), 0))};
}

// ---- new_*

std::vector<TensorType> shape_new_ones(const Node& node) { return new_shape(node); }
std::vector<RValue> kernel_new_ones(KernelContext& ctx) {
  return {filled_const(ctx, ctx.ints("size"), self_dtype(ctx), 1)};
}

std::vector<TensorType> shape_new_zeros(const Node& node) { return new_shape(node); }
std::vector<RValue> kernel_new_zeros(KernelContext& ctx) {
  return {filled_const(ctx, ctx.ints("size"), self_dtype(ctx), 0)};
}

std::vector<TensorType> shape_new_full(const Node& node) {
  scalar_arg_dtype(node, "fill_value");
  return new_shape(node);
}
std::vector<RValue> kernel_new_full(KernelContext& ctx) {
  return {filled(ctx, ctx.ints("size"), self_dtype(ctx), "fill_value")};
}

std::vector<TensorType> shape_new_empty(const Node& node) { return new_shape(node); }
std::vector<RValue> kernel_new_empty(KernelContext& ctx) {
  return {filled_const(ctx, ctx.ints("size"), self_dtype(ctx), 0)};
}

}  // namespace anvil::ops
