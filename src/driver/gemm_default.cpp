// GEMM kernels chosen without timing (gemm_default.h).
#include "driver/gemm_default.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "codegen/gemm/cuda_skinny.h"
#include "codegen/gemm/gemm_epilogue.h"
#include "codegen/gemm/gemm_filter.h"
#include "codegen/gemm/gemm_problem.h"
#include "driver/gemm_tune.h"  // kernel_choice

namespace anvil::driver {

namespace gemm = codegen::gemm;

int default_gemm_kernels(passes::Program& program, const gemm::GemmOptions& options,
                         const codegen::Target& backend, const codegen::TargetInfo& target) {
  if (backend.device_type() != Device::Type::kCUDA || target.name != "cuda-sm90") return 0;
  // untimed, so only without tuning: a tuned compile times the kernel among the others (and a
  // step the tuner left without a kernel, every candidate failing, keeps the library)
  if (options.mode != gemm::AutotuneMode::kOff) return 0;
  if (const char* e = std::getenv("ANVIL_CUDA_SKINNY"); e && std::strcmp(e, "0") == 0) return 0;
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

}  // namespace anvil::driver
