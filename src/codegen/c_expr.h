// C-family expression emitter shared by the targets that print C++ (the CPU target) or CUDA
// C++ (the CUDA target): loop-kernel expressions become SSA temporaries, stores are forwarded to
// later loads of the same element, reductions accumulate into acc<N>. Scheduling (which loops,
// which threads) is each target's own; the text here only assumes the helper functions every
// target's preamble defines (bf16_to_f32, fast_exp, max_nan, floordiv_i, ...).
#pragma once

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "passes/loop_ir.h"

namespace anvil::codegen {

using passes::Expr;
using passes::ExprOp;
using passes::Program;
using passes::ReduceOp;
using passes::Stmt;

/// The C++ dialect of generated text. They differ in complex values only: plain C++ (the CPU
/// target) computes them in std::complex, CUDA C++ in libcu++'s cuda::std::complex, whose
/// operators and functions are __host__ __device__ (std::complex is host-only).
enum class Dialect { kCpp, kCuda };
/// The namespace prefix of complex types and functions in dialect `d` ("std::" or "cuda::std::").
const char* complex_ns(Dialect d);

/// C storage type of a dtype ("float", "uint16_t" for bf16 / f16, "uint8_t" for bool).
std::string storage_type(DType t, Dialect d = Dialect::kCpp);
/// C++ type expressions of a dtype compute in ("float", "double", "int64_t").
std::string compute_type(DType t, Dialect d = Dialect::kCpp);
/// A C++ literal of `v` in compute type `ct` (f32 or f64).
std::string float_literal(double v, DType ct);
/// Wraps an int64 expression to the value range of an integral dtype.
std::string narrow(DType t, const std::string& e);
/// `struct RunState` of generated code (the run's pointers, symbol values and stream), which
/// every target's preamble and emit_model's run() share.
std::string run_state_struct();
/// The scalar helpers every target's preamble defines with the same semantics (Python index
/// arithmetic FloorDiv / Mod / Max / Min / Pow, bf16 / f16 conversions rounding to nearest even,
/// NaN-propagating max / min, floor and truncating division, integer powers, float -> int
/// conversions), each function declared with `qualifier` ("static inline"; CUDA adds
/// __host__ __device__) and the math functions taken from `math_ns` ("std::" or "").
std::string scalar_helpers(const std::string& qualifier, const std::string& math_ns);
/// The name part of float8 dtype `t` in include/anvil/anvil_fp8.h's functions ("f8e4m3fn").
std::string float8_suffix(DType t);
/// A stored element `raw` (e.g. "p3[i]") of dtype `t` as its compute value.
std::string from_storage(DType t, const std::string& raw);
/// Compute value `v` converted to dtype `t`'s storage.
std::string to_storage(DType t, const std::string& v, Dialect d = Dialect::kCpp);
/// The identity of a reduction ("0", "-INFINITY", ...).
const char* acc_init(ReduceOp op, bool fl);

/// The emitter of one kernel body: SSA temporaries scoped by block.
class Body {
 public:
  Body(const Program& p, std::ostringstream& os, Dialect d = Dialect::kCpp)
      : p_(p), os_(os), d_(d) {}

  void push() {
    exprs_.emplace_back();
    fwd_.emplace_back();
  }
  void pop() {
    exprs_.pop_back();
    fwd_.pop_back();
  }

  /// A C++ value for expression `id` (emitting temporaries at `ind` as needed).
  std::string value(int id, const std::string& ind) {
    for (auto it = exprs_.rbegin(); it != exprs_.rend(); ++it) {
      auto f = it->find(id);
      if (f != it->end()) return f->second;
    }
    const Expr& e = p_.exprs.at(id);
    const std::string ct = compute_type(e.dtype, d_);
    std::string code;
    switch (e.op) {
      case ExprOp::kConst:
        if (is_complex(e.dtype))
          return ct + "(" +
                 float_literal(e.f, e.dtype == DType::kComplex128 ? DType::kFloat64
                                                                   : DType::kFloat32) +
                 ")";
        return is_floating(e.dtype)
                   ? float_literal(e.f,
                                   e.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32)
                   : "INT64_C(" + std::to_string(e.i) + ")";
      case ExprOp::kIndex:
        code = narrow(e.dtype, "static_cast<int64_t>(" + e.index.str() + ")");
        if (is_floating(e.dtype) || is_complex(e.dtype))
          code = "static_cast<" + ct + ">(" + e.index.str() + ")";
        break;
      case ExprOp::kLoad: {
        const std::string key = load_key(e.buffer, e.index);
        for (auto it = fwd_.rbegin(); it != fwd_.rend(); ++it) {
          auto f = it->find(key);
          if (f != it->end()) return f->second;
        }
        if (p_.buffers[static_cast<size_t>(e.buffer)].local)
          throw Error("internal error: a kernel-local buffer is read before it is computed",
                      "codegen/cpu", "a forwarded value",
                      p_.buffers[static_cast<size_t>(e.buffer)].name);
        code = load_code(e.buffer, e.index);
        break;
      }
      default:
        code = op_code(e, ind);
        break;
    }
    const std::string var = "t" + std::to_string(next_++);
    os_ << ind << "const " << ct << " " << var << " = " << code << ";\n";
    exprs_.back()[id] = var;
    return var;
  }

  /// Records that `var` holds buffer b at `index` (store-to-load forwarding). Temporaries
  /// computed from earlier values of b — loaded from memory or forwarded from an earlier store
  /// or a vector register — are stale after the store (an in-place update fused with a later
  /// reader of the same buffer, a buffer stored twice): they are forgotten, so later uses
  /// recompute them from the new value.
  void forward(int b, const SymInt& index, const std::string& var) {
    std::map<int, bool> memo;
    for (auto& scope : exprs_)
      for (auto it = scope.begin(); it != scope.end();)
        it = reads(it->first, root(b), memo) ? scope.erase(it) : std::next(it);
    fwd_.back()[load_key(b, index)] = var;
  }

  /// True when expression `id` loads from (an alias of) root buffer `b`.
  bool reads(int id, int b, std::map<int, bool>& memo) const {
    auto m = memo.find(id);
    if (m != memo.end()) return m->second;
    const Expr& e = p_.exprs.at(id);
    bool r = e.op == ExprOp::kLoad && root(e.buffer) == b;
    for (int a : e.args)
      if (!r && a >= 0) r = reads(a, b, memo);
    memo[id] = r;
    return r;
  }

  std::string ptr(int b) const { return "p" + std::to_string(root(b)); }
  int root(int b) const {
    int guard = 0;
    while (p_.buffers[static_cast<size_t>(b)].alias_of >= 0 && guard++ < 64)
      b = p_.buffers[static_cast<size_t>(b)].alias_of;
    return b;
  }

  /// Storage conversion of a compute value to buffer b's dtype.
  std::string store_code(int b, const std::string& v) const {
    return to_storage(p_.buffers[static_cast<size_t>(b)].dtype, v, d_);
  }

 private:
  static std::string load_key(int b, const SymInt& index) {
    return std::to_string(b) + "[" + index.str() + "]";
  }

  std::string load_code(int b, const SymInt& index) const {
    return from_storage(p_.buffers[static_cast<size_t>(b)].dtype, ptr(b) + "[" + index.str() + "]");
  }

  /// Conversion of value `v` (computed for dtype `from`) to dtype `to`.
  std::string cast_code(DType from, DType to, const std::string& v) const {
    if (is_complex(to)) {  // from a complex value, or a real one (imaginary part 0)
      const std::string ct = compute_type(to, d_);
      const std::string x = is_complex(from)
                                ? "static_cast<" + ct + ">(" + v + ")"
                                : ct + "(static_cast<" + compute_type(complex_to_real(to)) +
                                      ">(" + v + "))";
      return to == DType::kComplex32 ? "round_c32(" + x + ")" : x;
    }
    if (is_complex(from)) {  // torch casts complex to real by dropping the imaginary part
      if (to == DType::kBool)
        return "static_cast<int64_t>((" + v + ") != " + compute_type(from, d_) + "(0))";
      return cast_code(from == DType::kComplex128 ? DType::kFloat64 : DType::kFloat32, to,
                       std::string(complex_ns(d_)) + "real(" + v + ")");
    }
    const bool ff = is_floating(from), ft = is_floating(to);
    if (to == DType::kBool) return "static_cast<int64_t>((" + v + ") != 0)";
    if (ft) {
      std::string x = "static_cast<" + compute_type(to) + ">(" + v + ")";
      if (to == DType::kBFloat16) return "round_bf16(" + x + ")";
      if (to == DType::kFloat16) return "round_f16(" + x + ")";
      if (is_float8(to))  // the float8 value, kept in float (bit for bit as PyTorch rounds)
        return "anvil_" + float8_suffix(to) + "_to_f32(anvil_f32_to_" + float8_suffix(to) + "(" +
               x + "))";
      return x;
    }
    if (ff) {  // float -> integer: truncate through int32 for int32, int64 otherwise
      if (to == DType::kInt32) return "f2i32(" + v + ")";
      return narrow(to, "f2i(" + v + ")");
    }
    return narrow(to, v);
  }

  std::string op_code(const Expr& e, const std::string& ind) {
    const DType t = e.dtype;
    const bool fl = is_floating(t) || is_complex(t);  // complex: (cuda::)std::complex operators
    const std::string ct = compute_type(t, d_);
    const std::string cx = complex_ns(d_);
    auto a = [&](int k) { return value(e.args[static_cast<size_t>(k)], ind); };
    auto adt = [&](int k) { return p_.exprs.at(e.args[static_cast<size_t>(k)]).dtype; };
    auto one = fl ? "static_cast<" + ct + ">(1)" : std::string("1");
    auto wrap = [&](const std::string& x) { return fl ? x : narrow(t, x); };
    auto u = [](const std::string& x) { return "static_cast<uint64_t>(" + x + ")"; };
    switch (e.op) {
      case ExprOp::kCast:
        return cast_code(adt(0), t, a(0));
      case ExprOp::kNeg:
        return fl ? "-" + a(0) : wrap("static_cast<int64_t>(0 - " + u(a(0)) + ")");
      case ExprOp::kAbs:
        if (is_complex(adt(0))) return cx + "abs(" + a(0) + ")";
        return fl ? "std::fabs(" + a(0) + ")"
                  : wrap(a(0) + " < 0 ? static_cast<int64_t>(0 - " + u(a(0)) + ") : " + a(0));
      case ExprOp::kExp:
        return "fast_exp(" + a(0) + ")";
      case ExprOp::kLog:
        return "std::log(" + a(0) + ")";
      case ExprOp::kSqrt:
        return "std::sqrt(" + a(0) + ")";
      case ExprOp::kRsqrt:
        return one + " / std::sqrt(" + a(0) + ")";
      case ExprOp::kRecip:
        return one + " / " + a(0);
      case ExprOp::kSin:
        return "std::sin(" + a(0) + ")";
      case ExprOp::kCos:
        return "std::cos(" + a(0) + ")";
      case ExprOp::kTanh:
        return "fast_tanh(" + a(0) + ")";
      case ExprOp::kErf:
        return "fast_erf(" + a(0) + ")";
      case ExprOp::kTan:
        return "std::tan(" + a(0) + ")";
      case ExprOp::kAsin:
        return "std::asin(" + a(0) + ")";
      case ExprOp::kAcos:
        return "std::acos(" + a(0) + ")";
      case ExprOp::kAtan:
        return "std::atan(" + a(0) + ")";
      case ExprOp::kSinh:
        return "std::sinh(" + a(0) + ")";
      case ExprOp::kCosh:
        return "std::cosh(" + a(0) + ")";
      case ExprOp::kAsinh:
        return "std::asinh(" + a(0) + ")";
      case ExprOp::kAcosh:
        return "std::acosh(" + a(0) + ")";
      case ExprOp::kAtanh:
        return "std::atanh(" + a(0) + ")";
      case ExprOp::kExpm1:
        return "std::expm1(" + a(0) + ")";
      case ExprOp::kLog1p:
        return "std::log1p(" + a(0) + ")";
      case ExprOp::kLog2:
        return "std::log2(" + a(0) + ")";
      case ExprOp::kLog10:
        return "std::log10(" + a(0) + ")";
      case ExprOp::kSigmoid:
        return "fast_sigmoid(" + a(0) + ")";
      case ExprOp::kRelu:
        return a(0) + " < 0 ? static_cast<" + ct + ">(0) : " + a(0);
      case ExprOp::kFloor:
        return "std::floor(" + a(0) + ")";
      case ExprOp::kCeil:
        return "std::ceil(" + a(0) + ")";
      case ExprOp::kRound:
        return "std::nearbyint(" + a(0) + ")";
      case ExprOp::kTrunc:
        return "std::trunc(" + a(0) + ")";
      case ExprOp::kLogicalNot:
        return "static_cast<int64_t>(" + a(0) + " == 0)";
      case ExprOp::kBitNot:
        return wrap("~" + a(0));
      case ExprOp::kAdd:
        return fl ? a(0) + " + " + a(1)
                  : wrap("static_cast<int64_t>(" + u(a(0)) + " + " + u(a(1)) + ")");
      case ExprOp::kSub:
        return fl ? a(0) + " - " + a(1)
                  : wrap("static_cast<int64_t>(" + u(a(0)) + " - " + u(a(1)) + ")");
      case ExprOp::kMul:
        return fl ? a(0) + " * " + a(1)
                  : wrap("static_cast<int64_t>(" + u(a(0)) + " * " + u(a(1)) + ")");
      case ExprOp::kDiv:
        return fl ? a(0) + " / " + a(1) : wrap("truncdiv_i(" + a(0) + ", " + a(1) + ")");
      case ExprOp::kFloorDiv:
        return fl ? "floordiv_f(" + a(0) + ", " + a(1) + ")"
                  : wrap("floordiv_i(" + a(0) + ", " + a(1) + ")");
      case ExprOp::kTruncDiv:
        return fl ? "std::trunc(" + a(0) + " / " + a(1) + ")"
                  : wrap("truncdiv_i(" + a(0) + ", " + a(1) + ")");
      case ExprOp::kPow:
        return fl ? "std::pow(" + a(0) + ", " + a(1) + ")"
                  : wrap("int_pow(" + a(0) + ", " + a(1) + ")");
      case ExprOp::kMax:
        return fl ? "max_nan(" + a(0) + ", " + a(1) + ")"
                  : "(" + a(0) + " > " + a(1) + " ? " + a(0) + " : " + a(1) + ")";
      case ExprOp::kMin:
        return fl ? "min_nan(" + a(0) + ", " + a(1) + ")"
                  : "(" + a(0) + " < " + a(1) + " ? " + a(0) + " : " + a(1) + ")";
      case ExprOp::kEq:
        return "static_cast<int64_t>(" + a(0) + " == " + a(1) + ")";
      case ExprOp::kNe:
        return "static_cast<int64_t>(" + a(0) + " != " + a(1) + ")";
      case ExprOp::kLt:
        return "static_cast<int64_t>(" + a(0) + " < " + a(1) + ")";
      case ExprOp::kLe:
        return "static_cast<int64_t>(" + a(0) + " <= " + a(1) + ")";
      case ExprOp::kGt:
        return "static_cast<int64_t>(" + a(0) + " > " + a(1) + ")";
      case ExprOp::kGe:
        return "static_cast<int64_t>(" + a(0) + " >= " + a(1) + ")";
      case ExprOp::kLogicalAnd:
        return "static_cast<int64_t>(" + a(0) + " != 0 && " + a(1) + " != 0)";
      case ExprOp::kLogicalOr:
        return "static_cast<int64_t>(" + a(0) + " != 0 || " + a(1) + " != 0)";
      case ExprOp::kBitAnd:
        return wrap(a(0) + " & " + a(1));
      case ExprOp::kBitOr:
        return wrap(a(0) + " | " + a(1));
      case ExprOp::kBitXor:
        return wrap(a(0) + " ^ " + a(1));
      case ExprOp::kAtan2:
        return "std::atan2(" + a(0) + ", " + a(1) + ")";
      case ExprOp::kFmod: {  // integers: C's %; x % -1 = 0, x % 0 = 0 (the reference throws)
        const std::string x = a(0), y = a(1);
        if (fl) return "std::fmod(" + x + ", " + y + ")";
        return wrap("(" + y + " == 0 || " + y + " == -1) ? INT64_C(0) : " + x + " % " + y);
      }
      case ExprOp::kReal:
        return cx + "real(" + a(0) + ")";
      case ExprOp::kImag:
        return cx + "imag(" + a(0) + ")";
      case ExprOp::kWhere: {
        const std::string c = a(0), x = a(1), y = a(2);
        return c + " != 0 ? " + x + " : " + y;
      }
      default:
        break;
    }
    throw Error("internal error: no C++ for expression op", "codegen/cpu", "a known op",
                passes::expr_op_name(e.op));
  }

  const Program& p_;
  std::ostringstream& os_;
  const Dialect d_;
  std::vector<std::map<int, std::string>> exprs_;
  std::vector<std::map<std::string, std::string>> fwd_;
  int next_ = 0;
};

/// Root buffers (after aliases) loop kernel `k` reads or writes in memory (kernel-local buffers
/// live in registers): the pointers its code needs.
std::set<int> kernel_roots(const Program& p, const passes::LoopKernel& k);

/// Emits the statements of one block (pre / post, or a loop body). Stores are prefixed with
/// `store_guard` (e.g. "if (threadIdx.x == 0) " where every thread of a block computes the same
/// per-row value); the stored value is forwarded either way.
void emit_stmts(Body& body, const Program& p, const std::vector<Stmt>& stmts,
                const std::string& ind, std::ostringstream& os, const std::string& store_guard = "");
/// After a pass loop (partial results combined): NaN fix-up, store (prefixed with
/// `store_guard`) and forwarding of each reduction result.
void finish_reductions(Body& body, const Program& p, const std::vector<Stmt>& stmts,
                       const std::string& ind, std::ostringstream& os,
                       const std::string& store_guard = "");

}  // namespace anvil::codegen
