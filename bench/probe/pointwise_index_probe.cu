// Does the index arithmetic of a generated pointwise kernel cost time? ConvNeXt-T's bias + erf
// GELU after its first 1x1 (bf16, [32, 56, 56, 384] in place, a [384] bias), as the CUDA target
// emitted it in session 33 (the flat index split into four loop variables with 64-bit divisions,
// then recombined into the address), beside: the dims coalesced (the address is the flat index;
// only the bias needs the channel), the same with 32-bit division, the same with a branch-free
// erf (Abramowitz & Stegun 7.1.26 on __expf: the CPU target's), and a plain 16-byte copy of
// the tensor (the bandwidth bound). Microseconds per kernel (cudaEvent, mean of 200).
//   nvcc -O3 -arch=sm_90a -o /tmp/pw bench/probe/pointwise_index_probe.cu && /tmp/pw
// Session 33, one H200: as emitted 57.6 us, coalesced 56.2 (64- or 32-bit), A&S erf 51.5, the
// copy 39.6; max |A&S - erff| 6.3e-7. The A&S erf in the generated kernels then made ViT-B/16
// and ConvNeXt-T (bf16 b32, b2b, two alternated rounds) 0.6 % and 1.6 % slower: not adopted.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

__device__ __forceinline__ float bf(uint16_t v) {
  return __uint_as_float(static_cast<uint32_t>(v) << 16);
}
__device__ __forceinline__ uint16_t tobf(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
// Abramowitz & Stegun 7.1.26 (1.5e-7 absolute; the CPU target's fast_erf) on the GPU's
// approximate exp and division: branch-free
__device__ __forceinline__ float as_erf(float x) {
  const float ax = fabsf(x);
  const float t = __fdividef(1.0f, 1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float y = 1.0f - p * t * __expf(-ax * ax);
  return x != x ? x : copysignf(y, x);
}
template <bool kFast>
__device__ __forceinline__ float gelu(float x, float b) {
  const float t = x + b;
  const float e = kFast ? as_erf(t * 0.70710678118654757f) : erff(t * 0.70710678118654757f);
  return t * 0.5f * (1.0f + e);
}
// the largest |as_erf - erff| over n points of [-6, 6] (and NaN / inf behaviour)
__global__ void erf_error(int n, float* worst) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float x = -6.0f + 12.0f * static_cast<float>(i) / static_cast<float>(n);
    atomicMax(reinterpret_cast<int*>(worst), __float_as_int(fabsf(as_erf(x) - erff(x))));
  }
}

constexpr int64_t kRows = 100352, kC = 384, kTotal = kRows * kC / 8;

// as emitted: four loop variables from 64-bit divisions, recombined
__global__ void __launch_bounds__(256) split64(const uint16_t* __restrict__ bias,
                                               uint16_t* __restrict__ x) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < kTotal;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e0 = idx * 8;
    const int64_t lin = e0 / 384;
    const int64_t r0 = e0 - lin * 384;
    const int64_t o0 = lin / 3136, o1 = (lin / 56) % 56, o2 = lin % 56;
    const int64_t at = 1204224 * o0 + 21504 * o1 + 384 * o2 + r0;
    alignas(16) uint16_t b[8], v[8], w[8];
    *reinterpret_cast<uint4*>(b) = *reinterpret_cast<const uint4*>(bias + r0);
    *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(x + at);
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = tobf(gelu<false>(bf(v[j]), bf(b[j])));
    *reinterpret_cast<uint4*>(x + at) = *reinterpret_cast<const uint4*>(w);
  }
}

// coalesced: the address is the flat index; the channel from one division (64-bit or 32-bit)
template <bool k32, bool kFast>
__global__ void __launch_bounds__(256) flat(const uint16_t* __restrict__ bias,
                                            uint16_t* __restrict__ x) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < kTotal;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e0 = idx * 8;
    const int64_t r0 = k32 ? static_cast<int64_t>(static_cast<uint32_t>(e0) % 384u) : e0 % 384;
    alignas(16) uint16_t b[8], v[8], w[8];
    *reinterpret_cast<uint4*>(b) = *reinterpret_cast<const uint4*>(bias + r0);
    *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(x + e0);
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = tobf(gelu<kFast>(bf(v[j]), bf(b[j])));
    *reinterpret_cast<uint4*>(x + e0) = *reinterpret_cast<const uint4*>(w);
  }
}

// the bound: read and write the tensor, 16 bytes a thread
__global__ void __launch_bounds__(256) copy(const uint4* __restrict__ a, uint4* __restrict__ b) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < kTotal;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x)
    b[idx] = a[idx];
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <typename F>
float time_us(F&& launch) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  for (int i = 0; i < 20; ++i) launch();
  check(cudaEventRecord(a), "record");
  for (int i = 0; i < 200; ++i) launch();
  check(cudaEventRecord(b), "record");
  check(cudaEventSynchronize(b), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  return ms * 1000 / 200;
}

}  // namespace

int main() {
  uint16_t *x = nullptr, *y = nullptr, *bias = nullptr;
  const size_t bytes = static_cast<size_t>(kRows * kC) * 2;
  check(cudaMalloc(&x, bytes), "malloc");
  check(cudaMalloc(&y, bytes), "malloc");
  check(cudaMalloc(&bias, kC * 2), "malloc");
  check(cudaMemset(x, 0x3c, bytes), "memset");  // ~0.0115 in bf16 pairs: finite values
  check(cudaMemset(bias, 0, kC * 2), "memset");
  const unsigned grid = static_cast<unsigned>((kTotal + 255) / 256);
  const double gb = 2.0 * static_cast<double>(bytes) / 1e9;
  const float t0 = time_us([&] { split64<<<grid, 256>>>(bias, x); });
  const float t1 = time_us([&] { flat<false, false><<<grid, 256>>>(bias, x); });
  const float t2 = time_us([&] { flat<true, false><<<grid, 256>>>(bias, x); });
  const float t3 = time_us([&] {
    copy<<<grid, 256>>>(reinterpret_cast<const uint4*>(x), reinterpret_cast<uint4*>(y));
  });
  const float t4 = time_us([&] { flat<true, true><<<grid, 256>>>(bias, x); });
  float* worst = nullptr;
  check(cudaMallocManaged(&worst, 4), "managed");
  *worst = 0;
  erf_error<<<1024, 256>>>(1 << 26, worst);
  check(cudaDeviceSynchronize(), "erf error");
  check(cudaGetLastError(), "launch");
  std::printf("split, 64-bit divisions (as emitted)  %8.1f us  %6.0f GB/s\n", t0, gb / t0 * 1e6);
  std::printf("coalesced, 64-bit division            %8.1f us  %6.0f GB/s\n", t1, gb / t1 * 1e6);
  std::printf("coalesced, 32-bit division            %8.1f us  %6.0f GB/s\n", t2, gb / t2 * 1e6);
  std::printf("coalesced, 32-bit, A&S erf             %8.1f us  %6.0f GB/s\n", t4, gb / t4 * 1e6);
  std::printf("max |A&S erf - erff| on [-6, 6]: %.3g\n", *worst);
  std::printf("copy (the bound)                      %8.1f us  %6.0f GB/s\n", t3, gb / t3 * 1e6);
  return 0;
}
