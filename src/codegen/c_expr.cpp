// The C-family expression emitter (codegen/c_expr.h).
#include "codegen/c_expr.h"

#include <cmath>
#include <cstdio>

namespace anvil::codegen {

const char* complex_ns(Dialect d) { return d == Dialect::kCuda ? "cuda::std::" : "std::"; }

std::string storage_type(DType t, Dialect d) {
  switch (t) {
    case DType::kFloat32:
      return "float";
    case DType::kFloat64:
      return "double";
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kUInt16:
      return "uint16_t";
    case DType::kInt64:
      return "int64_t";
    case DType::kInt32:
      return "int32_t";
    case DType::kInt16:
      return "int16_t";
    case DType::kInt8:
      return "int8_t";
    case DType::kUInt8:
    case DType::kBool:
    case DType::kFloat8E4M3FN:  // float8: the byte, converted by include/anvil/anvil_fp8.h
    case DType::kFloat8E5M2:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2FNUZ:
      return "uint8_t";
    case DType::kComplex32:
      return "anvil_c32";
    case DType::kComplex64:
      return std::string(complex_ns(d)) + "complex<float>";
    case DType::kComplex128:
      return std::string(complex_ns(d)) + "complex<double>";
    default:
      throw Error("dtype not supported by the CPU code generator", "codegen/cpu",
                  "f32, f64, f16, bf16, complex, integers or bool", dtype_name(t));
  }
}

std::string compute_type(DType t, Dialect d) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2FNUZ:
      return "float";
    case DType::kFloat64:
      return "double";
    case DType::kComplex32:
    case DType::kComplex64:
      return std::string(complex_ns(d)) + "complex<float>";
    case DType::kComplex128:
      return std::string(complex_ns(d)) + "complex<double>";
    default:
      return "int64_t";
  }
}

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

std::string run_state_struct() {
  return R"anvil(/// Pointers and symbol values of one run.
struct RunState {
  const AnvilRtApi* api;
  void* run_ctx;
  const int64_t* sym;
  void* const* in;
  void* const* out;
  void* const* cst;
  char* arena;
  int64_t* usym;  // run-time symbols (aten.item), set by item steps during the run
  void* const* dyn;  // buffers allocated during the run (api->run_alloc), by Buffer::dyn_slot
  void* stream;      // AnvilRunArgs::stream (device targets queue their work on it)
};
)anvil";
}

std::string scalar_helpers(const std::string& qualifier, const std::string& math_ns) {
  std::string text = R"anvil(// Index arithmetic with Python semantics (SymInt text uses these names).
@Q@ int64_t FloorDiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
@Q@ int64_t Mod(int64_t a, int64_t b) { return b == 0 ? 0 : a - FloorDiv(a, b) * b; }
@Q@ int64_t Max(int64_t a, int64_t b) { return a > b ? a : b; }
@Q@ int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }
@Q@ int64_t Pow(int64_t b, int64_t e) {
  int64_t r = 1;
  while (e-- > 0) r *= b;
  return r;
}

// 16-bit floats: storage is uint16_t, arithmetic is float.
@Q@ float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  @M@memcpy(&f, &u, 4);
  return f;
}
@Q@ uint16_t f32_to_bf16(float f) {
  uint32_t u;
  @M@memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
@Q@ float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {
      exp = 127 - 15 + 1;
      while (!(man & 0x400u)) {
        man <<= 1;
        --exp;
      }
      man &= 0x3ffu;
      u = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  @M@memcpy(&f, &u, 4);
  return f;
}
@Q@ uint16_t f32_to_f16(float f) {
  uint32_t u;
  @M@memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (absu < 0x38800000u) {
    if (absu < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t exp = absu >> 23, man = (absu & 0x7fffffu) | 0x800000u, shift = 126 - exp;
    uint32_t rem = man & ((1u << shift) - 1u), halfway = 1u << (shift - 1), hm = man >> shift;
    if (rem > halfway || (rem == halfway && (hm & 1u))) ++hm;
    return static_cast<uint16_t>(sign | hm);
  }
  uint32_t h = (((absu >> 23) - 127 + 15) << 10) | ((absu >> 13) & 0x3ffu), rem = absu & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}
@Q@ float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }
@Q@ float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }

// Scalar helpers with the reference kernels' semantics.
template <typename T>
@Q@ T max_nan(T a, T b) { return (a != a || b != b) ? (a != a ? a : b) : (a > b ? a : b); }
template <typename T>
@Q@ T min_nan(T a, T b) { return (a != a || b != b) ? (a != a ? a : b) : (a < b ? a : b); }
template <typename T>
@Q@ T floordiv_f(T a, T b) {
  if (b == 0) return a / b;
  T mod = @M@fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
  if (div == 0) return @M@copysign(T(0), a / b);
  T fl = @M@floor(div);
  if (div - fl > T(0.5)) fl += T(1);
  return fl;
}
@Q@ int64_t floordiv_i(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
@Q@ int64_t truncdiv_i(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  return a / b;
}
@Q@ int64_t int_pow(int64_t base, int64_t exp) {
  if (exp < 0) return base == 1 ? 1 : base == -1 ? ((exp & 1) ? -1 : 1) : 0;
  uint64_t r = 1, b = static_cast<uint64_t>(base);
  while (exp) {
    if (exp & 1) r *= b;
    b *= b;
    exp >>= 1;
  }
  return static_cast<int64_t>(r);
}
@Q@ int64_t f2i(double v) {  // float -> int64 like the reference (x86 semantics)
  return (v >= -9223372036854775808.0 && v < 9223372036854775808.0) ? static_cast<int64_t>(v)
                                                                     : INT64_MIN;
}
@Q@ int64_t f2i32(double v) {
  return (v >= -2147483648.0 && v < 2147483648.0) ? static_cast<int64_t>(static_cast<int32_t>(v))
                                                  : static_cast<int64_t>(INT32_MIN);
}
)anvil";
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"@Q@", qualifier},
                                 std::pair<std::string, std::string>{"@M@", math_ns}})
    for (size_t pos = text.find(from); pos != std::string::npos;
         pos = text.find(from, pos + to.size()))
      text.replace(pos, from.size(), to);
  return text;
}

std::string float8_suffix(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN:
      return "f8e4m3fn";
    case DType::kFloat8E5M2:
      return "f8e5m2";
    case DType::kFloat8E4M3FNUZ:
      return "f8e4m3fnuz";
    case DType::kFloat8E5M2FNUZ:
      return "f8e5m2fnuz";
    default:
      throw Error("internal error: not a float8 dtype", "codegen", "a float8 dtype",
                  dtype_name(t));
  }
}

std::string from_storage(DType t, const std::string& raw) {
  if (is_float8(t)) return "anvil_" + float8_suffix(t) + "_to_f32(" + raw + ")";
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

std::string to_storage(DType t, const std::string& v, Dialect d) {
  if (is_float8(t))
    return "anvil_f32_to_" + float8_suffix(t) + "(static_cast<float>(" + v + "))";
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
      return "static_cast<" + storage_type(t, d) + ">(" + v + ")";
  }
}

std::set<int> kernel_roots(const Program& p, const passes::LoopKernel& k) {
  auto root = [&](int b) {
    for (int guard = 0; p.buffers[static_cast<size_t>(b)].alias_of >= 0 && guard < 64; ++guard)
      b = p.buffers[static_cast<size_t>(b)].alias_of;
    return b;
  };
  std::set<int> roots;
  for (const auto& pass : k.passes)
    for (const auto* list : {&pass.pre, &pass.loop, &pass.post})
      for (const Stmt& s : *list) {
        if (!p.buffers[static_cast<size_t>(s.buffer)].local) roots.insert(root(s.buffer));
        std::vector<int> loads;
        p.exprs.loads(s.expr, loads);
        for (int l : loads) {
          const int b = p.exprs.at(l).buffer;
          if (!p.buffers[static_cast<size_t>(b)].local) roots.insert(root(b));
        }
      }
  return roots;
}

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
                const std::string& ind, std::ostringstream& os, const std::string& store_guard) {
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
      os << ind << store_guard << body.ptr(s.buffer) << "[" << s.index.str()
         << "] = " << body.store_code(s.buffer, v) << ";\n";
    body.forward(s.buffer, s.index, v);
  }
}

/// After a pass loop: NaN fix-up, store and forwarding of each reduction result.
void finish_reductions(Body& body, const Program& p, const std::vector<Stmt>& stmts,
                       const std::string& ind, std::ostringstream& os,
                       const std::string& store_guard) {
  for (const Stmt& s : stmts) {
    if (s.kind != Stmt::Kind::kReduce) continue;
    const std::string acc = "acc" + std::to_string(s.acc);
    if (is_floating(s.dtype) && (s.reduce == ReduceOp::kMax || s.reduce == ReduceOp::kMin))
      os << ind << "if (nan" << s.acc << ") " << acc << " = NAN;\n";
    if (!p.buffers[static_cast<size_t>(s.buffer)].local)
      os << ind << store_guard << body.ptr(s.buffer) << "[" << s.index.str()
         << "] = " << body.store_code(s.buffer, acc) << ";\n";
    body.forward(s.buffer, s.index, acc);
  }
}


}  // namespace anvil::codegen
