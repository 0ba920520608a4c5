// Runtime extern kernels for 2-D pooling: aten.max_pool2d.default, aten.avg_pool2d.default and
// aten.adaptive_avg_pool2d.default over [N, C, H, W] or [C, H, W] inputs with any strides.
// Semantics follow the reference kernels (src/ops/conv.cpp): max pooling propagates NaN, average
// pooling accumulates in fp32 (f64 for double, int64 for integers) and honours ceil_mode,
// count_include_pad and divisor_override. Planes are split over the runtime thread pool.
#include "core/pool_nd.h"
#include "runtime/kernels/kernel_util.h"

// -O2's "very cheap" vectoriser cost model keeps loops whose count is unknown scalar (the
// max pool's column pass).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

namespace anvil::runtime {

namespace {

/// Averaging accumulator: fp32 for 16/32-bit floats, f64 for f64, int64 for integers.
template <typename T>
using PoolAcc = std::conditional_t<std::is_same_v<T, double>, double,
                                   std::conditional_t<std::is_integral_v<T>, int64_t, float>>;

/// An int list attribute expanded to 2 values; `fallback` when absent.
std::vector<int64_t> pair_list(const ExternCall& call, const char* name,
                               const std::vector<int64_t>& fallback) {
  std::vector<int64_t> v = call.attr_ints(name, fallback);
  if (v.size() == 1) return {v[0], v[0]};
  ANVIL_CHECK(v.size() == 2, call.target(), str("'", name, "' must have 1 or 2 values"), "2 values",
              std::to_string(v.size()));
  return v;
}

/// Reads kernel_size / stride / padding (/ dilation) like torch (an empty stride = kernel), checked
/// by the pooling geometry the reference kernels share (core/pool_nd.h); index 0 = height, 1 =
/// width.
pool::Window read_window(const ExternCall& call, bool with_dilation) {
  return pool::make_window(
      2, call.attr_ints("kernel_size", {}), call.attr_ints("stride", {}),
      call.attr_ints("padding", {0}),
      with_dilation ? call.attr_ints("dilation", {1}) : std::vector<int64_t>{1}, call.target());
}

/// torch's pooling_output_shape (the one rule of core/pool_nd.h).
int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode) {
  return pool::output_size(in, k, pad, s, d, ceil_mode);
}

/// The input as planes: element offset of each [H, W] plane and the plane strides.
struct Planes {
  std::vector<int64_t> offsets;
  int64_t h = 0, w = 0, sh = 0, sw = 0;
};

/// Checks a pooling input's rank and lists its planes.
Planes planes_of(const ExternCall& call, const Tensor& x) {
  ANVIL_CHECK(x.dim() == 3 || x.dim() == 4, call.target(), "pooling needs a 3-D or 4-D input",
              "[N, C, H, W] or [C, H, W]", x.type_str());
  Planes p;
  p.h = x.size(-2);
  p.w = x.size(-1);
  p.sh = x.stride(-2);
  p.sw = x.stride(-1);
  const Shape lead(x.sizes().begin(), x.sizes().end() - 2);
  const std::array<Shape, 1> st = {Shape(x.strides().begin(), x.strides().end() - 2)};
  const int64_t n = shape_numel(lead);
  p.offsets.reserve(static_cast<size_t>(n));
  kern::for_each_offsets<1>(lead, st, 0, n,
                            [&](const std::array<int64_t, 1>& o) { p.offsets.push_back(o[0]); });
  return p;
}

/// Output sizes: the input's with the last two dims replaced.
Shape pooled_sizes(const Tensor& x, int64_t oh, int64_t ow) {
  Shape s = x.sizes();
  s[s.size() - 2] = oh;
  s[s.size() - 1] = ow;
  return s;
}

/// Runs per_plane(src, dst) for every plane, split over the thread pool.
template <typename T, typename F>
void for_planes(const Planes& p, const Tensor& x, const Tensor& out, int64_t per_plane_work,
                F&& per_plane) {
  const T* xp = static_cast<const T*>(x.data_ptr());
  T* op = static_cast<T*>(out.data_ptr());
  const int64_t plane_out = out.size(-2) * out.size(-1);
  const int64_t n = static_cast<int64_t>(p.offsets.size());
  parallel_for(0, n, kern::grain_for(per_plane_work), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) per_plane(xp + p.offsets[i], op + i * plane_out);
  });
}

/// The sum of n elements `stride` apart in accumulation type Acc; contiguous rows use eight
/// partial sums (independent add chains the compiler vectorizes).
template <typename T, typename Acc>
Acc row_sum(const T* row, int64_t n, int64_t stride) {
  Acc total = 0;
  int64_t i = 0;
  if (stride == 1 && n >= 16) {
    Acc part[8] = {};
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) part[j] += static_cast<Acc>(row[i + j]);
    for (int j = 0; j < 8; ++j) total += part[j];
  }
  for (; i < n; ++i) total += static_cast<Acc>(row[i * stride]);
  return total;
}

/// The taps k in [lo, hi) of a window starting at `start` (dilation `d`, `k` taps) that fall
/// inside [0, n).
void tap_range(int64_t start, int64_t d, int64_t k, int64_t n, int64_t& lo, int64_t& hi) {
  lo = start < 0 ? (-start + d - 1) / d : 0;
  hi = n - start <= 0 ? 0 : std::min(k, (n - start + d - 1) / d);
  lo = std::min(lo, k);
}

/// Validates a pooling call's output size.
void check_pool_size(const ExternCall& call, const Tensor& x, int64_t oh, int64_t ow) {
  ANVIL_CHECK(oh >= 1 && ow >= 1, call.target(), "output size is too small",
              "an output of at least 1x1", str(x.type_str(), " gives ", oh, "x", ow));
}

/// max(a, b) that is NaN when either is (torch's max pooling): a compare and a blend, which
/// the compiler vectorises.
inline float max_nan(float a, float b) { return (a > b || a != a) ? a : b; }

/// out[xo] = max over taps kj of colmax[xo * S - pad + kj * d] for the outputs [x0, x1) whose
/// taps all fall inside the row: tap by tap over the whole range, so the loop over xo
/// vectorises (S: the column stride, fixed for 1 and 2, else 0 with `stride` at run time).
template <int S>
void max_taps_interior(const float* colmax, float* out, int64_t x0, int64_t x1, int64_t stride,
                       int64_t pad, int64_t kw, int64_t d) {
  const int64_t s = S > 0 ? S : stride;
  for (int64_t xo = x0; xo < x1; ++xo) out[xo] = colmax[xo * s - pad];
  for (int64_t kj = 1; kj < kw; ++kj) {
    const int64_t off = kj * d - pad;
    for (int64_t xo = x0; xo < x1; ++xo) out[xo] = max_nan(colmax[xo * s + off], out[xo]);
  }
}

/// One fp32 plane with unit-stride rows: per output row, the column-wise max of the window's
/// input rows (a contiguous, vectorised pass over `colmax`), then each output's max over its
/// taps of that row (kw loads instead of kh x kw; vectorised where every tap is inside the
/// row). Same result as the generic loop, NaNs included.
void max_pool_rows_f32(const float* src, float* dst, const Planes& p, const pool::Window& w,
                       int64_t oh, int64_t ow, const std::vector<int64_t>& kj_lo,
                       const std::vector<int64_t>& kj_hi, float* colmax) {
  // Outputs [full0, full1) have every tap inside the row.
  int64_t full0 = 0, full1 = 0;
  while (full0 < ow && !(kj_lo[full0] == 0 && kj_hi[full0] == w.kernel[1])) ++full0;
  full1 = full0;
  while (full1 < ow && kj_lo[full1] == 0 && kj_hi[full1] == w.kernel[1]) ++full1;
  for (int64_t y = 0; y < oh; ++y) {
    const int64_t y0 = y * w.stride[0] - w.pad[0];
    int64_t ki_lo, ki_hi;
    tap_range(y0, w.dilation[0], w.kernel[0], p.h, ki_lo, ki_hi);
    float* out = dst + y * ow;
    if (ki_lo >= ki_hi) {
      std::fill(out, out + ow, std::numeric_limits<float>::lowest());
      continue;
    }
    std::memcpy(colmax, src + (y0 + ki_lo * w.dilation[0]) * p.sh, sizeof(float) * p.w);
    for (int64_t ki = ki_lo + 1; ki < ki_hi; ++ki) {
      const float* __restrict row = src + (y0 + ki * w.dilation[0]) * p.sh;
      float* __restrict m = colmax;
      for (int64_t x = 0; x < p.w; ++x) m[x] = max_nan(row[x], m[x]);
    }
    const int64_t s = w.stride[1], pad = w.pad[1], kw = w.kernel[1], d = w.dilation[1];
    if (s == 1)
      max_taps_interior<1>(colmax, out, full0, full1, s, pad, kw, d);
    else if (s == 2)
      max_taps_interior<2>(colmax, out, full0, full1, s, pad, kw, d);
    else
      max_taps_interior<0>(colmax, out, full0, full1, s, pad, kw, d);
    for (int64_t xo = 0; xo < ow; ++xo) {  // the edges: some taps outside the row, or none in
      if (xo == full0) xo = std::max(full1, xo);
      if (xo >= ow) break;
      const int64_t lo = kj_lo[xo], hi = kj_hi[xo];
      if (lo >= hi) {
        out[xo] = std::numeric_limits<float>::lowest();
        continue;
      }
      const int64_t x0 = xo * s - pad;
      float best = colmax[x0 + lo * d];
      for (int64_t kj = lo + 1; kj < hi; ++kj) best = max_nan(colmax[x0 + kj * d], best);
      out[xo] = best;
    }
  }
}

/// The runtime kernel of aten.max_pool2d.default.
int max_pool2d_extern(ExternCall& call) {
  const Tensor x = call.input_tensor(0);
  const pool::Window w = read_window(call, true);
  const bool ceil_mode = call.attr_bool("ceil_mode", false);
  const Planes p = planes_of(call, x);
  const int64_t oh = pool_out(p.h, w.kernel[0], w.pad[0], w.stride[0], w.dilation[0], ceil_mode);
  const int64_t ow = pool_out(p.w, w.kernel[1], w.pad[1], w.stride[1], w.dilation[1], ceil_mode);
  check_pool_size(call, x, oh, ow);
  ANVIL_CHECK(x.dtype() != DType::kBool, call.target(), "max_pool2d does not support bool",
              "a number", "bool");
  const Tensor out = kern::checked_output(call, 0, pooled_sizes(x, oh, ow), x.dtype());
  if (out.numel() == 0) return 0;
  // Valid kernel taps per output column: kj in [kj_lo[xo], kj_hi[xo]) reads inside the row.
  std::vector<int64_t> kj_lo(static_cast<size_t>(ow)), kj_hi(static_cast<size_t>(ow));
  for (int64_t xo = 0; xo < ow; ++xo)
    tap_range(xo * w.stride[1] - w.pad[1], w.dilation[1], w.kernel[1], p.w, kj_lo[xo], kj_hi[xo]);
  if (x.dtype() == DType::kFloat32 && p.sw == 1) {  // rows of contiguous floats (NCHW)
    for_planes<float>(p, x, out, oh * ow * w.kernel[0] * w.kernel[1],
                      [&](const float* src, float* dst) {
                        thread_local std::vector<float> colmax;
                        colmax.resize(static_cast<size_t>(p.w));
                        max_pool_rows_f32(src, dst, p, w, oh, ow, kj_lo, kj_hi, colmax.data());
                      });
    return 0;
  }
  ANVIL_DISPATCH_REAL(x.dtype(), call.target(), T, {
    using C = kern::CmpType<T>;
    for_planes<T>(p, x, out, oh * ow * w.kernel[0] * w.kernel[1], [&](const T* src, T* dst) {
      for (int64_t y = 0; y < oh; ++y) {
        const int64_t y0 = y * w.stride[0] - w.pad[0];
        int64_t ki_lo, ki_hi;
        tap_range(y0, w.dilation[0], w.kernel[0], p.h, ki_lo, ki_hi);
        for (int64_t xo = 0; xo < ow; ++xo) {
          const int64_t lo = kj_lo[xo], hi = kj_hi[xo];
          if (ki_lo >= ki_hi || lo >= hi) {  // no tap inside the input
            dst[y * ow + xo] = std::numeric_limits<T>::lowest();
            continue;
          }
          const int64_t x0 = (xo * w.stride[1] - w.pad[1]) * p.sw;
          const int64_t step = w.dilation[1] * p.sw;
          // Start from the first tap; track NaN apart so the max stays a short dependency chain.
          C best = static_cast<C>(src[(y0 + ki_lo * w.dilation[0]) * p.sh + x0 + lo * step]);
          bool nan = false;
          for (int64_t ki = ki_lo; ki < ki_hi; ++ki) {
            const T* row = src + (y0 + ki * w.dilation[0]) * p.sh;
            for (int64_t kj = lo; kj < hi; ++kj) {
              const C v = static_cast<C>(row[x0 + kj * step]);
              best = v > best ? v : best;
              nan |= kern::is_nan_value(v);
            }
          }
          if constexpr (std::is_floating_point_v<C>) {
            if (nan) best = std::numeric_limits<C>::quiet_NaN();
          }
          dst[y * ow + xo] = static_cast<T>(best);
        }
      }
    });
  });
  return 0;
}

/// The runtime kernel of aten.avg_pool2d.default.
int avg_pool2d_extern(ExternCall& call) {
  const Tensor x = call.input_tensor(0);
  const pool::Window w = read_window(call, false);
  const bool ceil_mode = call.attr_bool("ceil_mode", false);
  const Planes p = planes_of(call, x);
  const int64_t oh = pool_out(p.h, w.kernel[0], w.pad[0], w.stride[0], 1, ceil_mode);
  const int64_t ow = pool_out(p.w, w.kernel[1], w.pad[1], w.stride[1], 1, ceil_mode);
  check_pool_size(call, x, oh, ow);
  ANVIL_CHECK(x.dtype() != DType::kBool, call.target(), "avg_pool2d does not support bool",
              "a number", "bool");
  const bool include_pad = call.attr_bool("count_include_pad", true);
  const int64_t divisor = call.attr_int("divisor_override", 0);
  ANVIL_CHECK(!call.has_attr("divisor_override") || divisor != 0, call.target(),
              "divisor must be non-zero", "divisor_override != 0", "0");
  const Tensor out = kern::checked_output(call, 0, pooled_sizes(x, oh, ow), x.dtype());
  if (out.numel() == 0) return 0;
  ANVIL_DISPATCH_REAL(x.dtype(), call.target(), T, {
    using Acc = PoolAcc<T>;
    for_planes<T>(p, x, out, oh * ow * w.kernel[0] * w.kernel[1], [&](const T* src, T* dst) {
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          int64_t y0 = y * w.stride[0] - w.pad[0], x0 = xo * w.stride[1] - w.pad[1];
          int64_t y1 = std::min(y0 + w.kernel[0], p.h + w.pad[0]);
          int64_t x1 = std::min(x0 + w.kernel[1], p.w + w.pad[1]);
          const int64_t pool_size = (y1 - y0) * (x1 - x0);
          y0 = std::max<int64_t>(y0, 0);
          x0 = std::max<int64_t>(x0, 0);
          y1 = std::min(y1, p.h);
          x1 = std::min(x1, p.w);
          if (y0 >= y1 || x0 >= x1) {
            dst[y * ow + xo] = T(0);
            continue;
          }
          Acc sum = 0;
          for (int64_t iy = y0; iy < y1; ++iy)
            sum += row_sum<T, Acc>(src + iy * p.sh + x0 * p.sw, x1 - x0, p.sw);
          const int64_t div =
              divisor != 0 ? divisor : (include_pad ? pool_size : (y1 - y0) * (x1 - x0));
          dst[y * ow + xo] = static_cast<T>(sum / static_cast<Acc>(div));
        }
    });
  });
  return 0;
}

/// The runtime kernel of aten.adaptive_avg_pool2d.default.
int adaptive_avg_pool2d_extern(ExternCall& call) {
  const Tensor x = call.input_tensor(0);
  const Planes p = planes_of(call, x);
  ANVIL_CHECK(is_floating(x.dtype()) && !is_float8(x.dtype()), call.target(),
              "adaptive_avg_pool2d needs a floating input", "a float dtype", dtype_name(x.dtype()));
  const auto os = pair_list(call, "output_size", {});
  const int64_t oh = os[0], ow = os[1];
  ANVIL_CHECK(oh >= 0 && ow >= 0, call.target(), "output_size must be non-negative", ">= 0",
              str(oh, "x", ow));
  ANVIL_CHECK(!((p.h == 0 || p.w == 0) && oh * ow > 0), call.target(),
              "adaptive pooling needs a non-empty input plane", "H, W > 0", x.type_str());
  const Tensor out = kern::checked_output(call, 0, pooled_sizes(x, oh, ow), x.dtype());
  if (out.numel() == 0) return 0;
  ANVIL_DISPATCH_FLOAT(x.dtype(), call.target(), T, {
    using Acc = PoolAcc<T>;
    const int64_t per_plane = std::max<int64_t>(p.h * p.w, oh * ow);
    for_planes<T>(p, x, out, per_plane, [&](const T* src, T* dst) {
      for (int64_t y = 0; y < oh; ++y) {
        const int64_t y0 = (y * p.h) / oh, y1 = ((y + 1) * p.h + oh - 1) / oh;
        for (int64_t xo = 0; xo < ow; ++xo) {
          const int64_t x0 = (xo * p.w) / ow, x1 = ((xo + 1) * p.w + ow - 1) / ow;
          Acc sum = 0;
          for (int64_t iy = y0; iy < y1; ++iy)
            sum += row_sum<T, Acc>(src + iy * p.sh + x0 * p.sw, x1 - x0, p.sw);
          dst[y * ow + xo] = static_cast<T>(sum / static_cast<Acc>((y1 - y0) * (x1 - x0)));
        }
      }
    });
  });
  return 0;
}

}  // namespace

/// Registers the pooling externs.
void register_pool_externs() {
  register_extern("aten.max_pool2d.default", max_pool2d_extern);
  register_extern("aten.avg_pool2d.default", avg_pool2d_extern);
  register_extern("aten.adaptive_avg_pool2d.default", adaptive_avg_pool2d_extern);
  register_extern("aten._adaptive_avg_pool2d.default", adaptive_avg_pool2d_extern);
}

}  // namespace anvil::runtime
