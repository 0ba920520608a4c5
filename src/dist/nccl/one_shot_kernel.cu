// The one-shot all_reduce kernel (one_shot_kernel.h). One block: every thread pushes a share
// of the input into slot `rank` of every rank's buffer (NVLink / PCIe peer writes); thread 0
// then publishes the op's sequence number in every buffer with a release store at system
// scope; threads 0..world-1 wait for each rank's number in this rank's buffer with acquire
// loads (bounded by the op's timeout, read from %globaltimer); then every thread reduces its
// elements over the slots, read through L2 (.cg), in rank order.
//
// Two parities of slots and flags: op s uses parity s & 1. A rank starts op s + 2 only after
// op s + 1 completed here, which needs every peer's block of s + 1, which a peer pushes only
// after it finished op s (one stream): so op s's slots are never overwritten while read.
#include "dist/nccl/one_shot_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace anvil::dist::nccl {
namespace {

__device__ __forceinline__ uint64_t load_acquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store_release(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t* flag(void* buf, int parity, int r) {
  return static_cast<uint64_t*>(buf) + parity * kOneShotMaxRanks + r;
}

/// Copies `bytes` from `src` to `dst` with the block's threads in words of W when both
/// pointers and the size allow it (returns whether they did).
template <typename W>
__device__ bool copy_words(char* dst, const char* src, int64_t bytes) {
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) |
        static_cast<uintptr_t>(bytes)) & (sizeof(W) - 1)) != 0)
    return false;
  const int64_t n = bytes / static_cast<int64_t>(sizeof(W));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    reinterpret_cast<W*>(dst)[i] = reinterpret_cast<const W*>(src)[i];
  return true;
}

/// The block's copy: 16 bytes at a time where possible, else 4, else 1.
__device__ void block_copy(char* dst, const char* src, int64_t bytes) {
  if (!copy_words<uint4>(dst, src, bytes) && !copy_words<uint32_t>(dst, src, bytes))
    copy_words<char>(dst, src, bytes);
}

// Element access: loads through L2 (.cg: a peer's writes land there, never in this SM's L1),
// the accumulator type, and the store.
template <typename T>
struct Elem {
  using Acc = T;
  static __device__ Acc load(const T* p) { return __ldcg(p); }
  static __device__ T store(Acc a) { return a; }
};
template <>
struct Elem<__half> {
  using Acc = float;
  static __device__ Acc load(const __half* p) {
    return __half2float(__ushort_as_half(__ldcg(reinterpret_cast<const unsigned short*>(p))));
  }
  static __device__ __half store(Acc a) { return __float2half_rn(a); }
};
template <>
struct Elem<__nv_bfloat16> {
  using Acc = float;
  static __device__ Acc load(const __nv_bfloat16* p) {
    return __bfloat162float(
        __ushort_as_bfloat16(__ldcg(reinterpret_cast<const unsigned short*>(p))));
  }
  static __device__ __nv_bfloat16 store(Acc a) { return __float2bfloat16_rn(a); }
};
/// 1-byte integers: loaded as their raw byte, accumulated in 32 bits (wrapping as NCCL's do).
template <typename T, typename Raw, typename A>
struct ByteElem {
  using Acc = A;
  static __device__ Acc load(const T* p) {
    return static_cast<T>(__ldcg(reinterpret_cast<const Raw*>(p)));
  }
  static __device__ T store(Acc a) { return static_cast<T>(a); }
};
template <>
struct Elem<int8_t> : ByteElem<int8_t, signed char, int32_t> {};
template <>
struct Elem<uint8_t> : ByteElem<uint8_t, unsigned char, uint32_t> {};
template <>
struct Elem<int64_t> {
  using Acc = int64_t;
  static __device__ Acc load(const int64_t* p) {
    return __ldcg(reinterpret_cast<const long long*>(p));
  }
  static __device__ int64_t store(Acc a) { return a; }
};

template <typename A>
__device__ __forceinline__ A combine(OneShotOp op, A x, A y) {
  switch (op) {
    case OneShotOp::kProduct: return x * y;
    case OneShotOp::kMin: return y < x ? y : x;
    case OneShotOp::kMax: return y > x ? y : x;
    default: return x + y;  // sum, avg
  }
}

template <typename T>
__global__ void __launch_bounds__(512) one_shot(OneShotArgs a) {
  const int parity = static_cast<int>(a.seq & 1);
  const int64_t bytes = a.n * static_cast<int64_t>(sizeof(T));
  const int64_t slot0 = static_cast<int64_t>(kOneShotDataOffset) +
                        static_cast<int64_t>(parity) * a.world * a.slot_bytes;
  for (int p = 0; p < a.world; ++p)
    block_copy(static_cast<char*>(a.bufs[p]) + slot0 + a.rank * a.slot_bytes,
               static_cast<const char*>(a.in), bytes);
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();  // every thread's pushes are done (ordered before thread 0's release)
  if (threadIdx.x == 0)
    for (int p = 0; p < a.world; ++p) store_release(flag(a.bufs[p], parity, a.rank), a.seq);
  if (threadIdx.x < a.world) {
    const uint64_t* f = flag(a.bufs[a.rank], parity, static_cast<int>(threadIdx.x));
    const uint64_t start = now_ns();
    for (int spin = 0; load_acquire(f) != a.seq; ++spin) {
      if ((spin & 255) != 255) continue;
      if (now_ns() - start > static_cast<uint64_t>(a.timeout_ns)) {
        atomicCAS(a.status, 0ull, (a.seq << 8) | static_cast<unsigned long long>(threadIdx.x + 1));
        __threadfence_system();
        failed = 1;
        break;
      }
      // an earlier op gave up, or the group was aborted: this one cannot complete either
      // (read over the bus only every 4096 rounds: a waiting op is already late)
      if ((spin & 4095) == 4095 && *static_cast<volatile unsigned long long*>(a.status) != 0) {
        failed = 1;
        break;
      }
    }
  }
  __syncthreads();  // the acquires above are ordered before every thread's reads below
  if (failed) return;
  using E = Elem<T>;
  const char* slots = static_cast<const char*>(a.bufs[a.rank]) + slot0;
  T* out = static_cast<T*>(a.out);
  for (int64_t i = threadIdx.x; i < a.n; i += blockDim.x) {
    typename E::Acc acc = E::load(reinterpret_cast<const T*>(slots) + i);
    for (int p = 1; p < a.world; ++p)
      acc = combine(a.op, acc, E::load(reinterpret_cast<const T*>(slots + p * a.slot_bytes) + i));
    if (a.op == OneShotOp::kAvg) acc = acc / static_cast<typename E::Acc>(a.world);
    out[i] = E::store(acc);
  }
}

template <typename T>
cudaError_t launch(const OneShotArgs& a, cudaStream_t s) {
  // a thread per element (the reduction's unit) up to 512; a warp at least
  const int threads = a.n >= 512 ? 512 : static_cast<int>(32 * ((a.n + 31) / 32));
  one_shot<T><<<1, threads < 32 ? 32 : threads, 0, s>>>(a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t preload() {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, one_shot<T>);
}

}  // namespace

cudaError_t preload_one_shot() {
  for (cudaError_t e : {preload<float>(), preload<__half>(), preload<__nv_bfloat16>(),
                        preload<double>(), preload<int8_t>(), preload<uint8_t>(),
                        preload<int32_t>(), preload<int64_t>()})
    if (e != cudaSuccess) return e;
  return cudaSuccess;
}

cudaError_t launch_one_shot(const OneShotArgs& a, cudaStream_t s) {
  switch (a.type) {
    case OneShotType::kF32: return launch<float>(a, s);
    case OneShotType::kF16: return launch<__half>(a, s);
    case OneShotType::kBF16: return launch<__nv_bfloat16>(a, s);
    case OneShotType::kF64: return launch<double>(a, s);
    case OneShotType::kI8: return launch<int8_t>(a, s);
    case OneShotType::kU8: return launch<uint8_t>(a, s);
    case OneShotType::kI32: return launch<int32_t>(a, s);
    case OneShotType::kI64: return launch<int64_t>(a, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace anvil::dist::nccl
