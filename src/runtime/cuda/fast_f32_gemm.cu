// The CUDA backend's prebuilt 3xTF32 GEMM (fast_f32_gemm.h): one CUTLASS 2.x kernel per operand
// layout, the 128 x 64 x 32 tile with 64 x 32 warps and 4 stages (the tuner's first fast_f32
// candidate, codegen/gemm/cutlass_candidates.cpp). Compiled by nvcc for sm_90a (CMakeLists.txt);
// without CUTLASS's headers (ANVIL_NO_CUTLASS) it builds to "not built".
#include <atomic>

#include "runtime/cuda/fast_f32_gemm.h"

#ifndef ANVIL_NO_CUTLASS
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/device/gemm.h"
#endif

namespace anvil::cuda_backend {

namespace {

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

#ifndef ANVIL_NO_CUTLASS
template <class LayoutA, class LayoutB>
using Kernel = cutlass::gemm::device::Gemm<
    float, LayoutA, float, LayoutB, float, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, cutlass::gemm::GemmShape<128, 64, 32>,
    cutlass::gemm::GemmShape<64, 32, 32>, cutlass::gemm::GemmShape<16, 8, 8>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 4, 4, 4, false,
    cutlass::arch::OpMultiplyAddFastF32>;

// CUTLASS 2.x's B is K x N: a row-major B [K, N] is its RowMajor B, a B stored [N, K] (trans_b)
// its ColumnMajor B; A [M, K] is RowMajor, A stored [K, M] (trans_a) ColumnMajor.
template <class LayoutA, class LayoutB>
cudaError_t run(const FastF32Gemm& g, cudaStream_t stream) {
  using G = Kernel<LayoutA, LayoutB>;
  typename G::Arguments args(
      cutlass::gemm::GemmCoord(static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k)),
      {g.a, LayoutA(g.lda)}, {g.b, LayoutB(g.ldb)}, {g.c, cutlass::layout::RowMajor(g.ldc)},
      {g.d, cutlass::layout::RowMajor(g.ldd)}, {g.alpha, g.beta});
  G gemm;
  // no split K: no workspace
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
  if (gemm.initialize(args, nullptr, stream) != cutlass::Status::kSuccess)
    return cudaErrorNotSupported;
  // run() checks the launch (cudaGetLastError) and answers kErrorInternal when it failed
  if (gemm.run(stream) != cutlass::Status::kSuccess) return cudaErrorLaunchFailure;
  return cudaSuccess;
}
#endif

}  // namespace

bool fast_f32_gemm_built() {
#ifdef ANVIL_NO_CUTLASS
  return false;
#else
  return true;
#endif
}

bool fast_f32_gemm_device(int device) {
  if (!fast_f32_gemm_built() || device < 0 || device >= 64) return false;
  static std::atomic<int> major[64] = {};  // 0: not read yet
  int v = major[device].load(std::memory_order_relaxed);
  if (v == 0) {
    if (cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    major[device].store(v, std::memory_order_relaxed);
  }
  return v == 9;
}

bool fast_f32_gemm_takes(const FastF32Gemm& g) {
  constexpr int64_t kMax = INT32_MAX;
  if (g.m <= 0 || g.n <= 0 || g.k < kFastF32MinK || g.m > kMax || g.n > kMax || g.k > kMax)
    return false;
  if ((g.m + 127) / 128 * ((g.n + 63) / 64) < kFastF32MinTiles) return false;
  // CUTLASS bounds-checks a 4-float access by its first element: every contiguous extent (A's
  // and B's inner dims, the rows of C and D) must be a multiple of 4 too, or a view's rows
  // would be read or written past their end
  const int64_t a_inner = g.trans_a ? g.m : g.k, b_inner = g.trans_b ? g.k : g.n;
  return aligned(g.a) && aligned(g.b) && aligned(g.c) && aligned(g.d) && g.lda % 4 == 0 &&
         g.ldb % 4 == 0 && g.ldc % 4 == 0 && g.ldd % 4 == 0 && a_inner % 4 == 0 &&
         b_inner % 4 == 0 && g.n % 4 == 0;
}

cudaError_t fast_f32_gemm(const FastF32Gemm& g, cudaStream_t stream) {
#ifdef ANVIL_NO_CUTLASS
  (void)g;
  (void)stream;
  return cudaErrorNotSupported;
#else
  using Row = cutlass::layout::RowMajor;
  using Col = cutlass::layout::ColumnMajor;
  if (!g.trans_a) return g.trans_b ? run<Row, Col>(g, stream) : run<Row, Row>(g, stream);
  return g.trans_b ? run<Col, Col>(g, stream) : run<Col, Row>(g, stream);
#endif
}

}  // namespace anvil::cuda_backend
