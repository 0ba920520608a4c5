// Shared machinery for pointwise reference kernels and their shape rules:
//  - Scalar / Operand / TypeOperand: an argument that is a tensor or a Python number;
//  - ResultType: torch.result_type (dimensioned tensors > 0-dim tensors > Python numbers, each
//    only within its category bool < int < float);
//  - broadcast_sym_shapes / pointwise_type: symbolic broadcasting for shape rules;
//  - compute_dtype and map1 / map2 / map3: broadcasting elementwise loops over arbitrary strides,
//    computing in C++ type `C` (float for f16/bf16/f32, double for f64, int64_t for ints and bool)
//    and producing a new contiguous tensor that the caller casts once to the result dtype;
//  - assign_inplace: writes a result into an in-place op's `self`, honoring its strides.
//
// Typical kernel:
//   Operand a = operand_arg(ctx, "self"), b = operand_arg(ctx, "other");
//   DType rt = result_type({a, b});
//   Tensor out;
//   ANVIL_DISPATCH_COMPUTE(rt, ctx.where(), C, {
//     out = map2<C, C, C>(as_input(a, rt, true), as_input(b, rt, true),
//                         [](C x, C y) { return x + y; }, ctx.where());
//   });
//   return {out.to(rt)};
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/symint.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "ir/op_schema.h"

namespace anvil::ops {

// ---------------------------------------------------------------------------------------------
// Scalars and operands

/// A Python number argument (int, float or bool) as the export records it.
struct Scalar {
  enum class Kind { kBool, kInt, kFloat };
  Kind kind = Kind::kInt;
  int64_t i = 0;  // value for kInt and kBool (0 / 1)
  double f = 0;   // value for kFloat

  static Scalar from_int(int64_t v) { return {Kind::kInt, v, 0.0}; }
  static Scalar from_float(double v) { return {Kind::kFloat, 0, v}; }
  static Scalar from_bool(bool v) { return {Kind::kBool, v ? 1 : 0, 0.0}; }

  bool is_float() const { return kind == Kind::kFloat; }
  double to_double() const { return kind == Kind::kFloat ? f : static_cast<double>(i); }
  /// The value converted to element type T like a cast (integers stay exact for integer T).
  template <typename T>
  T as() const {
    return kind == Kind::kFloat ? cast_value<T, double>(f) : cast_value<T, int64_t>(i);
  }
  /// "2", "0.5", "True".
  std::string str() const;
};

/// The dtype a Python number takes part in type promotion with: bool, int64, or the default
/// float dtype float32.
DType scalar_kind_dtype(Scalar::Kind kind);

/// A runtime argument of a pointwise op: a tensor, or a Python number.
struct Operand {
  std::optional<Tensor> tensor;  // set for tensor arguments
  Scalar scalar;                 // the number otherwise
  bool is_tensor() const { return tensor.has_value(); }
};

/// A static argument of a pointwise op in a shape rule: a tensor type, or a number's kind.
struct TypeOperand {
  const ir::TensorType* type = nullptr;  // set for tensor arguments
  Scalar::Kind kind = Scalar::Kind::kInt;
  bool is_tensor() const { return type != nullptr; }
};

/// Scalar argument `name` (int, float or bool; a SymInt arrives as int). Throws Error at the node
/// when it is missing or of another kind.
Scalar scalar_arg(const ir::KernelContext& ctx, const std::string& name);
/// Like scalar_arg, but None / absent gives nullopt.
std::optional<Scalar> opt_scalar_arg(const ir::KernelContext& ctx, const std::string& name);
/// Argument `name` as a tensor or a number. Throws Error at the node for other kinds.
Operand operand_arg(const ir::KernelContext& ctx, const std::string& name);

/// Kind of scalar argument `name` in a shape rule (int and SymInt give kInt). Throws Error.
Scalar::Kind scalar_kind(const ir::Node& node, const std::string& name);
/// Static argument `name` as a tensor type or a number kind. Throws Error at the node.
TypeOperand type_operand(const ir::Node& node, const std::string& name);

// ---------------------------------------------------------------------------------------------
// Type promotion

/// torch.result_type over any number of operands (c10's ResultTypeState): dimensioned tensors
/// rank above 0-dim tensors, which rank above Python numbers; a lower rank changes the result
/// only when it is of a higher category (bool < integer < floating). Python floats count as the
/// default dtype float32, Python ints as int64.
class ResultType {
 public:
  /// A tensor of `dtype` with `dim` dimensions.
  void add_tensor(DType dtype, size_t dim);
  /// A Python number (a "wrapped number").
  void add_scalar(Scalar::Kind kind);
  void add(const Operand& op);
  void add(const TypeOperand& op);
  /// The promoted dtype. Throws Error (internal) when nothing was added.
  DType get() const;

 private:
  std::optional<DType> dim_, zero_, wrapped_;
};

/// torch.result_type of the operands.
DType result_type(const std::vector<Operand>& ops);
DType result_type(const std::vector<TypeOperand>& ops);

/// Whether torch allows writing a `from` result into a `to` output (torch.can_cast):
/// no floating -> integral, no non-bool -> bool, no complex -> real.
bool can_cast(DType from, DType to);

/// Result dtype of a floating unary op (sqrt, exp, ...) or true division: floating dtypes stay,
/// integers and bool become the default float dtype float32.
DType float_result_dtype(DType dtype);

/// The type kernels compute in for results of `dtype`: float32 for f16 / bf16 / f32, float64
/// for f64, int64 for integers and bool. Throws Error for complex and float8 dtypes.
DType compute_dtype(DType dtype, const std::string& where);

/// Runs the body with `NAME` bound to the C++ compute type of result dtype `DT` (float, double or
/// int64_t; see compute_dtype).
#define ANVIL_DISPATCH_COMPUTE(DT, WHERE, NAME, ...)      \
  do {                                                    \
    switch (::anvil::ops::compute_dtype((DT), (WHERE))) { \
      case ::anvil::DType::kFloat32: {                    \
        using NAME = float;                               \
        __VA_ARGS__;                                      \
        break;                                            \
      }                                                   \
      case ::anvil::DType::kFloat64: {                    \
        using NAME = double;                              \
        __VA_ARGS__;                                      \
        break;                                            \
      }                                                   \
      default: {                                          \
        using NAME = int64_t;                             \
        __VA_ARGS__;                                      \
        break;                                            \
      }                                                   \
    }                                                     \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Shapes

/// Numpy broadcast of two symbolic shapes: equal sizes (structurally equal expressions) stay, a
/// size 1 takes the other size; anything else throws Error at `where` naming both shapes.
std::vector<SymInt> broadcast_sym_shapes(const std::vector<SymInt>& a, const std::vector<SymInt>& b,
                                         const std::string& where);

/// Output type of a pointwise node: `dtype`, the broadcast of every tensor operand's sizes, the
/// first tensor operand's device, contiguous (empty) strides.
ir::TensorType pointwise_type(const ir::Node& node, const std::vector<TypeOperand>& ops,
                              DType dtype);

/// Output type of an in-place node writing `self`: self's type; throws Error at the node when the
/// other operands do not broadcast to exactly self's sizes, or `result` cannot be cast to
/// self's dtype.
ir::TensorType inplace_type(const ir::Node& node, const ir::TensorType& self,
                            const std::vector<TypeOperand>& others, DType result);

/// "node NAME (TARGET)", the location used in shape-rule errors.
std::string node_where(const ir::Node& node);

// ---------------------------------------------------------------------------------------------
// Elementwise loops

/// Calls f(offsets) for every element of `sizes` in row-major order, where offsets[k] is the
/// element offset (relative to the first element) in layout `strides[k]`.
template <size_t N, typename F>
void for_each_offsets(const Shape& sizes, const std::array<Shape, N>& strides, F&& f) {
  const size_t nd = sizes.size();
  for (int64_t s : sizes)
    if (s == 0) return;
  std::array<int64_t, N> off{};
  if (nd == 0) {
    f(off);
    return;
  }
  std::vector<int64_t> idx(nd, 0);
  const int64_t inner = sizes[nd - 1];
  std::array<int64_t, N> inner_stride{};
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][nd - 1];
  while (true) {
    std::array<int64_t, N> cur = off;
    for (int64_t i = 0; i < inner; ++i) {
      f(cur);
      for (size_t k = 0; k < N; ++k) cur[k] += inner_stride[k];
    }
    if (nd == 1) return;
    size_t d = nd - 2;
    while (true) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
      if (idx[d] < sizes[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * sizes[d];
      idx[d] = 0;
      if (d == 0) return;
      --d;
    }
  }
}

/// A Python number as a 0-dim tensor of `dtype` (integers stay exact for integer dtypes).
Tensor scalar_tensor(const Scalar& s, DType dtype);

/// An operand prepared as a loop input for result dtype `result`: tensors are converted to
/// `result` (no copy when they already have it), as torch casts inputs to the common dtype.
/// Numbers become 0-dim tensors in the compute dtype of `result` at full precision when
/// `exact_scalar` (torch's arithmetic kernels use the original scalar value), else rounded
/// through `result` (comparisons, selections).
Tensor as_input(const Operand& op, DType result, bool exact_scalar);

/// `t` converted to `dtype` keeping its layout when it is non-overlapping and dense (PyTorch's
/// preserve_format: a transposed or channels-last input stays so); no copy when equal unless
/// `copy`.
Tensor to_preserving(const Tensor& t, DType dtype, bool copy = false);

/// The strides memory format `code` gives `sizes` (torch.export's MemoryFormat: 2 channels_last
/// for rank 4, 3 channels_last_3d for rank 5); row-major strides for any other code or rank.
Shape memory_format_strides(const Shape& sizes, int64_t code);
/// A copy of `t` in `dtype` laid out as memory format `code` asks: 1 contiguous, 2 / 3 channels
/// last, anything else (4 preserve, none) `t`'s own layout when it is dense (to_preserving).
Tensor copy_in_format(const Tensor& t, DType dtype, std::optional<int64_t> code);
/// An uninitialised tensor of `like`'s sizes in `dtype` with `like`'s layout when it is dense
/// (the *_like ops' preserve_format).
Tensor empty_like_layout(const Tensor& like, DType dtype);

/// `value` laid out channels-last when `input` is (PyTorch's suggest_memory_format: a rank-4
/// input whose strides are channels-last and not row-major), as convolutions, pooling,
/// constant padding, upsampling and group_norm give their results; else `value` itself.
Tensor channels_last_like(const Tensor& value, const Tensor& input);
/// `value` (of `like`'s sizes) in `like`'s layout when that is dense (empty_like(like)).
Tensor layout_like(const Tensor& value, const Tensor& like);

namespace detail {
/// `t` converted to `dtype` (no copy when equal; layout kept, to_preserving) and expanded to
/// `shape`.
Tensor loop_input(const Tensor& t, DType dtype, const Shape& shape);
}  // namespace detail

/// The strides PyTorch's TensorIterator gives the output of a pointwise op whose inputs, already
/// broadcast (expanded) to `shape`, are `ins`: dims ordered by the inputs' strides (the first
/// input whose strides tell two dims apart decides; broadcast dims do not count), so a result of
/// transposed or channels-last inputs keeps their layout; contiguous when nothing says otherwise.
Shape pointwise_strides(const Shape& shape, const std::vector<const Tensor*>& ins);
/// An uninitialised tensor of `shape` / `dtype` with pointwise_strides(shape, ins).
Tensor empty_pointwise(const Shape& shape, DType dtype, const std::vector<const Tensor*>& ins);

/// out = f(a) elementwise; `a` is converted to A first. Returns a new tensor of dtype_of<R>()
/// laid out as PyTorch lays out a pointwise result (pointwise_strides).
template <typename A, typename R, typename F>
Tensor map1(const Tensor& a, F&& f) {
  Tensor ta = detail::loop_input(a, dtype_of<A>(), a.sizes());
  Tensor out = empty_pointwise(a.sizes(), dtype_of<R>(), {&ta});
  R* o = out.data<R>();
  const A* pa = ta.data<A>();
  for_each_offsets<2>(a.sizes(), {ta.strides(), out.strides()},
                      [&](const std::array<int64_t, 2>& off) { o[off[1]] = f(pa[off[0]]); });
  return out;
}

/// out = f(a, b) elementwise with broadcasting; inputs are converted to A and B first. Throws
/// Error at `where` when the shapes do not broadcast.
template <typename A, typename B, typename R, typename F>
Tensor map2(const Tensor& a, const Tensor& b, F&& f, const std::string& where) {
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), where);
  Tensor ta = detail::loop_input(a, dtype_of<A>(), shape);
  Tensor tb = detail::loop_input(b, dtype_of<B>(), shape);
  Tensor out = empty_pointwise(shape, dtype_of<R>(), {&ta, &tb});
  R* o = out.data<R>();
  const A* pa = ta.data<A>();
  const B* pb = tb.data<B>();
  for_each_offsets<3>(shape, {ta.strides(), tb.strides(), out.strides()},
                      [&](const std::array<int64_t, 3>& off) { o[off[2]] = f(pa[off[0]], pb[off[1]]); });
  return out;
}

/// out = f(a, b, c) elementwise with broadcasting; inputs are converted to A, B and C first.
template <typename A, typename B, typename C, typename R, typename F>
Tensor map3(const Tensor& a, const Tensor& b, const Tensor& c, F&& f, const std::string& where) {
  const Shape shape =
      broadcast_shapes(broadcast_shapes(a.sizes(), b.sizes(), where), c.sizes(), where);
  Tensor ta = detail::loop_input(a, dtype_of<A>(), shape);
  Tensor tb = detail::loop_input(b, dtype_of<B>(), shape);
  Tensor tc = detail::loop_input(c, dtype_of<C>(), shape);
  Tensor out = empty_pointwise(shape, dtype_of<R>(), {&ta, &tb, &tc});
  R* o = out.data<R>();
  const A* pa = ta.data<A>();
  const B* pb = tb.data<B>();
  const C* pc = tc.data<C>();
  for_each_offsets<4>(shape, {ta.strides(), tb.strides(), tc.strides(), out.strides()},
                      [&](const std::array<int64_t, 4>& off) {
                        o[off[3]] = f(pa[off[0]], pb[off[1]], pc[off[2]]);
                      });
  return out;
}

/// Writes `value` into `self`'s elements (any strides), converting to self's dtype; `value` must
/// broadcast to exactly self's sizes and its dtype must be castable (can_cast) to self's unless
/// `any_cast` (copy_). Safe when `value` overlaps `self`. Throws Error at `where`.
void assign_inplace(const Tensor& self, const Tensor& value, const std::string& where,
                    bool any_cast = false);

/// Throws Error(what, where, expected, actual).
[[noreturn]] inline void fail_at(const std::string& where, const std::string& what,
                                 const std::string& expected, const std::string& actual) {
  throw Error(what, where, expected, actual);
}


/// True when `x` is the constant `v`.
inline bool is_const(const SymInt& x, int64_t v) {
  const auto c = x.maybe_constant();
  return c && *c == v;
}

/// Constant sizes as symbolic ones.
inline std::vector<SymInt> to_sym(const Shape& s) { return std::vector<SymInt>(s.begin(), s.end()); }

/// `like` with new sizes (strides left empty: contiguous or unknown).
inline ir::TensorType typed(const ir::TensorType& like, std::vector<SymInt> sizes) {
  ir::TensorType t;
  t.dtype = like.dtype;
  t.device = like.device;
  t.sizes = std::move(sizes);
  return t;
}

}  // namespace anvil::ops
