#include "codegen/gemm/gemm_problem.h"

#include <algorithm>
#include <sstream>

#include "anvil/anvil_device.h"
#include "anvil/anvil_rt.h"
#include "codegen/gemm/cpu_templates.h"
#include "codegen/gemm/cuda_skinny.h"
#include "codegen/gemm/cutlass_candidates.h"
#include "codegen/gemm/gemm_filter.h"
#include "core/env_switch.h"

namespace anvil::codegen::gemm {

namespace {

/// max_alignment of one operand: its matrix (rows x cols, row-major with `ld`, or transposed)
/// and its batch strides; 1 when anything is symbolic.
int operand_alignment(DType dtype, const passes::GemmOperand& o, int64_t rows, int64_t cols) {
  const auto ld = o.ld.maybe_constant();
  const auto offset = o.offset.maybe_constant();
  if (!ld || !offset) return 1;
  std::vector<int64_t> sizes, strides;
  for (const SymInt& s : o.batch_strides) {
    const auto v = s.maybe_constant();
    if (!v) return 1;
    sizes.push_back(2);  // any size: only the strides matter for the batch dims
    strides.push_back(*v == 0 ? *ld : *v);
  }
  sizes.push_back(o.trans ? cols : rows);
  sizes.push_back(o.trans ? rows : cols);
  strides.push_back(*ld);
  strides.push_back(1);
  return std::max(1, max_alignment(dtype, sizes, strides, *offset));
}

bool b_is_constant(const passes::Program& p, const passes::GemmStep& g) {
  if (g.b.buffer < 0) return false;
  const passes::Buffer& b = p.buffers[static_cast<size_t>(g.b.buffer)];
  if (b.kind != passes::BufferKind::kConstant || b.index < 0) return false;
  return !p.constants[static_cast<size_t>(b.index)].is_mutable;
}

GemmCandidate library(const std::string& name, GemmBackend backend, int lib, int variant) {
  GemmCandidate c;
  c.name = name;
  c.backend = backend;
  c.library = lib;
  c.variant = variant;
  return c;
}

/// The CPU libraries' candidates for `p` (the runtime's AnvilRtApi::gemm libraries).
void cpu_library_candidates(const GemmProblem& p, const GemmOptions& o,
                            const std::vector<std::string>& features,
                            std::vector<GemmCandidate>& out) {
  const bool f32 = p.a_dtype == DType::kFloat32 && p.b_dtype == DType::kFloat32 &&
                   p.out_dtype == DType::kFloat32;
  const bool f64 = p.a_dtype == DType::kFloat64 && p.b_dtype == DType::kFloat64 &&
                   p.out_dtype == DType::kFloat64;
  if (backend_enabled(o, GemmBackend::kOpenBlas) && (f32 || f64))
    out.push_back(library(f32 ? "openblas_sgemm" : "openblas_dgemm", GemmBackend::kOpenBlas,
                          ANVIL_GEMM_LIB_OPENBLAS, 0));
  // anvil's packed-B kernel (runtime/kernels/gemm_packed.h): fp32, beta 0; counted as "own".
  // It applies a column bias and every activation in its store (GemmAct).
  if (backend_enabled(o, GemmBackend::kOwn) && f32 && p.beta == 0.0) {
    if (has_cpu_features(features, {"avx512f"})) {
      out.push_back(library("own_packed_f32_avx512", GemmBackend::kOwn, ANVIL_GEMM_LIB_PACKED, 3));
      out.back().fuses_bias = out.back().fuses_activation = true;
    }
    if (has_cpu_features(features, {"avx2", "fma"})) {
      out.push_back(library("own_packed_f32_avx2", GemmBackend::kOwn, ANVIL_GEMM_LIB_PACKED, 2));
      out.back().fuses_bias = out.back().fuses_activation = true;
    }
  }
  if (backend_enabled(o, GemmBackend::kOneDnn)) {
    const DType a = p.a_dtype;
    const bool same = p.b_dtype == a;
    if (same && (a == DType::kFloat32 || a == DType::kBFloat16 || a == DType::kFloat16)) {
      out.push_back(library(std::string("onednn_") + dtype_name(a) + "_" +
                                dtype_name(p.out_dtype),
                            GemmBackend::kOneDnn, ANVIL_GEMM_LIB_ONEDNN, 0));
      out.back().fuses_bias = out.back().fuses_activation = true;  // oneDNN post-ops
    }
    if (same && a == DType::kInt8 && p.out_dtype == DType::kInt32)
      out.push_back(library("onednn_s8s8s32", GemmBackend::kOneDnn, ANVIL_GEMM_LIB_ONEDNN, 0));
  }
}

}  // namespace

GemmProblem problem_of(const passes::Program& program, const passes::GemmStep& g,
                       const std::string& target, std::optional<int64_t> m_value) {
  GemmProblem p;
  p.op = g.batch.empty() ? GemmOp::kMm : GemmOp::kBmm;
  p.m = g.m.maybe_constant();
  const bool posed_m = !p.m && m_value;  // a symbolic M posed at one of its values
  if (posed_m) p.m = m_value;
  p.n = g.n.maybe_constant();
  p.k = g.k.maybe_constant();
  for (const SymInt& b : g.batch) {
    const auto v = b.maybe_constant();
    if (!v) {
      p.m.reset();  // a symbolic batch makes the problem symbolic
      break;
    }
    p.batch *= *v;
  }
  p.a_dtype = p.b_dtype = p.out_dtype = g.dtype;
  p.acc_dtype = g.dtype == DType::kFloat64 ? DType::kFloat64
                : g.dtype == DType::kInt8   ? DType::kInt32
                                            : DType::kFloat32;
  if (g.dtype == DType::kInt8) p.out_dtype = DType::kInt32;
  if (g.b_dtype) {  // mixed: B's own dtype, converted in the kernel (B.4.5: A's accumulator)
    p.op = GemmOp::kMixedMm;
    p.b_dtype = *g.b_dtype;
  }
  p.trans_a = g.a.trans;
  p.trans_b = g.b.trans;
  // a leading dim that is M itself takes M's posed value
  auto ld_of = [&](const SymInt& ld) {
    return posed_m && ld == g.m ? m_value : ld.maybe_constant();
  };
  p.lda = ld_of(g.a.ld);
  p.ldb = ld_of(g.b.ld);
  p.ldc = ld_of(g.c.ld);
  if (p.is_static()) {
    // with M posed, A's alignment must hold for every M: none when M is its contiguous dim
    p.align_a = posed_m && g.a.trans ? 1 : operand_alignment(g.dtype, g.a, *p.m, *p.k);
    p.align_b = operand_alignment(p.b_dtype, g.b, *p.k, *p.n);
    p.align_c = operand_alignment(p.out_dtype, g.c, *p.m, *p.n);
  }
  p.b_constant = b_is_constant(program, g);
  p.alpha = g.alpha;
  p.target = target;
  return p;
}

std::string problem_key(const GemmProblem& p) {
  std::ostringstream os;
  auto opt = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "s"; };
  os << gemm_op_name(p.op) << " m" << opt(p.m) << " n" << opt(p.n) << " k" << opt(p.k) << " b"
     << p.batch << " " << dtype_name(p.a_dtype) << "," << dtype_name(p.b_dtype) << "->"
     << dtype_name(p.out_dtype) << " acc " << dtype_name(p.acc_dtype) << " "
     << (p.trans_a ? "T" : "N") << (p.trans_b ? "T" : "N") << " ld " << opt(p.lda) << ","
     << opt(p.ldb) << "," << opt(p.ldc) << " align " << p.align_a << "," << p.align_b << ","
     << p.align_c << (p.b_constant ? " constB" : "") << " bias " << static_cast<int>(p.bias)
     << " act " << static_cast<int>(p.activation) << " alpha " << p.alpha << " beta " << p.beta
     << " target " << p.target;
  return os.str();
}

int template_cap(const GemmOptions& options) {
  if (options.max_profiled > 0) return options.max_profiled;
  return options.mode == AutotuneMode::kMax ? 0 : 4;
}

std::vector<GemmCandidate> gemm_candidates(const GemmProblem& p, const GemmOptions& options,
                                           const std::vector<std::string>& cpu_features, int sm,
                                           std::vector<std::string>* notes) {
  std::vector<GemmCandidate> all;
  if (sm == 0) {
    cpu_library_candidates(p, options, cpu_features, all);
  } else if (backend_enabled(options, GemmBackend::kCublasLt) && p.op != GemmOp::kMixedMm) {
    // cuBLASLt's heuristic choice (the device backend's gemm_ex): what CUDA packages run by
    // default, the yardstick templates must beat; then its next algorithms for the problem
    // (AnvilGemmArgs::algo_index): 3 more in fast mode, all it can name in max. It takes no
    // mixed (int8 B) problem.
    all.push_back(library("cublaslt_heuristic", GemmBackend::kCublasLt, 0, 0));
    const int more = options.mode == AutotuneMode::kMax ? ANVIL_GEMM_ALGOS - 1 : 3;
    for (int v = 1; v <= more; ++v)
      all.push_back(library("cublaslt_heuristic_" + std::to_string(v), GemmBackend::kCublasLt, 0,
                            v));
  }
  std::string why;
  if (!template_eligible(p, options, &why)) {
    if (notes) notes->push_back("no template candidates: " + why);
  } else if (sm == 0 && backend_enabled(options, GemmBackend::kOwn)) {
    for (auto& c : cpu_template_candidates(p, cpu_features)) all.push_back(std::move(c));
  } else if (sm > 0) {
    if (backend_enabled(options, GemmBackend::kOwn))  // anvil's skinny kernel (cuda_skinny.h)
      for (auto& c : skinny_candidates(p, sm)) all.push_back(std::move(c));
    if (backend_enabled(options, GemmBackend::kCutlass)) {
      std::string warning;
      CutlassOptions co;
      co.fast_f32 = env_switch("ANVIL_CUDA_FAST_FP32", true);  // 3xTF32 off: cuBLASLt alone
      for (auto& c : cutlass_candidates_if_available(p, sm, &warning, co))
        all.push_back(std::move(c));
      if (!warning.empty() && notes) notes->push_back(warning);
    }
  }
  return filter_candidates(std::move(all), options, template_cap(options));
}

}  // namespace anvil::codegen::gemm
