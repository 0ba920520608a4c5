// The text of one CPU GEMM template (cpu_templates.h): a prelude of the configuration's
// constants, one of three micro-kernels (AVX2 fp32, AVX-512 fp32, AVX-512 bf16 pairs) and the
// common body (validation, packing, blocking, threading, epilogue) written once below.
#include <sstream>

#include "codegen/fast_math_text.h"
#include "codegen/gemm/cpu_templates.h"
#include "core/error.h"

namespace anvil::codegen::gemm {

namespace {

// The micro-kernels: kernel(steps, ap, bp, t) computes the MR x NR tile t (row-major, fp32) =
// sum over `steps` packed K groups of A panel (MR values per group) times B panel (NR values
// per group). Loops over MR and the vectors of NR are fully unrolled so the accumulators live
// in registers.
constexpr const char* kKernelAvx512 = R"SRC(
constexpr int NV = NR / 16;
inline void kernel(int64_t steps, const PackedA* __restrict ap, const PackedB* __restrict bp,
                   Acc* __restrict t) {
  __m512 acc[MR][NV];
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < steps; ++p) {
    __m512 b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_ps(bp + v * 16);
    _mm_prefetch(reinterpret_cast<const char*>(bp + 8 * NR), _MM_HINT_T0);
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(ap[r]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
    ap += MR;
    bp += NR;
  }
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(t + r * NR + v * 16, acc[r][v]);
}
)SRC";

constexpr const char* kKernelAvx2 = R"SRC(
constexpr int NV = NR / 8;
inline void kernel(int64_t steps, const PackedA* __restrict ap, const PackedB* __restrict bp,
                   Acc* __restrict t) {
  __m256 acc[MR][NV];
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < steps; ++p) {
    __m256 b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = _mm256_loadu_ps(bp + v * 8);
    _mm_prefetch(reinterpret_cast<const char*>(bp + 8 * NR), _MM_HINT_T0);
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      const __m256 a = _mm256_broadcast_ss(ap + r);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(a, b[v], acc[r][v]);
    }
    ap += MR;
    bp += NR;
  }
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(t + r * NR + v * 8, acc[r][v]);
}
)SRC";

// bf16 pairs: a K group is (k, k+1); A holds MR pairs (one 32-bit word per row), B NR pairs.
constexpr const char* kKernelAvx512Bf16 = R"SRC(
constexpr int NV = NR / 16;
inline void kernel(int64_t steps, const PackedA* __restrict ap, const PackedB* __restrict bp,
                   Acc* __restrict t) {
  __m512 acc[MR][NV];
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < steps; ++p) {
    __m512bh b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = (__m512bh)_mm512_loadu_si512(bp + v * 32);
    _mm_prefetch(reinterpret_cast<const char*>(bp + 16 * NR), _MM_HINT_T0);
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      uint32_t pair;
      std::memcpy(&pair, ap + 2 * r, 4);
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a, b[v]);
    }
    ap += 2 * MR;
    bp += 2 * NR;
  }
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(t + r * NR + v * 16, acc[r][v]);
}
)SRC";

// int8: a K group is 4 values; A holds MR groups of u8 (a + 128), B NR groups of s8; vpdpbusd
// sums the 4 products into int32 (the 128 * column sum of B is subtracted in the store).
constexpr const char* kKernelAvx512Vnni = R"SRC(
constexpr int NV = NR / 16;
inline void kernel(int64_t steps, const PackedA* __restrict ap, const PackedB* __restrict bp,
                   Acc* __restrict t) {
  __m512i acc[MR][NV];
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_si512();
#pragma GCC unroll 2
  for (int64_t p = 0; p < steps; ++p) {
    __m512i b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_si512(bp + v * 64);
    _mm_prefetch(reinterpret_cast<const char*>(bp + 32 * NR), _MM_HINT_T0);
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      uint32_t quad;
      std::memcpy(&quad, ap + 4 * r, 4);
      const __m512i a = _mm512_set1_epi32(static_cast<int>(quad));
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], a, b[v]);
    }
    ap += 4 * MR;
    bp += 4 * NR;
  }
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) _mm512_storeu_si512(t + r * NR + v * 16, acc[r][v]);
}
)SRC";

// The common body. Uses the prelude's MR, NR, KC, MC, NC, kStep (K values per packed group),
// In / PackedA / PackedB / Acc / Out (element types), kInt8, kInDtype / kOutDtype and kName.
constexpr const char* kBody = R"SRC(
inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {  // round to nearest even; NaN stays NaN
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float to_f32(float v) { return v; }
inline float to_f32(uint16_t v) { return bf16_to_f32(v); }
inline float to_f32(int8_t v) { return v; }
inline float to_f32(int32_t v) { return float(v); }
inline PackedA pack_a_val(In v) {
  if constexpr (kInt8) return PackedA(int(v) + 128);
  else if constexpr (sizeof(PackedA) == sizeof(In)) return PackedA(v);
  else return PackedA(to_f32(v));
}
inline PackedB pack_b_val(In v) {
  if constexpr (sizeof(PackedB) == sizeof(In)) return PackedB(v); else return PackedB(to_f32(v));
}
inline Out to_out(float v) {
  if constexpr (sizeof(Out) == 4) return v; else return f32_to_bf16(v);
}
inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline void* alloc64(int64_t bytes) {
  return bytes > 0 ? std::aligned_alloc(64, size_t(round_up(bytes, 64))) : nullptr;
}

// The packed-B buffer is kept between calls (one per template, taken and given back atomically:
// a concurrent call allocates its own): a fresh one per call costs a page fault per 4 KiB, as
// much as the packing itself for a large B. Buffers over 64 MiB are not kept.
struct BCache {
  std::atomic<char*> buf{nullptr};  // 64 header bytes holding the capacity, then the data
  ~BCache() { std::free(buf.load()); }
};
BCache g_bcache;
void* take_b(int64_t bytes) {
  char* b = g_bcache.buf.exchange(nullptr);
  if (b && *reinterpret_cast<int64_t*>(b) >= bytes) return b + 64;
  std::free(b);
  b = static_cast<char*>(std::aligned_alloc(64, size_t(round_up(bytes + 64, 64))));
  if (!b) return nullptr;
  *reinterpret_cast<int64_t*>(b) = bytes;
  return b + 64;
}
void give_b(void* p) {
  if (!p) return;
  char* b = static_cast<char*>(p) - 64;
  if (*reinterpret_cast<int64_t*>(b) > (int64_t(64) << 20)) return std::free(b);
  std::free(g_bcache.buf.exchange(b));
}

struct Job {
  const AnvilGemmCall* g;
  const In* a;
  const In* b;
  Out* c;
  const Out* bias;
  int64_t m, n, k, kp;  // kp: k rounded up to kStep
  PackedB* bpack;       // ceil(n / NR) panels of kp x NR
  int32_t* bsum;        // int8: 128 * the sum of each column of B (per panel, NR each)
  int64_t mc, nc, nbm, nbn, kblocks;
  std::atomic<int> failed{0};
  const AnvilRtApi* api;
};

// Packing walks K in chunks of kChunk steps (a multiple of every kStep), so both the rows read and
// the panel part written stay in L1 whatever the layout (no page-strided walks down a column).
constexpr int64_t kChunk = 16;

// B panels [jp0, jp1) over K rows [k0, k1) into `out` (panel jp at out + (jp - jp0) * kpp * NR,
// kpp = round_up(k1 - k0, kStep)): element (k0 + p, j0 + jj) at
// [(p / kStep * NR + jj) * kStep + p % kStep], zero beyond n and k1.
void pack_b_panels(const Job& x, int64_t jp0, int64_t jp1, int64_t k0, int64_t k1, PackedB* out) {
  const int64_t ldb = x.g->ldb, kpp = round_up(k1 - k0, kStep);
  for (int64_t jp = jp0; jp < jp1; ++jp)
    if (x.n - jp * NR < NR || kpp != k1 - k0)
      std::memset(out + (jp - jp0) * kpp * NR, 0, size_t(kpp * NR) * sizeof(PackedB));
  for (int64_t pc = k0; pc < k1; pc += kChunk) {
    const int64_t pe = min64(pc + kChunk, k1);
    for (int64_t jp = jp0; jp < jp1; ++jp) {
      PackedB* dst = out + (jp - jp0) * kpp * NR - k0 * NR;  // k0 is a multiple of kStep
      const int64_t j0 = jp * NR, nv = min64(NR, x.n - j0);
      if (!x.g->trans_b) {
        for (int64_t p = pc; p < pe; ++p) {
          const In* src = x.b + p * ldb + j0;
          PackedB* d = dst + (p / kStep) * NR * kStep + p % kStep;
          for (int64_t jj = 0; jj < nv; ++jj) d[jj * kStep] = pack_b_val(src[jj]);
        }
      } else {
        for (int64_t jj = 0; jj < nv; ++jj) {
          const In* src = x.b + (j0 + jj) * ldb;
          for (int64_t p = pc; p < pe; ++p)
            dst[((p / kStep) * NR + jj) * kStep + p % kStep] = pack_b_val(src[p]);
        }
      }
    }
  }
  if (!kInt8) return;  // int8 packs all of K at once (k0 = 0)
  for (int64_t jp = jp0; jp < jp1; ++jp) {
    const PackedB* dst = x.bpack + jp * x.kp * NR;
    int32_t* sum = x.bsum + jp * NR;
    for (int64_t jj = 0; jj < NR; ++jj) sum[jj] = 0;
    for (int64_t q = 0; q < x.kp / kStep; ++q)
      for (int64_t jj = 0; jj < NR; ++jj)
        for (int64_t t = 0; t < kStep; ++t) sum[jj] += int32_t(dst[(q * NR + jj) * kStep + t]);
    for (int64_t jj = 0; jj < NR; ++jj) sum[jj] *= 128;
  }
}

// A rows [i0, i0 + rows) x K [p0, p0 + kc) into MR-row panels of kcp = round_up(kc, kStep)
// steps: element (r, p) of panel g at dst[g * MR * kcp + (p / kStep * MR + r) * kStep + p % kStep].
void pack_a(const Job& x, int64_t i0, int64_t rows, int64_t p0, int64_t kc, PackedA* dst) {
  const int64_t kcp = round_up(kc, kStep), lda = x.g->lda;
  for (int64_t g0 = 0; g0 < rows; g0 += MR) {
    PackedA* d = dst + g0 * kcp;
    const int64_t rv = min64(MR, rows - g0), r0 = i0 + g0;
    if (rv < MR || kcp != kc) std::memset(d, 0, size_t(MR * kcp) * sizeof(PackedA));
    if (!x.g->trans_a && kStep == 1 && rv == MR) {
      // Full panel: rows side by side, MR contiguous stores per K step.
      const In* src[MR];
#pragma GCC unroll 32
      for (int r = 0; r < MR; ++r) src[r] = x.a + (r0 + r) * lda + p0;
      for (int64_t p = 0; p < kc; ++p)
#pragma GCC unroll 32
        for (int r = 0; r < MR; ++r) d[p * MR + r] = pack_a_val(src[r][p]);
    } else if (!x.g->trans_a) {
      for (int64_t pc = 0; pc < kc; pc += kChunk) {
        const int64_t pe = min64(pc + kChunk, kc);
        for (int64_t r = 0; r < rv; ++r) {
          const In* src = x.a + (r0 + r) * lda + p0;
          for (int64_t p = pc; p < pe; ++p) d[((p / kStep) * MR + r) * kStep + p % kStep] = pack_a_val(src[p]);
        }
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        const In* src = x.a + (p0 + p) * lda + r0;
        PackedA* dp = d + (p / kStep) * MR * kStep + p % kStep;
        for (int64_t r = 0; r < rv; ++r) dp[r * kStep] = pack_a_val(src[r]);
      }
    }
  }
}

// The store of one tile: v = alpha * t + (first block: beta * C, else the running sum in acc);
// not the last K block: acc = v; the last: C = activation(v + bias).
void store_tile(const Job& x, const Acc* t, int64_t i0, int64_t j0, int64_t rv, int64_t cv,
                bool first, bool last, Acc* acc, int64_t ld_acc) {
  const AnvilGemmCall& g = *x.g;
  const float alpha = g.alpha, beta = g.beta;
  alignas(64) float v[NR];
  for (int64_t r = 0; r < rv; ++r) {
    const Acc* tr = t + r * NR;
    Acc* ar = acc + r * ld_acc;
    const int64_t i = i0 + r;
    for (int64_t jj = 0; jj < cv; ++jj) v[jj] = alpha * tr[jj];
    if (!first) {
      for (int64_t jj = 0; jj < cv; ++jj) v[jj] += ar[jj];
    } else if (beta != 0.0f) {
      const Out* cr = x.c + i * g.ldc + j0;
      for (int64_t jj = 0; jj < cv; ++jj) v[jj] += beta * to_f32(cr[jj]);
    }
    if (!last) {
      for (int64_t jj = 0; jj < cv; ++jj) ar[jj] = v[jj];
      continue;
    }
    if (g.bias_kind == ANVIL_GEMM_BIAS_COL) {
      const Out* bb = x.bias + j0;
      for (int64_t jj = 0; jj < cv; ++jj) v[jj] += to_f32(bb[jj]);
    } else if (g.bias_kind == ANVIL_GEMM_BIAS_ROW) {
      const float bv = to_f32(x.bias[i]);
      for (int64_t jj = 0; jj < cv; ++jj) v[jj] += bv;
    }
    switch (g.activation) {
      case ANVIL_GEMM_ACT_RELU:
        for (int64_t jj = 0; jj < cv; ++jj) v[jj] = v[jj] > 0.0f ? v[jj] : 0.0f;
        break;
      case ANVIL_GEMM_ACT_RELU6:
        for (int64_t jj = 0; jj < cv; ++jj) v[jj] = v[jj] > 0.0f ? (v[jj] < 6.0f ? v[jj] : 6.0f) : 0.0f;
        break;
      case ANVIL_GEMM_ACT_GELU_ERF:
        for (int64_t jj = 0; jj < cv; ++jj)
          v[jj] = 0.5f * v[jj] * (1.0f + fast_erf(v[jj] * 0.70710678118654752f));
        break;
      case ANVIL_GEMM_ACT_GELU_TANH:
        for (int64_t jj = 0; jj < cv; ++jj)
          v[jj] = 0.5f * v[jj] *
                  (1.0f + fast_tanh(0.79788456080286536f * (v[jj] + 0.044715f * v[jj] * v[jj] * v[jj])));
        break;
      case ANVIL_GEMM_ACT_SILU:
        for (int64_t jj = 0; jj < cv; ++jj) v[jj] = v[jj] * fast_sigmoid(v[jj]);
        break;
      default:
        break;
    }
    Out* cr = x.c + i * g.ldc + j0;
    for (int64_t jj = 0; jj < cv; ++jj) cr[jj] = to_out(v[jj]);
  }
}

// int8: exact int32 sums (alpha 1, beta 0, no bias / activation: checked by run); the running
// sum is C itself; the first K block subtracts 128 * the column sums of B (A was packed + 128).
void store_tile_int(const Job& x, const Acc* t, int64_t i0, int64_t j0, int64_t rv, int64_t cv,
                    bool first, Acc* acc, int64_t ld_acc) {
  const int32_t* comp = x.bsum ? x.bsum + j0 : nullptr;
  for (int64_t r = 0; r < rv; ++r) {
    const Acc* tr = t + r * NR;
    Acc* ar = acc + r * ld_acc;
    if (first) {
      for (int64_t jj = 0; jj < cv; ++jj) ar[jj] = Acc(int32_t(tr[jj]) - (comp ? comp[jj] : 0));
    } else {
      for (int64_t jj = 0; jj < cv; ++jj) ar[jj] = Acc(int32_t(tr[jj]) + int32_t(ar[jj]));
    }
  }
  (void)i0;
}

// One MC x NC block of C: the K blocks in order, A packed per block, B from the packed panels.
void run_block(Job& x, int64_t block) {
  // Column-block major: consecutive blocks (one thread's chunk) share the K x NC slice of packed
  // B, which stays in L3 while the row blocks pass.
  const int64_t jc = block / x.nbm * x.nc, ic = block % x.nbm * x.mc;
  const int64_t rows = min64(x.mc, x.m - ic), cols = min64(x.nc, x.n - jc);
  PackedA* apack = static_cast<PackedA*>(alloc64(round_up(rows, MR) * round_up(min64(KC, x.kp), kStep) * int64_t(sizeof(PackedA))));
  // fp32 running sums between K blocks: C itself for fp32 output, a block buffer for bf16.
  Acc* ws = nullptr;
  if (sizeof(Out) != 4 && x.kblocks > 1) ws = static_cast<Acc*>(alloc64(rows * cols * 4));
  if ((x.k > 0 && !apack) || (sizeof(Out) != 4 && x.kblocks > 1 && !ws)) {
    x.failed = 1;
    std::free(apack);
    std::free(ws);
    return;
  }
  // One row block (small M): this block's B slice is packed per K block into a buffer that stays
  // in cache, instead of all of B once into memory that would go out to DRAM and back.
  PackedB* blocal = nullptr;
  if (!x.bpack && x.k > 0) {
    blocal = static_cast<PackedB*>(alloc64(round_up(cols, NR) * round_up(min64(KC, x.kp), kStep) * int64_t(sizeof(PackedB))));
    if (!blocal) {
      x.failed = 1;
      std::free(apack);
      std::free(ws);
      return;
    }
  }
  alignas(64) Acc tile[MR * NR];
  for (int64_t kb = 0; kb < x.kblocks; ++kb) {
    const int64_t p0 = kb * KC, kc = min64(KC, x.k - p0), kcp = round_up(kc, kStep);
    const bool first = kb == 0, last = kb == x.kblocks - 1;
    if (kc > 0) pack_a(x, ic, rows, p0, kc, apack);
    if (blocal && kc > 0) pack_b_panels(x, jc / NR, (jc + cols + NR - 1) / NR, p0, p0 + kc, blocal);
    for (int64_t jr = 0; jr < cols; jr += NR) {
      const PackedB* bp = x.bpack   ? x.bpack + (jc + jr) / NR * x.kp * NR + p0 * NR
                          : blocal ? blocal + jr / NR * kcp * NR
                                   : nullptr;
      const int64_t cv = min64(NR, cols - jr);
      for (int64_t ir = 0; ir < rows; ir += MR) {
        kernel(kcp / kStep, apack + ir * kcp, bp, tile);
        Acc* acc;
        int64_t ld_acc;
        if constexpr (sizeof(Out) == 4) {
          acc = reinterpret_cast<Acc*>(x.c) + (ic + ir) * x.g->ldc + jc + jr;
          ld_acc = x.g->ldc;
        } else {
          acc = ws ? ws + ir * cols + jr : nullptr;
          ld_acc = cols;
        }
        if constexpr (kInt8)
          store_tile_int(x, tile, ic + ir, jc + jr, min64(MR, rows - ir), cv, first, acc, ld_acc);
        else
          store_tile(x, tile, ic + ir, jc + jr, min64(MR, rows - ir), cv, first, last, acc, ld_acc);
      }
    }
  }
  std::free(apack);
  std::free(ws);
  std::free(blocal);
}

void pack_b_range(void* ctx, int64_t b, int64_t e) {
  const Job& x = *static_cast<Job*>(ctx);
  pack_b_panels(x, b, e, 0, x.k, x.bpack + b * x.kp * NR);
}
// api->const_derived's fill: every panel of a constant B, packed once for the constant set.
void fill_b(void* ctx, void* dst) {
  Job& x = *static_cast<Job*>(ctx);
  x.bpack = static_cast<PackedB*>(dst);
  x.api->parallel_for(0, (x.n + NR - 1) / NR, 1, pack_b_range, &x);
}
void block_range(void* ctx, int64_t b, int64_t e) {
  for (int64_t t = b; t < e; ++t) run_block(*static_cast<Job*>(ctx), t);
}

int fail(const AnvilRtApi* api, void* run_ctx, const char* what, const char* expected, long long actual) {
  char msg[512];
  std::snprintf(msg, sizeof msg, "%s: %s (expected %s, got %lld)", kName, what, expected, actual);
  if (api && api->set_error) api->set_error(run_ctx, msg);
  return 1;
}

int run(const AnvilRtApi* api, void* run_ctx, const AnvilGemmCall* g) {
  if (!api || !api->parallel_for) return 1;
  if (!g) return fail(api, run_ctx, "null AnvilGemmCall", "a call", 0);
  if (g->a_dtype != kInDtype) return fail(api, run_ctx, "A dtype", kInName, g->a_dtype);
  if (g->b_dtype != kInDtype) return fail(api, run_ctx, "B dtype", kInName, g->b_dtype);
  if (g->c_dtype != kOutDtype) return fail(api, run_ctx, "C dtype", kOutName, g->c_dtype);
  if (g->m < 0 || g->n < 0 || g->k < 0)
    return fail(api, run_ctx, "negative size", "m, n, k >= 0", g->m < 0 ? g->m : g->n < 0 ? g->n : g->k);
  if (g->bias_kind < 0 || g->bias_kind > ANVIL_GEMM_BIAS_ROW)
    return fail(api, run_ctx, "bias_kind", "0, 1 or 2", g->bias_kind);
  if (g->activation < 0 || g->activation > ANVIL_GEMM_ACT_SILU)
    return fail(api, run_ctx, "activation", "0..5", g->activation);
  if (kInt8 && (g->alpha != 1.0f || g->beta != 0.0f || g->bias_kind != 0 || g->activation != 0))
    return fail(api, run_ctx, "int8 template takes a plain product", "alpha 1, beta 0, no bias or activation", g->activation);
  if (g->m == 0 || g->n == 0) return 0;
  const int64_t a_cols = g->trans_a ? g->m : g->k, b_cols = g->trans_b ? g->k : g->n;
  if (g->k > 0 && (!g->a || !g->b)) return fail(api, run_ctx, "null A or B", "data pointers", 0);
  if (!g->c) return fail(api, run_ctx, "null C", "a data pointer", 0);
  if (g->bias_kind != ANVIL_GEMM_BIAS_NONE && !g->bias) return fail(api, run_ctx, "null bias", "a bias pointer", 0);
  if (g->k > 0 && g->lda < a_cols) return fail(api, run_ctx, "lda below the row length of A", "lda >= columns of stored A", g->lda);
  if (g->k > 0 && g->ldb < b_cols) return fail(api, run_ctx, "ldb below the row length of B", "ldb >= columns of stored B", g->ldb);
  if (g->ldc < g->n) return fail(api, run_ctx, "ldc below n", "ldc >= n", g->ldc);
  Job x;
  x.g = g;
  x.a = static_cast<const In*>(g->a);
  x.b = static_cast<const In*>(g->b);
  x.c = static_cast<Out*>(g->c);
  x.bias = static_cast<const Out*>(g->bias);
  x.m = g->m;
  x.n = g->n;
  x.k = g->k;
  x.kp = round_up(x.k, kStep);
  x.api = api;
  const int64_t panels = (x.n + NR - 1) / NR;
  const int64_t b_bytes = panels * x.kp * NR * int64_t(sizeof(PackedB));
  // A constant B (a weight) is packed once and kept with the model's constants (ABI minor 10),
  // for any M: a small M then reads the packed panels instead of packing its slices per call.
  x.bpack = nullptr;
  if (!kInt8 && x.k > 0 && g->b_constant && api->abi_minor_version >= 10 && api->const_derived) {
    char layout[200];
    std::snprintf(layout, sizeof layout, "%s B %lldx%lld ld %lld", kName, (long long)x.k,
                  (long long)x.n, (long long)g->ldb);
    const void* kept = api->const_derived(run_ctx, g->b, layout, b_bytes, fill_b, &x);
    x.bpack = static_cast<PackedB*>(const_cast<void*>(kept));
  }
  const bool kept_b = x.bpack != nullptr;
  const bool global_b = !kept_b && (kInt8 || x.m > MC);
  if (x.k > 0 && global_b) x.bpack = static_cast<PackedB*>(take_b(b_bytes));
  x.bsum = kInt8 && x.k > 0 ? static_cast<int32_t*>(alloc64(panels * NR * 4)) : nullptr;
  if (x.k > 0 && ((global_b && !x.bpack) || (kInt8 && !x.bsum))) {
    give_b(x.bpack);
    std::free(x.bsum);
    return fail(api, run_ctx, "out of memory packing B", "bytes", b_bytes);
  }
  if (global_b && x.bpack) api->parallel_for(0, panels, 1, pack_b_range, &x);
  // Blocks: MC x NC, shrunk (never below 4 tiles) until there are enough to share; results do
  // not depend on it (each element of C is one task's K loop in order).
  x.mc = MC;
  x.nc = NC;
  auto blocks = [&x] { return ((x.m + x.mc - 1) / x.mc) * ((x.n + x.nc - 1) / x.nc); };
  while (blocks() < 8 && x.nc > 4 * NR) x.nc = round_up(x.nc / 2, NR);
  while (blocks() < 8 && x.mc > 4 * MR) x.mc = round_up(x.mc / 2, MR);
  x.nbm = (x.m + x.mc - 1) / x.mc;
  x.nbn = (x.n + x.nc - 1) / x.nc;
  x.kblocks = x.k == 0 ? 1 : (x.k + KC - 1) / KC;
  api->parallel_for(0, x.nbm * x.nbn, 1, block_range, &x);
  if (!kept_b) give_b(x.bpack);
  std::free(x.bsum);
  if (x.failed) return fail(api, run_ctx, "out of memory packing A", "a block buffer", 0);
  return 0;
}
)SRC";

const char* dtype_name(int32_t code) {
  return code == 7    ? "7 (float32)"
         : code == 13 ? "13 (bfloat16)"
         : code == 2  ? "2 (int8)"
                      : "4 (int32)";
}

}  // namespace

std::string cpu_template_source(const CpuTemplateConfig& c) {
  const std::string name = cpu_template_name(c), entry = cpu_template_entry(c);
  const int width = c.isa == CpuIsa::kAvx2 ? 8 : 16;
  const bool dot = c.isa == CpuIsa::kAvx512Bf16, vnni = c.isa == CpuIsa::kAvx512Vnni;
  const bool i8 = c.types == CpuGemmTypes::kI8I32;
  auto bad = [&](const std::string& what, const std::string& expected, const std::string& got) {
    return Error("invalid CPU GEMM template configuration: " + what, name, expected, got);
  };
  if (c.mr < 1 || c.mr > 32) throw bad("mr", "1..32", std::to_string(c.mr));
  if (c.nr < width || c.nr % width != 0 || c.nr / width > 8)
    throw bad("nr", "a multiple of " + std::to_string(width) + " up to 8 vectors",
              std::to_string(c.nr));
  if (c.kc < 2 || c.kc % 2 != 0) throw bad("kc", "an even number >= 2", std::to_string(c.kc));
  if (c.mc < c.mr || c.mc % c.mr != 0) throw bad("mc", "a multiple of mr", std::to_string(c.mc));
  if (c.nc < c.nr || c.nc % c.nr != 0) throw bad("nc", "a multiple of nr", std::to_string(c.nc));
  if (dot && c.types != CpuGemmTypes::kBf16 && c.types != CpuGemmTypes::kBf16F32)
    throw bad("isa", "bf16 inputs for avx512bf16", cpu_gemm_types_token(c.types));
  if (vnni != i8) throw bad("isa", "avx512vnni exactly for int8 inputs", cpu_isa_name(c.isa));
  if (vnni && c.kc % 4 != 0) throw bad("kc", "a multiple of 4 for int8", std::to_string(c.kc));
  const bool in_bf16 = c.types == CpuGemmTypes::kBf16 || c.types == CpuGemmTypes::kBf16F32;
  const bool out_bf16 = c.types == CpuGemmTypes::kBf16;
  const int in_code = i8 ? 2 : in_bf16 ? 13 : 7, out_code = i8 ? 4 : out_bf16 ? 13 : 7;
  std::ostringstream s;
  s << "// anvil CPU GEMM template " << name << " (generated by codegen/gemm/cpu_templates)\n"
    << "#include \"anvil/anvil_rt.h\"\n#include <immintrin.h>\n#include <atomic>\n#include "
       "<cmath>\n"
    << "#include <cstdint>\n#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n"
    << "#pragma GCC push_options\n#pragma GCC target(\""
    << (c.isa == CpuIsa::kAvx2 ? "avx2,fma"
        : dot                  ? "avx2,fma,avx512f,avx512bw,avx512bf16"
        : vnni                 ? "avx2,fma,avx512f,avx512bw,avx512vnni"
                               : "avx2,fma,avx512f")
    << "\")\nnamespace " << entry << "_ns {\nnamespace {\n"
    << "constexpr const char* kName = \"" << name << "\";\n"
    << "constexpr int MR = " << c.mr << ", NR = " << c.nr << ", kStep = "
    << (vnni  ? 4
        : dot ? 2
              : 1)
    << ";\n"
    << "constexpr bool kInt8 = " << (i8 ? "true" : "false") << ";\n"
    << "constexpr int64_t KC = " << c.kc << ", MC = " << c.mc << ", NC = " << c.nc << ";\n"
    << "constexpr int32_t kInDtype = " << in_code << ", kOutDtype = " << out_code << ";\n"
    << "constexpr const char* kInName = \"" << dtype_name(in_code) << "\";\n"
    << "constexpr const char* kOutName = \"" << dtype_name(out_code) << "\";\n"
    << "typedef "
    << (i8        ? "int8_t"
        : in_bf16 ? "uint16_t"
                  : "float")
    << " In;\n"
    << "typedef "
    << (i8    ? "uint8_t"
        : dot ? "uint16_t"
              : "float")
    << " PackedA;\n"
    << "typedef "
    << (i8    ? "int8_t"
        : dot ? "uint16_t"
              : "float")
    << " PackedB;\n"
    << "typedef " << (i8 ? "int32_t" : "float") << " Acc;\n"
    << "typedef "
    << (i8         ? "int32_t"
        : out_bf16 ? "uint16_t"
                   : "float")
    << " Out;\n"
    << fast_math_text()  // the fused activations (codegen/fast_math_text.h)
    << (c.isa == CpuIsa::kAvx2 ? kKernelAvx2
        : dot                  ? kKernelAvx512Bf16
        : vnni                 ? kKernelAvx512Vnni
                               : kKernelAvx512)
    << kBody << "}  // namespace\n}  // namespace " << entry << "_ns\n"
    << "extern \"C\" int " << entry
    << "(const AnvilRtApi* api, void* run_ctx, const AnvilGemmCall* call) {\n  return " << entry
    << "_ns::run(api, run_ctx, call);\n}\n#pragma GCC pop_options\n";
  return s.str();
}

}  // namespace anvil::codegen::gemm
