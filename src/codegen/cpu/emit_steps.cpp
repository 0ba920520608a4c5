// C++ for GEMM steps (api->sgemm / dgemm per batch; other dtypes through extern mm) and extern
// calls (descriptors + attributes, docs/externs.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "codegen/cpu/emit_cpu.h"
#include "codegen/gemm/gemm_epilogue.h"
#include "core/error.h"
#include "core/half.h"

namespace anvil::codegen::cpu {

namespace {

using passes::ExternStep;
using passes::GemmOperand;
using passes::GemmKernelChoice;
using passes::GemmStep;
using passes::Program;

std::string join_nodes(const std::vector<std::string>& nodes) {
  std::string s;
  for (size_t i = 0; i < nodes.size(); ++i) s += (i ? ", " : "") + nodes[i];
  return s;
}

/// "(T*)base + offset + sum(b_k * stride_k)" for a GEMM operand.
std::string operand_ptr(const Program& p, const GemmOperand& o, const std::string& ct) {
  std::string e =
      "reinterpret_cast<" + ct + "*>(" + buffer_base(p, o.buffer) + ") + (" + o.offset.str() + ")";
  for (size_t d = 0; d < o.batch_strides.size(); ++d)
    if (!(o.batch_strides[d] == SymInt(0)))
      e += " + b" + std::to_string(d) + " * (" + o.batch_strides[d].str() + ")";
  return e;
}

/// Fills AnvilRtTensor `var` for a matrix operand (rows x cols, transposed or not).
std::string matrix_desc(const std::string& var, const std::string& ptr, DType dt,
                        const std::string& rows, const std::string& cols, bool trans,
                        const std::string& ld) {
  std::ostringstream os;
  os << "      AnvilRtTensor " << var << "{};\n";
  os << "      " << var << ".data = const_cast<void*>(static_cast<const void*>(" << ptr << "));\n";
  os << "      " << var << ".dtype = " << static_cast<int>(dt) << ";\n";
  os << "      " << var << ".ndim = 2;\n";
  os << "      " << var << ".sizes[0] = " << rows << ";\n";
  os << "      " << var << ".sizes[1] = " << cols << ";\n";
  os << "      " << var << ".strides[0] = " << (trans ? "1" : ld) << ";\n";
  os << "      " << var << ".strides[1] = " << (trans ? ld : "1") << ";\n";
  return os.str();
}

}  // namespace

/// Whether buffer `buffer` is a constant of the model that no step writes.
static bool is_immutable_constant(const Program& p, int64_t buffer) {
  if (buffer < 0) return false;
  const passes::Buffer& b = p.buffers[static_cast<size_t>(buffer)];
  if (b.kind != passes::BufferKind::kConstant || b.index < 0) return false;
  return !p.constants[static_cast<size_t>(b.index)].is_mutable;
}

bool gemm_b_is_constant(const Program& p, const GemmStep& g) {
  return g.dtype == DType::kFloat32 && is_immutable_constant(p, g.b.buffer);
}

/// A fused epilogue's constant added to every element, as the column bias the kernel adds: a
/// vector of n copies (n static) the function fills once, thread-safely.
static std::string shift_bias(const GemmStep& g, double shift, const std::string& ind) {
  const auto n = g.n.maybe_constant();
  if (!n || *n <= 0)
    throw Error("a GEMM epilogue's constant fused as a bias needs a static n",
                "codegen/cpu " + g.name, "n > 0 known at compile time", g.n.str());
  const std::string st = storage_type(g.dtype);
  char value[96];
  const float f = static_cast<float>(shift);
  if (g.dtype == DType::kBFloat16)
    std::snprintf(value, sizeof value, "0x%04x", static_cast<unsigned>(BFloat16(f).bits));
  else if (g.dtype == DType::kFloat16)
    std::snprintf(value, sizeof value, "0x%04x", static_cast<unsigned>(Half(f).bits));
  else if (g.dtype == DType::kFloat32)
    std::snprintf(value, sizeof value, "static_cast<float>(%.17g)", shift);
  else
    throw Error("a GEMM epilogue's constant fused as a bias needs a float GEMM",
                "codegen/cpu " + g.name, "float32, bfloat16 or float16", dtype_name(g.dtype));
  char comment[64];
  std::snprintf(comment, sizeof comment, "%.9g", shift);
  std::ostringstream os;
  os << ind << "// + " << comment << " on every element: the bias [" << *n << "] of it\n";
  os << ind << "static const " << st << "* const shift_bias = [] {\n";
  os << ind << "  static " << st << " v[" << *n << "];\n";
  os << ind << "  for (int64_t j = 0; j < " << *n << "; ++j) v[j] = " << value << ";\n";
  os << ind << "  return v;\n";
  os << ind << "}();\n";
  os << ind << "call.bias = shift_bias; call.bias_kind = ANVIL_GEMM_BIAS_COL;\n";
  return os.str();
}

/// The call of the autotuner's choice (a library through api->gemm, or a generated template
/// from a gemm_kernel_*.cpp) for one matrix of the batch: a, b, c, m, n, k are in scope.
static std::string emit_chosen_gemm_call(const Program& p, const GemmStep& g,
                                         const GemmKernelChoice& ch, const std::string& ind,
                                         const gemm::FusedEpilogue* fused) {
  const int dt = static_cast<int>(g.dtype);
  char alpha[64];  // a fused epilogue's constant factor scales the product
  std::snprintf(alpha, sizeof alpha, "%.9g", g.alpha * (fused ? fused->scale : 1.0));
  std::ostringstream os;
  os << ind << "AnvilGemmCall call{};\n";
  os << ind << "call.library = " << ch.library << "; call.variant = " << ch.variant << ";\n";
  os << ind << "call.a_dtype = call.b_dtype = call.c_dtype = " << dt << ";\n";
  os << ind << "call.trans_a = " << (g.a.trans ? 1 : 0) << "; call.trans_b = "
     << (g.b.trans ? 1 : 0) << "; call.b_constant = "
     << (is_immutable_constant(p, g.b.buffer) ? 1 : 0)  // any dtype: a template keeps its pack
     << ";\n";
  os << ind << "call.m = m; call.n = n; call.k = k;\n";
  os << ind << "call.a = a; call.lda = " << g.a.ld.str() << "; call.b = b; call.ldb = "
     << g.b.ld.str() << "; call.c = c; call.ldc = " << g.c.ld.str() << ";\n";
  os << ind << "call.alpha = static_cast<float>(" << alpha << "); call.beta = 0.0f;\n";
  if (fused) {  // the epilogue statement this kernel applies (its loop kernel lost it)
    if (fused->bias >= 0)
      os << ind << "call.bias = reinterpret_cast<const " << storage_type(g.dtype) << "*>("
         << buffer_base(p, fused->bias) << ") + (" << fused->bias_offset.str()
         << "); call.bias_kind = ANVIL_GEMM_BIAS_COL;\n";
    else if (fused->has_shift)
      os << shift_bias(g, fused->shift, ind);
    os << ind << "call.activation = " << gemm::gemm_call_activation(fused->kind) << ";\n";
  }
  if (ch.source.empty()) {
    os << ind << "if (s.api->abi_minor_version < 8) {\n";
    os << ind << "  s.api->set_error(s.run_ctx, \"" << g.name << ": this package calls "
       << ch.name << " through AnvilRtApi::gemm (ABI minor 8); the runtime is older\");\n";
    os << ind << "  return 1;\n";
    os << ind << "}\n";
    os << ind << "if (s.api->gemm(s.run_ctx, &call) != 0) return 1;\n";
  } else {
    os << ind << "if (" << ch.entry << "(s.api, s.run_ctx, &call) != 0) {\n";
    os << ind << "  s.api->set_error(s.run_ctx, \"" << g.name << ": GEMM kernel " << ch.name
       << " failed\");\n";
    os << ind << "  return 1;\n";
    os << ind << "}\n";
  }
  return os.str();
}

/// The target's default call of GEMM step `g` for one matrix of the batch (a, b, c, m, n, k in
/// scope): api->sgemm / dgemm (sgemm_const_b for a constant B), else the extern aten.mm.
static std::string emit_default_gemm_call(const Program& p, const GemmStep& g,
                                          const std::string& ind) {
  const bool blas = g.dtype == DType::kFloat32 || g.dtype == DType::kFloat64;
  std::ostringstream os;
  if (blas) {
    const char* fn = g.dtype == DType::kFloat32 ? "sgemm" : "dgemm";
    char alpha[64];
    std::snprintf(alpha, sizeof alpha, "%.17g", g.alpha);
    if (gemm_b_is_constant(p, g))  // packed once by the runtime, then reused
      os << ind << "s.api->sgemm_const_b(s.run_ctx, " << (g.a.trans ? 1 : 0) << ", "
         << (g.b.trans ? 1 : 0) << ", m, n, k, " << alpha << ", a, " << g.a.ld.str() << ", b, "
         << g.b.ld.str() << ", c, " << g.c.ld.str() << ");\n";
    else
      os << ind << "s.api->" << fn << "(" << (g.a.trans ? 1 : 0) << ", "
         << (g.b.trans ? 1 : 0) << ", m, n, k, " << alpha << ", a, " << g.a.ld.str() << ", b, "
         << g.b.ld.str() << ", 0, c, " << g.c.ld.str() << ");\n";
  } else {
    if (g.alpha != 1.0)
      throw Error("GEMM with alpha != 1 is only supported for f32 / f64", "codegen/cpu " + g.name,
                  "alpha 1", std::to_string(g.alpha));
    std::ostringstream d;
    d << matrix_desc("ta", "a", g.dtype, "m", "k", g.a.trans, g.a.ld.str());
    d << matrix_desc("tb", "b", g.dtype, "k", "n", g.b.trans, g.b.ld.str());
    d << matrix_desc("tc", "c", g.dtype, "m", "n", false, g.c.ld.str());
    os << d.str();
    os << ind << "AnvilRtTensor ins[2] = {ta, tb};\n";
    os << ind
       << "const int rc = s.api->extern_call(s.run_ctx, \"aten.mm.default\", ins, 2, "
            "nullptr, 0, &tc, 1);\n";
    os << ind << "if (rc != 0) return rc;\n";
  }
  return os.str();
}

std::string emit_gemm(const Program& p, const GemmStep& g, const gemm::FusedEpilogue* fused) {
  if (g.b_dtype)  // PipelineOptions::mixed_gemm is the CUDA target's (driver/compile.cpp)
    throw Error("the CPU target has no mixed GEMM step", "codegen/cpu " + g.name,
                "A and B of one dtype (a conversion kernel before the GEMM)",
                std::string(dtype_name(g.dtype)) + " A with " + dtype_name(*g.b_dtype) + " B");
  const std::string st = storage_type(g.dtype);
  std::ostringstream body;
  body << "  const int64_t m = " << g.m.str() << ", n = " << g.n.str() << ", k = " << g.k.str()
       << ";\n";
  body << "  if (m <= 0 || n <= 0) return 0;\n";
  std::string ind = "  ";
  for (size_t d = 0; d < g.batch.size(); ++d) {
    body << ind << "for (int64_t b" << d << " = 0; b" << d << " < " << g.batch[d].str() << "; ++b"
         << d << ") {\n";
    ind += "  ";
  }
  body << ind << "{\n";
  body << ind << "  " << st << "* a = " << operand_ptr(p, g.a, st) << ";\n";
  body << ind << "  " << st << "* b = " << operand_ptr(p, g.b, st) << ";\n";
  body << ind << "  " << st << "* c = " << operand_ptr(p, g.c, st) << ";\n";
  body << ind << "  if (k <= 0) {\n";
  body << ind << "    for (int64_t i = 0; i < m; ++i) std::memset(c + i * (" << g.c.ld.str()
       << "), 0, sizeof(" << st << ") * n);\n";
  body << ind << "  } else {\n";
  if (!g.buckets.empty()) {  // symbolic M: the choice of M's bucket (driver/gemm_tune.h)
    for (size_t i = 0; i < g.buckets.size(); ++i) {
      const passes::GemmBucket& bk = g.buckets[i];
      const bool last = i + 1 == g.buckets.size();
      body << ind << (i == 0 ? "    " : "    } else ")
           << (last ? std::string("{") : "if (m <= " + std::to_string(bk.m_max) + ") {")
           << "  // m in " << SymRange{bk.m_min, bk.m_max}.str() << ": "
           << (bk.choice.name.empty() ? std::string("the default path") : bk.choice.name)
           << "\n";
      if (bk.choice.name.empty()) {
        if (fused)
          throw Error("a GEMM epilogue fused into bucketed kernels needs a kernel in every bucket",
                      "codegen/cpu " + g.name, "a chosen kernel for every M bucket",
                      "the default path for m in " + SymRange{bk.m_min, bk.m_max}.str());
        body << emit_default_gemm_call(p, g, ind + "    ");
      } else {
        body << emit_chosen_gemm_call(p, g, bk.choice, ind + "      ", fused);
      }
    }
    body << ind << "    }\n";
  } else if (!g.choice.name.empty()) {
    body << emit_chosen_gemm_call(p, g, g.choice, ind + "    ", fused);
  } else {
    body << emit_default_gemm_call(p, g, ind + "    ");
  }
  body << ind << "  }\n";
  body << ind << "}\n";
  for (size_t d = 0; d < g.batch.size(); ++d) {
    ind.resize(ind.size() - 2);
    body << ind << "}\n";
  }
  body << "  return 0;\n";
  std::ostringstream fn;
  std::vector<std::string> entries;  // the templates it calls, once each
  if (!g.choice.source.empty()) entries.push_back(g.choice.entry);
  for (const passes::GemmBucket& bk : g.buckets)
    if (!bk.choice.source.empty() &&
        std::find(entries.begin(), entries.end(), bk.choice.entry) == entries.end())
      entries.push_back(bk.choice.entry);
  for (const std::string& e : entries)
    fn << "extern \"C\" int " << e
       << "(const AnvilRtApi*, void*, const AnvilGemmCall*);  // gemm_kernel_*.cpp\n";
  fn << "// " << g.name << ": " << join_nodes(g.nodes) << " (" << dtype_name(g.dtype) << " GEMM"
     << (g.choice.name.empty() ? "" : ", kernel " + g.choice.name)
     << (g.buckets.empty() ? "" : ", a kernel per bucket of m")
     << (fused ? std::string(", epilogue ") + gemm::epilogue_macro(fused->kind) +
                     (fused->scale != 1.0 ? " scaled" : "") +
                     (fused->has_shift ? " shifted" : "") + " in its store"
               : "")
     << ")\n";
  fn << "ANVIL_HIDDEN int " << g.name << "(const RunState& s) {\n";
  fn << symbol_decls(p, body.str(), "s.sym", "  ");
  fn << body.str() << "}\n";
  return fn.str();
}

namespace {

/// "anvil.item": the run-time symbol = the tensor's one element; "anvil.assert": fail the run
/// with the assertion's message when its condition over run-time symbols is false.
std::string emit_run_time_symbol_step(const Program& p, const ExternStep& e) {
  std::ostringstream body;
  if (e.target == "anvil.item") {
    const auto* sym = passes::find_attr(e, "symbol");
    const auto& ub = p.unbacked_symbols;
    const auto it = std::find(ub.begin(), ub.end(), sym ? sym->s : "");
    if (!sym || it == ub.end() || e.inputs.size() != 1)
      throw Error("malformed anvil.item step", "codegen/cpu " + e.name);
    const passes::TensorView& v = e.inputs[0];
    body << "  " << storage_type(v.dtype) << " value{};\n";
    body << "  if (anvil_fetch(s, &value, reinterpret_cast<const " << storage_type(v.dtype) << "*>("
         << buffer_base(p, v.buffer) << ") + (" << v.offset.str() << ")) != 0)\n    return 1;\n";
    body << "  s.usym[" << (it - ub.begin()) << "] = static_cast<int64_t>(value);\n";
  } else {
    const auto* cond = passes::find_attr(e, "condition");
    const auto* msg = passes::find_attr(e, "message");
    if (!cond || !msg) throw Error("malformed anvil.assert step", "codegen/cpu " + e.name);
    body << "  if (!(" << cond->s << ")) {\n";
    body << "    s.api->set_error(s.run_ctx, " << quoted(msg->s) << ");\n";
    body << "    return 1;\n  }\n";
  }
  body << "  return 0;\n";
  std::ostringstream fn;
  fn << "// " << e.name << ": " << join_nodes(e.nodes) << " (" << e.target << ")\n";
  fn << "ANVIL_HIDDEN int " << e.name << "(const RunState& s) {\n";
  fn << symbol_decls(p, body.str(), "s.sym", "  ");
  fn << body.str() << "}\n";
  return fn.str();
}

}  // namespace

std::string emit_extern(const Program& p, const ExternStep& e) {
  if (e.target == "anvil.item" || e.target == "anvil.assert") return emit_run_time_symbol_step(p, e);
  std::ostringstream body;
  auto desc = [&](const std::string& arr, size_t i, const passes::TensorView& v) {
    body << rt_tensor_desc(p, arr + "[" + std::to_string(i) + "]", v, "  ", "codegen/cpu " + e.name);
  };
  const size_t ni = e.inputs.size(), no = e.outputs.size();
  // A convolution whose weight is an immutable constant says so (weight_constant = 1): the
  // runtime may keep a copy of the weight in another layout (oneDNN's, runtime/kernels/conv.h).
  const bool conv = e.target == "aten.convolution.default" || e.target == "aten.conv2d.default" ||
                    e.target == "aten.conv1d.default";
  const bool weight_constant = conv && ni >= 2 && is_immutable_constant(p, e.inputs[1].buffer);
  const size_t na = e.attrs.size() + (weight_constant ? 1 : 0);
  body << "  AnvilRtTensor in[" << std::max<size_t>(ni, 1) << "] = {};\n";
  body << "  AnvilRtTensor out[" << std::max<size_t>(no, 1) << "] = {};\n";
  for (size_t i = 0; i < ni; ++i) desc("in", i, e.inputs[i]);
  for (size_t i = 0; i < no; ++i) desc("out", i, e.outputs[i]);
  body << "  AnvilRtScalar at[" << std::max<size_t>(na, 1) << "] = {};\n";
  for (size_t i = 0; i < e.attrs.size(); ++i) {
    const auto& a = e.attrs[i];
    const std::string t = "at[" + std::to_string(i) + "]";
    body << "  " << t << ".name = \"" << a.name << "\";\n";
    body << "  " << t << ".kind = " << a.kind << ";\n";
    if (a.kind == 0) body << "  " << t << ".i = " << a.i.str() << ";\n";
    if (a.kind == 1) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", a.f);
      // Non-finite values (cdist's p = inf) have no literal: spell them with <cmath>'s macros.
      const char* lit = std::isnan(a.f) ? "NAN" : std::isinf(a.f) ? (a.f > 0 ? "HUGE_VAL" : "-HUGE_VAL") : buf;
      body << "  " << t << ".f = " << lit << ";\n";
    }
    if (a.kind == 2) body << "  " << t << ".s = " << quoted(a.s) << ";\n";
    if (a.kind == 3) {
      body << "  const int64_t ints" << i << "[" << std::max<size_t>(a.ints.size(), 1) << "] = {";
      for (size_t k = 0; k < a.ints.size(); ++k) body << (k ? ", " : "") << a.ints[k].str();
      body << "};\n";
      body << "  " << t << ".ints = ints" << i << ";\n";
      body << "  " << t << ".n_ints = " << a.ints.size() << ";\n";
    }
  }
  if (weight_constant) {
    const std::string t = "at[" + std::to_string(e.attrs.size()) + "]";
    body << "  " << t << ".name = \"weight_constant\";\n";
    body << "  " << t << ".kind = 0;\n";
    body << "  " << t << ".i = 1;\n";
  }
  body << "  return s.api->extern_call(s.run_ctx, \"" << e.target << "\", in, " << ni << ", at, "
       << na << ", out, " << no << ");\n";
  std::ostringstream fn;
  fn << "// " << e.name << ": " << join_nodes(e.nodes) << " -> extern " << e.target << "\n";
  fn << "ANVIL_HIDDEN int " << e.name << "(const RunState& s) {\n";
  fn << symbol_decls(p, body.str(), "s.sym", "  ");
  fn << body.str() << "}\n";
  return fn.str();
}

}  // namespace anvil::codegen::cpu
