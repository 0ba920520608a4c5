// From a lowered GEMM step to the autotuner's problem, and the candidate list for it: the
// library candidates of the target plus the generated templates of every enabled backend, in
// generation order, filtered (gemm_filter.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/gemm/gemm_candidate.h"
#include "passes/loop_ir.h"

namespace anvil::codegen::gemm {

/// The problem `g` poses (sizes nullopt when symbolic; alignments from its operands' leading
/// dims, offsets and batch strides; b_constant when B is an immutable model constant).
/// `target` is the target name ("x86_64-avx512", "cuda-sm90", ...). `m_value`: the value to pose
/// for a symbolic M (a bucket's representative, driver/gemm_tune.h); A's alignment is then what
/// holds for every M (1 when A's contiguous dim is M), and M's leading dims take the value.
GemmProblem problem_of(const passes::Program& program, const passes::GemmStep& g,
                       const std::string& target, std::optional<int64_t> m_value = std::nullopt);

/// The configuration-independent key of a problem (sizes, dtypes, layouts, alignments, epilogue,
/// target): what the tuning cache is keyed by, with the device name.
std::string problem_key(const GemmProblem& p);

/// Every candidate for `p` on a target with `cpu_features` (CPU) or compute capability `sm`
/// (CUDA, 0 for the CPU): library calls first, then generated templates, filtered by
/// `options` (backends, allow / deny, the cap of the mode). Templates are offered only when
/// template_eligible(); `notes` (when given) receives why a family was left out.
std::vector<GemmCandidate> gemm_candidates(const GemmProblem& p, const GemmOptions& options,
                                           const std::vector<std::string>& cpu_features, int sm,
                                           std::vector<std::string>* notes = nullptr);

/// How many template candidates a mode times (options.max_profiled overrides when > 0).
int template_cap(const GemmOptions& options);

}  // namespace anvil::codegen::gemm
