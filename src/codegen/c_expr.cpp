// The C-family expression emitter (codegen/c_expr.h).
#include "codegen/c_expr.h"

#include <cmath>
#include <cstdio>

namespace anvil::codegen {

std::string storage_type(DType t) {
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
      return "uint8_t";
    case DType::kComplex32:
      return "anvil_c32";
    case DType::kComplex64:
      return "std::complex<float>";
    case DType::kComplex128:
      return "std::complex<double>";
    default:
      throw Error("dtype not supported by the CPU code generator", "codegen/cpu",
                  "f32, f64, f16, bf16, complex, integers or bool", dtype_name(t));
  }
}

std::string compute_type(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
      return "float";
    case DType::kFloat64:
      return "double";
    case DType::kComplex32:
    case DType::kComplex64:
      return "std::complex<float>";
    case DType::kComplex128:
      return "std::complex<double>";
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
