// CUTLASS 3.x sm90 GEMM candidates (spec/process_group_and_gemm.md B.4.3-B.4.8): the GemmUniversal
// configurations (tile, cluster, schedule, layouts, alignment) that can solve a GemmProblem on an
// sm90 GPU, each rendered as one CUDA C++ translation unit that instantiates the kernel through
// CUTLASS's collective builders and exposes the GemmCandidate CUDA entry points:
//   extern "C" int <entry>(const AnvilGemmCall* call, void* workspace, size_t workspace_bytes,
//                          void* stream);
//   extern "C" size_t <entry>_workspace(const AnvilGemmCall* call);
// The call carries device pointers. The entry returns 0, or one of the CutlassStatus codes (the
// call does not fit the candidate, can_implement refused it, the launch failed); it never aborts.
//
// Batched mode (GemmProblem::batch > 1): the batch count is baked into the source and batch i of
// each operand starts at i * (stored rows * leading dimension) elements past its pointer (the
// batches are stacked densely: A at a + i*(trans_a ? k : m)*lda, B at b + i*(trans_b ? n : k)*ldb,
// C at c + i*m*ldc); AnvilGemmCall has no batch fields.
//
// Mixed input (spec B.4.1 "mixed_mm"): A fp16 or bf16, B int8 stored [N, K] (column-major, K-major),
// D of A's dtype, fp32 accumulation. CUTLASS's mixed-input mainloop
// (MainloopSm90TmaGmmaRmemAWarpSpecializedMixedInput, picked by the collective builder when the
// operand widths differ) converts the narrow operand to A's type in registers, which needs it as
// the MMA's A operand; the kernel therefore solves the transposed problem D^T = B^T A^T (CUTLASS's
// A is anvil's int8 B, its B anvil's A, its D anvil's D seen column-major), the explicit swap of
// CUTLASS's example 55 that keeps the TMA epilogue usable. Rows of C / D not 16-byte aligned get
// the non-TMA epilogue. No fused bias or activation; beta * C as in the other kernels.
//
// Epilogue: D = act(alpha * A·B + beta * C + bias). C is the call's output buffer itself (read
// before it is written) when the problem has beta != 0 or a full [M,N] bias (the caller puts X in
// C first); otherwise the kernel has no source operand (CUTLASS's void C) and a call with
// beta != 0 is refused. Per-column ([N]) and per-row ([M]) bias vectors and relu / gelu (erf and
// tanh) / silu are fused through CUTLASS's fusion operations (fuses_bias / fuses_activation);
// relu6 is not. A candidate refuses a call that asks for an epilogue it does not apply. As in
// AnvilRtApi::gemm, beta scales only C: the bias vector is added unscaled (addmm's beta * x[N]
// needs x scaled by the caller, or x copied into C as a full bias).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "codegen/gemm/gemm_candidate.h"
#include "codegen/toolchain.h"

namespace anvil::codegen::gemm {

/// Return codes of a CUTLASS candidate's entry point.
enum CutlassStatus : int {
  kCutlassOk = 0,
  kCutlassCallMismatch = 1,   // dtype / layout / epilogue / sizes of the call differ from the candidate's
  kCutlassMisaligned = 2,     // a pointer or leading dimension breaks the candidate's alignment
  kCutlassCannotImplement = 3,
  kCutlassWorkspaceTooSmall = 4,
  kCutlassInitFailed = 5,
  kCutlassLaunchFailed = 6,
  kCutlassWrongArch = 7,      // a fast_f32 kernel on a GPU other than compute capability 9.x
};

/// Kernel schedules generated (the configuration name's tokens in parentheses).
enum class CutlassSchedule {
  kCooperative,  // KernelTmaWarpSpecializedCooperative ("warpspecialized_cooperative")
  kPingpong,     // KernelTmaWarpSpecializedPingpong ("warpspecialized_pingpong")
  kStreamK,      // cooperative + StreamKScheduler ("stream_k_warpspecialized_cooperative")
};

/// One configuration, before rendering.
struct CutlassConfig {
  int tile_m = 128, tile_n = 128, tile_k = 64;
  int cluster_m = 1, cluster_n = 1;
  CutlassSchedule schedule = CutlassSchedule::kCooperative;
  DType a = DType::kBFloat16, b = DType::kBFloat16, acc = DType::kFloat32, d = DType::kBFloat16;
  bool has_source = false;      // C = the output buffer, scaled by beta (else CUTLASS's void C)
  bool a_row_major = true;      // !trans_a
  bool b_row_major = true;      // !trans_b (row-major B[K,N] is CUTLASS's N-major B)
  int align_a = 8, align_b = 8, align_c = 8;  // elements
  // TMA mainloop and epilogue (16-byte aligned operands); else the cp.async mainloop
  // (KernelCpAsyncWarpSpecialized*, cluster 1x1x1) with the non-TMA epilogue (NoSmemWarpSpecialized,
  // alpha / beta only): "cpasync_..._epi_nosmem" names, for 16-bit operands aligned to 4 or 2.
  bool tma = true;
  // The epilogue: TMA (16-byte aligned C / D rows) or the non-TMA NoSmemWarpSpecialized one
  // (alpha / beta only). Always false when `tma` is; the mixed-input kernels below pair a TMA
  // mainloop with either ("_epi_tma" / "_epi_nosmem").
  bool tma_epilogue = true;
  GemmBias bias = GemmBias::kNone;            // fused bias (kNone, kPerColumn or kPerRow)
  GemmActivation activation = GemmActivation::kNone;  // fused activation
  int64_t batch = 1;
  // fp32 at fp32 accuracy through TF32 tensor cores ("3xTF32"): a CUTLASS 2.x sm80 kernel
  // (device::Gemm, OpMultiplyAddFastF32) that splits each fp32 operand into a TF32 big part and
  // a TF32 small part in registers and sums big*big + big*small + small*big in fp32; run through
  // mma.sync on sm_90 too. Warp tile and stage count are its own; cluster, schedule and TMA do
  // not apply. beta scales AnvilGemmCall::source (a residual laid out as C) or, when that is
  // null, C itself, read only when beta != 0 (a run-time choice: fuses_residual); no fused bias
  // or activation; one matrix (batch 1). Its entry refuses a GPU whose compute capability is not
  // 9.x (code kCutlassWrongArch): the package then runs cuBLASLt for the step.
  bool fast_f32 = false;
  int warp_m = 64, warp_n = 32, warp_k = 32, stages = 4;
};

/// CUTLASS-style configuration name, e.g.
/// "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_void_bf16_128x128x64_1x2x1_0_tnt_align8_warpspecialized_cooperative_epi_tma".
std::string cutlass_config_name(const CutlassConfig& c);

/// Options of the generator beyond the problem.
struct CutlassOptions {
  bool allow_tf32 = false;  // fp32 problems through TF32 tensor cores: not generated yet (no candidates)
  bool fast_f32 = true;     // fp32 problems through the 3xTF32 kernels (CutlassConfig::fast_f32)
};

/// Whether candidate `name` is one of the fast_f32 (3xTF32) kernels: its package step falls back
/// to cuBLASLt where the kernel refuses the call, so it needs no compute capability 9.0.
bool is_fast_f32_name(const std::string& name);
/// Whether a package step running kernel `name` goes on to cuBLASLt when the kernel refuses the
/// call: anvil's skinny kernels (cuda_skinny.h) and the fast_f32 ones.
bool has_library_fallback(const std::string& name);
/// The two extern "C" entry points of a candidate's unit (`entry` and `entry`_workspace), for a
/// unit that defines `Gemm`, `Arguments` and `int make_arguments(const AnvilGemmCall*,
/// Arguments*)` (0 or a CutlassStatus); `before_launch` is code run after make_arguments.
std::string render_cutlass_entries(const std::string& entry, const std::string& before_launch);
/// The CUDA C++ translation unit of a fast_f32 configuration (cutlass_render_fast_f32.cpp).
std::string render_cutlass_fast_f32_source(const CutlassConfig& c, const std::string& entry);

/// The sm90 candidates of `p` in generation order (tile, then cluster, then schedule), after the
/// spec's B.4.4 steps a-g (tensor-op kernels only, dtype, layout, alignment); for fp32 the
/// fast_f32 kernels (largest tile first, 64 x 64 first when M <= 256). `sm` is the GPU's
/// compute capability (90 for sm_90); other archs, symbolic or zero sizes, and unsupported dtypes
/// or layouts give no candidates. Needs no CUTLASS headers (rendering is text).
std::vector<GemmCandidate> cutlass_candidates(const GemmProblem& p, int sm,
                                              const CutlassOptions& options = {});
/// The configurations behind cutlass_candidates (same order).
std::vector<CutlassConfig> cutlass_configs(const GemmProblem& p, int sm,
                                           const CutlassOptions& options = {});
/// The CUDA C++ translation unit of one configuration, defining `entry` and `entry`_workspace.
std::string render_cutlass_source(const CutlassConfig& c, const std::string& entry);

/// Where CUTLASS's headers are: `include` holds cutlass/ and cute/, `util_include` holds
/// cutlass/util/ (tools/util/include in CUTLASS's tree).
struct CutlassHeaders {
  std::string root, include, util_include;
};
/// $ANVIL_CUTLASS_DIR when set (a CUTLASS source tree or the nvidia-cutlass wheel's
/// cutlass_library/source folder), else the folder found at build time (ANVIL_CUTLASS_DEFAULT_DIR).
/// nullopt when neither holds include/cutlass/cutlass.h; `why` then says what was looked at.
std::optional<CutlassHeaders> find_cutlass_headers(std::string* why = nullptr);
/// nvcc arguments (besides the source, -o and the anvil include dir) for a candidate's TU:
/// -std=c++17 -gencode=arch=compute_90a,code=sm_90a -O3 --expt-relaxed-constexpr, CUTLASS's
/// include dirs, shared cudart.
std::vector<std::string> cutlass_nvcc_flags(const CutlassHeaders& h);
/// Options for build_shared_library that compile CUDA candidate units with nvcc ($ANVIL_NVCC,
/// else $CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc) and `compile_flags` into one shared
/// library (cutlass_toolchain_options, skinny_toolchain_options).
ToolchainOptions nvcc_unit_options(std::vector<std::string> compile_flags);
/// Options for build_shared_library (codegen/toolchain.h) that compile candidate sources with
/// nvcc ($ANVIL_NVCC, else $CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc) into one shared
/// library whose entries are the candidates' `entry` names.
ToolchainOptions cutlass_toolchain_options(const CutlassHeaders& h);
/// cutlass_candidates when the headers are found; else none, and `warning` is set to
/// "CUTLASS headers not found (<why>): CUTLASS candidates skipped" (spec case 28).
std::vector<GemmCandidate> cutlass_candidates_if_available(const GemmProblem& p, int sm,
                                                           std::string* warning,
                                                           const CutlassOptions& options = {});

}  // namespace anvil::codegen::gemm
