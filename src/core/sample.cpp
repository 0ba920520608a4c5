// Grid sampling, im2col and col2im (core/sample.h), written from PyTorch's documented
// definitions: grid_sample's unnormalization, padding modes and the cubic convolution kernel
// (Keys, A = -0.75), and F.unfold / F.fold's block layout.
#include "core/sample.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/for_range.h"

namespace anvil::sample {

namespace {

/// Computation type: f64 for double, fp32 otherwise.
template <typename T>
using Calc = std::conditional_t<std::is_same_v<T, double>, double, float>;

void check_output(const Tensor& t, const Shape& sizes, DType dtype, const std::string& where) {
  ANVIL_CHECK(t.sizes() == sizes && t.dtype() == dtype && t.is_contiguous(), where,
              "output does not match its shape rule",
              str("contiguous ", dtype_name(dtype), " of ", shape_numel(sizes), " elements"),
              t.type_str());
}

void check_floating(const Tensor& t, const char* what, const std::string& where) {
  ANVIL_CHECK(is_floating(t.dtype()) && !is_float8(t.dtype()), where,
              str(what, " must be floating"), "f16, bf16, f32 or f64", dtype_name(t.dtype()));
}

/// A grid coordinate in [-1, 1] as a pixel coordinate of a dim of `size` pixels.
template <typename F>
F unnormalize(F coord, int64_t size, bool align_corners) {
  if (align_corners) return (coord + 1) / 2 * static_cast<F>(size - 1);
  return ((coord + 1) * static_cast<F>(size) - 1) / 2;
}

/// `x` reflected into [lo2 / 2, hi2 / 2] (bounds given doubled, as the half-pixel edges need).
template <typename F>
F reflect(F x, int64_t lo2, int64_t hi2) {
  if (lo2 == hi2) return 0;
  // NaN or an infinity reflects to NaN (which the caller clips), without converting a
  // non-finite flip count to an integer (undefined; clang's UBSan caught it)
  if (!std::isfinite(x)) return std::numeric_limits<F>::quiet_NaN();
  const F lo = static_cast<F>(lo2) / 2, span = static_cast<F>(hi2 - lo2) / 2;
  x = std::fabs(x - lo);
  const F extra = std::fmod(x, span);
  const auto flips = static_cast<int64_t>(std::floor(x / span));
  return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

/// A pixel coordinate after the padding mode: border clips it to [0, size - 1]; reflection
/// reflects it about the pixel centres (align_corners) or the outer edges, then clips.
template <typename F>
F apply_padding(F x, int64_t size, Padding padding, bool align_corners) {
  // A NaN coordinate clips to 0, as PyTorch's kernel does (its max(NaN, 0) gives 0).
  auto clip = [&](F v) {
    return std::isnan(v) ? F(0)
                         : std::min(static_cast<F>(size - 1), std::max(v, static_cast<F>(0)));
  };
  if (padding == Padding::kBorder) return clip(x);
  if (padding == Padding::kReflection) {
    x = align_corners ? reflect(x, 0, 2 * (size - 1)) : reflect(x, -1, 2 * size - 1);
    return clip(x);
  }
  return x;
}

/// Keys' cubic convolution weights of the 4 taps around a point at fraction t past tap 1.
template <typename F>
void cubic_weights(F t, F w[4]) {
  const F a = static_cast<F>(-0.75);
  auto near = [&](F x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [&](F x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };  // 1 < |x| < 2
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

/// A pixel coordinate as an index; far outside [0, size) (or NaN) it becomes -100, which stays
/// outside after the +1 of the next tap (no undefined float-to-int conversion).
template <typename F>
int64_t to_index(F v, int64_t size) {
  return v >= F(-8) && v <= static_cast<F>(size + 8) ? static_cast<int64_t>(v) : -100;
}

}  // namespace

Shape grid_sample_sizes(const Tensor& input, const Tensor& grid, int64_t interpolation,
                        int64_t padding, const std::string& where) {
  ANVIL_CHECK(input.dim() == 4, where, "2-D grid sampling needs a 4-D input", "[N, C, H, W]",
              input.type_str());
  ANVIL_CHECK(grid.dim() == 4 && grid.size(3) == 2, where, "the grid must be [N, H_out, W_out, 2]",
              "[N, H_out, W_out, 2]", grid.type_str());
  ANVIL_CHECK(grid.size(0) == input.size(0), where,
              "the grid and the input must have the same batch size", str(input.size(0)),
              str(grid.size(0)));
  check_floating(input, "the input", where);
  ANVIL_CHECK(grid.dtype() == input.dtype(), where, "the grid must have the input's dtype",
              dtype_name(input.dtype()), dtype_name(grid.dtype()));
  ANVIL_CHECK(interpolation >= 0 && interpolation <= 2, where, "unknown interpolation_mode",
              "0 (bilinear), 1 (nearest) or 2 (bicubic)", str(interpolation));
  ANVIL_CHECK(padding >= 0 && padding <= 2, where, "unknown padding_mode",
              "0 (zeros), 1 (border) or 2 (reflection)", str(padding));
  ANVIL_CHECK(input.size(2) > 0 && input.size(3) > 0, where,
              "grid sampling needs a non-empty input plane", "H, W > 0", input.type_str());
  return {input.size(0), input.size(1), grid.size(1), grid.size(2)};
}

void grid_sample_2d(const Tensor& input, const Tensor& grid, int64_t interpolation, int64_t padding,
                    bool align_corners, const Tensor& out, const std::string& where,
                    bool parallel) {
  const Shape sizes = grid_sample_sizes(input, grid, interpolation, padding, where);
  check_output(out, sizes, input.dtype(), where);
  const Tensor x = input.contiguous(), g = grid.contiguous();
  const int64_t n = sizes[0], c = sizes[1], ho = sizes[2], wo = sizes[3];
  const int64_t h = x.size(2), w = x.size(3);
  const auto mode = static_cast<Interp>(interpolation);
  const auto pad = static_cast<Padding>(padding);
  ANVIL_DISPATCH_FLOAT(x.dtype(), where, T, {
    using F = Calc<T>;
    const T* xp = x.data<T>();
    const T* gp = g.data<T>();
    T* op = out.data<T>();
    const int64_t taps = mode == Interp::kBicubic ? 16 : 4;
    for_range(parallel, n * ho, wo * c * taps * 4, [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r)
        for (int64_t ox = 0; ox < wo; ++ox) {
          const int64_t b = r / ho, oy = r % ho;
          const T* pt = gp + ((b * ho + oy) * wo + ox) * 2;
          const F ix = unnormalize(static_cast<F>(pt[0]), w, align_corners);
          const F iy = unnormalize(static_cast<F>(pt[1]), h, align_corners);
          for (int64_t ch = 0; ch < c; ++ch) {
            const T* plane = xp + (b * c + ch) * h * w;
            // A pixel, or 0 outside the plane (and for NaN coordinates).
            auto at = [&](int64_t yy, int64_t xx) -> F {
              return yy >= 0 && yy < h && xx >= 0 && xx < w ? static_cast<F>(plane[yy * w + xx])
                                                            : F(0);
            };
            F v = 0;
            if (mode == Interp::kBicubic) {
              const F fx = std::floor(ix), fy = std::floor(iy);
              F wx[4], wy[4];
              cubic_weights(ix - fx, wx);
              cubic_weights(iy - fy, wy);
              for (int j = 0; j < 4; ++j) {
                const F ty = apply_padding(fy - 1 + static_cast<F>(j), h, pad, align_corners);
                F row = 0;
                for (int i = 0; i < 4; ++i) {
                  const F tx = apply_padding(fx - 1 + static_cast<F>(i), w, pad, align_corners);
                  row += wx[i] * at(to_index(ty, h), to_index(tx, w));
                }
                v += wy[j] * row;
              }
            } else {
              const F sx = apply_padding(ix, w, pad, align_corners);
              const F sy = apply_padding(iy, h, pad, align_corners);
              if (mode == Interp::kNearest) {
                v = at(to_index(std::nearbyint(sy), h), to_index(std::nearbyint(sx), w));
              } else {
                const F x0 = std::floor(sx), y0 = std::floor(sy);
                const F dx = sx - x0, dy = sy - y0;
                const int64_t xi = to_index(x0, w), yi = to_index(y0, h);
                v = (1 - dx) * (1 - dy) * at(yi, xi) + dx * (1 - dy) * at(yi, xi + 1) +
                    (1 - dx) * dy * at(yi + 1, xi) + dx * dy * at(yi + 1, xi + 1);
              }
            }
            op[((b * c + ch) * ho + oy) * wo + ox] = static_cast<T>(v);
          }
        }
    });
  });
}

Blocks make_blocks(const std::vector<int64_t>& kernel, const std::vector<int64_t>& dilation,
                   const std::vector<int64_t>& padding, const std::vector<int64_t>& stride,
                   const std::string& where) {
  const std::pair<const char*, const std::vector<int64_t>*> args[] = {{"kernel_size", &kernel},
                                                                      {"dilation", &dilation},
                                                                      {"padding", &padding},
                                                                      {"stride", &stride}};
  for (const auto& [name, v] : args)
    ANVIL_CHECK(v->size() == 2, where, str("'", name, "' must have 2 values"), "2 values",
                str(v->size()));
  Blocks b;
  for (int i = 0; i < 2; ++i) {
    const size_t k = static_cast<size_t>(i);
    ANVIL_CHECK(kernel[k] > 0, where, "kernel_size must be positive", "> 0", str(kernel[k]));
    ANVIL_CHECK(dilation[k] > 0, where, "dilation must be positive", "> 0", str(dilation[k]));
    ANVIL_CHECK(padding[k] >= 0, where, "padding must be non-negative", ">= 0", str(padding[k]));
    ANVIL_CHECK(stride[k] > 0, where, "stride must be positive", "> 0", str(stride[k]));
    b.kernel[i] = kernel[k];
    b.dilation[i] = dilation[k];
    b.pad[i] = padding[k];
    b.stride[i] = stride[k];
  }
  return b;
}

Shape im2col_sizes(const Tensor& input, const Blocks& b, const std::string& where) {
  ANVIL_CHECK(input.dim() == 3 || input.dim() == 4, where, "im2col needs a 3-D or 4-D input",
              "[N, C, H, W] or [C, H, W]", input.type_str());
  check_floating(input, "the input", where);
  const int64_t bh = b.count(0, input.size(-2)), bw = b.count(1, input.size(-1));
  ANVIL_CHECK(bh >= 1 && bw >= 1, where, "the input plane holds no block",
              "at least one block along H and W", str(input.type_str(), " gives ", bh, "x", bw));
  Shape out;
  if (input.dim() == 4) out.push_back(input.size(0));
  out.push_back(input.size(-3) * b.kernel[0] * b.kernel[1]);
  out.push_back(bh * bw);
  return out;
}

void im2col(const Tensor& input, const Blocks& b, const Tensor& out, const std::string& where,
            bool parallel) {
  const Shape sizes = im2col_sizes(input, b, where);
  check_output(out, sizes, input.dtype(), where);
  const Tensor x = input.contiguous();
  const int64_t h = x.size(-2), w = x.size(-1), c = x.size(-3);
  const int64_t n = input.dim() == 4 ? x.size(0) : 1;
  const int64_t bh = b.count(0, h), bw = b.count(1, w), kh = b.kernel[0], kw = b.kernel[1];
  ANVIL_DISPATCH_FLOAT(x.dtype(), where, T, {
    const T* xp = x.data<T>();
    T* op = out.data<T>();
    for_range(parallel, n * c, kh * kw * bh * bw, [&](int64_t pb, int64_t pe) {
      for (int64_t pl = pb; pl < pe; ++pl)
        for (int64_t ki = 0; ki < kh; ++ki)
          for (int64_t kj = 0; kj < kw; ++kj) {
            const int64_t s = pl / c, ch = pl % c;
            const int64_t row = (ch * kh + ki) * kw + kj;
            T* dst = op + (s * c * kh * kw + row) * bh * bw;
            const T* plane = xp + (s * c + ch) * h * w;
            for (int64_t by = 0; by < bh; ++by) {
              const int64_t iy = by * b.stride[0] - b.pad[0] + ki * b.dilation[0];
              for (int64_t bx = 0; bx < bw; ++bx) {
                const int64_t ix = bx * b.stride[1] - b.pad[1] + kj * b.dilation[1];
                dst[by * bw + bx] =
                    iy >= 0 && iy < h && ix >= 0 && ix < w ? plane[iy * w + ix] : T(0);
              }
            }
          }
    });
  });
}

Shape col2im_sizes(const Tensor& input, const std::vector<int64_t>& output_size, const Blocks& b,
                   const std::string& where) {
  ANVIL_CHECK(input.dim() == 2 || input.dim() == 3, where, "col2im needs a 2-D or 3-D input",
              "[N, C * kh * kw, L] or [C * kh * kw, L]", input.type_str());
  check_floating(input, "the input", where);
  ANVIL_CHECK(output_size.size() == 2, where, "'output_size' must have 2 values", "2 values",
              str(output_size.size()));
  ANVIL_CHECK(output_size[0] >= 1 && output_size[1] >= 1, where, "output_size must be positive",
              ">= 1", str(output_size[0], "x", output_size[1]));
  const int64_t kk = b.kernel[0] * b.kernel[1];
  const int64_t rows = input.size(-2), cols = input.size(-1);
  ANVIL_CHECK(rows % kk == 0, where,
              "the input's rows must be divisible by the product of kernel_size",
              str("a multiple of ", kk), str(rows));
  const int64_t bh = b.count(0, output_size[0]), bw = b.count(1, output_size[1]);
  ANVIL_CHECK(bh >= 1 && bw >= 1 && cols == bh * bw, where,
              "the input's columns must be the number of sliding blocks of output_size",
              str(bh, " x ", bw, " = ", bh * bw), str(cols));
  Shape out;
  if (input.dim() == 3) out.push_back(input.size(0));
  out.push_back(rows / kk);
  out.push_back(output_size[0]);
  out.push_back(output_size[1]);
  return out;
}

void col2im(const Tensor& input, const Blocks& b, const Tensor& out, const std::string& where,
            bool parallel) {
  ANVIL_CHECK(out.dim() >= 2, where, "col2im output must have an [H, W] plane", "[.., H, W]",
              out.type_str());
  const Shape sizes = col2im_sizes(input, {out.size(-2), out.size(-1)}, b, where);
  check_output(out, sizes, input.dtype(), where);
  const Tensor x = input.contiguous();
  const int64_t h = out.size(-2), w = out.size(-1), c = out.size(-3);
  const int64_t n = input.dim() == 3 ? x.size(0) : 1;
  const int64_t bh = b.count(0, h), bw = b.count(1, w), kh = b.kernel[0], kw = b.kernel[1];
  ANVIL_DISPATCH_FLOAT(x.dtype(), where, T, {
    using F = Calc<T>;
    const T* xp = x.data<T>();
    T* op = out.data<T>();
    for_range(parallel, n * c, kh * kw * bh * bw + h * w, [&](int64_t pb, int64_t pe) {
      std::vector<F> acc(static_cast<size_t>(h * w));
      for (int64_t pl = pb; pl < pe; ++pl) {
        const int64_t s = pl / c, ch = pl % c;
        std::fill(acc.begin(), acc.end(), F(0));
        for (int64_t ki = 0; ki < kh; ++ki)
          for (int64_t kj = 0; kj < kw; ++kj) {
            const T* src = xp + (s * c * kh * kw + (ch * kh + ki) * kw + kj) * bh * bw;
            for (int64_t by = 0; by < bh; ++by) {
              const int64_t iy = by * b.stride[0] - b.pad[0] + ki * b.dilation[0];
              if (iy < 0 || iy >= h) continue;
              for (int64_t bx = 0; bx < bw; ++bx) {
                const int64_t ix = bx * b.stride[1] - b.pad[1] + kj * b.dilation[1];
                if (ix >= 0 && ix < w)
                  acc[static_cast<size_t>(iy * w + ix)] += static_cast<F>(src[by * bw + bx]);
              }
            }
          }
        T* dst = op + (s * c + ch) * h * w;
        for (int64_t i = 0; i < h * w; ++i) dst[i] = static_cast<T>(acc[static_cast<size_t>(i)]);
      }
    });
  });
}

}  // namespace anvil::sample
