// fp32 GEMM against a pre-packed B (see gemm_packed.h). Loop nest (BLIS-like; B is packed
// ahead of time and A is read in place, so nothing is packed or allocated per call):
//   for each chunk of kMc rows                     (the chunk's A block stays in L2)
//     for each K block [kb, kb + kc)               (kc depends on k only: deterministic)
//       for each group of <= NP panels in [n0, n1) (balanced: 4 panels run as 2 + 2)
//         for each row block of <= MR rows: micro-kernel MR x (16 * NP) that starts from 0
//         (first K block) or from C, and applies alpha, bias and ReLU when the last K block
//         stores (masked stores for a partial last panel); another activation (GELU, SiLU,
//         ReLU6: GemmAct) in registers too on AVX-512 (polynomial exp and erf, no division),
//         else over each row block's rows of [n0, n1) once the last K block's last panel
//         group has finished them (vectorised rows, conv_activate).
// Every element of C is one FMA chain over k in order, whatever the tile, the row block or the
// column range it falls in: results do not depend on how [0, n) or the rows are split.
// Micro-kernels: AVX-512 8 x 48 (24 zmm accumulators), AVX2+FMA 6 x 16 (12 ymm accumulators),
// generic C++ 4 x 16. The library is not compiled with -mavx*: the SIMD kernels carry target
// attributes and are chosen at run time with __builtin_cpu_supports.
#include "runtime/kernels/gemm_packed.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "runtime/kernels/conv.h"  // conv_activate: the vectorised activations

namespace anvil::runtime {

namespace {

constexpr int kPanel = static_cast<int>(kPackedPanel);
/// K is cut into blocks of at most this many steps so the B block of one column group stays
/// in L1/L2 while all row blocks use it.
constexpr int64_t kMaxKc = 512;
/// Rows are processed in chunks of this many so that a chunk's kMc x kc block of A stays in L2
/// while all column groups use it (only matters for large m).
constexpr int64_t kMc = 256;
/// B is prefetched this many K steps (cache lines of a panel) ahead: the hardware prefetcher
/// alone leaves a weight streamed from DRAM / L3 at ~60% of the bandwidth M = 8 needs.
constexpr int kPrefetchSteps = 32;

/// Prefetches the panel line kPrefetchSteps K steps after `bp` (a hint: never faults).
inline void prefetch_b(const float* bp) {
  _mm_prefetch(reinterpret_cast<const char*>(bp + kPrefetchSteps * kPanel), _MM_HINT_T0);
}

/// The conv_activate code of `act` (relu6 is its clamp to [0, 6]).
kern::ConvAct conv_act_of(GemmAct act) {
  switch (act) {
    case GemmAct::kRelu6:
      return kern::ConvAct::kClamp;
    case GemmAct::kGeluErf:
      return kern::ConvAct::kGelu;
    case GemmAct::kGeluTanh:
      return kern::ConvAct::kGeluTanh;
    case GemmAct::kSilu:
      return kern::ConvAct::kSilu;
    case GemmAct::kNone:
      break;
  }
  return kern::ConvAct::kNone;
}

/// What one micro-kernel call computes: rows [0, mr) x np panels of C, over K steps [0, kc).
struct Tile {
  int64_t kc;          // K steps in this block
  const float* ap;     // A at (row 0, step 0): element (r, p) at ap[r * a_rs + p * a_ks]
  int64_t a_rs;        // A stride between rows
  int64_t a_ks;        // A stride between K steps
  const float* bp;     // first panel at this K block's offset; panels `bstride` floats apart
  int64_t bstride;     // floats between consecutive panels (16 * k)
  float* c;            // C at (row block start, first column)
  int64_t ldc;
  int last_cols;       // valid columns in the last panel (1..16)
  bool first;          // first K block: start from 0 (else from C)
  bool last;           // last K block: apply alpha, bias, relu
  float alpha;
  const float* bias;      // bias at the first column, or nullptr
  const float* row_bias;  // bias at the first row (one value per row), or nullptr
  bool relu;
  GemmAct act;  // applied in registers by the kernels that can (IsaKernels::fuses_act)
};

// ---------------------------------------------------------------------------------------------
// Generic C++ micro-kernel: any mr <= 4, one panel.

constexpr int kGenericMr = 4;

/// Plain C++ tile of `mr` rows x one panel (the compiler vectorises it for the baseline ISA).
void kernel_generic(int mr, const Tile& t) {
  float acc[kGenericMr][kPanel];
  for (int r = 0; r < mr; ++r)
    for (int j = 0; j < kPanel; ++j)
      acc[r][j] = (t.first || j >= t.last_cols) ? 0.0f : t.c[r * t.ldc + j];
  for (int64_t p = 0; p < t.kc; ++p) {
    const float* b = t.bp + p * kPanel;
    for (int r = 0; r < mr; ++r) {
      const float a = t.ap[r * t.a_rs + p * t.a_ks];
      for (int j = 0; j < kPanel; ++j) acc[r][j] += a * b[j];
    }
  }
  for (int r = 0; r < mr; ++r) {
    for (int j = 0; j < t.last_cols; ++j) {
      float v = acc[r][j];
      if (t.last) {
        v *= t.alpha;
        if (t.bias) v += t.bias[j];
        if (t.row_bias) v += t.row_bias[r];
        if (t.relu) v = std::max(v, 0.0f);
      }
      t.c[r * t.ldc + j] = v;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// AVX2 + FMA micro-kernel: MR x 16 (one panel = two ymm), MR <= 6.

constexpr int kAvx2Mr = 6;

/// AVX2 tile of MR rows x one panel; partial panels use maskload / maskstore.
template <int MR>
__attribute__((target("avx2,fma"))) void kernel_avx2(const Tile& t) {
  __m256 acc[MR][2];
  const int lc = t.last_cols;
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(lc), idx);
  const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(lc - 8), idx);
  const bool full = lc == kPanel;
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    if (t.first) {
      acc[r][0] = _mm256_setzero_ps();
      acc[r][1] = _mm256_setzero_ps();
    } else if (full) {
      acc[r][0] = _mm256_loadu_ps(t.c + r * t.ldc);
      acc[r][1] = _mm256_loadu_ps(t.c + r * t.ldc + 8);
    } else {
      acc[r][0] = _mm256_maskload_ps(t.c + r * t.ldc, m0);
      acc[r][1] = _mm256_maskload_ps(t.c + r * t.ldc + 8, m1);
    }
  }
  const float* ap = t.ap;
  const float* bp = t.bp;
#pragma GCC unroll 2
  for (int64_t p = 0; p < t.kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(bp);
    const __m256 b1 = _mm256_loadu_ps(bp + 8);
    prefetch_b(bp);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 a = _mm256_broadcast_ss(ap + r * t.a_rs);
      acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
    }
    ap += t.a_ks;
    bp += kPanel;
  }
  if (t.last) {
    const __m256 alpha = _mm256_set1_ps(t.alpha);
    __m256 bias0 = _mm256_setzero_ps(), bias1 = _mm256_setzero_ps();
    if (t.bias) {
      bias0 = full ? _mm256_loadu_ps(t.bias) : _mm256_maskload_ps(t.bias, m0);
      bias1 = full ? _mm256_loadu_ps(t.bias + 8) : _mm256_maskload_ps(t.bias + 8, m1);
    }
    const __m256 zero = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      acc[r][0] = _mm256_add_ps(_mm256_mul_ps(acc[r][0], alpha), bias0);
      acc[r][1] = _mm256_add_ps(_mm256_mul_ps(acc[r][1], alpha), bias1);
      if (t.row_bias) {
        const __m256 rb = _mm256_set1_ps(t.row_bias[r]);
        acc[r][0] = _mm256_add_ps(acc[r][0], rb);
        acc[r][1] = _mm256_add_ps(acc[r][1], rb);
      }
      if (t.relu) {
        acc[r][0] = _mm256_max_ps(zero, acc[r][0]);  // x second: NaN stays NaN
        acc[r][1] = _mm256_max_ps(zero, acc[r][1]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    if (full) {
      _mm256_storeu_ps(t.c + r * t.ldc, acc[r][0]);
      _mm256_storeu_ps(t.c + r * t.ldc + 8, acc[r][1]);
    } else {
      _mm256_maskstore_ps(t.c + r * t.ldc, m0, acc[r][0]);
      _mm256_maskstore_ps(t.c + r * t.ldc + 8, m1, acc[r][1]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// AVX-512 micro-kernel: MR x (16 * NP), MR <= 8, NP <= 3.

constexpr int kAvx512Mr = 8;
constexpr int kAvx512Np = 3;

#define ANVIL_K512 __attribute__((target("avx512f,avx512vl,fma"))) inline
// maskz forms of min / max / rcp14 / roundscale / scalef: GCC 12 warns
// (-Wmaybe-uninitialized) on the plain ones
constexpr __mmask16 kAll16 = 0xFFFF;

/// e^x for x <= 88 (vec_math.h's polynomial after x = n ln2 + r; 2^n by scalef, which gives 0
/// far below and never overflows the exponent field). NaN x: an unspecified finite value.
ANVIL_K512 __m512 exp512(__m512 x) {
  x = _mm512_maskz_min_ps(kAll16, x, _mm512_set1_ps(88.0f));
  const __m512 n =
      _mm512_maskz_roundscale_ps(kAll16, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.98756915e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.39819995e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.33345190e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.16657959e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.66666655e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.00000012e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(kAll16, p, n);
}

/// 1 / d for d >= 1: rcp14 and one Newton step (about 1 ulp; no division).
ANVIL_K512 __m512 recip512(__m512 d) {
  const __m512 t = _mm512_maskz_rcp14_ps(kAll16, d);
  return _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0f)));
}

/// x / (1 + e^-z) with e^-z clamped at e^88 (SiLU: z = x; tanh GELU: z = 2u).
ANVIL_K512 __m512 x_sigmoid512(__m512 x, __m512 z) {
  const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), z));
  return _mm512_mul_ps(x, recip512(_mm512_add_ps(e, _mm512_set1_ps(1.0f))));
}

/// `act` of 16 values in registers, the formulas of conv_act.cpp (erf: Abramowitz & Stegun
/// 7.1.26 as vec_math.h, with |x / sqrt 2| clamped at 4, where erf is 1 in fp32). NaN stays NaN
/// (the result is x times a finite value, or min(NaN, ...) kept).
ANVIL_K512 __m512 act512(GemmAct act, __m512 x) {
  switch (act) {
    case GemmAct::kRelu6:  // x second: NaN stays
      return _mm512_maskz_min_ps(kAll16, _mm512_set1_ps(6.0f),
                                 _mm512_maskz_max_ps(kAll16, _mm512_setzero_ps(), x));
    case GemmAct::kGeluErf: {
      const __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));
      const __m512 az = _mm512_maskz_min_ps(kAll16, _mm512_abs_ps(z), _mm512_set1_ps(4.0f));
      const __m512 t =
          recip512(_mm512_fmadd_ps(az, _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1.0f)));
      __m512 p = _mm512_set1_ps(1.061405429f);
      p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
      p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
      p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
      p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
      // q = 1 - erf|z|; gelu = x (1 - q / 2) for z >= 0, x q / 2 below
      const __m512 hq = _mm512_mul_ps(
          _mm512_mul_ps(p, t),
          _mm512_mul_ps(exp512(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), az), az)),
                        _mm512_set1_ps(0.5f)));
      const __mmask16 neg = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
      const __m512 w = _mm512_mask_blend_ps(neg, _mm512_sub_ps(_mm512_set1_ps(1.0f), hq), hq);
      return _mm512_mul_ps(x, w);
    }
    case GemmAct::kGeluTanh: {
      const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
      const __m512 u = _mm512_mul_ps(_mm512_fmadd_ps(x3, _mm512_set1_ps(0.044715f), x),
                                     _mm512_set1_ps(0.7978845608028654f));
      return x_sigmoid512(x, _mm512_add_ps(u, u));
    }
    case GemmAct::kSilu:
      return x_sigmoid512(x, x);
    case GemmAct::kNone:
      break;
  }
  return x;
}

/// AVX-512 tile of MR rows x NP panels: per K step NP panel loads, MR broadcasts of A and
/// MR * NP FMAs; a partial last panel uses masked loads / stores.
template <int MR, int NP>
__attribute__((target("avx512f,avx512vl,fma"))) void kernel_avx512(const Tile& t) {
  __m512 acc[MR][NP];
  const __mmask16 lmask = static_cast<__mmask16>((1u << t.last_cols) - 1u);
  // Column mask of panel j: all ones except for the last panel.
  auto mask = [&](int j) -> __mmask16 { return j == NP - 1 ? lmask : __mmask16(0xFFFF); };
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j)
      acc[r][j] = t.first ? _mm512_setzero_ps()
                          : _mm512_maskz_loadu_ps(mask(j), t.c + r * t.ldc + j * kPanel);
  }
  const float* ap = t.ap;
  const float* bp = t.bp;
  const int64_t bs = t.bstride;
  const int64_t ars = t.a_rs, aks = t.a_ks;
#pragma GCC unroll 2
  for (int64_t p = 0; p < t.kc; ++p) {
    __m512 b[NP];
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) b[j] = _mm512_loadu_ps(bp + j * bs);
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) prefetch_b(bp + j * bs);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(ap[r * ars]);
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j) acc[r][j] = _mm512_fmadd_ps(a, b[j], acc[r][j]);
    }
    ap += aks;
    bp += kPanel;
  }
  if (t.last) {
    const __m512 alpha = _mm512_set1_ps(t.alpha);
    const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) {
      const __m512 bias =
          t.bias ? _mm512_maskz_loadu_ps(mask(j), t.bias + j * kPanel) : _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        acc[r][j] = _mm512_add_ps(_mm512_mul_ps(acc[r][j], alpha), bias);
        if (t.row_bias) acc[r][j] = _mm512_add_ps(acc[r][j], _mm512_set1_ps(t.row_bias[r]));
        // max(0, x) with x second keeps NaN (as torch.relu); maskz avoids a GCC 12
        // -Wmaybe-uninitialized false positive in _mm512_max_ps.
        if (t.relu) acc[r][j] = _mm512_maskz_max_ps(__mmask16(0xFFFF), zero, acc[r][j]);
        if (t.act != GemmAct::kNone) acc[r][j] = act512(t.act, acc[r][j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j)
      _mm512_mask_storeu_ps(t.c + r * t.ldc + j * kPanel, mask(j), acc[r][j]);
  }
}

// ---------------------------------------------------------------------------------------------
// Dispatch tables and the blocked driver.

/// A micro-kernel instance (fixed rows and panels).
using KernelFn = void (*)(const Tile&);

/// kernel_generic with a compile-time row count, for the dispatch table.
template <int MR>
void generic_mr(const Tile& t) {
  kernel_generic(MR, t);
}

/// One ISA: its register tile (mr rows x np panels) and kernels indexed [mr - 1][np - 1].
struct IsaKernels {
  int mr;
  int np;
  KernelFn fn[8][3];
  bool fuses_act;  // the kernels apply Tile::act in registers
};

const IsaKernels kGenericKernels = {
    kGenericMr, 1, {{generic_mr<1>}, {generic_mr<2>}, {generic_mr<3>}, {generic_mr<4>}}, false};

const IsaKernels kAvx2Kernels = {kAvx2Mr,
                                 1,
                                 {{kernel_avx2<1>},
                                  {kernel_avx2<2>},
                                  {kernel_avx2<3>},
                                  {kernel_avx2<4>},
                                  {kernel_avx2<5>},
                                  {kernel_avx2<6>}},
                                 false};

#define ANVIL_K512_ROW(M) {kernel_avx512<M, 1>, kernel_avx512<M, 2>, kernel_avx512<M, 3>}
const IsaKernels kAvx512Kernels = {
    kAvx512Mr,
    kAvx512Np,
    {ANVIL_K512_ROW(1), ANVIL_K512_ROW(2), ANVIL_K512_ROW(3), ANVIL_K512_ROW(4), ANVIL_K512_ROW(5),
     ANVIL_K512_ROW(6), ANVIL_K512_ROW(7), ANVIL_K512_ROW(8)},
    true};
#undef ANVIL_K512_ROW

/// K block size for `k` steps: blocks of equal size at most max_kc().
int64_t choose_kc(int64_t k) {
  const int64_t kmax = gemm_packed_max_kc();
  const int64_t blocks = (k + kmax - 1) / kmax;
  return (k + blocks - 1) / blocks;
}

/// Runs the blocked loops of the header comment over panels [n0/16, ceil(n1/16)) with `isa`.
void run_blocked(const IsaKernels& isa, bool trans_a, int64_t m, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* packed_b, const float* bias,
                 const float* row_bias, bool relu, GemmAct act, float* c, int64_t ldc, int64_t n0,
                 int64_t n1, int64_t packed_k) {
  const kern::ConvAct cact = conv_act_of(act);
  const int64_t kc_max = choose_kc(k);
  const int64_t panel0 = n0 / kPanel, panel1 = (n1 + kPanel - 1) / kPanel;
  Tile t{};
  t.bstride = packed_k * kPanel;
  t.ldc = ldc;
  t.alpha = alpha;
  t.relu = relu;
  t.act = isa.fuses_act ? act : GemmAct::kNone;
  for (int64_t ic = 0; ic < m; ic += kMc) {
    const int64_t ic_end = std::min(m, ic + kMc);
    for (int64_t kb = 0; kb < k; kb += kc_max) {
      t.kc = std::min(kc_max, k - kb);
      t.first = kb == 0;
      t.last = kb + t.kc == k;
      for (int64_t pj = panel0; pj < panel1;) {
        // Balanced groups: the fewest groups of at most isa.np panels, of near-equal width (4
        // panels run as 2 + 2 rather than 3 + 1).
        const int64_t left = panel1 - pj, groups = (left + isa.np - 1) / isa.np;
        const int np = static_cast<int>((left + groups - 1) / groups);
        const int64_t col = pj * kPanel;
        const int64_t col_end = std::min(n1, (pj + np) * kPanel);
        t.last_cols = static_cast<int>(col_end - (pj + np - 1) * kPanel);
        t.bias = bias ? bias + col : nullptr;
        t.bp = packed_b + pj * t.bstride + kb * kPanel;
        for (int64_t i0 = ic; i0 < ic_end; i0 += isa.mr) {
          const int mr = static_cast<int>(std::min<int64_t>(isa.mr, ic_end - i0));
          // op(A) read in place: row i0 + r, step kb + p.
          t.ap = trans_a ? a + kb * lda + i0 : a + i0 * lda + kb;
          t.a_rs = trans_a ? 1 : lda;
          t.a_ks = trans_a ? lda : 1;
          t.c = c + i0 * ldc + col;
          t.row_bias = row_bias ? row_bias + i0 : nullptr;
          isa.fn[mr - 1][np - 1](t);
          // The last K block's last panel group finishes these rows of [n0, n1): the
          // activation runs over them while they are in L1 / L2, in long vectorised rows.
          if (t.last && cact != kern::ConvAct::kNone && !isa.fuses_act && pj + np == panel1)
            for (int r = 0; r < mr; ++r)
              kern::conv_activate(cact, 0.0f, 6.0f, c + (i0 + r) * ldc + panel0 * kPanel,
                                  n1 - panel0 * kPanel);
        }
        pj += np;
      }
    }
  }
}

/// The fastest ISA this CPU runs (decided once).
GemmIsa best_isa() {
  static const GemmIsa best = gemm_isa_available(GemmIsa::kAvx512) ? GemmIsa::kAvx512
                              : gemm_isa_available(GemmIsa::kAvx2) ? GemmIsa::kAvx2
                                                                   : GemmIsa::kGeneric;
  return best;
}

}  // namespace

void gemm_activate(GemmAct act, float* p, int64_t n) {
  if (act != GemmAct::kNone) kern::conv_activate(conv_act_of(act), 0.0f, 6.0f, p, n);
}

int64_t gemm_packed_max_kc() {
  static const int64_t kc = [] {
    const char* env = std::getenv("ANVIL_GEMM_KC");
    const long v = env ? std::strtol(env, nullptr, 10) : 0;
    return v >= 16 && v <= 4096 ? static_cast<int64_t>(v) : kMaxKc;
  }();
  return kc;
}

int64_t packed_b_floats(int64_t k, int64_t n) {
  return (n + kPackedPanel - 1) / kPackedPanel * kPackedPanel * k;
}

void pack_b(bool trans_b, int64_t k, int64_t n, const float* b, int64_t ldb, float* out) {
  const char* where = "pack_b";
  ANVIL_CHECK(k >= 0 && n >= 0, where, "negative matrix size", "k, n >= 0", str(k, ", ", n));
  ANVIL_CHECK(ldb >= std::max<int64_t>(1, trans_b ? k : n), where, "leading dimension too small",
              str(">= ", trans_b ? k : n), str(ldb));
  const int64_t panels = (n + kPackedPanel - 1) / kPackedPanel;
  for (int64_t pj = 0; pj < panels; ++pj) {
    float* dst = out + pj * kPackedPanel * k;
    const int64_t j0 = pj * kPackedPanel;
    const int64_t cols = std::min<int64_t>(kPackedPanel, n - j0);
    if (cols < kPackedPanel) std::memset(dst, 0, sizeof(float) * kPackedPanel * k);
    if (trans_b) {
      // op(B)[p][j] = B[j][p]: walk the `cols` rows of B, writing with stride 16.
      for (int64_t j = 0; j < cols; ++j) {
        const float* src = b + (j0 + j) * ldb;
        for (int64_t p = 0; p < k; ++p) dst[p * kPackedPanel + j] = src[p];
      }
    } else {
      for (int64_t p = 0; p < k; ++p)
        std::memcpy(dst + p * kPackedPanel, b + p * ldb + j0, sizeof(float) * cols);
    }
  }
}

bool gemm_isa_available(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAuto:
    case GemmIsa::kGeneric:
      return true;
    case GemmIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case GemmIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("fma");
  }
  return false;
}

void sgemm_packed(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* packed_b, const float* bias, bool relu, float* c,
                  int64_t ldc, int64_t n0, int64_t n1, GemmIsa isa, const float* row_bias,
                  GemmAct act, int64_t packed_k) {
  const char* where = "sgemm_packed";
  ANVIL_CHECK(m >= 0 && n >= 0 && k >= 0, where, "negative matrix size", "m, n, k >= 0",
              str(m, ", ", n, ", ", k));
  ANVIL_CHECK(n0 >= 0 && n0 % kPackedPanel == 0 && n0 <= n1 && n1 <= n, where,
              "bad column range [n0, n1)", str("n0 % 16 == 0, 0 <= n0 <= n1 <= ", n),
              str("[", n0, ", ", n1, ")"));
  ANVIL_CHECK(m <= 1 || ldc >= n1, where, "ldc too small", str(">= ", n1), str(ldc));
  ANVIL_CHECK(k == 0 || m == 0 || (trans_a ? (k <= 1 || lda >= m) : (m <= 1 || lda >= k)),
              where, "lda too small", str(">= ", trans_a ? m : k), str(lda));
  if (packed_k == 0) packed_k = k;
  ANVIL_CHECK(packed_k >= k, where, "packed_k smaller than k", str(">= ", k), str(packed_k));
  ANVIL_CHECK(gemm_isa_available(isa), where, "GEMM ISA not supported by this CPU",
              "an available GemmIsa", str(static_cast<int>(isa)));
  if (m == 0 || n0 == n1) return;
  ANVIL_CHECK(c != nullptr && (k == 0 || (a != nullptr && packed_b != nullptr)), where,
              "null operand", "non-null A, packed B and C", "a null pointer");
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = n0; j < n1; ++j) {
        float v = bias ? bias[j] : 0.0f;
        if (row_bias) v += row_bias[i];
        c[i * ldc + j] = relu ? std::max(v, 0.0f) : v;
      }
    }
    if (act != GemmAct::kNone)  // the same activation over the rows of bias values
      for (int64_t i = 0; i < m; ++i) gemm_activate(act, c + i * ldc + n0, n1 - n0);
    return;
  }
  if (isa == GemmIsa::kAuto) isa = best_isa();
  const IsaKernels& kernels = isa == GemmIsa::kAvx512 ? kAvx512Kernels
                              : isa == GemmIsa::kAvx2 ? kAvx2Kernels
                                                      : kGenericKernels;
  run_blocked(kernels, trans_a, m, k, alpha, a, lda, packed_b, bias, row_bias, relu, act, c, ldc,
              n0, n1, packed_k);
}

}  // namespace anvil::runtime
