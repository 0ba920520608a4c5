// The CUDA C++ text of the skinny GEMM (cuda_skinny.h): a kernel template, instantiated once
// per translation unit by render_skinny_source with the configuration's constants.
#include <sstream>

#include "codegen/gemm/cuda_skinny.h"

namespace anvil::codegen::gemm {

namespace {

// Shared memory: `stages` stages of an A tile [BM rows][128 K] and a B tile [BN rows][128 K],
// rows of 16 chunks of 16 bytes, chunk c of row r stored at chunk c ^ (r & 7) so that the
// cp.async writes and the 16-byte reads of 8 rows × 4 chunks per warp are free of bank
// conflicts. After the main loop the same memory holds the fp32 partial tiles, one per K warp,
// rows padded by 8 floats.
constexpr const char* kKernel = R"CUDA(
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>

#include <atomic>

namespace {

namespace cg = cooperative_groups;

constexpr int kBM = 16 * kMTiles, kBN = kNTile, kBK = 128, kChunks = kBK / 8;
constexpr int kThreads = 32 * kWarps, kRowStep = kThreads / 16;  // rows one load pass covers
constexpr int kWarpsK = kWarps / kWarpsN, kWarpN = kBN / kWarpsN, kNT = kWarpN / 8;
constexpr int kWarpChunks = kChunks / kWarpsK, kPasses = kWarpChunks / 4;
constexpr int kTileElems = (kBM + kBN) * kBK;  // one stage, elements
constexpr int kRedStride = kBN + 8;            // fp32 partial tile row, floats

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool pred) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = pred ? 16 : 0;  // 0: the 16 bytes are zero-filled
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void mma16816(float* d, unsigned a0, unsigned a1, unsigned a2,
                                         unsigned a3, unsigned b0, unsigned b1) {
  // not volatile: independent MMAs may be interleaved by the compiler
  asm("mma.sync.aligned.m16n8k16.row.col.f32." kMmaType "." kMmaType
      ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float activate(float v) {
  switch (kAct) {  // ANVIL_GEMM_ACT_*; NaN passes through as in PyTorch
    case 1: return v < 0.f ? 0.f : v;
    case 2: return v < 0.f ? 0.f : (v > 6.f ? 6.f : v);
    case 3: return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    case 4: {
      const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
      return 0.5f * v * (1.f + tanhf(u));
    }
    case 5: return v / (1.f + __expf(-v));
    default: return v;
  }
}

// Row r, 16-byte chunk c of a tile whose rows hold kChunks chunks.
__device__ __forceinline__ int swz(int r, int c) { return r * kBK + ((c ^ (r & 7)) << 3); }

__global__ void __launch_bounds__(kThreads) skinny_kernel(const T* __restrict__ a, int64_t lda,
                                                     const T* __restrict__ b, int64_t ldb,
                                                     T* __restrict__ d, int64_t ldd,
                                                     const T* __restrict__ bias, int M, int N,
                                                     int K, float alpha) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int wn = warp % kWarpsN, wk = warp / kWarpsN;
  const int split = static_cast<int>(blockIdx.x % kSplit);
  const int n0 = static_cast<int>(blockIdx.x / kSplit) * kBN, m0 = blockIdx.y * kBM;
  const int k_tiles = (K + kBK - 1) / kBK;
  const int kt0 = split * k_tiles / kSplit, kt1 = (split + 1) * k_tiles / kSplit;
  const int nk = kt1 - kt0;

  // Thread tid copies chunk lc of rows lr, lr + kRowStep, ... of both tiles: the same chunk and
  // the same swizzle (rows a multiple of 8 apart share r & 7), so one base offset serves all.
  const int lr = tid >> 4, lc = tid & 15;
  const int soff = swz(lr, lc);
  const T* a_row = a + (int64_t)(m0 + lr) * lda + lc * 8;
  const T* b_row = b + (int64_t)(n0 + lr) * ldb + lc * 8;
  auto load = [&](int stage, int kt) {
    T* sa = smem + stage * kTileElems + soff;
    T* sb = sa + kBM * kBK;
    const int k0 = kt * kBK;
    const bool kok = k0 + lc * 8 < K;
#pragma unroll
    for (int j = 0; j < kBM / kRowStep; ++j) {
      const bool ok = kok && m0 + lr + kRowStep * j < M;
      cp_async16(sa + j * kRowStep * kBK, ok ? a_row + (int64_t)(kRowStep * j) * lda + k0 : a,
                 ok);
    }
#pragma unroll
    for (int j = 0; j < kBN / kRowStep; ++j) {
      const bool ok = kok && n0 + lr + kRowStep * j < N;
      cp_async16(sb + j * kRowStep * kBK, ok ? b_row + (int64_t)(kRowStep * j) * ldb + k0 : b,
                 ok);
    }
  };

  float acc[kMTiles][kNT][4];
#pragma unroll
  for (int i = 0; i < kMTiles; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nk) load(s, kt0 + s);
    cp_async_commit();
  }
  for (int t = 0; t < nk; ++t) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int tn = t + kStages - 1;
    if (tn < nk) load(tn % kStages, kt0 + tn);
    cp_async_commit();
    const T* sa = smem + (t % kStages) * kTileElems;
    const T* sb = sa + kBM * kBK;
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int c = wk * kWarpChunks + p * 4 + q;
      uint4 af[kMTiles][2];
#pragma unroll
      for (int i = 0; i < kMTiles; ++i) {
        af[i][0] = *reinterpret_cast<const uint4*>(sa + swz(i * 16 + g, c));
        af[i][1] = *reinterpret_cast<const uint4*>(sa + swz(i * 16 + g + 8, c));
      }
      uint4 bf[kNT];
#pragma unroll
      for (int j = 0; j < kNT; ++j)
        bf[j] = *reinterpret_cast<const uint4*>(sb + swz(wn * kWarpN + j * 8 + g, c));
      // K values 0-3 of the chunk, then 4-7: the MMAs in a row update different accumulators
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int i = 0; i < kMTiles; ++i)
          mma16816(acc[i][j], af[i][0].x, af[i][1].x, af[i][0].y, af[i][1].y, bf[j].x, bf[j].y);
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int i = 0; i < kMTiles; ++i)
          mma16816(acc[i][j], af[i][0].z, af[i][1].z, af[i][0].w, af[i][1].w, bf[j].z, bf[j].w);
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // Partial tiles: one per K warp, then summed into the first.
  float* red = reinterpret_cast<float*>(smem_raw);
  float* mine = red + wk * kBM * kRedStride;
#pragma unroll
  for (int i = 0; i < kMTiles; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      const int col = wn * kWarpN + j * 8 + 2 * q, row = i * 16 + g;
      *reinterpret_cast<float2*>(mine + row * kRedStride + col) =
          make_float2(acc[i][j][0], acc[i][j][1]);
      *reinterpret_cast<float2*>(mine + (row + 8) * kRedStride + col) =
          make_float2(acc[i][j][2], acc[i][j][3]);
    }
  __syncthreads();
  if (kWarpsK > 1) {
    for (int e = tid * 4; e < kBM * kBN; e += kThreads * 4) {
      const int row = e / kBN, col = e % kBN;
      float4 s = *reinterpret_cast<float4*>(red + row * kRedStride + col);
#pragma unroll
      for (int w = 1; w < kWarpsK; ++w) {
        const float4 o = *reinterpret_cast<const float4*>(red + (w * kBM + row) * kRedStride + col);
        s.x += o.x; s.y += o.y; s.z += o.z; s.w += o.w;
      }
      *reinterpret_cast<float4*>(red + row * kRedStride + col) = s;
    }
    __syncthreads();
  }

  // The K splits of a cluster: CTA `split` sums rows [split, split + 1) · kBM / kSplit of every
  // CTA's tile through distributed shared memory (ranks in order), applies the epilogue, stores.
  constexpr int kRows = kBM / kSplit;
#if kSplit > 1
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
#endif
  const int r0 = split * kRows;
  for (int e = tid * 4; e < kRows * kBN; e += kThreads * 4) {
    const int row = r0 + e / kBN, col = e % kBN;
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int r = 0; r < kSplit; ++r) {
#if kSplit > 1
      const float* other = cluster.map_shared_rank(red, r);
#else
      const float* other = red;
#endif
      const float4 o = *reinterpret_cast<const float4*>(other + row * kRedStride + col);
      s.x += o.x; s.y += o.y; s.z += o.z; s.w += o.w;
    }
    const int gm = m0 + row, gn = n0 + col;
    if (gm >= M) continue;
    float v[4] = {s.x, s.y, s.z, s.w};
    __align__(8) T out[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      float x = alpha * v[u];
      if (kBias && gn + u < N) x += static_cast<float>(bias[gn + u]);
      out[u] = static_cast<T>(activate(x));
    }
    T* dst = d + (int64_t)gm * ldd + gn;
    if (gn + 3 < N && (reinterpret_cast<uintptr_t>(dst) & 7) == 0) {
      *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(out);
    } else {
      for (int u = 0; u < 4 && gn + u < N; ++u) dst[u] = out[u];
    }
  }
#if kSplit > 1
  cluster.sync();  // keep this CTA's tile alive until every CTA of the cluster has read it
#endif
}

int launch(const AnvilGemmCall* call, void* stream) {
  const int smem = kStages * kTileElems * static_cast<int>(sizeof(T)) >
                           kWarpsK * kBM * kRedStride * 4
                       ? kStages * kTileElems * static_cast<int>(sizeof(T))
                       : kWarpsK * kBM * kRedStride * 4;
  // A failed CUDA call leaves its error in the thread's slot, which the package's next launch
  // check would read: clear it, so the step's cuBLASLt fallback runs cleanly.
  auto fail = [] {
    (void)cudaGetLastError();
    return 6;
  };
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return fail();
  // per device: 0 unknown, -1 unusable (not compute capability 9.x: clusters and this unit's
  // sm_90a code, which loads on no other architecture), 1 usable, 2 usable with the shared memory
  // size set
  static std::atomic<int> state[64];
  if (device < 0 || device >= 64) return 6;
  int st = state[device].load(std::memory_order_acquire);
  if (st == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
      return fail();
    st = major == 9 ? 1 : -1;
    state[device].store(st, std::memory_order_release);
  }
  if (st < 0) return 6;
  if (st == 1) {
    if (cudaFuncSetAttribute(skinny_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) !=
        cudaSuccess)
      return fail();
    state[device].store(2, std::memory_order_release);
  }
  const int64_t n_tiles = (call->n + kBN - 1) / kBN, m_tiles = (call->m + kBM - 1) / kBM;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(n_tiles * kSplit), static_cast<unsigned>(m_tiles), 1);
  cfg.blockDim = dim3(kThreads, 1, 1);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = kSplit;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t e = cudaLaunchKernelEx(
      &cfg, skinny_kernel, static_cast<const T*>(call->a), call->lda,
      static_cast<const T*>(call->b), call->ldb, static_cast<T*>(call->c), call->ldc,
      static_cast<const T*>(call->bias), static_cast<int>(call->m), static_cast<int>(call->n),
      static_cast<int>(call->k), call->alpha);
  return e == cudaSuccess ? 0 : fail();
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

int check(const AnvilGemmCall* call) {
  if (call->a_dtype != kDType || call->b_dtype != kDType || call->c_dtype != kDType) return 1;
  if (call->trans_a != 0 || call->trans_b != 1 || call->beta != 0.f) return 1;
  if (call->activation != kAct) return 1;
  if (kBias ? (call->bias_kind != 1 || !call->bias) : call->bias_kind != 0) return 1;
  // grid y counts M tiles (at most 65535); rows, columns and K in int with room for a tile
  if (call->m > 65535LL * kBM || call->n > 2147483647LL - 2 * kBN ||
      call->k > 2147483647LL - kBK)
    return 1;
  if (call->k % 8 != 0 || call->lda % 8 != 0 || call->ldb % 8 != 0) return 2;
  if (!aligned16(call->a) || !aligned16(call->b)) return 2;
  return 0;
}

}  // namespace
)CUDA";

const char* act_token(GemmActivation a) {
  switch (a) {
    case GemmActivation::kRelu: return "_relu";
    case GemmActivation::kRelu6: return "_relu6";
    case GemmActivation::kGeluErf: return "_gelu_erf";
    case GemmActivation::kGeluTanh: return "_gelu_tanh";
    case GemmActivation::kSilu: return "_silu";
    default: return "";
  }
}

int act_code(GemmActivation a) {  // ANVIL_GEMM_ACT_*
  switch (a) {
    case GemmActivation::kRelu: return 1;
    case GemmActivation::kRelu6: return 2;
    case GemmActivation::kGeluErf: return 3;
    case GemmActivation::kGeluTanh: return 4;
    case GemmActivation::kSilu: return 5;
    default: return 0;
  }
}

}  // namespace

int SkinnyConfig::smem_bytes() const {
  const int bm = 16 * m_tiles;
  const int pipeline = stages * (bm + n_tile) * 128 * 2;
  const int reduce = (warps / warps_n) * bm * (n_tile + 8) * 4;
  return pipeline > reduce ? pipeline : reduce;
}

std::string skinny_config_name(const SkinnyConfig& c) {
  std::ostringstream os;
  os << "anvil_skinny_sm90_" << (c.dtype == DType::kFloat16 ? "f16" : "bf16") << "_m"
     << 16 * c.m_tiles << "_n" << c.n_tile << "_w" << c.warps_n << "x" << c.warps / c.warps_n
     << "_s" << c.split_k << "_st" << c.stages;
  if (c.bias == GemmBias::kPerColumn) os << "_bias";
  os << act_token(c.activation);
  return os.str();
}

std::string render_skinny_source(const SkinnyConfig& c, const std::string& entry) {
  const bool f16 = c.dtype == DType::kFloat16;
  std::ostringstream o;
  o << "// Generated by anvil (src/codegen/gemm/cuda_skinny_source.cpp): " << skinny_config_name(c)
    << "\n#include \"anvil/anvil_rt.h\"\n"
    << "typedef " << (f16 ? "__half" : "__nv_bfloat16") << " T;\n"
    << "#define kMmaType \"" << (f16 ? "f16" : "bf16") << "\"\n"
    << "#define kSplit " << c.split_k << "\n"
    << "constexpr int kMTiles = " << c.m_tiles << ", kNTile = " << c.n_tile
    << ", kWarps = " << c.warps << ", kWarpsN = " << c.warps_n << ", kStages = " << c.stages
    << ";\n"
    << "constexpr int kAct = " << act_code(c.activation)
    << ", kBias = " << (c.bias == GemmBias::kPerColumn ? 1 : 0)
    << ", kDType = " << static_cast<int>(c.dtype) << ";\n";
  // T is declared before the CUDA headers are included by the kernel text: the typedef needs them.
  std::string text = o.str();
  const std::string includes =
      "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n";
  text.insert(text.find("typedef"), includes);
  text += kKernel;
  text += "\nextern \"C\" __attribute__((visibility(\"default\"))) size_t " + entry +
          "_workspace(const AnvilGemmCall*) { return 0; }\n";
  text += "extern \"C\" __attribute__((visibility(\"default\"))) int " + entry +
          "(const AnvilGemmCall* call, void* workspace, size_t workspace_bytes, void* stream) {\n"
          "  (void)workspace; (void)workspace_bytes;\n"
          "  const int rc = check(call);\n"
          "  if (rc != 0) return rc;\n"
          "  if (call->m <= 0 || call->n <= 0) return 0;\n"
          "  return launch(call, stream);\n"
          "}\n";
  return text;
}

}  // namespace anvil::codegen::gemm
