// CUDA C++ for loop kernels and GEMM steps (codegen/cuda/emit_cuda.h). The expressions come from
// the shared C-family emitter (codegen/c_expr.h); what is CUDA's own is the mapping of the loop
// nest onto threads and blocks and the launches on the run's stream.
#include "codegen/cuda/emit_cuda.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "codegen/c_expr.h"
#include "codegen/cpu/emit_cpu.h"  // buffer_base, symbol_decls: target-neutral RunState text
#include "codegen/gemm/cuda_skinny.h"
#include "codegen/gemm/cutlass_candidates.h"
#include "codegen/gemm/gemm_epilogue.h"
#include "codegen/text_util.h"
#include "core/env_switch.h"
#include "core/error.h"

namespace anvil::codegen::cuda {

namespace {

using cpu::buffer_base;
using cpu::symbol_decls;
using passes::GemmOperand;
using passes::GemmStep;
using passes::LoopKernel;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

}  // namespace

/// "const int64_t o0 = ...;" for the dims `sizes` of linear index `lin` (prefix "o" or "r").
std::string decompose(const std::vector<SymInt>& sizes, const std::string& lin,
                      const std::string& prefix, const std::string& ind) {
  std::ostringstream os;
  const size_t n = sizes.size();
  SymInt stride(1);
  std::vector<std::string> strides(n);
  for (size_t d = n; d-- > 0;) {
    strides[d] = stride.str();
    stride = stride * sizes[d];
  }
  for (size_t d = 0; d < n; ++d) {
    std::string e = lin;
    if (strides[d] != "1") e = "(" + e + " / (" + strides[d] + "))";
    if (d > 0) e = "(" + e + " % (" + sizes[d].str() + "))";
    os << ind << "const int64_t " << prefix << d << " = " << e << ";\n";
  }
  return os.str();
}

namespace {

bool has_reduce(const std::vector<passes::Stmt>& stmts) {
  return std::any_of(stmts.begin(), stmts.end(),
                     [](const passes::Stmt& s) { return s.kind == passes::Stmt::Kind::kReduce; });
}

}  // namespace

int pdl_mode() {
  const char* v = std::getenv("ANVIL_CUDA_PDL");
  const std::string mode = v ? v : "";
  if (mode.empty() || mode == "1") return 1;
  if (mode == "0") return 0;
  if (mode == "2") return 2;
  throw Error("ANVIL_CUDA_PDL names no launch mode", "codegen (cuda)",
              "0 (plain launches), 1 (programmatic launches, the default) or 2 (programmatic, "
              "each kernel letting the next be scheduled at its start)",
              mode);
}

std::string pdl_prologue() {
  switch (pdl_mode()) {
    case 0:
      return "";
    case 1:
      return "  anvil_grid_wait();\n";
    default:
      return "  anvil_grid_wait();\n  anvil_grid_trigger();\n";
  }
}

/// `__global__ void NAME(Syms<n> sy, T* __restrict__ p<root>...) {` with the symbol
/// declarations `text` needs.
std::string kernel_head(const passes::Program& p, const std::set<int>& roots,
                        const std::string& name, int threads, const std::string& text) {
  std::ostringstream fn;
  fn << "__global__ void __launch_bounds__(" << threads << ") " << name << "(Syms<"
     << kernel_sym_count(p) << "> sy";
  for (int b : roots) {
    const std::string st = storage_type(p.buffers[static_cast<size_t>(b)].dtype, Dialect::kCuda);
    fn << ", " << st << "* __restrict__ p" << b;
  }
  fn << ") {\n" << pdl_prologue() << kernel_symbol_decls(p, text, "  ");
  return fn.str();
}

/// `NAME<<<grid, threads, 0, stream>>>(sy, bases...);` and its launch check.
std::string kernel_launch(const passes::Program& p, const std::set<int>& roots,
                          const std::string& kernel, const std::string& step,
                          const std::string& grid, int threads, const std::string& ind) {
  std::ostringstream launch;
  if (pdl_mode() > 0)
    launch << ind << "anvil_launch(s, " << kernel << ", " << grid << ", " << threads << ", sy";
  else
    launch << ind << kernel << "<<<" << grid << ", " << threads
           << ", 0, static_cast<cudaStream_t>(s.stream)>>>(sy";
  for (int b : roots) {
    const std::string st = storage_type(p.buffers[static_cast<size_t>(b)].dtype, Dialect::kCuda);
    launch << ",\n" << ind << "    reinterpret_cast<" << st << "*>(" << buffer_base(p, b) << ")";
  }
  launch << ");\n" << ind << "anvil_launch_check(s, \"" << step << "\");\n";
  return launch.str();
}

std::string emit_loop_kernel(const passes::Program& p, const LoopKernel& k) {
  SymInt outer_n(1), inner_n(1);
  for (const auto& s : k.outer) outer_n = outer_n * s;
  for (const auto& s : k.inner) inner_n = inner_n * s;
  const bool pointwise = k.passes.size() == 1 && k.passes[0].pre.empty() &&
                         k.passes[0].post.empty() && !has_reduce(k.passes[0].loop);
  const std::set<int> roots = kernel_roots(p, k);
  const std::string sizes_text = outer_n.str() + " " + inner_n.str();
  std::ostringstream fn, launch;
  fn << "// " << k.name << ": " << join(k.nodes) << "\n";
  launch << "  const int64_t n_outer = " << outer_n.str() << ", n_inner = " << inner_n.str()
         << ";\n";
  if (pointwise) {
    const int threads = 256;
    std::ostringstream body_os;
    Body body(p, body_os, Dialect::kCuda);
    body.push();
    const std::string ind = "    ";
    body_os << ind << "const int64_t lin = idx / (" << inner_n.str() << ");\n";
    body_os << ind << "const int64_t rr = idx - lin * (" << inner_n.str() << ");\n";
    body_os << ind << "(void)rr;\n";
    body_os << decompose(k.outer, "lin", "o", ind) << decompose(k.inner, "rr", "r", ind);
    emit_stmts(body, p, k.passes[0].loop, ind, body_os);
    body.pop();
    const std::string text = body_os.str();
    fn << kernel_head(p, roots, k.name + "_kernel", threads, text + sizes_text);
    fn << "  const int64_t total = (" << outer_n.str() << ") * (" << inner_n.str() << ");\n";
    fn << "  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; "
          "idx < total;\n       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {\n";
    fn << text << "  }\n}\n\n";
    // the vectorized form (emit_cuda_vector.cpp), launched when its operands are aligned
    const VectorKernel vk = emit_vector_kernel(p, k);
    fn << vk.kernel_text;
    launch << "  if (n_outer <= 0 || n_inner <= 0) return;\n" << kernel_syms_fill(p);
    if (vk.width > 0)
      launch << "  if (" << vk.align_check << ") {\n"
             << kernel_launch(p, roots, k.name + "_kernel_v", k.name,
                              "anvil_blocks(n_outer * n_inner / " + std::to_string(vk.width) +
                                  ", 256)",
                              256, "    ")
             << "    return;\n  }\n";
    launch << kernel_launch(p, roots, k.name + "_kernel", k.name,
                            "anvil_blocks(n_outer * n_inner, " + std::to_string(threads) + ")",
                            threads, "  ");
  } else {  // emit_cuda_rows.cpp
    const RowKernels rk = emit_row_kernels(p, k);
    fn << rk.kernels;
    launch << "  if (n_outer <= 0) return;\n  (void)n_inner;\n" << kernel_syms_fill(p)
           << rk.launch;
  }
  // host launcher
  fn << "ANVIL_HIDDEN void " << k.name << "(const RunState& s) {\n";
  fn << symbol_decls(p, launch.str(), "s.sym", "  ") << launch.str() << "}\n";
  return fn.str();
}

namespace {

/// "(T*)base + offset + sum(b_d * stride_d)" over the outer batch dims (all but the last).
std::string operand_ptr(const passes::Program& p, const GemmOperand& o, const std::string& st,
                        size_t outer_dims) {
  std::string e =
      "reinterpret_cast<" + st + "*>(" + buffer_base(p, o.buffer) + ") + (" + o.offset.str() + ")";
  for (size_t d = 0; d < outer_dims && d < o.batch_strides.size(); ++d)
    if (!(o.batch_strides[d] == SymInt(0)))
      e += " + b" + std::to_string(d) + " * (" + o.batch_strides[d].str() + ")";
  return e;
}

std::string last_stride(const GemmOperand& o, size_t nb) {
  return nb == 0 || o.batch_strides.size() < nb ? "0" : "(" + o.batch_strides[nb - 1].str() + ")";
}

}  // namespace

namespace {

/// The allow_tf32 argument of a GEMM of `dtype`: for float32, the backend's 3xTF32 kernel where
/// it takes the problem (anvil_device.h ANVIL_FP32_3XTF32; a backend before device ABI 9 gets
/// 0), unless ANVIL_CUDA_FAST_FP32=0 when the package is generated; else 0 (TF32 off).
std::string fp32_mode(DType dtype) {
  if (dtype != DType::kFloat32 || !env_switch("ANVIL_CUDA_FAST_FP32", true)) return "0";
  return "(dev->abi_version >= 9 ? ANVIL_FP32_3XTF32 : 0)";
}

/// The body of a GEMM step as one cuBLASLt call through gemm_ex (batch.size() <= 1): with the
/// fused epilogue `f` (null: none), running the heuristic's `algo`-th algorithm (the tuner's
/// cublaslt_heuristic_N); with an epilogue cuBLASLt cannot fuse here, the plain GEMM then the
/// epilogue's own kernel.
std::string gemm_ex_body(const passes::Program& p, const GemmStep& g, const FusedEpilogue* fp,
                         const std::string& st, int algo) {
  const size_t nb = g.batch.size();
  const FusedEpilogue none{};
  const FusedEpilogue& f = fp ? *fp : none;
  char alpha[64], beta[64];
  std::snprintf(alpha, sizeof alpha, "%.9g", g.alpha);
  std::snprintf(beta, sizeof beta, "%.9g", f.residual >= 0 ? f.beta : 0.0);
  const auto ptr = [&](int buffer, const SymInt& offset) {
    return "reinterpret_cast<" + st + "*>(" + buffer_base(p, buffer) + ") + (" + offset.str() + ")";
  };
  std::ostringstream b;
  b << "  AnvilGemmArgs ga{};\n";
  b << "  ga.struct_size = sizeof ga;\n";
  b << "  ga.dtype = " << static_cast<int>(g.dtype) << ";\n";
  b << "  ga.trans_a = " << (g.a.trans ? 1 : 0) << ";\n";
  b << "  ga.trans_b = " << (g.b.trans ? 1 : 0) << ";\n";
  b << "  ga.m = m;\n  ga.n = n;\n  ga.k = k;\n";
  b << "  ga.alpha = static_cast<float>(" << alpha << ");\n";
  b << "  ga.beta = static_cast<float>(" << beta << ");\n";
  b << "  ga.a = " << operand_ptr(p, g.a, st, 0) << ";\n";
  b << "  ga.lda = " << g.a.ld.str() << ";\n  ga.stride_a = " << last_stride(g.a, nb) << ";\n";
  b << "  ga.b = " << operand_ptr(p, g.b, st, 0) << ";\n";
  b << "  ga.ldb = " << g.b.ld.str() << ";\n  ga.stride_b = " << last_stride(g.b, nb) << ";\n";
  if (f.residual >= 0) {  // laid out as the result
    b << "  ga.c = " << ptr(f.residual, f.residual_offset) << ";  // residual\n";
    b << "  ga.ldc = " << g.c.ld.str() << ";\n  ga.stride_c = " << last_stride(g.c, nb) << ";\n";
  }
  b << "  ga.d = " << operand_ptr(p, g.c, st, 0) << ";\n";
  b << "  ga.ldd = " << g.c.ld.str() << ";\n  ga.stride_d = " << last_stride(g.c, nb) << ";\n";
  b << "  ga.batch = batch;\n";
  b << "  ga.epilogue = " << (fp ? epilogue_macro(f.kind) : "ANVIL_EPILOGUE_NONE") << ";\n";
  if (f.bias >= 0) b << "  ga.bias = " << ptr(f.bias, f.bias_offset) << ";\n";
  b << "  ga.allow_tf32 = " << fp32_mode(g.dtype) << ";\n";
  if (algo > 0)
    b << "  ga.algo_index = " << algo << ";  // the tuner's: the heuristic's algorithm " << algo
      << "\n";
  b << "  int rc = dev->gemm_ex(device, s.stream, &ga);\n";
  if (fp) {
    b << "  if (rc == ANVIL_GEMM_NOT_FUSED) {  // cuBLASLt has no fused kernel for it here\n";
    b << "    rc = dev->gemm(device, s.stream, ga.dtype, ga.trans_a, ga.trans_b, m, n, k, "
         "ga.alpha, ga.a,\n                  ga.lda, ga.stride_a, ga.b, ga.ldb, ga.stride_b, "
         "ga.d, ga.ldd, ga.stride_d, batch,\n                  ANVIL_EPILOGUE_NONE, nullptr, "
         "ga.allow_tf32);\n";
    b << "    if (rc == 0) " << f.fallback.name << "(s);\n";
    b << "  }\n";
  }
  b << "  if (rc != 0) {\n    s.api->set_error(s.run_ctx, dev->last_error());\n    return rc;\n"
       "  }\n";
  return b.str();
}

}  // namespace

/// The body of a GEMM step on cuBLASLt without an epilogue: dev->gemm per outer batch index.
static std::string plain_gemm_body(const passes::Program& p, const GemmStep& g,
                                   const std::string& st) {
  const size_t nb = g.batch.size();
  const size_t outer = nb > 0 ? nb - 1 : 0;
  std::ostringstream b;
  std::string ind = "  ";
  for (size_t d = 0; d < outer; ++d) {
    b << ind << "for (int64_t b" << d << " = 0; b" << d << " < " << g.batch[d].str() << "; ++b"
    << d << ") {\n";
    ind += "  ";
  }
  char alpha[64];
  std::snprintf(alpha, sizeof alpha, "%.9g", g.alpha);
  b << ind << "const int rc = dev->gemm(device, s.stream, " << static_cast<int>(g.dtype)
    << ", " << (g.a.trans ? 1 : 0) << ", " << (g.b.trans ? 1 : 0)
    << ", m, n, k, static_cast<float>(" << alpha << "),\n"
    << ind << "    " << operand_ptr(p, g.a, st, outer) << ", " << g.a.ld.str() << ", "
    << last_stride(g.a, nb) << ",\n"
    << ind << "    " << operand_ptr(p, g.b, st, outer) << ", " << g.b.ld.str() << ", "
    << last_stride(g.b, nb) << ",\n"
    << ind << "    " << operand_ptr(p, g.c, st, outer) << ", " << g.c.ld.str() << ", "
    << last_stride(g.c, nb) << ", batch, ANVIL_EPILOGUE_NONE, nullptr, " << fp32_mode(g.dtype)
    << ");\n";
  b << ind << "if (rc != 0) {\n"
    << ind << "  s.api->set_error(s.run_ctx, dev->last_error());\n"
    << ind << "  return rc;\n"
    << ind << "}\n";
  for (size_t d = 0; d < outer; ++d) {
    ind.resize(ind.size() - 2);
    b << ind << "}\n";
  }
  return b.str();
}

/// The body of a GEMM step that runs the autotuner's CUTLASS kernel `ch` (a gemm_kernel_N.cu of
/// the package; no batch dims), with the bias and activation of `fused` applied in its store when
/// set (chosen_kernel_fuses): its workspace is the stream's (device ABI 4).
/// anvil's own kernels (`own`, cuda_skinny.h) and CUTLASS's fast_f32 ones may refuse a call (a
/// GPU not of compute capability 9.x, an operand that lost its alignment): the step then goes
/// on to cuBLASLt, in a block of its own.
std::string chosen_gemm_body(const passes::Program& p, const GemmStep& g,
                             const passes::GemmKernelChoice& ch, const std::string& st,
                             const FusedEpilogue* fused, bool own) {
  const std::string& e = ch.entry;
  char alpha[64];
  std::snprintf(alpha, sizeof alpha, "%.9g", g.alpha);
  std::ostringstream b;
  if (own) b << "  {  // " << ch.name << ", else cuBLASLt below\n";
  // a mixed GEMM's B is stored as its own dtype (int8), converted in the kernel
  const DType bt = g.b_dtype.value_or(g.dtype);
  b << "  AnvilGemmCall call{};\n";
  if (g.b_dtype)
    b << "  call.a_dtype = call.c_dtype = " << static_cast<int>(g.dtype)
      << "; call.b_dtype = " << static_cast<int>(bt) << ";  // mixed: " << dtype_name(bt)
      << " B converted in the kernel\n";
  else
    b << "  call.a_dtype = call.b_dtype = call.c_dtype = " << static_cast<int>(g.dtype) << ";\n";
  b << "  call.trans_a = " << (g.a.trans ? 1 : 0) << "; call.trans_b = " << (g.b.trans ? 1 : 0)
    << ";\n";
  b << "  call.m = m; call.n = n; call.k = k;\n";
  b << "  call.a = " << operand_ptr(p, g.a, st, 0) << "; call.lda = " << g.a.ld.str() << ";\n";
  b << "  call.b = " << operand_ptr(p, g.b, storage_type(bt), 0) << "; call.ldb = "
    << g.b.ld.str() << ";\n";
  b << "  call.c = " << operand_ptr(p, g.c, st, 0) << "; call.ldc = " << g.c.ld.str() << ";\n";
  b << "  call.alpha = static_cast<float>(" << alpha << ");";
  if (fused && fused->residual >= 0) {  // a kernel that fuses it (fuses_residual): its C source
    char beta[64];
    std::snprintf(beta, sizeof beta, "%.9g", fused->beta);
    b << " call.beta = static_cast<float>(" << beta << ");\n";
    b << "  call.source = reinterpret_cast<" << st << "*>(" << buffer_base(p, fused->residual)
      << ") + (" << fused->residual_offset.str() << ");  // residual\n";
    b << "  call.ld_source = " << g.c.ld.str() << ";\n";
  } else {
    b << " call.beta = 0.0f;\n";
  }
  if (fused && gemm::epilogue_has_bias(fused->kind))
    b << "  call.bias = reinterpret_cast<" << st << "*>(" << buffer_base(p, fused->bias)
      << ") + (" << fused->bias_offset.str() << ");\n  call.bias_kind = ANVIL_GEMM_BIAS_COL;\n";
  if (fused && gemm::epilogue_has_activation(fused->kind))
    b << "  call.activation = " << gemm::gemm_call_activation(fused->kind) << ";  // "
      << epilogue_macro(fused->kind) << "\n";
  b << "  const size_t ws_bytes = " << e << "_workspace(&call);\n";
  b << "  void* ws = nullptr;\n";
  b << "  if (ws_bytes > 0) {\n";
  b << "    ws = dev->abi_version >= 4 ? dev->workspace(device, s.stream, ws_bytes) : nullptr;\n";
  b << "    if (!ws) {\n      s.api->set_error(s.run_ctx, \"" << g.name
    << ": no workspace for the GEMM kernel (device backend ABI 4 needed)\");\n      return 1;\n    }\n";
  b << "  }\n";
  if (own) {
    b << "  if (" << e << "(&call, ws, ws_bytes, s.stream) == 0) return 0;\n  }\n";
    return b.str();
  }
  b << "  const int rc = " << e << "(&call, ws, ws_bytes, s.stream);\n";
  b << "  if (rc != 0) {\n";
  b << "    char msg[512];\n";
  b << "    snprintf(msg, sizeof msg, \"" << g.name << ": GEMM kernel " << ch.name
    << " refused the call (code %d)\", rc);\n";
  b << "    s.api->set_error(s.run_ctx, msg);\n    return 1;\n  }\n";
  return b.str();
}

std::string emit_gemm(const passes::Program& p, const GemmStep& g, const FusedEpilogue* fused) {
  const std::string st = storage_type(g.dtype);
  const size_t nb = g.batch.size();
  ANVIL_CHECK(!fused || nb <= 1, "emit_gemm", g.name + ": a fused epilogue needs one cuBLASLt call",
              "at most one batch dim", std::to_string(nb));
  std::ostringstream body;
  body << "  const int64_t m = " << g.m.str() << ", n = " << g.n.str() << ", k = " << g.k.str()
       << ";\n";
  body << "  if (m <= 0 || n <= 0) return 0;\n";
  body << "  const AnvilDeviceApi* dev = s.api->device;\n";
  body << "  if (!dev) {\n    s.api->set_error(s.run_ctx, \"" << g.name
       << ": the runtime gave a CUDA package no device backend\");\n    return 1;\n  }\n";
  body << "  int device = 0;\n  cudaGetDevice(&device);\n";
  body << "  const int64_t batch = " << (nb > 0 ? g.batch[nb - 1].str() : std::string("1"))
       << ";\n";
  body << "  if (batch <= 0) return 0;\n";
  const bool chosen = nb == 0 && !g.choice.source.empty();
  const bool own = chosen && gemm::has_library_fallback(g.choice.name);
  const bool bucketed = nb == 0 && !g.buckets.empty();
  if (g.b_dtype && !chosen &&
      (!bucketed || std::any_of(g.buckets.begin(), g.buckets.end(),
                                [](const auto& bk) { return bk.choice.source.empty(); })))
    // the driver lowers it again as a conversion and a GEMM instead
    throw Error("a mixed GEMM step needs a chosen mixed-input kernel", "codegen/cuda " + g.name,
                "a CUTLASS mixed_mm kernel from the autotuner",
                std::string(dtype_name(*g.b_dtype)) + " B without one (cuBLASLt takes one dtype)");
  // cuBLASLt's call: with the fused epilogue or the tuner's algorithm (gemm_ex), or plain
  auto library_body = [&](const passes::GemmKernelChoice& ch) {
    const int algo = nb <= 1 ? ch.variant : 0;
    return fused || algo > 0 ? gemm_ex_body(p, g, fused, st, algo) : plain_gemm_body(p, g, st);
  };
  if (bucketed) {  // symbolic M: the choice of M's bucket (driver/gemm_buckets.h)
    for (size_t i = 0; i < g.buckets.size(); ++i) {
      const passes::GemmBucket& bk = g.buckets[i];
      const bool last = i + 1 == g.buckets.size();
      body << (i == 0 ? "  " : "  } else ")
           << (last ? std::string("{") : "if (m <= " + std::to_string(bk.m_max) + ") {")
           << "  // m in " << SymRange{bk.m_min, bk.m_max}.str() << ": "
           << (!bk.choice.source.empty() ? bk.choice.name
               : bk.choice.variant > 0     ? "cuBLASLt, " + bk.choice.name
                                           : std::string("cuBLASLt"))
           << "\n";
      body << (bk.choice.source.empty() ? library_body(bk.choice)
                                        : chosen_gemm_body(p, g, bk.choice, st, fused, false));
    }
    body << "  }\n";
  } else if (chosen) {
    body << chosen_gemm_body(p, g, g.choice, st, fused, own);
    // after a refusal of anvil's kernel: a plain GEMM, then the epilogue's own kernel
    if (own) body << plain_gemm_body(p, g, st) << (fused ? "  " + fused->fallback.name + "(s);\n" : "");
  } else {
    body << library_body(g.choice);
  }
  body << "  return 0;\n";
  std::ostringstream fn;
  std::set<std::string> entries;  // the CUTLASS kernels it calls, declared once each
  if (chosen) entries.insert(g.choice.entry);
  if (bucketed)
    for (const passes::GemmBucket& bk : g.buckets)
      if (!bk.choice.source.empty()) entries.insert(bk.choice.entry);
  for (const std::string& e : entries)
    fn << "extern \"C\" int " << e << "(const AnvilGemmCall*, void*, size_t, void*);\n"
       << "extern \"C\" size_t " << e << "_workspace(const AnvilGemmCall*);\n";
  fn << "// " << g.name << ": " << join(g.nodes) << " (" << dtype_name(g.dtype)
     << (chosen                 ? " GEMM, " + g.choice.name
         : bucketed             ? std::string(" GEMM, a kernel per bucket of m")
         : g.choice.variant > 0 ? " GEMM, cuBLASLt, " + g.choice.name
                                : std::string(" GEMM, cuBLASLt"))
     << (own ? " (cuBLASLt where it refuses the call)" : "");
  if (fused) {
    fn << "; epilogue " << epilogue_macro(fused->kind);
    if (fused->residual >= 0) fn << " + residual C";
    fn << " in the GEMM";
    if (!chosen || own) fn << "; unfused: " << fused->fallback.name;
    fn << ")\n";
  } else {
    fn << ")\n";
  }
  fn << "ANVIL_HIDDEN int " << g.name << "(const RunState& s) {\n";
  fn << symbol_decls(p, body.str(), "s.sym", "  ");
  fn << body.str() << "}\n";
  return fn.str();
}

std::string emit_fused_away(const passes::LoopKernel& k, const std::string& gemms) {
  return "// " + k.name + ": " + join(k.nodes) + ": computed in the cuBLASLt epilogue of " + gemms +
         "\nANVIL_HIDDEN void " + k.name + "(const RunState& s) { (void)s; }\n";
}

size_t kernel_sym_count(const passes::Program& p) {
  return std::max<size_t>(1, p.symbols.size() + p.unbacked_symbols.size());
}

std::string kernel_syms_fill(const passes::Program& p) {
  std::ostringstream os;
  os << "  Syms<" << kernel_sym_count(p) << "> sy{};\n";
  if (!p.symbols.empty())
    os << "  for (int i = 0; i < " << p.symbols.size() << "; ++i) sy.v[i] = s.sym[i];\n";
  if (!p.unbacked_symbols.empty())  // set by the item steps run so far
    os << "  for (int i = 0; i < " << p.unbacked_symbols.size() << "; ++i) sy.v["
       << p.symbols.size() << " + i] = s.usym[i];\n";
  return os.str();
}

std::string kernel_symbol_decls(const passes::Program& p, const std::string& text,
                                const std::string& indent) {
  std::string out;
  const size_t n = p.symbols.size();
  for (size_t i = 0; i < n + p.unbacked_symbols.size(); ++i) {
    const std::string& name = i < n ? p.symbols[i] : p.unbacked_symbols[i - n];
    if (contains_word(text, name))
      out += indent + "const int64_t " + name + " = sy.v[" + std::to_string(i) + "];\n";
  }
  return out;
}

std::string unsupported_reason(const passes::Program& p, const passes::Step& step) {
  if (const auto* k = std::get_if<LoopKernel>(&step)) {
    // Complex values compute in cuda::std::complex (pointwise code, as on the CPU); a loop
    // reduction over them is compiled by neither target (the lowering leaves none today).
    for (const auto& pass : k->passes)
      for (const passes::Stmt& s : pass.loop)
        if (s.kind == passes::Stmt::Kind::kReduce && is_complex(s.dtype))
          return str("a reduction of ", dtype_name(s.dtype),
                     " values (complex loop reductions are not compiled)");
    return "";
  }
  if (const auto* g = std::get_if<GemmStep>(&step)) {
    if (g->dtype != DType::kFloat32 && g->dtype != DType::kBFloat16 &&
        g->dtype != DType::kFloat16 && g->dtype != DType::kFloat64)
      return str("a ", dtype_name(g->dtype),
                 " GEMM (cuBLASLt GEMMs take float32, float64, "
                 "bfloat16, float16)");
    return "";
  }
  return extern_unsupported_reason(p, std::get<passes::ExternStep>(step));
}

}  // namespace anvil::codegen::cuda
