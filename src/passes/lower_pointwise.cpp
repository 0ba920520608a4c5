// Lowering rules for pointwise ops (arithmetic, comparisons, selection, math, activations,
// casts) and creation ops (arange, full, zeros, ...): each becomes a computed TRef whose value
// at an index is an expression over its operands' values (broadcasting = index 0).
#include <cmath>

#include "core/error.h"
#include "ops/common.h"
#include "passes/lower_internal.h"
#include "passes/pointwise_operand.h"

namespace anvil::passes::detail {

namespace {

ExprOp float_fn(const std::string& t) {
  if (t == "aten.rsqrt.default") return ExprOp::kRsqrt;
  if (t == "aten.sqrt.default") return ExprOp::kSqrt;
  if (t == "aten.reciprocal.default") return ExprOp::kRecip;
  if (t == "aten.exp.default") return ExprOp::kExp;
  if (t == "aten.log.default") return ExprOp::kLog;
  if (t == "aten.cos.default") return ExprOp::kCos;
  if (t == "aten.sin.default") return ExprOp::kSin;
  if (t == "aten.tanh.default") return ExprOp::kTanh;
  if (t == "aten.erf.default") return ExprOp::kErf;
  if (t == "aten.sigmoid.default") return ExprOp::kSigmoid;
  if (t == "aten.tan.default") return ExprOp::kTan;
  if (t == "aten.asin.default") return ExprOp::kAsin;
  if (t == "aten.acos.default") return ExprOp::kAcos;
  if (t == "aten.atan.default") return ExprOp::kAtan;
  if (t == "aten.sinh.default") return ExprOp::kSinh;
  if (t == "aten.cosh.default") return ExprOp::kCosh;
  if (t == "aten.asinh.default") return ExprOp::kAsinh;
  if (t == "aten.acosh.default") return ExprOp::kAcosh;
  if (t == "aten.atanh.default") return ExprOp::kAtanh;
  if (t == "aten.expm1.default") return ExprOp::kExpm1;
  if (t == "aten.log1p.default") return ExprOp::kLog1p;
  if (t == "aten.log2.default") return ExprOp::kLog2;
  if (t == "aten.log10.default") return ExprOp::kLog10;
  return ExprOp::kConst;
}

/// kind of comparison for a target prefix.
std::optional<ExprOp> compare_op(const std::string& t) {
  static const std::pair<const char*, ExprOp> kOps[] = {
      {"aten.eq.", ExprOp::kEq}, {"aten.ne.", ExprOp::kNe}, {"aten.lt.", ExprOp::kLt},
      {"aten.le.", ExprOp::kLe}, {"aten.gt.", ExprOp::kGt}, {"aten.ge.", ExprOp::kGe}};
  for (auto& [p, op] : kOps)
    if (t.rfind(p, 0) == 0) return op;
  return std::nullopt;
}

/// x ** e for a constant exponent, with the reference kernel's special cases.
int pow_const(ExprPool& E, int x, double e, DType rt) {
  if (!is_floating(rt)) {
    int c = E.int_constant(static_cast<int64_t>(e), DType::kInt64);
    return E.binary(ExprOp::kPow, x, c, rt);
  }
  if (e == 2) return E.binary(ExprOp::kMul, x, x, rt);
  if (e == 3) return E.binary(ExprOp::kMul, E.binary(ExprOp::kMul, x, x, rt), x, rt);
  if (e == 0.5) return E.unary(ExprOp::kSqrt, x, rt);
  if (e == -0.5) return E.unary(ExprOp::kRsqrt, x, rt);
  if (e == -1) return E.unary(ExprOp::kRecip, x, rt);
  if (e == -2) return E.unary(ExprOp::kRecip, E.binary(ExprOp::kMul, x, x, rt), rt);
  if (e == 1) return x;
  return E.binary(ExprOp::kPow, x, E.constant(e, rt), rt);
}

/// Promoted dtype of arithmetic (true division of integers gives float32).
DType arith_dtype(const ir::Node& n, bool true_div) {
  const DType rt = ops::result_type(
      std::vector<ops::TypeOperand>{ops::type_operand(n, "self"), ops::type_operand(n, "other")});
  if (true_div && is_integral(rt, true)) return DType::kFloat32;
  return rt;
}

/// a OP alpha*b for add / sub / rsub / mul / div (+ rounding modes) in dtype rt.
TRefPtr arith(Lowerer& L, const std::string& t, DType rt, const ir::TensorType& out) {
  auto a = operand(L, "self"), b = operand(L, "other");
  if (!a || !b) L.fail("arithmetic needs self and other");
  std::optional<Operand> alpha = operand(L, "alpha");
  auto& E = L.ex();
  const auto sizes = out.sizes;
  std::string mode;
  if (const ir::Arg* m = L.node().arg("rounding_mode"); m && m->kind == ir::Arg::Kind::kString)
    mode = m->s;
  const bool add = t.find(".add") != std::string::npos, sub = t.find(".sub") != std::string::npos,
             rsub = t.find(".rsub") != std::string::npos, mul = t.find(".mul") != std::string::npos;
  Operand A = *a, B = *b;
  return make(L, out, {A, B},
              [&L, &E, A, B, alpha, rt, sizes, add, sub, rsub, mul, mode](const Index& idx) {
                int x = value(L, A, rt, sizes, idx), y = value(L, B, rt, sizes, idx);
                auto scaled = [&](int v) {
                  if (!alpha) return v;
                  return E.binary(ExprOp::kMul, value(L, *alpha, rt, sizes, idx), v, rt);
                };
                if (add) return E.binary(ExprOp::kAdd, x, scaled(y), rt);
                if (rsub) return E.binary(ExprOp::kSub, y, scaled(x), rt);
                if (sub) return E.binary(ExprOp::kSub, x, scaled(y), rt);
                if (mul) return E.binary(ExprOp::kMul, x, y, rt);
                if (mode == "trunc") return E.binary(ExprOp::kTruncDiv, x, y, rt);
                if (mode == "floor") return E.binary(ExprOp::kFloorDiv, x, y, rt);
                return E.binary(ExprOp::kDiv, x, y, rt);
              });
}

/// gelu / silu / hardswish / hardsigmoid as expressions over x (dtype rt).
int activation(ExprPool& E, const std::string& t, int x, DType rt, const std::string& approx) {
  auto c = [&](double v) { return E.constant(v, rt); };
  auto mul = [&](int a, int b) { return E.binary(ExprOp::kMul, a, b, rt); };
  auto addf = [&](int a, int b) { return E.binary(ExprOp::kAdd, a, b, rt); };
  if (t == "aten.silu.default")
    return E.binary(ExprOp::kDiv, x,
                    addf(c(1), E.unary(ExprOp::kExp, E.unary(ExprOp::kNeg, x, rt), rt)), rt);
  if (t == "aten.hardsigmoid.default" || t == "aten.hardswish.default") {  // relu6(x + 3) / 6
    const int r6 =
        E.binary(ExprOp::kMin, E.binary(ExprOp::kMax, addf(x, c(3)), c(0), rt), c(6), rt);
    const int hs = E.binary(ExprOp::kDiv, r6, c(6), rt);
    return t == "aten.hardswish.default" ? mul(x, hs) : hs;
  }
  if (approx == "tanh") {
    const double k_beta = M_SQRT2 * M_2_SQRTPI * 0.5;
    int inner = mul(c(k_beta), addf(x, mul(mul(mul(c(0.044715), x), x), x)));
    return mul(mul(c(0.5), x), addf(c(1), E.unary(ExprOp::kTanh, inner, rt)));
  }
  return mul(mul(x, c(0.5)), addf(c(1), E.unary(ExprOp::kErf, mul(x, c(M_SQRT1_2)), rt)));
}

/// Fill value argument `name` as a number in dtype rt.
int fill_value(Lowerer& L, const std::string& name, DType rt) {
  auto o = operand(L, name);
  if (!o) L.fail("missing fill value '" + name + "'");
  return value(L, *o, rt, {}, {}, /*exact=*/false);
}

/// Creation ops: arange, full, zeros, ones, empty, scalar_tensor, *_like, new_*.
bool lower_creation(Lowerer& L, const ir::Node& n) {
  const std::string& t = n.target;
  auto& E = L.ex();
  const ir::TensorType& out = L.out_type();
  const DType rt = out.dtype;
  if (t.rfind("aten.arange.", 0) == 0) {
    auto start = operand(L, "start"), step = operand(L, "step");
    Operand s0 = start ? *start : Operand{}, st = step ? *step : Operand{};
    if (!step) st.i = 1;
    L.bind(0, L.computed(out.sizes, rt,
                         [&L, &E, s0, st, rt](const Index& idx) {
                           if (!is_floating(rt) && !s0.is_float && !st.is_float) {
                             SymInt s = s0.symbolic ? s0.sym : SymInt(s0.i);
                             SymInt k = st.symbolic ? st.sym : SymInt(st.i);
                             return E.cast(E.index_value(s + k * idx[0], DType::kInt64), rt);
                           }
                           const DType acc = rt == DType::kFloat64 || rt == DType::kFloat32
                                                 ? DType::kFloat64
                                                 : DType::kFloat32;
                           auto num = [&](const Operand& o) {
                             if (o.symbolic)
                               return E.cast(E.index_value(o.sym, DType::kInt64), acc);
                             return E.constant(o.is_float ? o.f : static_cast<double>(o.i), acc);
                           };
                           int i = E.cast(E.index_value(idx[0], DType::kInt64), acc);
                           return E.cast(E.binary(ExprOp::kAdd, num(s0),
                                                  E.binary(ExprOp::kMul, num(st), i, acc), acc),
                                         rt);
                         },
                         {}));
    return true;
  }
  int c = -1;
  if (t == "aten.full.default" || t == "aten.full_like.default" || t == "aten.new_full.default")
    c = fill_value(L, "fill_value", rt);
  else if (t == "aten.scalar_tensor.default")
    c = fill_value(L, "s", rt);
  else if (t == "aten.ones.default" || t == "aten.ones_like.default" ||
           t == "aten.new_ones.default")
    c = E.cast(E.int_constant(1, DType::kInt64), rt);
  else if (t == "aten.zeros.default" || t == "aten.zeros_like.default" ||
           t == "aten.new_zeros.default" || t == "aten.empty.memory_format" ||
           t == "aten.empty_strided.default" ||
           t == "aten.empty_like.default" || t == "aten.new_empty.default")
    c = E.cast(E.int_constant(0, DType::kInt64), rt);
  else
    return false;
  L.bind(0, L.computed(out.sizes, rt, [c](const Index&) { return c; }, {}));
  return true;
}

}  // namespace

namespace {

/// True when the current node reads or writes a complex tensor.
bool touches_complex(const ir::Node& n) {
  for (const auto& a : n.args)
    if (a.kind == ir::Arg::Kind::kTensor && a.value && a.value->kind == ir::ValueKind::kTensor &&
        is_complex(a.value->type.dtype))
      return true;
  for (const ir::Value* o : n.outputs)
    if (o && o->kind == ir::ValueKind::kTensor && is_complex(o->type.dtype)) return true;
  return false;
}

/// The pointwise ops the CPU compiler computes on complex values (std::complex arithmetic in
/// the generated code); others fail with a clear error instead of producing C++ that does not
/// compile.
bool complex_op_supported(const std::string& t) {
  static const char* const kOps[] = {
      "aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar",
      "aten.rsub.Scalar", "aten.rsub.Tensor", "aten.mul.Tensor", "aten.mul.Scalar",
      "aten.div.Tensor", "aten.div.Scalar", "aten.neg.default", "aten.abs.default",
      "aten.real.default", "aten.imag.default", "aten.view_as_real.default",
      "aten.eq.Tensor", "aten.eq.Scalar", "aten.ne.Tensor", "aten.ne.Scalar",
      "aten.where.self", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device",
      "aten._to_copy.default", "aten.type_as.default", "aten.clone.default",
      "aten.contiguous.default", "aten.lift_fresh_copy.default"};
  for (const char* op : kOps)
    if (t == op) return true;
  return false;
}

/// real / imag / view_as_real of a complex tensor: computed copies (the reference kernels
/// return views; compiled code materialises them where they are stored).
bool lower_complex_parts(Lowerer& L, const ir::Node& n) {
  const std::string& t = n.target;
  const bool re = t == "aten.real.default", im = t == "aten.imag.default",
             as_real = t == "aten.view_as_real.default";
  if (!re && !im && !as_real) return false;
  TRefPtr x = L.arg("self");
  if (!x) L.fail(t + " needs a tensor self");
  const ir::TensorType& out = L.out_type();
  const DType rt = out.dtype;
  if (!is_complex(x->dtype)) {
    if (!re) L.fail(t + " needs a complex tensor", "a complex tensor", dtype_name(x->dtype));
    L.bind(0, x);  // real of a real tensor is the tensor itself
    L.copy_aliases.insert(n.outputs[0]);
    return true;
  }
  auto& E = L.ex();
  L.bind(0, L.computed(out.sizes, rt,
                       [&L, &E, x, rt, re, as_real](const Index& idx) {
                         if (!as_real) {
                           const int v = L.load(*x, idx);
                           return E.unary(re ? ExprOp::kReal : ExprOp::kImag, v, rt);
                         }
                         const Index base(idx.begin(), idx.end() - 1);
                         const int v = L.load(*x, base);
                         const int is_re = E.binary(
                             ExprOp::kEq, E.index_value(idx.back(), DType::kInt64),
                             E.int_constant(0, DType::kInt64), DType::kBool);
                         return E.where(is_re, E.unary(ExprOp::kReal, v, rt),
                                        E.unary(ExprOp::kImag, v, rt), rt);
                       },
                       {x}));
  return true;
}

}  // namespace

bool lower_pointwise(Lowerer& L, const ir::Node& n) {
  const std::string& t = n.target;
  if (n.schema->category == ir::OpCategory::kCreation) return lower_creation(L, n);
  if (n.schema->category != ir::OpCategory::kPointwise) return false;
  if (touches_complex(n) && !complex_op_supported(t))
    L.fail("complex tensors are not supported by the CPU compiler for " + t,
           "a complex op anvil compiles (add, sub, mul, div, neg, abs, real, imag, "
           "view_as_real, eq, ne, where, copies)",
           t);
  if (lower_complex_parts(L, n)) return true;
  if (lower_pad(L, n)) return true;
  auto& E = L.ex();
  const ir::TensorType& out = L.out_type();
  const DType rt = out.dtype;
  const auto sizes = out.sizes;

  if (fuse_add_into_conv(L, n) || fuse_act_into_conv(L, n)) return true;
  if (t == "aten.add.Tensor" || t == "aten.add.Scalar" || t == "aten.sub.Tensor" ||
      t == "aten.sub.Scalar" || t == "aten.rsub.Scalar" || t == "aten.rsub.Tensor" ||
      t == "aten.mul.Tensor" || t == "aten.mul.Scalar" || t == "aten.div.Tensor" ||
      t == "aten.div.Scalar" || t == "aten.div.Tensor_mode" || t == "aten.div.Scalar_mode") {
    L.bind(0, arith(L, t, rt, out));
    return true;
  }
  if (t == "aten.pow.Tensor_Scalar" || t == "aten.pow.Tensor_Tensor" || t == "aten.pow.Scalar") {
    auto a = operand(L, "self"), b = operand(L, "exponent");
    if (!a || !b) L.fail("pow needs self and exponent");
    Operand A = *a, B = *b;
    L.bind(0, make(L, out, {A, B}, [&L, &E, A, B, rt, sizes](const Index& idx) {
             int x = value(L, A, rt, sizes, idx);
             if (!B.t && !B.symbolic) return pow_const(E, x, B.is_float ? B.f : double(B.i), rt);
             return E.binary(ExprOp::kPow, x, value(L, B, rt, sizes, idx), rt);
           }));
    return true;
  }
  if (t == "aten.maximum.default" || t == "aten.minimum.default" || t == "aten.max.other" ||
      t == "aten.min.other") {
    Operand A = *operand(L, "self"), B = *operand(L, "other");
    const ExprOp op =
        t == "aten.maximum.default" || t == "aten.max.other" ? ExprOp::kMax : ExprOp::kMin;
    L.bind(0, make(L, out, {A, B}, [&L, &E, A, B, rt, sizes, op](const Index& idx) {
             return E.binary(op, value(L, A, rt, sizes, idx), value(L, B, rt, sizes, idx), rt);
           }));
    return true;
  }
  if (auto cmp = compare_op(t)) {
    Operand A = *operand(L, "self"), B = *operand(L, "other");
    const DType pt = ops::result_type(
        std::vector<ops::TypeOperand>{ops::type_operand(n, "self"), ops::type_operand(n, "other")});
    const ExprOp op = *cmp;
    L.bind(0, make(L, out, {A, B}, [&L, &E, A, B, pt, sizes, op](const Index& idx) {
             return E.binary(op, value(L, A, pt, sizes, idx, false),
                             value(L, B, pt, sizes, idx, false), DType::kBool);
           }));
    return true;
  }
  if (t == "aten.__and__.Tensor" || t == "aten.__or__.Tensor" || t == "aten.bitwise_and.Tensor" ||
      t == "aten.bitwise_or.Tensor" || t == "aten.logical_and.default" ||
      t == "aten.logical_or.default") {
    Operand A = *operand(L, "self"), B = *operand(L, "other");
    const bool logical = t.find("logical") != std::string::npos;
    const bool is_and = t.find("and") != std::string::npos;
    const ExprOp op = logical ? (is_and ? ExprOp::kLogicalAnd : ExprOp::kLogicalOr)
                              : (is_and ? ExprOp::kBitAnd : ExprOp::kBitOr);
    const DType in = logical ? DType::kBool : rt;
    L.bind(0, make(L, out, {A, B}, [&L, &E, A, B, in, rt, sizes, op](const Index& idx) {
             return E.binary(op, value(L, A, in, sizes, idx), value(L, B, in, sizes, idx), rt);
           }));
    return true;
  }
  if (t == "aten.where.self" || t == "aten.where.ScalarOther" || t == "aten.where.ScalarSelf" ||
      t == "aten.masked_fill.Scalar" || t == "aten.masked_fill.Tensor") {
    const bool mf = t.rfind("aten.masked_fill", 0) == 0;
    Operand C = *operand(L, mf ? "mask" : "condition");
    Operand A = *operand(L, mf ? "value" : "self"), B = *operand(L, mf ? "self" : "other");
    L.bind(0, make(L, out, {C, A, B}, [&L, &E, C, A, B, rt, sizes](const Index& idx) {
             return E.where(value(L, C, DType::kBool, sizes, idx),
                            value(L, A, rt, sizes, idx, false), value(L, B, rt, sizes, idx, false),
                            rt);
           }));
    return true;
  }
  if (t == "aten.clamp.default" || t == "aten.clamp_min.default" ||
      t == "aten.clamp_max.default" || t == "aten.hardtanh.default" || t == "aten.relu6.default") {
    Operand X = *operand(L, "self");
    auto lo = operand(L, "min"), hi = operand(L, "max");
    if (t == "aten.hardtanh.default" || t == "aten.relu6.default") {  // fixed bounds
      const bool relu6 = t == "aten.relu6.default";
      lo = Operand{};
      hi = Operand{};
      lo->is_float = hi->is_float = true;
      lo->f = relu6 ? 0.0 : ir::shape_args::float_(n, "min_val", -1.0);
      hi->f = relu6 ? 6.0 : ir::shape_args::float_(n, "max_val", 1.0);
    }
    L.bind(0, make(L, out, {X}, [&L, &E, X, lo, hi, rt, sizes](const Index& idx) {
             int x = value(L, X, rt, sizes, idx);
             if (lo) {
               int l = value(L, *lo, rt, sizes, idx, false);
               x = E.where(E.binary(ExprOp::kLt, x, l, DType::kBool), l, x, rt);
             }
             if (hi) {
               int h = value(L, *hi, rt, sizes, idx, false);
               x = E.where(E.binary(ExprOp::kGt, x, h, DType::kBool), h, x, rt);
             }
             return x;
           }));
    return true;
  }
  if (lower_math(L, n)) return true;
  const ExprOp ff = float_fn(t);
  if (ff != ExprOp::kConst || t == "aten.neg.default" || t == "aten.abs.default" ||
      t == "aten.relu.default" || t == "aten.logical_not.default" ||
      t == "aten.bitwise_not.default" || t == "aten.gelu.default" || t == "aten.silu.default" ||
      t == "aten.hardswish.default" || t == "aten.hardsigmoid.default") {
    Operand X = *operand(L, "self");
    std::string approx = "none";
    if (const ir::Arg* a = n.arg("approximate"); a && a->kind == ir::Arg::Kind::kString)
      approx = a->s;
    L.bind(0, make(L, out, {X}, [&L, &E, X, rt, sizes, ff, t, approx](const Index& idx) {
             if (t == "aten.logical_not.default")
               return E.unary(ExprOp::kLogicalNot, value(L, X, DType::kBool, sizes, idx), rt);
             if (t == "aten.abs.default" && X.t && is_complex(X.t->dtype))  // |z|: real result
               return E.unary(ExprOp::kAbs, value(L, X, X.t->dtype, sizes, idx), rt);
             int x = value(L, X, rt, sizes, idx);
             if (ff != ExprOp::kConst) return E.unary(ff, x, rt);
             if (t == "aten.neg.default") return E.unary(ExprOp::kNeg, x, rt);
             if (t == "aten.abs.default") return E.unary(ExprOp::kAbs, x, rt);
             if (t == "aten.relu.default") return E.unary(ExprOp::kRelu, x, rt);
             if (t == "aten.bitwise_not.default")
               return E.unary(rt == DType::kBool ? ExprOp::kLogicalNot : ExprOp::kBitNot, x, rt);
             return activation(E, t, x, rt, approx);
           }));
    return true;
  }
  if (t == "aten.addcmul.default" || t == "aten.addcdiv.default") {
    // self + (value * tensor1) * tensor2 (or / tensor2), PyTorch's order of operations
    auto s = operand(L, "self"), a = operand(L, "tensor1"), b = operand(L, "tensor2");
    if (!s || !a || !b) L.fail("addcmul / addcdiv need self, tensor1 and tensor2");
    std::optional<Operand> v = operand(L, "value");
    const bool div = t == "aten.addcdiv.default";
    const Operand S = *s, A = *a, B = *b;
    L.bind(0, make(L, out, {S, A, B}, [&L, &E, S, A, B, v, rt, sizes, div](const Index& idx) {
             int p = value(L, A, rt, sizes, idx);
             if (v) p = E.binary(ExprOp::kMul, value(L, *v, rt, sizes, idx), p, rt);
             p = E.binary(div ? ExprOp::kDiv : ExprOp::kMul, p, value(L, B, rt, sizes, idx), rt);
             return E.binary(ExprOp::kAdd, value(L, S, rt, sizes, idx), p, rt);
           }));
    return true;
  }
  if (t == "aten.floor.default" || t == "aten.ceil.default" || t == "aten.round.default" ||
      t == "aten.trunc.default") {
    TRefPtr x = L.arg("self");
    if (!x) L.fail("rounding needs self");
    if (!is_floating(rt)) {  // integers round to themselves
      L.bind(0, L.computed(sizes, rt, [&L, x](const Index& idx) { return L.load(*x, idx); }, {x}));
      return true;
    }
    const ExprOp op = t == "aten.floor.default"  ? ExprOp::kFloor
                      : t == "aten.ceil.default" ? ExprOp::kCeil
                      : t == "aten.round.default" ? ExprOp::kRound
                                                  : ExprOp::kTrunc;
    L.bind(0, L.computed(sizes, rt,
                         [&L, &E, x, op, rt](const Index& idx) {
                           return E.unary(op, E.cast(L.load(*x, idx), rt), rt);
                         },
                         {x}));
    return true;
  }
  if (t == "aten.fill.Scalar") {
    const int c = fill_value(L, "value", rt);
    L.bind(0, L.computed(sizes, rt, [c](const Index&) { return c; }, {}));
    return true;
  }
  if (t == "aten.fill.Tensor") {
    TRefPtr v = L.arg("value");
    if (!v) L.fail("fill needs a value tensor");
    L.bind(0, L.computed(
                  sizes, rt, [&L, &E, v, rt](const Index&) { return E.cast(L.load(*v, {}), rt); },
                  {v}));
    return true;
  }
  if (t == "aten.to.dtype" || t == "aten.to.dtype_layout" || t == "aten.to.device" ||
      t == "aten._to_copy.default" || t == "aten.type_as.default" || t == "aten.clone.default" ||
      t == "aten.contiguous.default" || t == "aten.lift_fresh_copy.default" ||
      t == "aten.dropout.default") {
    // dropout's argument is `input`; dropout_ (ir/inplace.h) keeps the name `self`
    const ir::Arg* a = n.arg(t == "aten.dropout.default" && n.arg("input") ? "input" : "self");
    if (!a || !a->value) L.fail("cast without an input");
    if (t == "aten.dropout.default")
      if (const ir::Arg* tr = n.arg("train"); tr && tr->kind == ir::Arg::Kind::kBool && tr->b)
        L.fail("dropout in training mode is not supported", "train=False", "train=True");
    TRefPtr x = L.ref(a->value);
    if (x->dtype == rt) {
      L.bind(0, x);  // no conversion: the same tensor; an in-place write to it copies first
      L.copy_aliases.insert(n.outputs[0]);
      return true;
    }
    L.bind(0, L.computed(sizes, rt,
                         [&L, &E, x, rt](const Index& idx) { return E.cast(L.load(*x, idx), rt); },
                         {x}));
    return true;
  }
  return false;
}

TRefPtr inplace_value(Lowerer& L, const ir::Node& n) {
  // aten.copy_.default is the one in-place op with a row: the importers write every other
  // aten.X_.O as aten.X.O plus copy_ (ir/inplace.h).
  if (n.target != "aten.copy_.default") L.fail("in-place op without a lowering");
  TRefPtr src = L.arg("src");
  if (!src) L.fail("copy_ needs src");
  return src;
}

bool Lowerer::is_gemm_result_sum(const ir::Node& n, const TRef& t) const {
  if (n.target != "aten.add.Tensor") return false;
  bool gemm_operand = false;
  int tensors = 0;
  for (const auto& a : n.args) {
    if (!a.value || !a.value->is_tensor()) continue;
    ++tensors;
    const auto r = vals_.find(a.value);
    if (r == vals_.end() || !r->second) return false;
    const TRef& in = *r->second;
    if (in.dtype != t.dtype || !(in.sizes == t.sizes)) return false;  // no broadcast, no cast
    if (!in.is_buffer() || !is_contiguous_view(in) || gemm_operand) continue;
    for (const SNode& s : snodes_)
      if (s.kind == SNode::Kind::kGemm && s.gemm && s.gemm->c.buffer == in.buffer)
        gemm_operand = true;
  }
  return tensors == 2 && gemm_operand;
}

}  // namespace anvil::passes::detail
