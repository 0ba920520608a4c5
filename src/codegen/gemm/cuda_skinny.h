// anvil's own CUDA GEMM for skinny problems (small M, large N·K: a linear layer on a small batch,
// the MLP of issue 14 at batch 64): D[M,N] = act(alpha · A[M,K] · B + bias[N]) with A row-major and
// B stored [N,K] (a linear layer's weight, trans_b), 16-bit operands, fp32 accumulation.
//
// Such a GEMM reads its weight once and does little arithmetic per byte, so its time is the
// weight's bytes over the memory bandwidth plus the launch and the tail. The library kernels tile
// M by 64-128 and leave most SMs idle or split K through a global workspace; this one splits K
// over the CTAs of a thread-block cluster (sm_90) and sums the partial tiles through distributed
// shared memory, so every SM streams weight rows and no workspace, memset or second kernel is
// needed; the sum runs in a fixed order, so results do not vary from run to run. Inside a CTA,
// 4 or 8 warps split N and K; operands go global → shared through a cp.async pipeline, and each
// thread reads 16-byte vectors of A and B whose eight K values feed two m16n8k16 tensor-core
// MMAs (K is permuted identically in both operands, which a dot product allows).
//
// Candidates use the CUDA entry points of GemmCandidate (gemm_candidate.h); the entry returns
// 0, 1 (the call's dtype / layout / epilogue differs from the candidate's: beta must be 0, no C
// source), 2 (a pointer or leading dimension is not 16-byte aligned, or K % 8 != 0) or 6 (the
// launch failed, or the GPU is not of compute capability 9.x; the thread's CUDA error is cleared).
// The workspace is always 0 bytes.
#pragma once

#include <string>
#include <vector>

#include "codegen/gemm/gemm_candidate.h"
#include "codegen/toolchain.h"

namespace anvil::codegen::gemm {

/// One configuration of the skinny kernel.
struct SkinnyConfig {
  DType dtype = DType::kBFloat16;   // A, B and D: bf16 or f16
  int m_tiles = 4;                  // CTA tile M = 16 · m_tiles (1, 2 or 4)
  int n_tile = 64;                  // CTA tile N (32, 64 or 128)
  int warps = 4;                    // warps per CTA (4 or 8)
  int warps_n = 1;                  // warps along N; warps / warps_n (1, 2 or 4) along K
  int split_k = 4;                  // CTAs of a cluster splitting K (1, 2, 4 or 8)
  int stages = 4;                   // cp.async pipeline depth (2-6); K step 128 per stage
  GemmBias bias = GemmBias::kNone;  // kNone or kPerColumn
  GemmActivation activation = GemmActivation::kNone;  // any (relu6 included)
  /// Dynamic shared memory of one CTA, bytes.
  int smem_bytes() const;
};

/// "anvil_skinny_sm90_bf16_m64_n64_w1x4_s4_st4" plus epilogue tokens ("_bias", "_gelu_erf").
std::string skinny_config_name(const SkinnyConfig& c);

/// The configurations that can solve `p` on a GPU of compute capability `sm` (90 and up): static
/// sizes, M ≤ 256, bf16 / f16 operands and output, A not transposed, B transposed ([N,K]),
/// beta 0, no full or per-row bias, K a multiple of 8, leading dims aligned to 8 elements.
/// Ordered by a cost estimate (the heuristic's pick first).
std::vector<SkinnyConfig> skinny_configs(const GemmProblem& p, int sm);
/// skinny_configs as candidates (backend kOwn, source set, fuses the problem's epilogue).
std::vector<GemmCandidate> skinny_candidates(const GemmProblem& p, int sm);
/// The CUDA C++ translation unit of one configuration, defining `entry` and `entry`_workspace.
std::string render_skinny_source(const SkinnyConfig& c, const std::string& entry);
/// True when `c` is a candidate of this family (its units need no CUTLASS headers).
bool is_skinny_candidate(const GemmCandidate& c);
/// True when a chosen kernel's name is this family's ("anvil_skinny_...").
bool is_skinny_name(const std::string& name);
/// nvcc arguments for a skinny unit (sm_90a machine code only, hidden visibility, shared
/// cudart).
std::vector<std::string> skinny_nvcc_flags();
/// build_shared_library options that compile skinny units with nvcc.
ToolchainOptions skinny_toolchain_options();

}  // namespace anvil::codegen::gemm
