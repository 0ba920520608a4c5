// Pointwise operands of the lowering (lower_pointwise.cpp, lower_math.cpp): an argument that is
// a tensor or a number, its value at an output index in a given dtype, and the computed TRef of
// one pointwise op over such operands.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "passes/lower_internal.h"

namespace anvil::passes::detail {

/// A pointwise operand: a tensor, or a number (possibly a symbolic int).
struct Operand {
  TRefPtr t;
  bool is_float = false, is_bool = false, symbolic = false;
  double f = 0;
  int64_t i = 0;
  SymInt sym;
};

inline std::optional<Operand> operand(Lowerer& L, const std::string& name) {
  const ir::Arg* a = L.node().arg(name);
  if (!a) return std::nullopt;
  Operand o;
  switch (a->kind) {
    case ir::Arg::Kind::kTensor:
      if (!a->value) return std::nullopt;
      if (a->value->kind == ir::ValueKind::kSymInt) {
        o.symbolic = true;
        o.sym = a->value->sym;
        if (auto c = o.sym.maybe_constant()) {
          o.symbolic = false;
          o.i = *c;
        }
        return o;
      }
      o.t = L.ref(a->value);
      return o;
    case ir::Arg::Kind::kInt:
      o.i = a->i;
      return o;
    case ir::Arg::Kind::kFloat:
      o.is_float = true;
      o.f = a->f;
      return o;
    case ir::Arg::Kind::kBool:
      o.is_bool = true;
      o.i = a->b ? 1 : 0;
      return o;
    case ir::Arg::Kind::kSymInt:
      if (a->symints.empty()) return std::nullopt;
      if (a->symints[0].value) {
        o.symbolic = true;
        o.sym = a->symints[0].value->sym;
      } else {
        o.i = a->symints[0].constant;
      }
      return o;
    default:
      return std::nullopt;
  }
}

/// The value of `o` at `idx` (an index of `sizes`) in dtype `rt`. Numbers are exact in rt's
/// compute type when `exact`, else rounded through rt (comparisons, selections).
inline int value(Lowerer& L, const Operand& o, DType rt, const std::vector<SymInt>& sizes,
                 const Index& idx, bool exact = true) {
  auto& E = L.ex();
  if (o.t) return E.cast(L.load(*o.t, Lowerer::broadcast_index(*o.t, sizes, idx)), rt);
  if (o.symbolic) return E.cast(E.index_value(o.sym, DType::kInt64), rt);
  const double v = o.is_float ? o.f : static_cast<double>(o.i);
  if (exact && is_floating(rt))  // torch's arithmetic uses the number unrounded in the compute type
    return E.constant(v, rt == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32);
  if (o.is_float) return E.cast(E.constant(v, DType::kFloat64), rt);
  return E.cast(E.int_constant(o.i, DType::kInt64), rt);
}

/// Result of one pointwise op over `ops` with output type `out`.
inline TRefPtr make(Lowerer& L, const ir::TensorType& out, const std::vector<Operand>& ops,
                    std::function<int(const Index&)> fn) {
  std::vector<TRefPtr> ins;
  for (const auto& o : ops)
    if (o.t) ins.push_back(o.t);
  return L.computed(out.sizes, out.dtype, std::move(fn), ins);
}

/// Lowers sign, isnan, isinf, elu, leaky_relu, atan2, fmod, remainder, logical_xor, bitwise
/// xor and the Scalar forms of bitwise and / or / xor, and clamp with tensor bounds
/// (lower_math.cpp). Returns false when the node is none of them.
bool lower_math(Lowerer& L, const ir::Node& n);

}  // namespace anvil::passes::detail
