// Direct depthwise convolution (conv.h): groups == C, any kernel size, stride, dilation and
// padding, channel multiplier O / C, fp32 accumulation for fp32 / bf16 / fp16.
//
// Per input plane (one image, one channel), on one thread of the pool:
//  1. The plane is copied, converted to fp32, into a zero-padded buffer split into `sw` column
//     phases (phase r holds the padded columns r, r + sw, r + 2 sw, ...), so that for every
//     kernel tap the input pixels of consecutive output columns are consecutive floats, whatever
//     the stride. Rows keep their padded index; a vertical stride is a row step. The buffer's
//     border is zeroed once per thread and never written again (every plane writes the same
//     interior).
//  2. For each of the plane's output channels, the output is cut into tiles of R rows x NV
//     vectors; a tile keeps R x NV accumulators in registers (initialised with the bias), walks
//     the kh x kw taps (one broadcast weight, R x NV loads and FMAs per tap) and stores once,
//     with ReLU (other fused activations: conv_activate over the finished plane) and a masked
//     store for the last vector of a row. Loads past a row's last output
//     read the buffer's zero slack (the results of those lanes are never stored).
// Micro-kernels: AVX-512 (16 lanes) and AVX2 + FMA (8 lanes) chosen at run time
// (__builtin_cpu_supports; the library is not built with -mavx*), generic C++ otherwise.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#if defined(__x86_64__) || defined(__SSE2__)
#include <immintrin.h>
#endif

#include "runtime/kernels/conv.h"
#include "runtime/kernels/kernel_util.h"

namespace anvil::runtime::kern {

namespace {

/// Columns of every buffer row are padded to a multiple of this (the widest vector).
constexpr int64_t kMaxLanes = 16;
/// Vectors per tile row at most, and rows per tile at most for NV vectors (R x NV <= 12
/// accumulators: AVX2 has 16 registers).
constexpr int kMaxNv = 4;
constexpr int kMaxRows[kMaxNv] = {8, 4, 4, 3};

/// One tile: output rows [y0, y0 + R) x columns [x0, x0 + NV * lanes) of one output plane.
struct Tile {
  const float* src;    // the padded buffer at (row y0 * sh, phase 0, column x0)
  const int64_t* off;  // per tap: buffer offset of its first input pixel from `src`
  const float* w;      // per tap: the weight
  int64_t taps;        // kh * kw
  int64_t row_step;    // buffer floats between the inputs of consecutive output rows
  float* out;          // output at (y0, x0)
  int64_t ldo;         // output row stride
  int last;            // valid lanes of the tile's last vector (1 .. lanes)
  float bias;
  bool relu;
};

using TileFn = void (*)(const Tile&);

#if defined(__x86_64__)
/// R x NV tile with 16-lane AVX-512 vectors.
template <int R, int NV>
__attribute__((target("avx512f"))) void tile_avx512(const Tile& t) {
  __m512 acc[R][NV];
  const __m512 b = _mm512_set1_ps(t.bias);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = b;
  for (int64_t k = 0; k < t.taps; ++k) {
    const __m512 wv = _mm512_set1_ps(t.w[k]);
    const float* p = t.src + t.off[k];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[r][v] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + r * t.row_step + v * 16), acc[r][v]);
  }
  const __m512 zero = _mm512_setzero_ps();
  const __mmask16 tail = static_cast<__mmask16>((uint32_t{1} << t.last) - 1);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      // max(0, x) with x second keeps NaN (as torch.relu); maskz avoids a GCC 12
      // -Wmaybe-uninitialized false positive in _mm512_max_ps.
      const __m512 y = t.relu ? _mm512_maskz_max_ps(__mmask16(0xFFFF), zero, acc[r][v]) : acc[r][v];
      float* o = t.out + r * t.ldo + v * 16;
      if (v + 1 < NV)
        _mm512_storeu_ps(o, y);
      else
        _mm512_mask_storeu_ps(o, tail, y);
    }
}

/// R x NV tile with 8-lane AVX2 vectors and FMA.
template <int R, int NV>
__attribute__((target("avx2,fma"))) void tile_avx2(const Tile& t) {
  __m256 acc[R][NV];
  const __m256 b = _mm256_set1_ps(t.bias);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = b;
  for (int64_t k = 0; k < t.taps; ++k) {
    const __m256 wv = _mm256_set1_ps(t.w[k]);
    const float* p = t.src + t.off[k];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[r][v] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p + r * t.row_step + v * 8), acc[r][v]);
  }
  const __m256 zero = _mm256_setzero_ps();
  const __m256i tail =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(t.last), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __m256 y = t.relu ? _mm256_max_ps(zero, acc[r][v]) : acc[r][v];  // NaN stays NaN
      float* o = t.out + r * t.ldo + v * 8;
      if (v + 1 < NV)
        _mm256_storeu_ps(o, y);
      else
        _mm256_maskstore_ps(o, tail, y);
    }
}

/// The tile functions of one ISA, indexed [NV - 1][R - 1] (null where R > kMaxRows[NV - 1]).
struct TileTable {
  TileFn fn[kMaxNv][8] = {};
};

template <template <int, int> class Wrap, int NV, int... Rs>
void fill_row(TileTable& t, std::integer_sequence<int, Rs...>) {
  ((t.fn[NV - 1][Rs] = Wrap<Rs + 1, NV>::fn), ...);
}

template <int R, int NV>
struct Avx512Fn {
  static constexpr TileFn fn = &tile_avx512<R, NV>;
};
template <int R, int NV>
struct Avx2Fn {
  static constexpr TileFn fn = &tile_avx2<R, NV>;
};

template <template <int, int> class Wrap>
TileTable make_table() {
  TileTable t;
  fill_row<Wrap, 1>(t, std::make_integer_sequence<int, kMaxRows[0]>{});
  fill_row<Wrap, 2>(t, std::make_integer_sequence<int, kMaxRows[1]>{});
  fill_row<Wrap, 3>(t, std::make_integer_sequence<int, kMaxRows[2]>{});
  fill_row<Wrap, 4>(t, std::make_integer_sequence<int, kMaxRows[3]>{});
  return t;
}
#endif

/// The vector ISA the tiles of `ow`-wide output rows use: 16 (AVX-512), 8 (AVX2 + FMA) or 0
/// (generic C++), the best the CPU has unless ANVIL_CONV_ISA=avx2|generic asks for less (tests
/// and benchmarks compare). Rows of at most 8 outputs (7x7 planes) take 8-lane vectors, which
/// waste fewer lanes.
int tile_lanes(int64_t ow) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const char* env = std::getenv("ANVIL_CONV_ISA");
  const std::string isa = env ? env : "";
  if (isa == "generic") return 0;
  if (avx512 && isa != "avx2" && !(ow <= 8 && avx2)) return 16;
  return avx2 ? 8 : 0;
#else
  (void)ow;
  return 0;
#endif
}

/// Everything one output plane's computation needs besides the buffer and the channel.
struct PlaneGeom {
  int64_t oh, ow, sh, taps, ld;  // ld: buffer row length (floats)
  std::vector<int64_t> off;      // per tap, from the buffer's start
};

/// One output plane (its weights `w`, its bias, `out` [oh, ow]) from the padded buffer, with
/// tiles of `lanes`-wide vectors (tile_lanes).
void plane(const PlaneGeom& p, int lanes, const float* buf, const float* w, float bias, bool relu,
           float* out) {
#if defined(__x86_64__)
  if (lanes > 0) {
    static const TileTable avx512 = make_table<Avx512Fn>();
    static const TileTable avx2 = make_table<Avx2Fn>();
    const TileTable& table = lanes == 16 ? avx512 : avx2;
    const int64_t vecs = (p.ow + lanes - 1) / lanes;
    for (int64_t v0 = 0; v0 < vecs; v0 += kMaxNv) {
      const int nv = static_cast<int>(std::min<int64_t>(kMaxNv, vecs - v0));
      const int64_t x0 = v0 * lanes;
      Tile t{};
      t.off = p.off.data();
      t.w = w;
      t.taps = p.taps;
      t.row_step = p.sh * p.ld;
      t.ldo = p.ow;
      t.last = static_cast<int>(std::min<int64_t>(lanes, p.ow - (x0 + (nv - 1) * lanes)));
      t.bias = bias;
      t.relu = relu;
      const int max_rows = kMaxRows[nv - 1];
      for (int64_t y0 = 0; y0 < p.oh; y0 += max_rows) {
        const int rows = static_cast<int>(std::min<int64_t>(max_rows, p.oh - y0));
        t.src = buf + y0 * t.row_step + x0;
        t.out = out + y0 * p.ow + x0;
        table.fn[nv - 1][rows - 1](t);
      }
    }
    return;
  }
#endif
  // Generic: one output row at a time, tap by tap over the whole row (the compiler vectorises
  // the inner loop for the baseline ISA).
  for (int64_t y = 0; y < p.oh; ++y) {
    float* row = out + y * p.ow;
    std::fill(row, row + p.ow, bias);
    const float* src = buf + y * p.sh * p.ld;
    for (int64_t k = 0; k < p.taps; ++k) {
      const float wk = w[k];
      const float* in = src + p.off[static_cast<size_t>(k)];
      for (int64_t x = 0; x < p.ow; ++x) row[x] += wk * in[x];
    }
    if (relu)
      for (int64_t x = 0; x < p.ow; ++x) row[x] = row[x] < 0.0f ? 0.0f : row[x];
  }
}

/// Writes input row `in` [w] into one padded buffer row split into `sw` phases (`phase_floats`
/// apart): input column ix sits at padded column pc = ix + pad_left, i.e. at phase pc % sw,
/// offset pc / sw. Each residue ix % sw is one contiguous run of the destination.
void split_row(const float* in, int64_t w, int64_t sw, int64_t pad_left, float* dst,
               int64_t phase_floats) {
  if (sw == 1) {
    std::memcpy(dst + pad_left, in, sizeof(float) * static_cast<size_t>(w));
    return;
  }
  float* run[2] = {nullptr, nullptr};  // sw == 2: destinations of the even / odd columns
  for (int64_t r = 0; r < std::min(sw, w); ++r) {
    float* d = dst + ((r + pad_left) % sw) * phase_floats + (r + pad_left) / sw;
    if (sw == 2) {
      run[r] = d;
      continue;
    }
    for (int64_t j = 0, ix = r; ix < w; ++j, ix += sw) d[j] = in[ix];
  }
  if (sw != 2) return;
  int64_t j = 0;
#if defined(__SSE2__)
  for (; 2 * j + 8 <= w; j += 4) {  // 8 columns -> 4 even + 4 odd
    const __m128 a = _mm_loadu_ps(in + 2 * j), b = _mm_loadu_ps(in + 2 * j + 4);
    _mm_storeu_ps(run[0] + j, _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm_storeu_ps(run[1] + j, _mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
#endif
  for (; 2 * j < w; ++j) {
    run[0][j] = in[2 * j];
    if (2 * j + 1 < w) run[1][j] = in[2 * j + 1];
  }
}

/// The typed body: T is the element type of x and out (float, BFloat16 or Half).
template <typename T>
void depthwise_run(const ConvGeom& g, const Tensor& x, const Tensor& weight,
                   const std::optional<Tensor>& bias, const Tensor& out) {
  const int64_t mult = g.o / g.c, taps = g.kh * g.kw;
  const Tensor wf = weight.to(DType::kFloat32).contiguous();  // [O, 1, (KH,) KW]
  const float* wp = static_cast<const float*>(wf.data_ptr());
  std::vector<float> bv(static_cast<size_t>(g.o), 0.0f);
  if (bias) {
    const std::vector<double> b = bias->to_doubles();
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(b[i]);
  }
  // Input strides in [n, c, h, w] terms (unbatched: no n; 1-D: no h).
  const int64_t b0 = g.unbatched ? 0 : 1;
  const int64_t xs_n = g.unbatched ? 0 : x.stride(0), xs_c = x.stride(b0);
  const int64_t xs_h = g.spatial == 2 ? x.stride(-2) : 0, xs_w = x.stride(-1);
  const T* xp = static_cast<const T*>(x.data_ptr());
  T* op = static_cast<T*>(out.data_ptr());

  // Buffer: sw phases of ph rows of ld floats.
  const int64_t ph = g.h + g.pad_top + g.pad_bottom, pw = g.w + g.pad_left + g.pad_right;
  const int64_t sw = g.sw;
  const int64_t out_cols = (g.ow + kMaxLanes - 1) / kMaxLanes * kMaxLanes;
  PlaneGeom pg;
  pg.oh = g.oh;
  pg.ow = g.ow;
  pg.sh = g.sh;
  pg.taps = taps;
  pg.ld = std::max((pw + sw - 1) / sw, out_cols + (g.kw - 1) * g.dw / sw);
  pg.off.resize(static_cast<size_t>(taps));
  for (int64_t ki = 0; ki < g.kh; ++ki)
    for (int64_t kj = 0; kj < g.kw; ++kj) {
      const int64_t col = kj * g.dw;  // padded column of output column 0's input, this tap
      pg.off[static_cast<size_t>(ki * g.kw + kj)] =
          ((col % sw) * ph + ki * g.dh) * pg.ld + col / sw;
    }
  const size_t buf_floats = static_cast<size_t>(sw * ph * pg.ld);
  const int64_t l = g.l();

  // Copies plane (b, ch) into the buffer's interior, row by row: a contiguous fp32 row (the
  // input's own, or `tmp` converted / gathered), then split into its column phases.
  auto fill = [&](float* buf, float* tmp, int64_t b, int64_t ch) {
    const T* src = xp + b * xs_n + ch * xs_c;
    for (int64_t iy = 0; iy < g.h; ++iy) {
      const T* row = src + iy * xs_h;
      const float* in = tmp;
      if constexpr (std::is_same_v<T, float>) {
        if (xs_w == 1) in = row;
      }
      if (in == tmp)
        for (int64_t ix = 0; ix < g.w; ++ix) tmp[ix] = cast_value<float, T>(row[ix * xs_w]);
      split_row(in, g.w, sw, g.pad_left, buf + (iy + g.pad_top) * pg.ld, ph * pg.ld);
    }
  };

  const int64_t planes = g.n * g.c;
  const int lanes = tile_lanes(g.ow);
  // relu in the tiles' stores; any other activation over each plane once it is written
  const bool relu = g.act == ConvAct::kRelu, post_act = !relu && g.act != ConvAct::kNone;
  parallel_for(0, planes, grain_for(mult * l * taps), [&](int64_t p0, int64_t p1) {
    std::vector<float> buf(buf_floats, 0.0f), tmp(static_cast<size_t>(g.w));
    std::vector<float> scratch(std::is_same_v<T, float> ? 0 : static_cast<size_t>(l));
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t b = p / g.c, ch = p % g.c;
      fill(buf.data(), tmp.data(), b, ch);
      for (int64_t j = 0; j < mult; ++j) {
        const int64_t oc = ch * mult + j;
        T* dst = op + (b * g.o + oc) * l;
        float* res;
        if constexpr (std::is_same_v<T, float>)
          res = dst;
        else
          res = scratch.data();
        plane(pg, lanes, buf.data(), wp + oc * taps, bv[static_cast<size_t>(oc)], relu, res);
        if (post_act) conv_activate(g.act, g.act_lo, g.act_hi, res, l);  // while in cache
        if constexpr (!std::is_same_v<T, float>)
          for (int64_t i = 0; i < l; ++i) dst[i] = cast_value<T, float>(res[i]);
      }
    }
  });
}

}  // namespace

bool use_conv_depthwise(const ConvGeom& g, DType dtype) {
  return conv_path(g, dtype) == ConvPath::kDirect;
}

void conv_depthwise(const ConvGeom& g, const Tensor& x, const Tensor& weight,
                    const std::optional<Tensor>& bias, const Tensor& out) {
  ANVIL_CHECK(g.depthwise() && g.o % g.c == 0, "conv_depthwise", "not a depthwise convolution",
              str("groups == C (", g.c, ") and O % C == 0"), str("groups ", g.groups, ", O ", g.o));
  ANVIL_CHECK(out.is_contiguous() && out.dtype() == x.dtype(), "conv_depthwise",
              "the output must be contiguous with the input's dtype", dtype_name(x.dtype()),
              out.type_str());
  switch (x.dtype()) {
    case DType::kFloat32:
      return depthwise_run<float>(g, x, weight, bias, out);
    case DType::kBFloat16:
      return depthwise_run<BFloat16>(g, x, weight, bias, out);
    case DType::kFloat16:
      return depthwise_run<Half>(g, x, weight, bias, out);
    default:
      throw Error("unsupported dtype", "conv_depthwise", "f32, bf16 or f16", dtype_name(x.dtype()));
  }
}

}  // namespace anvil::runtime::kern
