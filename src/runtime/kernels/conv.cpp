// Runtime extern kernels for aten.convolution.default and aten.conv2d.default (transposed=True
// goes to conv_transpose.h): 2-D convolution
// (and 1-D, as a height-1 2-D one) with stride, padding (ints or "same" / "valid"), dilation and
// groups, batched or unbatched input, any input strides. Floating dtypes run im2col + GEMM in
// fp32 (f64 for double; f16 / bf16 converted to fp32, rounded once at the end, like the
// reference kernel); integer dtypes use im2col + a direct wrapping-int64 product loop.
// Depthwise convolutions (groups == C) in fp32 / bf16 / fp16 go to conv_depthwise.cpp instead,
// the other fp32 / bf16 ones to oneDNN (conv_onednn.cpp) when built with it (kern::conv_path).
// Work is split over the batch (or groups, or inside the GEMM) on the runtime thread pool.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "runtime/kernels/gemm_packed.h"
#include "runtime/rt_api.h"

#include "runtime/kernels/conv.h"
#include "runtime/kernels/conv_transpose.h"
#include "runtime/kernels/kernel_util.h"

namespace anvil::runtime {

namespace {

using kern::available_threads;

using kern::ConvGeom;

/// An int list attribute expanded to `n` values (a single value applies to every dim).
std::vector<int64_t> spatial_list(const ExternCall& call, const char* name, int64_t dflt,
                                  size_t n) {
  std::vector<int64_t> v = call.attr_ints(name, {dflt});
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  ANVIL_CHECK(v.size() == n, call.target(), str("'", name, "' must have 1 or ", n, " values"),
              str(n, " values"), std::to_string(v.size()));
  return v;
}

/// Validates the operands and attributes and computes the geometry (output checked by caller).
ConvGeom conv_geometry(const ExternCall& call, const Tensor& x, const Tensor& wt,
                       const std::optional<Tensor>& bias) {
  const std::string where = call.target();
  ANVIL_CHECK(!call.attr_bool("transposed", false), where,
              "transposed convolution is not supported", "transposed=False", "transposed=True");
  ANVIL_CHECK(wt.dim() == 3 || wt.dim() == 4, where, "only 1-D and 2-D convolutions are supported",
              "a 3-D or 4-D weight", wt.type_str());
  ConvGeom g;
  g.spatial = static_cast<int>(wt.dim() - 2);
  const int64_t sp = g.spatial;
  g.unbatched = x.dim() == sp + 1;
  ANVIL_CHECK(
      x.dim() == sp + 2 || g.unbatched, where,
      str("a ", sp, "-D convolution needs a ", sp + 2, "-D (or unbatched ", sp + 1, "-D) input"),
      str(sp + 2, "-D"), x.type_str());
  ANVIL_CHECK(x.dtype() == wt.dtype(), where, "input and weight dtypes differ",
              dtype_name(x.dtype()), dtype_name(wt.dtype()));
  ANVIL_CHECK(!bias || bias->dtype() == x.dtype(), where, "input and bias dtypes differ",
              dtype_name(x.dtype()), bias ? dtype_name(bias->dtype()) : "");
  ANVIL_CHECK(x.dtype() != DType::kBool && !is_complex(x.dtype()) && is_supported(x.dtype()), where,
              "convolution does not support this dtype", "an integer or floating dtype",
              dtype_name(x.dtype()));
  const int64_t b0 = g.unbatched ? 0 : 1;  // first non-batch dim of x
  g.n = g.unbatched ? 1 : x.size(0);
  g.c = x.size(b0);
  g.w = x.size(-1);
  g.h = sp == 2 ? x.size(-2) : 1;
  g.o = wt.size(0);
  g.kw = wt.size(-1);
  g.kh = sp == 2 ? wt.size(-2) : 1;
  g.groups = call.attr_int("groups", 1);
  if (call.attr_int("fused_relu", 0) != 0) g.act = kern::ConvAct::kRelu;
  if (const int64_t act = call.attr_int("fused_act", 0); act != 0) {
    ANVIL_CHECK(act > 0 && act <= kern::kConvActLast && g.act == kern::ConvAct::kNone, where,
                "unknown fused activation (or fused_act beside fused_relu)",
                str("fused_act in 1..", kern::kConvActLast, " alone"), std::to_string(act));
    g.act = static_cast<kern::ConvAct>(act);
    g.act_lo = static_cast<float>(call.attr_float("fused_act_min", -HUGE_VAL));
    g.act_hi = static_cast<float>(call.attr_float("fused_act_max", HUGE_VAL));
  }
  ANVIL_CHECK(g.groups > 0, where, "groups must be positive", "> 0", std::to_string(g.groups));
  ANVIL_CHECK(wt.size(1) * g.groups == g.c && g.o % g.groups == 0, where,
              str("weight does not fit the input with groups=", g.groups),
              str("weight [O divisible by ", g.groups, ", ", g.c / g.groups, ", ...] for ", g.c,
                  " input channels"),
              wt.type_str());
  ANVIL_CHECK(!bias || (bias->dim() == 1 && bias->size(0) == g.o), where,
              "bias must be 1-D with one value per output channel", str("[", g.o, "]"),
              bias ? bias->type_str() : "");
  const auto stride = spatial_list(call, "stride", 1, sp);
  const auto dilation = spatial_list(call, "dilation", 1, sp);
  for (size_t i = 0; i < stride.size(); ++i) {
    ANVIL_CHECK(stride[i] > 0, where, "stride must be positive", "> 0", str(stride[i]));
    ANVIL_CHECK(dilation[i] > 0, where, "dilation must be positive", "> 0", str(dilation[i]));
  }
  g.sw = stride.back();
  g.dw = dilation.back();
  if (sp == 2) {
    g.sh = stride[0];
    g.dh = dilation[0];
  }
  const AnvilRtScalar* pad = call.find_attr("padding");
  if (pad && pad->kind == 2) {
    const std::string mode = pad->s ? pad->s : "";
    if (mode == "same") {
      ANVIL_CHECK(g.sh == 1 && g.sw == 1, where,
                  "padding='same' is not supported for strided convolutions", "stride 1",
                  str(g.sh, "x", g.sw));
      const int64_t th = g.dh * (g.kh - 1), tw = g.dw * (g.kw - 1);
      g.pad_top = th / 2;
      g.pad_bottom = th - th / 2;
      g.pad_left = tw / 2;
      g.pad_right = tw - tw / 2;
    } else {
      ANVIL_CHECK(mode == "valid", where, "unknown padding string", "\"valid\" or \"same\"", mode);
    }
  } else {
    const auto p = spatial_list(call, "padding", 0, sp);
    for (int64_t v : p) ANVIL_CHECK(v >= 0, where, "negative padding", ">= 0", str(v));
    g.pad_left = g.pad_right = p.back();
    if (sp == 2) g.pad_top = g.pad_bottom = p[0];
  }
  const int64_t ph = g.h + g.pad_top + g.pad_bottom, pw = g.w + g.pad_left + g.pad_right;
  const int64_t ekh = g.dh * (g.kh - 1) + 1, ekw = g.dw * (g.kw - 1) + 1;
  ANVIL_CHECK(ph >= ekh && pw >= ekw, where,
              "kernel size can't be greater than the (padded) input size",
              str("padded input >= dilated kernel ", g.kh, "x", g.kw), x.type_str());
  g.oh = (ph - ekh) / g.sh + 1;
  g.ow = (pw - ekw) / g.sw + 1;
  return g;
}

/// The output sizes of the convolution in the caller's layout.
Shape conv_out_sizes(const ConvGeom& g) {
  Shape s;
  if (!g.unbatched) s.push_back(g.n);
  s.push_back(g.o);
  if (g.spatial == 2) s.push_back(g.oh);
  s.push_back(g.ow);
  return s;
}

/// A contiguous [n, c, h, w] copy (or the original memory) of a tensor in type A.
template <typename A>
const A* as_contiguous(const Tensor& t, const Shape& sizes4, std::unique_ptr<A[]>& holder) {
  const Tensor v = t.dim() == static_cast<int64_t>(sizes4.size()) ? t : t.reshape(sizes4);
  if (t.dtype() == dtype_of<A>() && v.is_contiguous()) return static_cast<const A*>(v.data_ptr());
  holder =
      std::make_unique_for_overwrite<A[]>(static_cast<size_t>(std::max<int64_t>(v.numel(), 1)));
  kern::copy_cast(kern::wrap_buffer(holder.get(), dtype_of<A>(), v.sizes()), v);
  return holder.get();
}

/// im2col for channels [c0, c1) of one image: x [c, h, w] -> cols [c * kh * kw, oh * ow].
template <typename A>
void im2col(const ConvGeom& g, const A* x, A* cols, int64_t c0, int64_t c1) {
  const int64_t l = g.l();
  for (int64_t ch = c0; ch < c1; ++ch) {
    const A* plane = x + ch * g.h * g.w;
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        A* row = cols + ((ch * g.kh + ki) * g.kw + kj) * l;
        for (int64_t y = 0; y < g.oh; ++y) {
          const int64_t iy = y * g.sh - g.pad_top + ki * g.dh;
          A* dst = row + y * g.ow;
          if (iy < 0 || iy >= g.h) {
            std::fill(dst, dst + g.ow, A(0));
            continue;
          }
          const A* src = plane + iy * g.w;
          const int64_t x0 = kj * g.dw - g.pad_left;
          if (g.sw == 1) {
            // Valid output columns: 0 <= xo + x0 < w.
            const int64_t lo = std::clamp<int64_t>(-x0, 0, g.ow);
            const int64_t hi = std::clamp<int64_t>(g.w - x0, lo, g.ow);
            std::fill(dst, dst + lo, A(0));
            std::copy(src + x0 + lo, src + x0 + hi, dst + lo);
            std::fill(dst + hi, dst + g.ow, A(0));
          } else {
            for (int64_t xo = 0; xo < g.ow; ++xo) {
              const int64_t ix = xo * g.sw + x0;
              dst[xo] = (ix < 0 || ix >= g.w) ? A(0) : src[ix];
            }
          }
        }
      }
  }
}

#if defined(__x86_64__)
/// One 16-pixel row of a one-row panel with AVX-512 masked loads: dst[q] = src[q * sw] for q in
/// [lo, hi), 0 elsewhere (sw 1 or 2). Lanes outside [lo, hi) are never read (masked off), so
/// `src` may point before the input row.
__attribute__((target("avx512f"))) inline void panel_row_avx512(float* dst, const float* src,
                                                                 int64_t lo, int64_t hi,
                                                                 int64_t sw) {
  const auto bits = [](int64_t a, int64_t b) {  // bits [a, b) of a 32-bit mask
    const uint64_t hi_bits = (uint64_t{1} << b) - 1, lo_bits = (uint64_t{1} << a) - 1;
    return static_cast<uint32_t>(hi_bits & ~lo_bits);
  };
  const __mmask16 m = static_cast<__mmask16>(bits(lo, hi));
  if (sw == 1) {
    _mm512_storeu_ps(dst, _mm512_maskz_loadu_ps(m, src));
    return;
  }
  // sw == 2: the even positions 2lo .. 2(hi - 1) of src[0 .. 32)
  const uint32_t span = hi > lo ? bits(2 * lo, 2 * hi - 1) : 0;
  const __m512 a = _mm512_maskz_loadu_ps(static_cast<__mmask16>(span & 0xFFFFu), src);
  const __m512 b = _mm512_maskz_loadu_ps(static_cast<__mmask16>(span >> 16), src + 16);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  _mm512_storeu_ps(dst, _mm512_maskz_mov_ps(m, _mm512_permutex2var_ps(a, even, b)));
}

bool have_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}
#else
inline void panel_row_avx512(float*, const float*, int64_t, int64_t, int64_t) {}
bool have_avx512() { return false; }
#endif

/// im2col for channels [c0, c1) of one image straight into the packed-B layout of
/// gemm_packed.h: group gi's [ckk, oh * ow] matrix at packed + gi * group_floats. Panel by panel
/// (16 output pixels): a panel whose pixels lie in one output row and read inside the input for
/// this kernel tap is a strided copy (a 64-byte copy at stride 1); others check every pixel.
/// `Wide`: one-row panels with stride 1 or 2 use panel_row_avx512 (the instantiation is compiled
/// for AVX-512 so that it inlines).
template <bool Wide>
__attribute__((always_inline)) inline void im2col_packed_impl(const ConvGeom& g, const float* x,
                                                              float* packed, int64_t group_floats,
                                                              int64_t c0, int64_t c1) {
  const int64_t l = g.l(), ckk = g.ckk(), cg = g.cg();
  const int64_t panels = (l + kPackedPanel - 1) / kPackedPanel;
  const bool wide = Wide && kPackedPanel == 16 && (g.sw == 1 || g.sw == 2);
  int64_t iy0[kPackedPanel], ix0[kPackedPanel];
  // Per kernel column kj of a one-row panel: pixels q in [lo, hi) read inside the input row.
  std::vector<int64_t> lo_of(static_cast<size_t>(g.kw)), hi_of(static_cast<size_t>(g.kw));
  int64_t oy = 0, ox = 0;  // output coordinates of the panel's first pixel
  for (int64_t pj = 0; pj < panels; ++pj) {
    const int64_t count = std::min(kPackedPanel, l - pj * kPackedPanel);
    for (int64_t q = 0, y = oy, xo = ox; q < kPackedPanel; ++q) {
      iy0[q] = y * g.sh - g.pad_top;
      ix0[q] = xo * g.sw - g.pad_left;
      if (q + 1 < count && ++xo == g.ow) xo = 0, ++y;
    }
    for (int64_t q = 0; q < count; ++q)
      if (++ox == g.ow) ox = 0, ++oy;
    const bool one_row = count == kPackedPanel && iy0[0] == iy0[kPackedPanel - 1];
    if (one_row)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        // 0 <= ixa + q * sw < w
        const int64_t ixa = ix0[0] + kj * g.dw;
        const int64_t lo = ixa >= 0 ? 0 : std::min(kPackedPanel, (-ixa + g.sw - 1) / g.sw);
        lo_of[static_cast<size_t>(kj)] = lo;
        hi_of[static_cast<size_t>(kj)] = std::clamp<int64_t>(
            g.w - ixa <= 0 ? 0 : (g.w - ixa + g.sw - 1) / g.sw, lo, kPackedPanel);
      }
    for (int64_t ch = c0; ch < c1; ++ch) {
      const float* plane = x + ch * g.h * g.w;
      const int64_t gi = ch / cg;
      float* dst = packed + gi * group_floats + pj * kPackedPanel * ckk +
                   (ch - gi * cg) * g.kh * g.kw * kPackedPanel;
      for (int64_t ki = 0; ki < g.kh; ++ki) {
        for (int64_t kj = 0; kj < g.kw; ++kj, dst += kPackedPanel) {
          const int64_t dy = ki * g.dh, dx = kj * g.dw;
          if (one_row) {
            const int64_t iy = iy0[0] + dy, ixa = ix0[0] + dx;
            if (iy < 0 || iy >= g.h) {
              std::memset(dst, 0, sizeof(float) * kPackedPanel);
              continue;
            }
            const int64_t lo = lo_of[static_cast<size_t>(kj)], hi = hi_of[static_cast<size_t>(kj)];
            const float* src = plane + iy * g.w + ixa;
            if (wide) {
              panel_row_avx512(dst, src, lo, hi, g.sw);
              continue;
            }
            if (lo == 0 && hi == kPackedPanel && g.sw == 1) {
              std::memcpy(dst, src, sizeof(float) * kPackedPanel);
              continue;
            }
            for (int64_t q = 0; q < lo; ++q) dst[q] = 0.0f;
            int64_t q = lo;
#if defined(__SSE2__)
            if (g.sw == 1 && hi - lo >= 4) {  // 4-wide copies, the last one overlapping
              for (; q + 4 <= hi; q += 4) _mm_storeu_ps(dst + q, _mm_loadu_ps(src + q));
              if (q < hi) _mm_storeu_ps(dst + hi - 4, _mm_loadu_ps(src + hi - 4));
              q = hi;
            }
            if (g.sw == 2)  // src[2q + 0, 2, 4, 6] from two loads reading src[2q .. 2q + 6]
              for (; q + 4 <= hi; q += 4)
                _mm_storeu_ps(dst + q, _mm_shuffle_ps(_mm_loadu_ps(src + 2 * q),
                                                      _mm_loadu_ps(src + 2 * q + 3),
                                                      _MM_SHUFFLE(3, 1, 2, 0)));
#endif
            for (; q < hi; ++q) dst[q] = src[q * g.sw];
            for (int64_t q = hi; q < kPackedPanel; ++q) dst[q] = 0.0f;
            continue;
          }
          for (int64_t q = 0; q < kPackedPanel; ++q) {
            const int64_t iy = iy0[q] + dy, ix = ix0[q] + dx;
            dst[q] = q < count && iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? plane[iy * g.w + ix]
                                                                             : 0.0f;
          }
        }
      }
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void im2col_packed_avx512(const ConvGeom& g, const float* x,
                                                             float* packed, int64_t group_floats,
                                                             int64_t c0, int64_t c1) {
  im2col_packed_impl<true>(g, x, packed, group_floats, c0, c1);
}
#endif

/// im2col_packed_impl, with the AVX-512 rows on CPUs that have them.
void im2col_packed(const ConvGeom& g, const float* x, float* packed, int64_t group_floats,
                   int64_t c0, int64_t c1) {
#if defined(__x86_64__)
  if (have_avx512()) return im2col_packed_avx512(g, x, packed, group_floats, c0, c1);
#endif
  im2col_packed_impl<false>(g, x, packed, group_floats, c0, c1);
}

/// out[m, n] = a[m, k] * b[k, n] (+ nothing): floating types through GEMM, integers by loop
/// (wrapping int64 arithmetic).
template <typename A>
void product(int64_t m, int64_t n, int64_t k, const A* a, const A* b, A* out) {
  if constexpr (std::is_same_v<A, float> || std::is_same_v<A, double>) {
    runtime::gemm(false, false, m, n, k, A(1), a, k, b, n, A(0), out, n);
  } else {
    for (int64_t i = 0; i < m; ++i) {
      uint64_t* acc = reinterpret_cast<uint64_t*>(out + i * n);
      std::fill(acc, acc + n, uint64_t{0});
      for (int64_t p = 0; p < k; ++p) {
        const uint64_t av = static_cast<uint64_t>(a[i * k + p]);
        const A* brow = b + p * n;
        for (int64_t j = 0; j < n; ++j) acc[j] += av * static_cast<uint64_t>(brow[j]);
      }
    }
  }
}

/// out[b, oc, :] += bias[oc] (integers wrap), then max(x, 0) for floating A when g.act is relu
/// (NaN stays NaN, as torch.relu; conv_compute applies the other activations).
template <typename A>
void add_bias(const ConvGeom& g, const A* bp, A* op) {
  if constexpr (std::is_floating_point_v<A>) {
    if (g.act == kern::ConvAct::kRelu) {
      const int64_t l = g.l();
      parallel_for(0, g.n * g.o, kern::grain_for(l), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          A* row = op + r * l;
          const A bv = bp ? bp[r % g.o] : A(0);
          for (int64_t i = 0; i < l; ++i) {
            const A v = row[i] + bv;
            row[i] = v < A(0) ? A(0) : v;
          }
        }
      });
      return;
    }
  }
  if (!bp) return;
  const int64_t l = g.l();
  parallel_for(0, g.n * g.o, kern::grain_for(l), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      A* row = op + r * l;
      const A bv = bp[r % g.o];
      if constexpr (std::is_integral_v<A>) {
        for (int64_t i = 0; i < l; ++i)
          row[i] = static_cast<A>(static_cast<uint64_t>(row[i]) + static_cast<uint64_t>(bv));
      } else {
        for (int64_t i = 0; i < l; ++i) row[i] += bv;
      }
    }
  });
}

/// fp32 convolution (not pointwise): per image, im2col straight into packed panels, then one
/// packed GEMM per group (weights [og, ckk] times packed [ckk, l]) with the bias added as it
/// stores.
void conv_packed(const ConvGeom& g, const float* xp, const float* wp, const float* bp, float* op,
                 int threads) {
  const int64_t l = g.l(), ckk = g.ckk(), og = g.og();
  const int64_t group_floats = packed_b_floats(ckk, l);
  const size_t floats = static_cast<size_t>(std::max<int64_t>(group_floats * g.groups, 1));
  auto image = [&](int64_t b, float* packed, bool parallel) {
    const float* xb = xp + b * g.c * g.h * g.w;
    if (parallel)
      parallel_for(0, g.c, kern::grain_for(g.kh * g.kw * l), [&](int64_t c0, int64_t c1) {
        im2col_packed(g, xb, packed, group_floats, c0, c1);
      });
    else
      im2col_packed(g, xb, packed, group_floats, 0, g.c);
    float* ob = op + b * g.o * l;
    for (int64_t gi = 0; gi < g.groups; ++gi)
      sgemm_prepacked(false, og, l, ckk, 1.0f, wp + gi * og * ckk, ckk,
                      packed + gi * group_floats, ob + gi * og * l, l,
                      bp ? bp + gi * og : nullptr, g.act == kern::ConvAct::kRelu);
  };
  if (g.n >= threads && threads > 1) {
    parallel_for(0, g.n, 1, [&](int64_t b0, int64_t b1) {
      auto packed = std::make_unique_for_overwrite<float[]>(floats);
      for (int64_t b = b0; b < b1; ++b) image(b, packed.get(), false);
    });
  } else {
    auto packed = std::make_unique_for_overwrite<float[]>(floats);
    for (int64_t b = 0; b < g.n; ++b) image(b, packed.get(), true);
  }
}

/// The convolution in accumulation type A (float, double or int64) for element type T.
template <typename T, typename A>
void conv_run(const ConvGeom& g, const Tensor& x, const Tensor& wt,
              const std::optional<Tensor>& bias, const Tensor& out) {
  std::unique_ptr<A[]> xh, wh, bh, oh;
  const A* xp = as_contiguous<A>(x, {g.n, g.c, g.h, g.w}, xh);
  const A* wp = as_contiguous<A>(wt, {g.o, g.cg(), g.kh, g.kw}, wh);
  const A* bp = bias ? as_contiguous<A>(*bias, {g.o}, bh) : nullptr;
  A* op;
  if constexpr (std::is_same_v<T, A>) {
    op = static_cast<A*>(out.data_ptr());
  } else {
    oh =
        std::make_unique_for_overwrite<A[]>(static_cast<size_t>(std::max<int64_t>(out.numel(), 1)));
    op = oh.get();
  }
  const int64_t l = g.l(), ckk = g.ckk(), og = g.og();
  const bool direct = g.pointwise();
  const int threads = available_threads();
  if constexpr (std::is_same_v<A, float>) {
    if (!direct) {
      conv_packed(g, xp, wp, bp, op, threads);
      if constexpr (!std::is_same_v<T, A>)
        kern::copy_cast(out, kern::wrap_buffer(op, dtype_of<A>(), out.sizes()));
      return;
    }
  }
  if constexpr (std::is_floating_point_v<A>) {
    if (direct && l == 1 && g.groups == 1 && g.n > 1) {
      // 1x1 images (squeeze-excitation): one [N, C] x [O, C]^T product for the batch, split
      // inside the GEMM where it is large enough, instead of N matrix-vector products (each
      // far too small to be worth a thread of its own).
      runtime::gemm(false, true, g.n, g.o, g.c, A(1), xp, g.c, wp, g.c, A(0), op, g.o);
      add_bias(g, bp, op);
      if constexpr (!std::is_same_v<T, A>)
        kern::copy_cast(out, kern::wrap_buffer(op, dtype_of<A>(), out.sizes()));
      return;
    }
  }
  // One image: im2col (parallel over channels at the top level), then one product per group.
  auto image = [&](int64_t b, A* cols) {
    const A* xb = xp + b * g.c * g.h * g.w;
    if (!direct) {
      const int64_t grain = kern::grain_for(g.kh * g.kw * l);
      parallel_for(0, g.c, grain, [&](int64_t c0, int64_t c1) { im2col<A>(g, xb, cols, c0, c1); });
    }
    const A* src = direct ? xb : cols;
    A* ob = op + b * g.o * l;
    auto group = [&](int64_t gi) {
      product<A>(og, l, ckk, wp + gi * og * ckk, src + gi * ckk * l, ob + gi * og * l);
    };
    if (g.groups >= threads && g.groups > 1) {
      parallel_for(0, g.groups, kern::grain_for(og * l * ckk), [&](int64_t g0, int64_t g1) {
        for (int64_t gi = g0; gi < g1; ++gi) group(gi);
      });
    } else {
      for (int64_t gi = 0; gi < g.groups; ++gi) group(gi);
    }
  };
  const size_t cols_size =
      direct ? 1 : static_cast<size_t>(std::max<int64_t>(g.c * g.kh * g.kw * l, 1));
  if (g.n >= threads && threads > 1) {
    parallel_for(0, g.n, 1, [&](int64_t b0, int64_t b1) {
      auto cols = std::make_unique_for_overwrite<A[]>(cols_size);
      for (int64_t b = b0; b < b1; ++b) image(b, cols.get());
    });
  } else {
    auto cols = std::make_unique_for_overwrite<A[]>(cols_size);
    for (int64_t b = 0; b < g.n; ++b) image(b, cols.get());
  }
  add_bias(g, bp, op);
  if constexpr (!std::is_same_v<T, A>)
    kern::copy_cast(out, kern::wrap_buffer(op, dtype_of<A>(), out.sizes()));
}

/// The convolution of geometry `g` (its activation included) into `out` on the path
/// conv_path() picks.
void conv_compute(ExternCall& call, const ConvGeom& g, const Tensor& x, const Tensor& wt,
                  const std::optional<Tensor>& bias, const Tensor& out) {
  if (g.c == 0 || g.kh * g.kw == 0) {  // empty reduction: bias (or zeros)
    if (bias)
      kern::copy_cast(out,
                      bias->reshape({1, g.o, 1}).expand({g.n, g.o, g.l()}).reshape(out.sizes()));
    else
      Tensor(out).fill(0);
    kern::conv_activate(g, out);
    return;
  }
  switch (kern::conv_path(g, x.dtype())) {
    case kern::ConvPath::kDirect:
      kern::conv_depthwise(g, x, wt, bias, out);
      return;
    case kern::ConvPath::kOneDnn:
      // weight_constant (CPU codegen): the weight is an immutable constant of the model.
      if (kern::conv_onednn(g, x, wt, bias, out,
                            call.attr_int("weight_constant", 0) ? call.packed_weights() : nullptr))
        return;
      break;  // no fast oneDNN kernel for it: im2col
    case kern::ConvPath::kIm2col:
      break;
  }
  // im2col + GEMM applies relu as it stores; the other activations follow over the output.
  ConvGeom p = g;
  if (g.act != kern::ConvAct::kRelu) p.act = kern::ConvAct::kNone;
  switch (x.dtype()) {
    case DType::kFloat32:
      conv_run<float, float>(p, x, wt, bias, out);
      break;
    case DType::kFloat64:
      conv_run<double, double>(p, x, wt, bias, out);
      break;
    case DType::kFloat16:
      conv_run<Half, float>(p, x, wt, bias, out);
      break;
    case DType::kBFloat16:
      conv_run<BFloat16, float>(p, x, wt, bias, out);
      break;
    case DType::kInt64:
      conv_run<int64_t, int64_t>(p, x, wt, bias, out);
      break;
    default:
      ANVIL_DISPATCH_REAL(x.dtype(), call.target(), T, {
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
          conv_run<T, int64_t>(p, x, wt, bias, out);
      });
  }
  if (p.act != g.act) kern::conv_activate(g, out);
}

/// out = out + residual, then g's activation: a residual add (and activation) fused into the
/// call (fused_add) that the convolution's path did not apply itself.
void add_residual(const Tensor& out, const Tensor& residual, const ConvGeom& g) {
  const Tensor r = residual.is_contiguous() ? residual : residual.contiguous();
  if (out.dtype() == DType::kFloat32 && out.is_contiguous()) {
    float* o = out.data<float>();
    const float* p = r.data<float>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i) o[i] += p[i];
  } else {
    std::vector<double> v = out.to_doubles();
    const std::vector<double> rv = r.to_doubles();
    for (size_t i = 0; i < v.size(); ++i) v[i] += rv[i];
    kern::copy_cast(out, Tensor::from_vector(v, out.sizes()));
  }
  kern::conv_activate(g, out);
}

/// Output 0 of a convolution call: its sizes and dtype checked, dense NCHW (contiguous) or, on
/// a 4-D output, dense channels-last (the layout passes/conv_layout.cpp may give it).
Tensor conv_output(const ExternCall& call, const ConvGeom& g, DType dtype) {
  ANVIL_CHECK(call.num_outputs() >= 1, call.target(), "missing output", "1 output", "0");
  const Tensor out = call.output_tensor(0);
  const Shape sizes = conv_out_sizes(g);
  ANVIL_CHECK(out.sizes() == sizes && out.dtype() == dtype, call.target(),
              "the output has the wrong sizes or dtype", shape_str(sizes) + " " + dtype_name(dtype),
              out.type_str());
  const bool nhwc = out.dim() == 4 && out.strides() == Shape{g.oh * g.ow * g.o, 1, g.ow * g.o, g.o};
  ANVIL_CHECK(out.numel() == 0 || out.is_contiguous() || nhwc, call.target(),
              "the output must be dense NCHW or channels-last", "contiguous or NHWC strides",
              shape_str(out.strides()));
  return out;
}

/// Shared body of convolution / conv2d.
int conv_extern(ExternCall& call) {
  const Tensor x = call.input_tensor(0), wt = call.input_tensor(1);
  const std::optional<Tensor> bias = kern::opt_input(call, 2);
  if (call.attr_bool("transposed", false)) {  // aten.convolution.default, transposed=True
    kern::ConvTransposeArgs a;
    a.stride = call.attr_ints("stride", {1});
    a.padding = call.attr_ints("padding", {0});
    a.output_padding = call.attr_ints("output_padding", {0});
    a.dilation = call.attr_ints("dilation", {1});
    a.groups = call.attr_int("groups", 1);
    const Tensor out = kern::checked_output(
        call, 0, kern::conv_transpose_sizes(x.sizes(), wt.sizes(), a, call.target()), x.dtype());
    kern::conv_transpose(x, wt, bias, a, out, call.target());
    return 0;
  }
  const ConvGeom g = conv_geometry(call, x, wt, bias);
  const Tensor out = conv_output(call, g, x.dtype());
  std::optional<Tensor> residual;
  if (call.attr_int("fused_add", 0)) {  // a residual add fused by the compiler: input 3
    residual = kern::opt_input(call, 3);
    ANVIL_CHECK(residual.has_value(), call.target(), "fused_add needs the residual as input 3",
                "a tensor of the output's shape", "none");
    ANVIL_CHECK(residual->dtype() == x.dtype() && residual->sizes() == out.sizes(), call.target(),
                "the fused residual must have the output's dtype and sizes", out.type_str(),
                residual->type_str());
  }
  if (out.numel() == 0) return 0;
  // oneDNN takes any dense layout and the residual and activation fused.
  if (g.c > 0 && g.kh * g.kw > 0 && kern::conv_path(g, x.dtype()) == kern::ConvPath::kOneDnn &&
      kern::conv_onednn(g, x, wt, bias, out,
                        call.attr_int("weight_constant", 0) ? call.packed_weights() : nullptr,
                        residual ? &*residual : nullptr))
    return 0;
  if (!out.is_contiguous()) {
    // A channels-last output on the other paths: computed contiguous, then copied into place.
    const Tensor dense = Tensor::empty(out.sizes(), out.dtype());
    ConvGeom plain = g;
    if (residual) plain.act = kern::ConvAct::kNone;
    conv_compute(call, plain, x, wt, bias, dense);
    if (residual) add_residual(dense, *residual, g);
    kern::copy_cast(out, dense);
    return 0;
  }
  if (!residual) {
    conv_compute(call, g, x, wt, bias, out);
    return 0;
  }
  // The paths other than oneDNN's write the plain convolution first: a residual in the
  // output's memory is copied before that, the activation waits for the add.
  const auto* r0 = static_cast<const char*>(residual->data_ptr());
  const auto* o0 = static_cast<const char*>(out.data_ptr());
  const bool overlaps = r0 < o0 + out.nbytes() && o0 < r0 + residual->nbytes();
  ConvGeom plain = g;
  plain.act = kern::ConvAct::kNone;
  const Tensor r = overlaps || !residual->is_contiguous()
                       ? residual->to(residual->dtype(), /*copy=*/true)
                       : *residual;
  conv_compute(call, plain, x, wt, bias, out);
  add_residual(out, r, g);
  return 0;
}

}  // namespace

/// Registers the convolution externs.
void register_conv_externs() {
  register_extern("aten.convolution.default", conv_extern);
  register_extern("aten.conv2d.default", conv_extern);
  register_extern("aten.conv1d.default", conv_extern);
}

}  // namespace anvil::runtime
