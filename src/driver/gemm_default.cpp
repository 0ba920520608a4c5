// GEMM kernels chosen without timing (gemm_default.h).
#include "driver/gemm_default.h"

#include <string>

#include "anvil/anvil_rt.h"  // ANVIL_GEMM_LIB_PACKED
#include "codegen/gemm/cpu_templates.h"
#include "codegen/gemm/cuda_skinny.h"
#include "codegen/gemm/gemm_epilogue.h"
#include "codegen/gemm/gemm_filter.h"
#include "codegen/gemm/gemm_problem.h"
#include "core/env_switch.h"
#include "driver/gemm_tune.h"  // kernel_choice

namespace anvil::driver {

namespace gemm = codegen::gemm;

gemm::CpuTemplateConfig default_bf16_template(bool trans_a, bool trans_b) {
  return {.types = gemm::CpuGemmTypes::kBf16, .isa = gemm::CpuIsa::kAvx512, .mr = 12, .nr = 32,
          .kc = 256, .mc = 144, .nc = 1024, .trans_a = trans_a, .trans_b = trans_b};
}

namespace {

/// The CPU rule (gemm_default.h): the packed kernel with the epilogue in its store, for the
/// fp32 constant-weight GEMMs whose result goes through a bias / activation / constant scale.
int default_cpu_fused_gemms(passes::Program& program, const gemm::GemmOptions& options,
                            const codegen::TargetInfo& target) {
  if (options.mode != gemm::AutotuneMode::kOff) return 0;
  if (!env_switch("ANVIL_CPU_FUSED_GEMM", true)) return 0;
  if (!gemm::backend_enabled(options, gemm::GemmBackend::kOwn)) return 0;
  const gemm::EpiloguePlan epilogues = gemm::match_gemm_epilogues(program, true);
  int chosen = 0;
  for (const auto& [si, f] : epilogues.by_gemm) {
    auto* g = std::get_if<passes::GemmStep>(&program.steps[si]);
    if (!g || !g->choice.name.empty() || !g->buckets.empty() || !g->batch.empty()) continue;
    if (f.residual >= 0 || (f.kind == gemm::GemmEpilogueKind::kNone && f.scale == 1.0)) continue;
    if (f.has_shift && !g->n.maybe_constant()) continue;  // the shift's vector is sized statically
    const gemm::GemmProblem p = gemm::problem_of(program, *g, target.name);
    if (g->dtype != DType::kFloat32 || !p.b_constant || p.beta != 0.0) continue;
    gemm::GemmCandidate c;
    c.name = "own_packed_f32_auto";  // what the default path runs, ISA picked at run time
    c.backend = gemm::GemmBackend::kOwn;
    c.library = ANVIL_GEMM_LIB_PACKED;
    c.variant = 0;
    c.fuses_bias = c.fuses_activation = true;
    auto cands = gemm::filter_candidates({c}, options, 1);
    if (cands.empty()) continue;
    g->choice = kernel_choice(cands.front());
    ++chosen;
  }
  return chosen;
}

/// The bf16 rule (gemm_default.h): anvil's widening AVX-512 template instead of oneDNN.
int default_cpu_bf16_gemms(passes::Program& program, const gemm::GemmOptions& options,
                           const codegen::TargetInfo& target) {
  if (options.mode != gemm::AutotuneMode::kOff) return 0;
  // A native target's features are the building CPU's, AMX included; a named target's list is
  // fixed and says nothing of AMX (where oneDNN's tile kernels win).
  if (target.name != "native") return 0;
  const auto& features = target.cpu_features;
  if (gemm::has_cpu_features(features, {"amx-bf16"}) ||
      !gemm::has_cpu_features(features, {"avx512f"}))
    return 0;
  if (!env_switch("ANVIL_CPU_BF16_TEMPLATE", true)) return 0;
  if (!gemm::backend_enabled(options, gemm::GemmBackend::kOwn)) return 0;
  int chosen = 0;
  for (auto& step : program.steps) {
    auto* g = std::get_if<passes::GemmStep>(&step);
    if (!g || !g->choice.name.empty() || !g->buckets.empty() || !g->batch.empty()) continue;
    if (g->dtype != DType::kBFloat16) continue;
    const gemm::GemmProblem p = gemm::problem_of(program, *g, target.name);
    if (p.a_dtype != DType::kBFloat16 || p.b_dtype != DType::kBFloat16) continue;
    if (!gemm::template_eligible(p, options, nullptr) || *p.m < kDefaultBf16MinM) continue;
    auto pick = gemm::filter_candidates(
        {gemm::cpu_template_candidate(default_bf16_template(p.trans_a, p.trans_b))}, options, 1);
    if (pick.empty()) continue;
    g->choice = kernel_choice(pick.front());
    ++chosen;
  }
  return chosen;
}

/// The skinny rule (gemm_default.h): anvil's skinny kernel for decode-sized 16-bit GEMMs.
int default_cuda_skinny_gemms(passes::Program& program, const gemm::GemmOptions& options,
                              const codegen::TargetInfo& target) {
  if (!env_switch("ANVIL_CUDA_SKINNY", true)) return 0;
  if (!gemm::backend_enabled(options, gemm::GemmBackend::kOwn)) return 0;
  const gemm::EpiloguePlan epilogues = gemm::match_gemm_epilogues(program);
  int chosen = 0;
  for (size_t si = 0; si < program.steps.size(); ++si) {
    auto* g = std::get_if<passes::GemmStep>(&program.steps[si]);
    if (!g || !g->choice.name.empty() || !g->batch.empty()) continue;
    gemm::GemmProblem p = gemm::problem_of(program, *g, target.name);
    if (!p.is_static()) continue;
    // Where the skinny kernel beats cuBLASLt on an H200 (docs/performance.md, bench/gemm_gpu.py
    // --linear): M <= 16 (decode-sized batches) and a weight of 2 MB or more. At M 64 it is
    // 1.3-1.4x slower than cuBLASLt there, so larger M is left to the tuner.
    if (*p.m > kSkinnyMaxM || *p.n * *p.k < kSkinnyMinWeightElems) continue;
    if (!gemm::pose_cuda_epilogue(epilogues, si, *g, p)) continue;  // cuBLASLt's residual
    auto cands = gemm::filter_candidates(gemm::skinny_candidates(p, 90), options, 1);
    if (cands.empty()) continue;
    g->choice = kernel_choice(cands.front());
    ++chosen;
  }
  return chosen;
}

}  // namespace

int default_gemm_kernels(passes::Program& program, const gemm::GemmOptions& options,
                         const codegen::Target& backend, const codegen::TargetInfo& target) {
  if (backend.device_type() == Device::Type::kCPU)
    return default_cpu_fused_gemms(program, options, target) +
           default_cpu_bf16_gemms(program, options, target);
  if (backend.device_type() != Device::Type::kCUDA || target.name != "cuda-sm90") return 0;
  // untimed, so only without tuning: a tuned compile times the kernel among the others (and a
  // step the tuner left without a kernel, every candidate failing, keeps the library)
  if (options.mode != gemm::AutotuneMode::kOff) return 0;
  return default_cuda_skinny_gemms(program, options, target);
}

}  // namespace anvil::driver
