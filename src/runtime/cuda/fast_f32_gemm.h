// fp32 GEMMs at fp32 accuracy through TF32 tensor cores ("3xTF32"), built into the CUDA backend
// (fast_f32_gemm.cu, compiled by nvcc with CUTLASS's headers): CUTLASS 2.x's device::Gemm with
// OpMultiplyAddFastF32 splits each fp32 operand into a TF32 big and a TF32 small part in registers
// and sums big*big + big*small + small*big in fp32, through mma.sync. The same kernels are the
// autotuner's fast_f32 candidates (codegen/gemm/cutlass_candidates.h), which packages build
// themselves; these are prebuilt so that an untuned package pays no compile time for them.
//
// The backend's GEMMs take this path for a float32 call with allow_tf32 = ANVIL_FP32_3XTF32
// (anvil_device.h) where fast_f32_gemm_takes() holds; otherwise cuBLASLt's fp32 GEMM runs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace anvil::cuda_backend {

/// One row-major GEMM D[m, n] = alpha * op(A) op(B) + beta * C (C read only when beta != 0;
/// C may be D itself, and is when the call has none).
struct FastF32Gemm {
  int trans_a = 0, trans_b = 0;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  const float* c = nullptr;  // D itself when the call has no C
  int64_t ldc = 0;
  float* d = nullptr;
  int64_t ldd = 0;
};

/// Fewest 128 x 64 output tiles (about a wave on a 132-SM GPU) and least K for which the kernel
/// beat cuBLASLt's fp32 GEMM on an H200 (bench/probe/fp32_gemm_probe.cu: 1.4-1.7x from M 512;
/// at M 256, N 1024 it only tied).
constexpr int64_t kFastF32MinTiles = 128;
constexpr int64_t kFastF32MinK = 256;

/// Whether this backend was built with the kernels (CUTLASS's headers found at build time).
bool fast_f32_gemm_built();
/// Whether `g` is a problem the kernels take and win on: sizes within int32, at least
/// kFastF32MinTiles tiles and K >= kFastF32MinK, every pointer 16-byte aligned, every leading
/// dimension and every contiguous extent (N, A's and B's inner dims) a multiple of 4.
bool fast_f32_gemm_takes(const FastF32Gemm& g);
/// Whether the kernels run on `device`: built, and a GPU of compute capability 9.x (remembered
/// per device).
bool fast_f32_gemm_device(int device);
/// Queues `g` on `stream` (sm_90a code: a GPU of compute capability 9.x). cudaSuccess, or the
/// error of the launch (cudaErrorNotSupported when not built or CUTLASS refuses the problem).
cudaError_t fast_f32_gemm(const FastF32Gemm& g, cudaStream_t stream);

}  // namespace anvil::cuda_backend
