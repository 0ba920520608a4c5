// C++ for one loop kernel: the outer domain split into chunks for api->parallel_for, an
// odometer over the outer indices, and per pass a `#pragma omp simd` loop over the inner domain
// (reductions accumulate in registers; 16-bit floats compute in float). Expressions become SSA
// temporaries; a value stored and read back in the same kernel is forwarded, and kernel-local
// buffers are never stored.
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "codegen/cpu/emit_cpu.h"
#include "core/error.h"

namespace anvil::codegen::cpu {

namespace {

using passes::Expr;
using passes::ExprOp;
using passes::LoopKernel;
using passes::Program;
using passes::ReduceOp;
using passes::Stmt;

std::string float_literal(double v, DType ct) {
  if (std::isnan(v)) return ct == DType::kFloat64 ? "double(NAN)" : "float(NAN)";
  if (std::isinf(v)) {
    const std::string s = v > 0 ? "INFINITY" : "-INFINITY";
    return ct == DType::kFloat64 ? "double(" + s + ")" : "float(" + s + ")";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return ct == DType::kFloat64 ? s : "static_cast<float>(" + s + ")";
}

/// Wraps an int64 expression to the value range of an integral dtype.
std::string narrow(DType t, const std::string& e) {
  switch (t) {
    case DType::kInt32:
      return "static_cast<int64_t>(static_cast<int32_t>(" + e + "))";
    case DType::kInt16:
      return "static_cast<int64_t>(static_cast<int16_t>(" + e + "))";
    case DType::kInt8:
      return "static_cast<int64_t>(static_cast<int8_t>(" + e + "))";
    case DType::kUInt8:
      return "static_cast<int64_t>(static_cast<uint8_t>(" + e + "))";
    case DType::kUInt16:
      return "static_cast<int64_t>(static_cast<uint16_t>(" + e + "))";
    case DType::kBool:
      return "static_cast<int64_t>((" + e + ") != 0)";
    default:
      return e;
  }
}

/// The emitter of one kernel body: SSA temporaries scoped by block.
class Body {
 public:
  Body(const Program& p, std::ostringstream& os) : p_(p), os_(os) {}

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
    const std::string ct = compute_type(e.dtype);
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
        loaded_.insert(root(e.buffer));
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
  /// computed from earlier loads of b are stale after the store (an in-place update fused with
  /// a later reader of the same buffer): they are forgotten, so later uses reload.
  void forward(int b, const SymInt& index, const std::string& var) {
    if (loaded_.count(root(b))) {
      std::map<int, bool> memo;
      for (auto& scope : exprs_)
        for (auto it = scope.begin(); it != scope.end();)
          it = reads(it->first, root(b), memo) ? scope.erase(it) : std::next(it);
    }
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
    const DType t = p_.buffers[static_cast<size_t>(b)].dtype;
    switch (t) {
      case DType::kBFloat16:
        return "f32_to_bf16(" + v + ")";
      case DType::kFloat16:
        return "f32_to_f16(" + v + ")";
      case DType::kComplex32:
        return "c64_to_c32(" + v + ")";
      case DType::kBool:
        return "static_cast<uint8_t>((" + v + ") != 0)";
      default:
        return "static_cast<" + storage_type(t) + ">(" + v + ")";
    }
  }

 private:
  static std::string load_key(int b, const SymInt& index) {
    return std::to_string(b) + "[" + index.str() + "]";
  }

  std::string load_code(int b, const SymInt& index) const {
    const DType t = p_.buffers[static_cast<size_t>(b)].dtype;
    const std::string raw = ptr(b) + "[" + index.str() + "]";
    switch (t) {
      case DType::kBFloat16:
        return "bf16_to_f32(" + raw + ")";
      case DType::kFloat16:
        return "f16_to_f32(" + raw + ")";
      case DType::kComplex32:
        return "c32_to_c64(" + raw + ")";
      case DType::kFloat32:
      case DType::kFloat64:
      case DType::kComplex64:
      case DType::kComplex128:
        return raw;
      default:
        return "static_cast<int64_t>(" + raw + ")";
    }
  }

  /// Conversion of value `v` (computed for dtype `from`) to dtype `to`.
  static std::string cast_code(DType from, DType to, const std::string& v) {
    if (is_complex(to)) {  // from a complex value, or a real one (imaginary part 0)
      const std::string ct = compute_type(to);
      const std::string x = is_complex(from)
                                ? "static_cast<" + ct + ">(" + v + ")"
                                : ct + "(static_cast<" + compute_type(complex_to_real(to)) +
                                      ">(" + v + "))";
      return to == DType::kComplex32 ? "round_c32(" + x + ")" : x;
    }
    if (is_complex(from)) {  // torch casts complex to real by dropping the imaginary part
      if (to == DType::kBool)
        return "static_cast<int64_t>((" + v + ") != " + compute_type(from) + "(0))";
      return cast_code(from == DType::kComplex128 ? DType::kFloat64 : DType::kFloat32, to,
                       "std::real(" + v + ")");
    }
    const bool ff = is_floating(from), ft = is_floating(to);
    if (to == DType::kBool) return "static_cast<int64_t>((" + v + ") != 0)";
    if (ft) {
      std::string x = "static_cast<" + compute_type(to) + ">(" + v + ")";
      if (to == DType::kBFloat16) return "round_bf16(" + x + ")";
      if (to == DType::kFloat16) return "round_f16(" + x + ")";
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
    const bool fl = is_floating(t) || is_complex(t);  // complex: std::complex operators
    const std::string ct = compute_type(t);
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
        if (is_complex(adt(0))) return "std::abs(" + a(0) + ")";
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
      case ExprOp::kSigmoid:
        return "fast_sigmoid(" + a(0) + ")";
      case ExprOp::kRelu:
        return a(0) + " < 0 ? static_cast<" + ct + ">(0) : " + a(0);
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
      case ExprOp::kReal:
        return "std::real(" + a(0) + ")";
      case ExprOp::kImag:
        return "std::imag(" + a(0) + ")";
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
  std::vector<std::map<int, std::string>> exprs_;
  std::vector<std::map<std::string, std::string>> fwd_;
  std::set<int> loaded_;  // root buffers this kernel has loaded from memory
  int next_ = 0;
};

const char* acc_init(ReduceOp op, bool fl) {
  switch (op) {
    case ReduceOp::kSum:
      return "0";
    case ReduceOp::kProd:
      return "1";
    case ReduceOp::kMax:
      return fl ? "-INFINITY" : "INT64_MIN";
    case ReduceOp::kMin:
      return fl ? "INFINITY" : "INT64_MAX";
    case ReduceOp::kAny:
      return "0";
    case ReduceOp::kAll:
      return "1";
  }
  return "0";
}

/// Emits the statements of one block (pre / post, or a loop body).
void emit_stmts(Body& body, const Program& p, const std::vector<Stmt>& stmts,
                const std::string& ind, std::ostringstream& os) {
  for (const Stmt& s : stmts) {
    const std::string v = body.value(s.expr, ind);
    if (s.kind == Stmt::Kind::kReduce) {
      const std::string acc = "acc" + std::to_string(s.acc);
      const bool fl = is_floating(s.dtype);
      switch (s.reduce) {
        case ReduceOp::kSum:
          os << ind << acc << " += " << v << ";\n";
          break;
        case ReduceOp::kProd:
          os << ind << acc << " *= " << v << ";\n";
          break;
        case ReduceOp::kMax:
          os << ind << acc << " = " << v << " > " << acc << " ? " << v << " : " << acc << ";\n";
          if (fl) os << ind << "nan" << s.acc << " |= (" << v << " != " << v << ");\n";
          break;
        case ReduceOp::kMin:
          os << ind << acc << " = " << v << " < " << acc << " ? " << v << " : " << acc << ";\n";
          if (fl) os << ind << "nan" << s.acc << " |= (" << v << " != " << v << ");\n";
          break;
        case ReduceOp::kAny:
          os << ind << acc << " |= (" << v << " != 0);\n";
          break;
        case ReduceOp::kAll:
          os << ind << acc << " &= (" << v << " != 0);\n";
          break;
      }
      continue;
    }
    if (!p.buffers[static_cast<size_t>(s.buffer)].local)
      os << ind << body.ptr(s.buffer) << "[" << s.index.str()
         << "] = " << body.store_code(s.buffer, v) << ";\n";
    body.forward(s.buffer, s.index, v);
  }
}

/// Declarations of the accumulators of `stmts` and the omp simd reduction clauses.
std::string acc_decls(const std::vector<Stmt>& stmts, const std::string& ind,
                      std::string& clauses) {
  std::string out;
  for (const Stmt& s : stmts) {
    if (s.kind != Stmt::Kind::kReduce) continue;
    if (is_complex(s.dtype))  // no omp simd reduction over std::complex
      throw Error("complex reductions are not supported by the CPU code generator",
                  "codegen/cpu", "a real accumulator", dtype_name(s.dtype));
    const bool fl = is_floating(s.dtype);
    const std::string ct = compute_type(s.dtype);
    const std::string acc = "acc" + std::to_string(s.acc);
    out += ind + ct + " " + acc + " = " + acc_init(s.reduce, fl) + ";\n";
    const char* red = s.reduce == ReduceOp::kSum    ? "+"
                      : s.reduce == ReduceOp::kProd ? "*"
                      : s.reduce == ReduceOp::kMax  ? "max"
                      : s.reduce == ReduceOp::kMin  ? "min"
                      : s.reduce == ReduceOp::kAny  ? "|"
                                                    : "&";
    clauses += std::string(" reduction(") + red + ":" + acc + ")";
    if (fl && (s.reduce == ReduceOp::kMax || s.reduce == ReduceOp::kMin)) {
      out += ind + "int nan" + std::to_string(s.acc) + " = 0;\n";
      clauses += " reduction(|:nan" + std::to_string(s.acc) + ")";
    }
  }
  return out;
}

/// After a pass loop: NaN fix-up, store and forwarding of each reduction result.
void finish_reductions(Body& body, const Program& p, const std::vector<Stmt>& stmts,
                       const std::string& ind, std::ostringstream& os) {
  for (const Stmt& s : stmts) {
    if (s.kind != Stmt::Kind::kReduce) continue;
    const std::string acc = "acc" + std::to_string(s.acc);
    if (is_floating(s.dtype) && (s.reduce == ReduceOp::kMax || s.reduce == ReduceOp::kMin))
      os << ind << "if (nan" << s.acc << ") " << acc << " = NAN;\n";
    if (!p.buffers[static_cast<size_t>(s.buffer)].local)
      os << ind << body.ptr(s.buffer) << "[" << s.index.str()
         << "] = " << body.store_code(s.buffer, acc) << ";\n";
    body.forward(s.buffer, s.index, acc);
  }
}

}  // namespace

std::string emit_loop_kernel(const Program& p, const LoopKernel& k, const CpuCodegenOptions& o) {
  std::ostringstream body_os;
  Body body(p, body_os);
  body.push();
  const size_t no = k.outer.size(), ni = k.inner.size();
  const std::string ind1 = "    ";
  // Pure pointwise work over a long (or symbolic) inner dim is split into chunks of the inner
  // dim too, so that a few long rows still spread over the threads.
  constexpr int64_t kChunk = 2048;
  bool chunked = k.passes.size() == 1 && k.passes[0].pre.empty() && k.passes[0].post.empty() &&
                 ni == 1 && (!k.inner[0].is_constant() || k.inner[0].constant() >= 2 * kChunk);
  if (chunked)
    for (const Stmt& st : k.passes[0].loop) chunked = chunked && st.kind == Stmt::Kind::kStore;
  SymInt outer_stride(1);
  std::vector<std::string> outer_strides(no);
  for (size_t d = no; d-- > 0;) {
    outer_strides[d] = outer_stride.str();
    outer_stride = outer_stride * k.outer[d];
  }
  if (chunked) {
    body_os << ind1 << "const int64_t lin = it / nchunk;\n";
    body_os << ind1 << "const int64_t c0 = (it - lin * nchunk) * " << kChunk << ";\n";
    body_os << ind1 << "const int64_t c1 = c0 + " << kChunk << " < R ? c0 + " << kChunk
            << " : R;\n";
    for (size_t d = 0; d < no; ++d) {
      std::string e = "lin";
      if (outer_strides[d] != "1") e = "(" + e + " / (" + outer_strides[d] + "))";
      if (d > 0) e = "(" + e + " % (" + k.outer[d].str() + "))";
      body_os << ind1 << "const int64_t o" << d << " = " << e << ";\n";
    }
  }
  // odometer over the outer indices of this chunk
  std::ostringstream pre;
  if (no > 0 && !chunked) {
    SymInt stride(1);
    std::vector<std::string> strides(no);
    for (size_t d = no; d-- > 0;) {
      strides[d] = stride.str();
      stride = stride * k.outer[d];
    }
    for (size_t d = 0; d < no; ++d) {
      std::string e = "begin";
      if (strides[d] != "1") e = "(" + e + " / (" + strides[d] + "))";
      if (d > 0) e = "(" + e + " % (" + k.outer[d].str() + "))";
      pre << "  int64_t o" << d << " = " << e << ";\n";
    }
  }
  // passes
  std::string ind = ind1;
  for (const auto& pass : k.passes) {
    emit_stmts(body, p, pass.pre, ind, body_os);
    if (!pass.loop.empty()) {
      std::string clauses;
      body_os << acc_decls(pass.loop, ind, clauses);
      std::string lind = ind;
      for (size_t d = 0; d < ni; ++d) {
        if (d + 1 == ni) body_os << lind << "#pragma omp simd" << clauses << "\n";
        if (chunked)
          body_os << lind << "for (int64_t r0 = c0; r0 < c1; ++r0) {\n";
        else
          body_os << lind << "for (int64_t r" << d << " = 0; r" << d << " < " << k.inner[d].str()
                  << "; ++r" << d << ") {\n";
        lind += "  ";
      }
      if (ni == 0) {
        body_os << lind << "{\n";
        lind += "  ";
      }
      body.push();
      emit_stmts(body, p, pass.loop, lind, body_os);
      body.pop();
      for (size_t d = 0; d < std::max<size_t>(ni, 1); ++d) {
        lind.resize(lind.size() - 2);
        body_os << lind << "}\n";
      }
      finish_reductions(body, p, pass.loop, ind, body_os);
    }
    emit_stmts(body, p, pass.post, ind, body_os);
  }
  body.pop();
  // odometer increment
  std::ostringstream inc;
  if (no > 0 && !chunked) {
    inc << ind1 << "if (++o" << no - 1 << " == " << k.outer[no - 1].str() << ") {\n";
    std::string ii = ind1 + "  ";
    inc << ii << "o" << no - 1 << " = 0;\n";
    for (size_t d = no - 1; d-- > 0;) {
      inc << ii << "if (++o" << d << " == " << k.outer[d].str() << ") {\n";
      ii += "  ";
      inc << ii << "o" << d << " = 0;\n";
    }
    for (size_t d = 0; d < no; ++d) {
      ii.resize(ii.size() - 2);
      inc << ii << "}\n";
    }
  }
  // pointers of the buffers the body touches
  std::set<int> roots;
  for (const auto& pass : k.passes)
    for (const auto* list : {&pass.pre, &pass.loop, &pass.post})
      for (const Stmt& s : *list) {
        if (!p.buffers[static_cast<size_t>(s.buffer)].local) roots.insert(body.root(s.buffer));
        std::vector<int> loads;
        p.exprs.loads(s.expr, loads);
        for (int l : loads) {
          const int b = p.exprs.at(l).buffer;
          if (!p.buffers[static_cast<size_t>(b)].local) roots.insert(body.root(b));
        }
      }
  std::ostringstream ptrs;
  for (int b : roots) {
    const std::string st = storage_type(p.buffers[static_cast<size_t>(b)].dtype);
    ptrs << "  " << st << "* __restrict p" << b << " = reinterpret_cast<" << st << "*>("
         << buffer_base(p, b) << ");  // " << p.buffers[static_cast<size_t>(b)].name << "\n";
  }
  SymInt outer_n(1), inner_n(1);
  for (const auto& s : k.outer) outer_n = outer_n * s;
  for (const auto& s : k.inner) inner_n = inner_n * s;
  std::ostringstream fn;
  std::string nodes;
  for (size_t i = 0; i < k.nodes.size(); ++i) nodes += (i ? ", " : "") + k.nodes[i];
  fn << "// " << k.name << ": " << nodes << "\n";
  fn << "static void " << k.name << "_chunk(void* ctx, int64_t begin, int64_t end) {\n";
  fn << "  const RunState& s = *static_cast<const RunState*>(ctx);\n";
  const std::string body_text = ptrs.str() + pre.str() + body_os.str() + inc.str();
  fn << symbol_decls(p, body_text + outer_n.str() + " " + inner_n.str(), "s.sym", "  ");
  fn << ptrs.str() << pre.str();
  if (chunked) {
    fn << "  const int64_t R = " << inner_n.str() << ";\n";
    fn << "  const int64_t nchunk = (R + " << kChunk - 1 << ") / " << kChunk << ";\n";
  }
  fn << "  for (int64_t it = begin; it < end; ++it) {\n";
  fn << body_os.str() << inc.str();
  fn << "  }\n";
  fn << "}\n\n";
  fn << "ANVIL_HIDDEN void " << k.name << "(const RunState& s) {\n";
  const std::string sizes_text = outer_n.str() + " " + inner_n.str();
  fn << symbol_decls(p, sizes_text, "s.sym", "  ");
  if (chunked) {
    fn << "  const int64_t R = " << inner_n.str() << ";\n";
    fn << "  const int64_t n_outer = " << outer_n.str() << " * ((R + " << kChunk - 1 << ") / "
       << kChunk << ");\n";
    fn << "  if (n_outer <= 0) return;\n";
    fn << "  if (n_outer > 1 && n_outer * " << kChunk << " >= " << o.parallel_min_work << ")\n";
    fn << "    s.api->parallel_for(0, n_outer, 1, " << k.name
       << "_chunk, const_cast<RunState*>(&s));\n";
    fn << "  else\n";
    fn << "    " << k.name << "_chunk(const_cast<RunState*>(&s), 0, n_outer);\n";
    fn << "}\n";
    return fn.str();
  }
  fn << "  const int64_t n_outer = " << outer_n.str() << ";\n";
  fn << "  if (n_outer <= 0) return;\n";
  fn << "  const int64_t inner = " << inner_n.str() << " > 1 ? " << inner_n.str() << " : 1;\n";
  fn << "  if (n_outer > 1 && n_outer * inner >= " << o.parallel_min_work << ") {\n";
  fn << "    const int64_t grain = " << o.parallel_min_work / 8 << " / inner > 1 ? "
     << o.parallel_min_work / 8 << " / inner : 1;\n";
  fn << "    s.api->parallel_for(0, n_outer, grain, " << k.name
     << "_chunk, const_cast<RunState*>(&s));\n";
  fn << "  } else {\n";
  fn << "    " << k.name << "_chunk(const_cast<RunState*>(&s), 0, n_outer);\n";
  fn << "  }\n";
  fn << "}\n";
  return fn.str();
}

}  // namespace anvil::codegen::cpu
