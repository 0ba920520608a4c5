// Experiment (bench/probe, not part of the build; run by skinny_wgmma_probe.cu): a 16-bit GEMM
// for few rows (a linear layer on a small batch: D[m, n] = act(alpha * A W^T + beta * C + bias),
// m <= 64, W stored [n, k]) on Hopper's TMA and warpgroup MMAs, written to read the weight near
// the memory bandwidth where cuBLASLt reads the bf16 MLP's weights at 1.7-2.8 TB/s of the H200's
// 4.8. It did not beat cuBLASLt at M 64 (0.57-0.82x; docs/performance.md, session 30 has the
// figures and where the time goes), so the backend does not use it.
//
// The kernel: one warpgroup per CTA computes a 64 x BN tile (BN 64, 128 or 256) with wgmma
// (operands in shared memory), fed by TMA loads of 64-wide K boxes of A and W (128-byte swizzle,
// `ksub` boxes per stage) through an mbarrier pipeline, one MMA group in flight. K is split over
// the CTAs of a thread-block cluster (1-8) so that the grid covers the SMs; the partial tiles are
// summed through distributed shared memory in a fixed order (no workspace, no second kernel), and
// the epilogue (alpha, beta * C, bias, relu / tanh or erf GELU) runs in the store, each step a
// pass over all of a thread's values. Rows past m and columns past n are TMA's zero fill.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace anvil::cuda_backend {

/// The activation of a skinny GEMM's epilogue (after bias).
enum class SkinnyAct : int32_t { kNone = 0, kRelu = 1, kGeluTanh = 2, kGeluErf = 3 };

/// One GEMM D[m, n] = act(alpha * A B^T + beta * C + bias): A [m, k] and B [n, k] row-major,
/// bfloat16 or float16 (D, C and bias alike), fp32 accumulation.
struct SkinnyGemm {
  bool bf16 = true;  // else float16
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;  // [n, k]: a linear layer's weight
  int64_t ldb = 0;
  const void* c = nullptr;  // null, or read when beta != 0 (may be d itself)
  int64_t ldc = 0;
  void* d = nullptr;
  int64_t ldd = 0;
  const void* bias = nullptr;  // null or n elements
  SkinnyAct act = SkinnyAct::kNone;
};

/// Queues `g` on `stream` on the current device (one of compute capability 9.x; A and B
/// 16-byte aligned with leading dimensions multiples of 8: the caller's to check). cudaSuccess,
/// or the error of the launch (cudaErrorNotSupported when the driver has no TMA descriptors).
cudaError_t skinny_gemm(const SkinnyGemm& g, cudaStream_t stream);

}  // namespace anvil::cuda_backend
