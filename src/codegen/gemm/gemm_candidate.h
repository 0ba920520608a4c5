// GEMM autotuning, the shared vocabulary (spec/process_group_and_gemm.md part B): the problem a
// GEMM step poses, the candidates that can solve it (generated templates and library calls), and
// the options that filter them. Candidate generators (cpu_templates, cpu_library, cublaslt,
// cutlass) return candidates in generation order; gemm_filter.h filters them in the spec's order;
// the driver (driver/gemm_tune.*) compiles, times and picks one; the target's emitter calls the
// chosen one from the package.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace anvil::codegen::gemm {

/// Which op the GEMM came from (the name passed to selection, B.4.1).
enum class GemmOp { kMm, kAddmm, kBmm, kIntMm, kMixedMm };
const char* gemm_op_name(GemmOp op);  // "mm", "addmm", "bmm", "int_mm", "mixed_mm"

/// Epilogue applied in the GEMM's store (B.4.7 / issue 16 item 5). Bias is the C operand.
enum class GemmActivation { kNone, kRelu, kRelu6, kGeluErf, kGeluTanh, kSilu };
enum class GemmBias { kNone, kPerColumn /* [N], row broadcast */, kPerRow /* [M,1] */, kFull };

/// One GEMM problem: C[b] = alpha * op(A[b]) * op(B[b]) + beta * X (+ bias), activation.
/// Operands are row-major matrices with a leading dimension; `trans` means the stored matrix is
/// the transpose (the operand is column-major). Sizes are nullopt when symbolic.
struct GemmProblem {
  GemmOp op = GemmOp::kMm;
  std::optional<int64_t> m, n, k;
  int64_t batch = 1;  // product of the batch dims (1: plain GEMM mode)
  DType a_dtype = DType::kFloat32, b_dtype = DType::kFloat32, out_dtype = DType::kFloat32;
  DType acc_dtype = DType::kFloat32;  // B.4.5
  bool trans_a = false, trans_b = false;
  std::optional<int64_t> lda, ldb, ldc;
  int align_a = 1, align_b = 1, align_c = 1;  // max_alignment of each operand, in elements
  bool b_constant = false;  // B is an immutable model constant (may be packed once)
  GemmBias bias = GemmBias::kNone;
  GemmActivation activation = GemmActivation::kNone;
  double alpha = 1.0, beta = 0.0;
  std::string target;       // "x86_64-avx512", "cuda-sm90", ...
  bool is_static() const { return m && n && k; }
};

/// Candidate families (the `--gemm-backends` names, case-insensitive).
enum class GemmBackend { kOwn, kOpenBlas, kOneDnn, kCublasLt, kCutlass };
const char* gemm_backend_name(GemmBackend b);  // "own", "openblas", "onednn", "cublaslt", "cutlass"

/// One way to run a GemmProblem.
/// - A library call (source empty): the runtime's AnvilRtApi::gemm (CPU, `library`/`variant` as
///   in AnvilGemmCall) or the device backend's GEMM (CUDA cuBLASLt: `variant` = the index in
///   cuBLASLt's heuristic list).
/// - A generated template (source set): a translation unit defining `entry`. CPU signature:
///     extern "C" int entry(const AnvilRtApi* api, void* run_ctx, const AnvilGemmCall* call);
///   CUDA signature (CUTLASS):
///     extern "C" int entry(const AnvilGemmCall* call, void* workspace, size_t workspace_bytes,
///                          void* stream);  and  extern "C" size_t <entry>_workspace(const AnvilGemmCall*);
///   returning 0 or non-zero (not applicable / launch failed).
struct GemmCandidate {
  std::string name;  // configuration name: backend, dtype, layout, tile... tokens ("op_conf_name")
  GemmBackend backend = GemmBackend::kOwn;
  int library = 0, variant = 0;  // library calls
  std::string source;            // generated templates
  std::string entry;
  bool fuses_bias = false, fuses_activation = false;  // the epilogue it applies in its store
  bool fuses_residual = false;  // beta * R from AnvilGemmCall::source (R laid out as C)
};

/// `--autotune` levels.
enum class AutotuneMode { kOff, kFast, kMax };

/// Options of GEMM selection (CLI flags in parentheses).
struct GemmOptions {
  AutotuneMode mode = AutotuneMode::kOff;  // (--autotune)
  std::vector<GemmBackend> backends;       // (--gemm-backends); empty: every one the target has
  std::string allow_regex;                 // (--gemm-allow) empty: no filter
  std::optional<std::string> deny_regex;   // (--gemm-deny) nullopt: no filter
  int max_profiled = 0;                    // cap on candidates timed; 0: mode's default
  int64_t min_gemm_size = 1;               // M*N*K below this: no template candidates
  bool fallback = true;                    // (--no-gemm-fallback turns it off)
  std::string cache_dir;                   // (--autotune-cache) empty: <cache>/autotune
  int jobs = 0;                            // parallel candidate compiles; 0: hardware threads
  bool verbose = false;                    // each candidate's time on stderr
  int child_timeout_s = 60;                // a timing child past this is killed (+inf)
};

}  // namespace anvil::codegen::gemm
