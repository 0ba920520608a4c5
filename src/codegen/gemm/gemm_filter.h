// GEMM candidate filters and option parsing (spec/process_group_and_gemm.md B.4.3-B.4.5): the
// eligibility gate, the alignment rule, the allow / deny regexes, de-duplication and the cap,
// applied in the spec's order. Generators apply the dtype / layout / alignment steps (B.4.4
// a-g) themselves; select_candidates() runs the rest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/gemm/gemm_candidate.h"

namespace anvil::codegen::gemm {

/// B.4.5: the largest alignment (in elements) of `dtype`'s list (fp16 / bf16: 8 4 2 1; fp32:
/// 4 2 1; int8 / uint8: 16 8 4 2; int32: 4 2 1) such that the stride-1 dim's size, the offset
/// and every other dim's stride are multiples of it; 1 when no dim has stride 1 or none fits;
/// 0 for a dtype the list does not have (not supported).
int max_alignment(DType dtype, const std::vector<int64_t>& sizes,
                  const std::vector<int64_t>& strides, int64_t offset);

/// B.4.3: whether template candidates may be offered for `p`: static sizes, all non-zero,
/// M*N*K >= options.min_gemm_size (equality admits), an output dtype of fp16 / bf16 / fp32 /
/// int32. On false, `why` says which condition failed.
bool template_eligible(const GemmProblem& p, const GemmOptions& options, std::string* why);

/// Steps h-i, 3 of B.4.4: keep names that contain a match of options.allow_regex (empty: all),
/// drop names that contain a match of options.deny_regex (nullopt or empty: none), de-duplicate by
/// name (first wins), keep the first `cap` (0: all) templates in generation order. The regexes
/// filter library candidates too (`--gemm-deny openblas`); the cap counts templates only. Throws
/// Error for an invalid regex, naming the option.
std::vector<GemmCandidate> filter_candidates(std::vector<GemmCandidate> candidates,
                                             const GemmOptions& options, int cap);

/// "own, OneDNN ,cutlass" -> backends (case-insensitive, spaces trimmed; "aten" means the
/// libraries: openblas and onednn on the CPU, cublaslt on CUDA). Throws Error for an unknown name.
std::vector<GemmBackend> parse_backends(const std::string& list);
/// "off" | "fast" | "max"; throws Error otherwise.
AutotuneMode parse_autotune_mode(const std::string& s);
const char* autotune_mode_name(AutotuneMode m);

/// Whether candidates of `b` are wanted (options.backends empty: every backend).
bool backend_enabled(const GemmOptions& options, GemmBackend b);
/// Whether `b` is a library (no generated source).
bool is_library_backend(GemmBackend b);

}  // namespace anvil::codegen::gemm
