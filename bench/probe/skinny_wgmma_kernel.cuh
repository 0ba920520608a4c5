// The skinny 16-bit GEMM experiment of skinny_wgmma_kernel.h: TMA loads, an mbarrier pipeline,
// warpgroup MMAs, K split over a thread-block cluster and summed through distributed shared
// memory. Included by skinny_wgmma_probe.cu (sm_90a).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "skinny_wgmma_kernel.h"

namespace anvil::cuda_backend {

namespace {

constexpr int kBM = 64;        // rows of a CTA's tile: one m64 warpgroup MMA
constexpr int kBK = 64;        // K of a stage: one 128-byte swizzle row of 16-bit values
constexpr int kMaxSplit = 8;   // CTAs of a cluster (the portable cluster size)
constexpr int kThreads = 128;  // one warpgroup
constexpr int kATileBytes = kBM * kBK * 2;

struct Params {
  int m, n, kb_total, kb_per, stages;
  int ksub;  // 64-wide K boxes per stage (a K block is 64 * ksub wide)
  float alpha, beta;
  const void* c;
  int64_t ldc;
  void* d;
  int64_t ldd;
  const void* bias;
  int act;
  int vec_store;  // D's rows may be stored 2 values (4 bytes) at a time
  int no_store;   // probe only: compute the epilogue but store nothing
};

__host__ __device__ constexpr int stage_bytes(int bn, int ksub) {
  return ksub * (kATileBytes + bn * kBK * 2);
}
__host__ __device__ constexpr int partial_ld(int bn) {
  return bn + 4;
}  // floats per row of the summed tile
int smem_bytes(int bn, int stages, int ksub) {
  const int tiles = stages * stage_bytes(bn, ksub);
  const int partial = kBM * partial_ld(bn) * 4;
  return 1024 /* alignment slack */ + (tiles > partial ? tiles : partial) + 2 * stages * 8;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t phase) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(phase)
        : "memory");
  } while (!done);
}

// A 2-D TMA load of the box at (c0 along the contiguous dim, c1 along rows) into `dst`.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0,
                                         int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// The shared-memory descriptor of a K-major tile with 128-byte swizzle: rows of 64 16-bit
// values (128 bytes), 8-row groups 1024 bytes apart; the tile starts 1024-byte aligned. Adding
// 2 to it moves 32 bytes (16 values) along K inside the swizzle row.
__device__ __forceinline__ uint64_t smem_desc(const void* tile) {
  const uint64_t addr = smem_addr(tile);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
// Commits the MMAs issued since the last commit and waits until at most one group is pending.
__device__ __forceinline__ void wgmma_commit_wait1() {
  asm volatile("wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 1;" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait0() {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

#define ANVIL_ACC8(o)                                                                             \
  "+f"(d[o + 0]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), \
      "+f"(d[o + 6]), "+f"(d[o + 7])
#define ANVIL_ACC32 ANVIL_ACC8(0), ANVIL_ACC8(8), ANVIL_ACC8(16), ANVIL_ACC8(24)
#define ANVIL_ACC64 ANVIL_ACC32, ANVIL_ACC8(32), ANVIL_ACC8(40), ANVIL_ACC8(48), ANVIL_ACC8(56)
#define ANVIL_ACC128                                                                           \
  ANVIL_ACC64, ANVIL_ACC8(64), ANVIL_ACC8(72), ANVIL_ACC8(80), ANVIL_ACC8(88), ANVIL_ACC8(96), \
      ANVIL_ACC8(104), ANVIL_ACC8(112), ANVIL_ACC8(120)
#define ANVIL_REGS32                                                       \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define ANVIL_REGS64                                                            \
  ANVIL_REGS32                                                                  \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "    \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, " \
  "%61, %62, %63"
template <int BN, bool BF16>
__device__ __forceinline__ void wgmma_k16(float* d, uint64_t da, uint64_t db);
#define ANVIL_REGS128                                                                    \
  ANVIL_REGS64                                                                           \
  ", "                                                                                   \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, "               \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "               \
  "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, "         \
  "%106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, " \
  "%120, %121, %122, %123, %124, %125, %126, %127"

// One specialization per tile width and type: d += A (64 x 16) * B (N x 16)^T. The operands
// after the accumulators: %A the A descriptor, %A+1 the B one, %A+2 scale-d (1: accumulate).
#define ANVIL_WGMMA_K16(N, BF16, TYPE, REGS, ACC, A, B, S)                                 \
  template <>                                                                              \
  __device__ __forceinline__ void wgmma_k16<N, BF16>(float* d, uint64_t da, uint64_t db) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #S                                   \
                 ", 0;\n"                                                                  \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {" REGS \
                 "}, %" #A ", %" #B ", p, 1, 1, 0, 0;\n}\n"                                \
                 : ACC                                                                     \
                 : "l"(da), "l"(db), "r"(1));                                              \
  }
ANVIL_WGMMA_K16(64, true, "bf16", ANVIL_REGS32, ANVIL_ACC32, 32, 33, 34)
ANVIL_WGMMA_K16(64, false, "f16", ANVIL_REGS32, ANVIL_ACC32, 32, 33, 34)
ANVIL_WGMMA_K16(128, true, "bf16", ANVIL_REGS64, ANVIL_ACC64, 64, 65, 66)
ANVIL_WGMMA_K16(128, false, "f16", ANVIL_REGS64, ANVIL_ACC64, 64, 65, 66)
ANVIL_WGMMA_K16(256, true, "bf16", ANVIL_REGS128, ANVIL_ACC128, 128, 129, 130)
ANVIL_WGMMA_K16(256, false, "f16", ANVIL_REGS128, ANVIL_ACC128, 128, 129, 130)

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
}
// Four floats at `p` in the shared memory of the cluster's CTA `rank`.
__device__ __forceinline__ float4 load_cluster(const float* p, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(smem_addr(p)), "r"(rank));
  float4 v;  // not volatile: the loads of a sum may be issued together (a cluster barrier
             // orders them after the writes)
  asm("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
      : "r"(remote));
  return v;
}

template <bool BF16>
struct Elem;
template <>
struct Elem<true> {
  using T = __nv_bfloat16;
  __device__ static float load(const T& v) { return __bfloat162float(v); }
  __device__ static T store(float v) { return __float2bfloat16_rn(v); }
};
template <>
struct Elem<false> {
  using T = __half;
  __device__ static float load(const T& v) { return __half2float(v); }
  __device__ static T store(float v) { return __float2half_rn(v); }
};

// The epilogue of a thread's NV values of D, adjacent pairs: value 2q + e is at row map.row(q),
// column map.col(q) + e. alpha, beta * C, bias and the activation are each a pass over all the
// values, so that a pass's loads are issued together and one value's arithmetic overlaps the
// others' (with one warp per scheduler nothing else hides a dependent instruction's latency:
// per value, with the branches inside, the epilogue took ~7000 cycles).
template <class E, int NV, class Map>
__device__ __forceinline__ void epilogue(const Params& p, float* v, const Map& map) {
  using T = typename E::T;
  const int m = p.m, n = p.n;
  const T* __restrict__ cin = static_cast<const T*>(p.c);
  const T* __restrict__ bias = static_cast<const T*>(p.bias);
  T* __restrict__ out = static_cast<T*>(p.d);
  auto inside = [&](int q, int e) { return map.row(q) < m && map.col(q) + e < n; };
#pragma unroll
  for (int i = 0; i < NV; ++i) v[i] *= p.alpha;
  if (cin && p.beta != 0.f) {
    float c[NV];
#pragma unroll
    for (int i = 0; i < NV; ++i)
      c[i] =
          inside(i / 2, i % 2)
              ? E::load(cin[static_cast<int64_t>(map.row(i / 2)) * p.ldc + map.col(i / 2) + i % 2])
              : 0.f;
#pragma unroll
    for (int i = 0; i < NV; ++i) v[i] += p.beta * c[i];
  }
  if (bias) {
    float b[NV];
#pragma unroll
    for (int i = 0; i < NV; ++i)
      b[i] = inside(i / 2, i % 2) ? E::load(bias[map.col(i / 2) + i % 2]) : 0.f;
#pragma unroll
    for (int i = 0; i < NV; ++i) v[i] += b[i];
  }
  switch (p.act) {
    case 1:
#pragma unroll
      for (int i = 0; i < NV; ++i) v[i] = v[i] > 0.f ? v[i] : 0.f;
      break;
    case 2:
#pragma unroll
      for (int i = 0; i < NV; ++i)
        v[i] = 0.5f * v[i] *
               (1.f + tanhf(0.7978845608028654f * (v[i] + 0.044715f * v[i] * v[i] * v[i])));
      break;
    case 3:
#pragma unroll
      for (int i = 0; i < NV; ++i) v[i] = 0.5f * v[i] * (1.f + erff(v[i] * 0.7071067811865476f));
      break;
    default:
      break;
  }
  if (p.no_store) {  // probe only
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < NV; ++i) sum += v[i];
    if (sum == 12345.f) out[0] = E::store(sum);  // never
    return;
  }
#pragma unroll
  for (int q = 0; q < NV / 2; ++q) {
    if (!inside(q, 0)) continue;
    T* dst = out + static_cast<int64_t>(map.row(q)) * p.ldd + map.col(q);
    const T x = E::store(v[2 * q]);
    if (!inside(q, 1)) {
      dst[0] = x;
    } else if (p.vec_store) {
      T two[2] = {x, E::store(v[2 * q + 1])};
      *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(two);
    } else {
      dst[0] = x;
      dst[1] = E::store(v[2 * q + 1]);
    }
  }
}

// Where an m64nNk16 accumulator's values lie: warp w holds rows 16w..16w+15; value 4j+e of a
// thread is row lane/4 (+8 for e >= 2), column 8j + 2(lane%4) (+1 for odd e); pair q = 2j + h.
struct FragmentMap {
  int row0, col0;  // the thread's first value's
  __device__ int row(int q) const { return row0 + 8 * (q % 2); }
  __device__ int col(int q) const { return col0 + 8 * (q / 2); }
};
// The summed split tile: group t of a thread is g = tid + 128 t, 4 values at row g / (cols / 4)
// and column first + 4 (g % (cols / 4)); pair q = 2t + h.
struct GroupMap {
  int m0, n0, tid, cols, first, groups, none;  // none: a row past every valid one
  __device__ int row(int q) const {
    const int g = tid + kThreads * (q / 2);
    return g < groups ? m0 + g / (cols / 4) : none;
  }
  __device__ int col(int q) const {
    const int g = tid + kThreads * (q / 2);
    return n0 + first + 4 * (g % (cols / 4)) + 2 * (q % 2);
  }
};

// The CTA's share of the split tile (columns [rank * BN / S, (rank + 1) * BN / S)), summed over
// the cluster's partial tiles in rank order; every load is issued before the first sum.
template <class E, int BN, int S>
__device__ __forceinline__ void reduce_store(const Params& p, const float* part, int m0, int n0,
                                             int tid, uint32_t rank) {
  constexpr int kGroups = BN / (8 * S) > 0 ? BN / (8 * S) : 1;  // per thread
  constexpr int cols = BN / S, ld = partial_ld(BN);
  const int rows = min(kBM, p.m - m0), groups = rows * (cols / 4);
  float4 t[kGroups][S];
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const int g = tid + kThreads * k;
    const int r = g < groups ? g / (cols / 4) : 0,
              c = static_cast<int>(rank) * cols + 4 * (g % (cols / 4));
#pragma unroll
    for (int q = 0; q < S; ++q)
      t[k][q] = g < groups ? load_cluster(&part[r * ld + c], q) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float v[4 * kGroups];
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    float4 sum = t[k][0];
#pragma unroll
    for (int q = 1; q < S; ++q) {
      sum.x += t[k][q].x;
      sum.y += t[k][q].y;
      sum.z += t[k][q].z;
      sum.w += t[k][q].w;
    }
    v[4 * k] = sum.x, v[4 * k + 1] = sum.y, v[4 * k + 2] = sum.z, v[4 * k + 3] = sum.w;
  }
  const GroupMap map{m0, n0, tid, cols, static_cast<int>(rank) * cols, groups, p.m};
  epilogue<E, 4 * kGroups>(p, v, map);
}

#ifdef SKINNY_TRACE
__device__ long long g_trace[16];
__device__ unsigned long long g_span[2][4096];  // per CTA: globaltimer at start and end
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define CTA_ID (blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z))
#define TRACE(i)                                                                                   \
  do {                                                                                             \
    if (tid == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) g_trace[i] = clock64(); \
    if (tid == 0 && (i) == 0 && CTA_ID < 4096) g_span[0][CTA_ID] = global_ns();                    \
    if (tid == 0 && (i) == 9 && CTA_ID < 4096) g_span[1][CTA_ID] = global_ns();                    \
  } while (0)
#else
#define TRACE(i)
#endif

template <int BN, bool BF16>
__global__ void __launch_bounds__(kThreads, 1)
    skinny_kernel(const __grid_constant__ CUtensorMap map_a,
                  const __grid_constant__ CUtensorMap map_b, const Params p) {
  using E = Elem<BF16>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const int ksub = p.ksub, kStage = stage_bytes(BN, ksub);
  const int stages = p.stages;
  const int tiles_bytes = stages * kStage;
  const int partial_bytes = kBM * partial_ld(BN) * 4;
  uint64_t* full = reinterpret_cast<uint64_t*>(
      base + (tiles_bytes > partial_bytes ? tiles_bytes : partial_bytes));
  uint64_t* empty = full + stages;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  TRACE(0);
  const uint32_t split = cluster_rank(), splits = gridDim.z;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * kBM;
  const int kb0 = static_cast<int>(split) * p.kb_per;
  const int kb1 = min(p.kb_total, kb0 + p.kb_per);
  const int nkb = kb1 > kb0 ? kb1 - kb0 : 0;

  if (tid == 0) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
    for (int s = 0; s < stages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 4);  // one arrival per warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;" ::
                     : "memory");
  }
  __syncthreads();
  auto issue = [&](int s, int kb) {
    uint8_t* a = base + s * kStage;
    mbar_expect_tx(&full[s], kStage);
    for (int sub = 0; sub < ksub; ++sub) {
      const int k = (kb * ksub + sub) * kBK;
      tma_load(a + sub * kATileBytes, &map_a, &full[s], k, m0);
      tma_load(a + ksub * kATileBytes + sub * BN * kBK * 2, &map_b, &full[s], k, n0);
    }
  };
  TRACE(1);
  if (tid == 0)
    for (int s = 0; s < stages && s < nkb; ++s) issue(s, kb0 + s);
  TRACE(2);

  float d[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
  // stage i's MMAs run while stage i + 1's are issued; stage i is refilled once they are done
  auto release = [&](int i) {
    if (i + stages >= nkb) return;
    const int s = i % stages;
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);
    if (tid == 0) {
      mbar_wait(&empty[s], (i / stages) & 1);
      issue(s, kb0 + i + stages);
    }
  };
  for (int i = 0; i < nkb; ++i) {
    const int s = i % stages;
    mbar_wait(&full[s], (i / stages) & 1);
    if (i == 0) TRACE(3);
    const uint8_t* a = base + s * kStage;
    wgmma_fence();
    for (int sub = 0; sub < ksub; ++sub) {
      const uint64_t da = smem_desc(a + sub * kATileBytes),
                     db = smem_desc(a + ksub * kATileBytes + sub * BN * kBK * 2);
#pragma unroll
      for (int j = 0; j < kBK / 16; ++j) wgmma_k16<BN, BF16>(d, da + 2 * j, db + 2 * j);
    }
    wgmma_commit_wait1();
    if (i > 0) release(i - 1);
  }
  wgmma_wait0();
  TRACE(4);

  const int r0 = 16 * warp + lane / 4;
  if (splits == 1) {  // no K split: the epilogue straight from the registers
    epilogue<E, BN / 2>(p, d, FragmentMap{m0 + r0, n0 + 2 * (lane % 4)});
    TRACE(5);
    TRACE(9);
    return;
  }
  __syncthreads();  // every MMA has read its stage: the tiles' memory takes the partial tile
  float* part = reinterpret_cast<float*>(base);
  constexpr int ld = partial_ld(BN);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int c = 8 * j + 2 * (lane % 4);
    *reinterpret_cast<float2*>(&part[r0 * ld + c]) = make_float2(d[4 * j], d[4 * j + 1]);
    *reinterpret_cast<float2*>(&part[(r0 + 8) * ld + c]) = make_float2(d[4 * j + 2], d[4 * j + 3]);
  }
  TRACE(5);
  cluster_sync();  // every CTA's partial tile is written
  TRACE(6);
  if (splits == 2)
    reduce_store<E, BN, 2>(p, part, m0, n0, tid, split);
  else if (splits == 4)
    reduce_store<E, BN, 4>(p, part, m0, n0, tid, split);
  else
    reduce_store<E, BN, 8>(p, part, m0, n0, tid, split);
  TRACE(7);
  cluster_sync();  // no CTA leaves while another reads its shared memory
  TRACE(9);
}

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// The TMA map of a row-major [rows, k] matrix read in boxes of box_rows x 64 (128-byte swizzle).
bool make_map(CUtensorMap* map, bool bf16, const void* ptr, int64_t rows, int64_t k, int64_t ld,
              int box_rows) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
  const cuuint32_t box[2] = {kBK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  return encode_fn()(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                     2, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

int attribute(int device, cudaDeviceAttr attr) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, attr, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return v;
}

// Bytes of pipeline stages a CTA may hold: 96 KB lets two CTAs share an SM, 200 KB one.
constexpr int kTileBudget[2] = {96 << 10, 200 << 10};
constexpr int kSmemLimit = 227 << 10;  // dynamic shared memory a CTA may opt in to on sm_90

// Stages within `budget`, at most the K blocks, and two at least where there are two K blocks
// (the main loop refills a stage only after issuing the next one's MMAs).
int stages_for(int bn, int ksub, int budget, int64_t kb_per) {
  int st = budget / stage_bytes(bn, ksub);
  if (st > kb_per) st = static_cast<int>(kb_per);
  const int least = kb_per >= 2 ? 2 : 1;
  return st < least ? least : st;
}

template <int BN, bool BF16>
cudaError_t set_smem(int device) {
  static std::atomic<uint64_t> done{0};  // devices whose attribute is set
  if (done.load(std::memory_order_relaxed) >> device & 1) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(
      skinny_kernel<BN, BF16>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemLimit);
  if (e == cudaSuccess) done.fetch_or(uint64_t{1} << device, std::memory_order_relaxed);
  return e;
}

cudaLaunchConfig_t launch_config(dim3 grid, int split, int smem, cudaStream_t stream,
                                 cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t lc{};
  lc.gridDim = grid;
  lc.blockDim = dim3(kThreads);
  lc.dynamicSmemBytes = static_cast<size_t>(smem);
  lc.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = 1;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = static_cast<unsigned>(split);
  lc.attrs = attr;
  lc.numAttrs = 1;
  return lc;
}

// What a device runs at once: clusters of each split (index log2) at each tile budget
// (kTileBudget). Clusters live within a GPC, so a GPU of 132 SMs holds 30 clusters of 4
// one-per-SM CTAs, not 33: a grid of 32 would run in two waves.
struct Capacity {
  int sms = 0;
  int clusters[4][2] = {};
};

cudaError_t capacity(int device, Capacity* out) {
  static std::mutex mu;
  static Capacity table[64];
  std::lock_guard<std::mutex> lock(mu);
  Capacity& c = table[device];
  if (c.sms == 0) {
    Capacity fresh;
    fresh.sms = attribute(device, cudaDevAttrMultiProcessorCount);
    if (fresh.sms <= 0) return cudaErrorNotSupported;
    if (const cudaError_t e = set_smem<128, true>(device); e != cudaSuccess) return e;
    for (int i = 0, split = 1; split <= kMaxSplit; ++i, split *= 2)
      for (int level = 0; level < 2; ++level) {
        cudaLaunchAttribute attr;
        const int smem = smem_bytes(128, stages_for(128, 1, kTileBudget[level], 64), 1);
        const cudaLaunchConfig_t lc = launch_config(dim3(1, 1, split), split, smem, nullptr, &attr);
        int& n = fresh.clusters[i][level];
        if (const cudaError_t e = cudaOccupancyMaxActiveClusters(&n, skinny_kernel<128, true>, &lc);
            e != cudaSuccess)
          return e;
        if (n <= 0) return cudaErrorNotSupported;
      }
    c = fresh;
  }
  *out = c;
  return cudaSuccess;
}

// A tile width, a split, a K block and a pipeline depth for `g`.
struct Config {
  int bn, split, ksub, kb_per, stages;
};
Config make_config(const SkinnyGemm& g, int bn, int split, int ksub, int level) {
  const int64_t kb_total = (g.k + kBK * ksub - 1) / (kBK * ksub);
  const int64_t kb_per = (kb_total + split - 1) / split;
  return {bn, split, ksub, static_cast<int>(kb_per),
          stages_for(bn, ksub, kTileBudget[level], kb_per)};
}

// The least estimated time, counting a CTA's bytes times the CTAs an SM runs one after another
// or side by side (waves of clusters the device holds at once, CTAs of a wave per SM); fewer
// splits and the wider tile on a tie.
Config choose(const SkinnyGemm& g, const Capacity& cap) {
  const int64_t mt = (g.m + kBM - 1) / kBM, kb_total = (g.k + kBK - 1) / kBK;
  Config best{};
  int64_t best_cost = INT64_MAX;
  for (const int bn : {128, 64})
    for (int i = 0, split = 1; split <= kMaxSplit; ++i, split *= 2) {
      const int64_t kb_per = (kb_total + split - 1) / split;
      if ((split - 1) * kb_per >= kb_total) break;  // a split with no K
      const int64_t clusters = (g.n + bn - 1) / bn * mt, held = cap.clusters[i][0];
      const int64_t waves = (clusters + held - 1) / held;
      const int64_t per_sm = ((clusters < held ? clusters : held) * split + cap.sms - 1) / cap.sms;
      const int64_t cost = waves * per_sm * kb_per * stage_bytes(bn, 1);
      if (cost < best_cost) {
        best_cost = cost;
        best = make_config(g, bn, split, 1, 0);
      }
    }
  return best;
}

template <int BN, bool BF16>
cudaError_t launch(const SkinnyGemm& g, const Config& cfg, int device, cudaStream_t stream) {
  CUtensorMap map_a, map_b;
  if (encode_fn() == nullptr || !make_map(&map_a, BF16, g.a, g.m, g.k, g.lda, kBM) ||
      !make_map(&map_b, BF16, g.b, g.n, g.k, g.ldb, BN))
    return cudaErrorNotSupported;
  if (const cudaError_t e = set_smem<BN, BF16>(device); e != cudaSuccess) return e;
  Params p{};
  p.m = static_cast<int>(g.m);
  p.n = static_cast<int>(g.n);
  p.kb_total = static_cast<int>((g.k + kBK * cfg.ksub - 1) / (kBK * cfg.ksub));
  p.kb_per = cfg.kb_per;
  p.stages = cfg.stages;
  p.ksub = cfg.ksub;
  p.alpha = g.alpha;
  p.beta = g.c ? g.beta : 0.f;
  p.c = g.c;
  p.ldc = g.ldc;
  p.d = g.d;
  p.ldd = g.ldd;
  p.bias = g.bias;
  p.act = static_cast<int>(g.act);
  p.vec_store = g.ldd % 2 == 0 && reinterpret_cast<uintptr_t>(g.d) % 4 == 0;
  p.no_store = getenv("SKINNY_NO_STORE") != nullptr;  // probe: the epilogue without its stores
  const dim3 grid(static_cast<unsigned>((g.n + BN - 1) / BN),
                  static_cast<unsigned>((g.m + kBM - 1) / kBM), static_cast<unsigned>(cfg.split));
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t lc =
      launch_config(grid, cfg.split, smem_bytes(BN, cfg.stages, cfg.ksub), stream, &attr);
  return cudaLaunchKernelEx(&lc, skinny_kernel<BN, BF16>, map_a, map_b, p);
}

}  // namespace

cudaError_t skinny_gemm(const SkinnyGemm& g, cudaStream_t stream) {
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (device < 0 || device >= 64) return cudaErrorNotSupported;
  Capacity cap;
  if (const cudaError_t e = capacity(device, &cap); e != cudaSuccess) return e;
  const Config cfg = choose(g, cap);
  if (cfg.bn == 256)
    return g.bf16 ? launch<256, true>(g, cfg, device, stream)
                  : launch<256, false>(g, cfg, device, stream);
  if (cfg.bn == 128)
    return g.bf16 ? launch<128, true>(g, cfg, device, stream)
                  : launch<128, false>(g, cfg, device, stream);
  return g.bf16 ? launch<64, true>(g, cfg, device, stream)
                : launch<64, false>(g, cfg, device, stream);
}

}  // namespace anvil::cuda_backend
