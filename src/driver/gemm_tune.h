// The GEMM autotuner (spec/process_group_and_gemm.md B.4.6; docs/architecture.md "GEMM
// autotuning"): for each GEMM step of a lowered program, the candidates codegen/gemm offers are
// compiled in parallel (templates; libraries need no compile), each is timed in a child process
// of its own (tools/gemm_time: a crash, a hang past the timeout or a wrong result counts as
// infinitely slow); the three fastest are timed twice more, alternately, and the one with the
// lowest median of its three rounds becomes the step's GemmKernelChoice (so that one noisy round
// cannot decide). Choices are cached on
// disk under <cache>/autotune keyed by the problem, the candidate set and the machine, so a
// second compile times nothing; compiled templates come from the toolchain's object cache.
#pragma once

#include <string>
#include <vector>

#include "codegen/gemm/gemm_candidate.h"
#include "codegen/target.h"
#include "codegen/toolchain.h"
#include "passes/loop_ir.h"

namespace anvil::driver {

/// What tuning did. tuned / from_cache / kept_default count problems: a GEMM step with static
/// sizes is one, a step with a symbolic M one per bucket of M's range (gemm_buckets.h).
struct GemmTuneReport {
  int steps = 0;          // GEMM steps seen
  int bucketed = 0;       // steps with a symbolic M tuned per bucket (GemmStep::buckets)
  int tuned = 0;          // problems whose candidates were timed
  int from_cache = 0;     // problems whose choice came from the on-disk cache
  int kept_default = 0;   // problems left on the default path (no candidates, all failed)
  int candidates_timed = 0;
  double seconds = 0;
  std::vector<std::string> warnings;  // fallbacks, skipped families
  std::vector<std::string> lines;     // per candidate "step name: time" (for --verbose)
};

/// Tunes every GEMM step of `program` (a no-op when options.mode is kOff), recording the
/// choices in the steps. `target` / `backend` say what the package is built for; `toolchain`
/// builds template candidates (its cache_dir is also the tuning cache's root unless
/// options.cache_dir is set). Throws Error when every candidate of a step fails and
/// options.fallback is off.
GemmTuneReport tune_gemms(passes::Program& program, const codegen::gemm::GemmOptions& options,
                          const codegen::Target& backend, const codegen::TargetInfo& target,
                          const codegen::ToolchainOptions& toolchain);

/// One candidate's timing: nanoseconds per call (median), or +inf with the reason.
struct CandidateTiming {
  std::string name;
  double ns = 0;
  std::string error;
};

/// Compiles the template candidates of `cands` in parallel (options.jobs), times each in a
/// child process (`tool`, see gemm_time_tool()), the three fastest twice more (their timing
/// is then the median of their three rounds), and returns the timings in candidate order and
/// the index of the fastest (-1 when every one failed). `device`: "cpu", or "cuda:I" for CUDA
/// candidates (operands in that GPU's memory). A compile failure, a crash, a wrong
/// result or a hang past options.child_timeout_s is +inf with its reason.
int time_candidates(const codegen::gemm::GemmProblem& problem,
                    const std::vector<codegen::gemm::GemmCandidate>& cands,
                    const codegen::Target& backend, const codegen::ToolchainOptions& toolchain,
                    const codegen::gemm::GemmOptions& options, const std::string& tool,
                    std::vector<CandidateTiming>& timings, const std::string& device = "cpu");

/// The step's record of candidate `c` as its kernel: measured at `us` microseconds among `timed`
/// candidates (0, 0: chosen without timing).
passes::GemmKernelChoice kernel_choice(const codegen::gemm::GemmCandidate& c, double us = 0,
                                       int timed = 0);

/// The child that times candidates: $ANVIL_GEMM_TIME, else anvil-gemm-time beside the running
/// executable, else on PATH. Empty when none is found.
std::string gemm_time_tool();

}  // namespace anvil::driver
