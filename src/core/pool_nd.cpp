// Pooling over 1 to 3 spatial dims (core/pool_nd.h). Every window is handled as a 3-D one: a
// rank-r window gets 3 - r leading dims of size 1 (kernel 1, stride 1, no padding), so one loop
// nest serves 1-, 2- and 3-D pooling and the flat index d * H * W + h * W + w is h * W + w in 2-D.
#include "core/pool_nd.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/for_range.h"

namespace anvil::pool {

namespace {

/// Averaging accumulator: fp32 for 16/32-bit floats, f64 for f64, int64 for integers.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double,
                               std::conditional_t<std::is_integral_v<T>, int64_t, float>>;

/// Comparison type of max pooling: fp32 for 16-bit floats, T otherwise.
template <typename T>
using Cmp = typename AccType<T>::type;

/// An int list argument expanded to `rank` values (one value applies to every dim).
std::vector<int64_t> expand(const std::vector<int64_t>& v, int rank, const char* name,
                            const std::string& where) {
  if (v.size() == 1) return std::vector<int64_t>(static_cast<size_t>(rank), v[0]);
  if (v.size() != static_cast<size_t>(rank))
    throw Error(str("'", name, "' must have 1 or ", rank, " values"), where, str(rank, " values"),
                str(v.size()));
  return v;
}

/// The geometry of one pooling call, always as 3 spatial dims.
struct Geometry {
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1};
  int64_t planes = 0;
  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
};

/// Checks x's rank for a `rank`-D pooling and reads its plane count and spatial sizes.
Geometry geometry_of(const Tensor& x, int rank, const Shape& out_sizes, const std::string& where) {
  const int64_t nd = x.dim();
  if (nd != rank + 1 && nd != rank + 2)
    throw Error(str(rank, "-D pooling needs a ", rank + 1, "-D or ", rank + 2, "-D input"), where,
                rank == 3 ? "[N, C, D, H, W] or [C, D, H, W]"
                          : (rank == 2 ? "[N, C, H, W] or [C, H, W]" : "[N, C, L] or [C, L]"),
                x.type_str());
  Geometry g;
  for (int i = 0; i < rank; ++i) {
    g.in[static_cast<size_t>(3 - rank + i)] = x.size(nd - rank + i);
    g.out[static_cast<size_t>(3 - rank + i)] = out_sizes[static_cast<size_t>(nd - rank + i)];
  }
  g.planes = 1;
  for (int64_t d = 0; d < nd - rank; ++d) g.planes *= x.size(d);
  return g;
}

/// The window as 3 dims (leading unit dims for rank < 3).
Window as_3d(const Window& w) {
  Window o;
  o.rank = 3;
  for (int i = 0; i < w.rank; ++i) {
    const size_t j = static_cast<size_t>(3 - w.rank + i), k = static_cast<size_t>(i);
    o.kernel[j] = w.kernel[k];
    o.stride[j] = w.stride[k];
    o.pad[j] = w.pad[k];
    o.dilation[j] = w.dilation[k];
  }
  return o;
}

/// The start of a max: -inf for floating types, the lowest value otherwise.
template <typename C>
C lowest() {
  if constexpr (std::is_floating_point_v<C>) return -std::numeric_limits<C>::infinity();
  return std::numeric_limits<C>::lowest();
}

/// Checks that a preallocated output has the sizes and dtype of the shape rule, contiguous.
void check_output(const Tensor& t, const Shape& sizes, DType dtype, const std::string& where) {
  ANVIL_CHECK(t.sizes() == sizes && t.dtype() == dtype && t.is_contiguous(), where,
              "pooling output does not match its shape rule",
              str("contiguous ", dtype_name(dtype), " of ", shape_numel(sizes), " elements"),
              t.type_str());
}

}  // namespace

int64_t output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                    bool ceil_mode) {
  const int64_t num = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

Window make_window(int rank, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                   const std::vector<int64_t>& pad, const std::vector<int64_t>& dilation,
                   const std::string& where) {
  Window w;
  w.rank = rank;
  const auto k = expand(kernel, rank, "kernel_size", where);
  const auto s = stride.empty() ? k : expand(stride, rank, "stride", where);
  const auto p = expand(pad, rank, "padding", where);
  const auto d = expand(dilation, rank, "dilation", where);
  for (size_t i = 0; i < static_cast<size_t>(rank); ++i) {
    ANVIL_CHECK(k[i] > 0, where, "kernel_size must be positive", "> 0", str(k[i]));
    ANVIL_CHECK(s[i] > 0, where, "stride must be positive", "> 0", str(s[i]));
    ANVIL_CHECK(d[i] > 0, where, "dilation must be positive", "> 0", str(d[i]));
    ANVIL_CHECK(p[i] >= 0 && p[i] <= k[i] / 2, where, "pad should be at most half of kernel size",
                str("0 <= pad <= ", k[i] / 2), str(p[i]));
    w.kernel[i] = k[i];
    w.stride[i] = s[i];
    w.pad[i] = p[i];
    w.dilation[i] = d[i];
  }
  return w;
}

Shape output_sizes(const Tensor& x, const Window& w, bool ceil_mode, const std::string& where) {
  geometry_of(x, w.rank, x.sizes(), where);  // the rank check
  Shape out = x.sizes();
  const size_t first = out.size() - static_cast<size_t>(w.rank);
  for (size_t i = 0; i < static_cast<size_t>(w.rank); ++i) {
    out[first + i] = output_size(x.size(static_cast<int64_t>(first + i)), w.kernel[i], w.pad[i],
                                 w.stride[i], w.dilation[i], ceil_mode);
    ANVIL_CHECK(out[first + i] >= 1, where, "output size is too small",
                "an output of at least 1 along every pooled dim",
                str(x.type_str(), " gives ", out[first + i], " along dim ", first + i));
  }
  return out;
}

void max_pool(const Tensor& x, const Window& w, bool ceil_mode, const Tensor& values,
              const Tensor* indices, const std::string& where, bool parallel) {
  const Shape out_sizes = output_sizes(x, w, ceil_mode, where);
  ANVIL_CHECK(x.dtype() != DType::kBool, where, "max pooling does not support bool", "a number",
              "bool");
  check_output(values, out_sizes, x.dtype(), where);
  if (indices) check_output(*indices, out_sizes, DType::kInt64, where);
  const Geometry g = geometry_of(x, w.rank, out_sizes, where);
  const Window k = as_3d(w);
  const Tensor xc = x.contiguous();
  int64_t* ip = indices ? indices->data<int64_t>() : nullptr;
  ANVIL_DISPATCH_REAL(x.dtype(), where, T, {
    using C = Cmp<T>;
    const T* src = xc.data<T>();
    T* dst = values.data<T>();
    const int64_t cost = g.out_plane() * k.kernel[0] * k.kernel[1] * k.kernel[2];
    for_range(parallel, g.planes, cost, [&](int64_t pb, int64_t pe) {
      for (int64_t p = pb; p < pe; ++p) {
        const T* plane = src + p * g.in_plane();
        int64_t o = p * g.out_plane();
        for (int64_t od = 0; od < g.out[0]; ++od)
          for (int64_t oh = 0; oh < g.out[1]; ++oh)
            for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
              C best = lowest<C>();
              int64_t at = -1;
              for (int64_t kd = 0; kd < k.kernel[0]; ++kd) {
                const int64_t id = od * k.stride[0] - k.pad[0] + kd * k.dilation[0];
                if (id < 0 || id >= g.in[0]) continue;
                for (int64_t kh = 0; kh < k.kernel[1]; ++kh) {
                  const int64_t ih = oh * k.stride[1] - k.pad[1] + kh * k.dilation[1];
                  if (ih < 0 || ih >= g.in[1]) continue;
                  for (int64_t kw = 0; kw < k.kernel[2]; ++kw) {
                    const int64_t iw = ow * k.stride[2] - k.pad[2] + kw * k.dilation[2];
                    if (iw < 0 || iw >= g.in[2]) continue;
                    const int64_t flat = (id * g.in[1] + ih) * g.in[2] + iw;
                    const C v = static_cast<C>(plane[flat]);
                    bool nan = false;
                    if constexpr (std::is_floating_point_v<C>) nan = std::isnan(v);
                    if (at < 0) at = flat;  // PyTorch starts at the window's first valid tap
                    if (v > best || nan) {
                      best = v;
                      at = flat;
                    }
                  }
                }
              }
              dst[o] = static_cast<T>(best);
              if (ip) ip[o] = at;
            }
      }
    });
  });
}

void avg_pool(const Tensor& x, const Window& w, bool ceil_mode, bool count_include_pad,
              int64_t divisor_override, const Tensor& out, const std::string& where,
              bool parallel) {
  const Shape out_sizes = output_sizes(x, w, ceil_mode, where);
  ANVIL_CHECK(x.dtype() != DType::kBool, where, "average pooling does not support bool", "a number",
              "bool");
  check_output(out, out_sizes, x.dtype(), where);
  const Geometry g = geometry_of(x, w.rank, out_sizes, where);
  const Window k = as_3d(w);
  const Tensor xc = x.contiguous();
  ANVIL_DISPATCH_REAL(x.dtype(), where, T, {
    using A = Acc<T>;
    const T* src = xc.data<T>();
    T* dst = out.data<T>();
    const int64_t cost = g.out_plane() * k.kernel[0] * k.kernel[1] * k.kernel[2];
    for_range(parallel, g.planes, cost, [&](int64_t pb, int64_t pe) {
      for (int64_t p = pb; p < pe; ++p) {
        const T* plane = src + p * g.in_plane();
        int64_t o = p * g.out_plane();
        for (int64_t od = 0; od < g.out[0]; ++od)
          for (int64_t oh = 0; oh < g.out[1]; ++oh)
            for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
              const int64_t oi[3] = {od, oh, ow};
              int64_t lo[3], hi[3], padded = 1, inside = 1;
              bool empty = false;
              for (size_t d = 0; d < 3; ++d) {
                lo[d] = oi[d] * k.stride[d] - k.pad[d];
                hi[d] = std::min(lo[d] + k.kernel[d], g.in[d] + k.pad[d]);
                padded *= hi[d] - lo[d];
                lo[d] = std::max<int64_t>(lo[d], 0);
                hi[d] = std::min(hi[d], g.in[d]);
                empty = empty || lo[d] >= hi[d];
                inside *= std::max<int64_t>(hi[d] - lo[d], 0);
              }
              if (empty) {
                dst[o] = T(0);
                continue;
              }
              A sum = 0;
              for (int64_t id = lo[0]; id < hi[0]; ++id)
                for (int64_t ih = lo[1]; ih < hi[1]; ++ih)
                  for (int64_t iw = lo[2]; iw < hi[2]; ++iw)
                    sum += static_cast<A>(plane[(id * g.in[1] + ih) * g.in[2] + iw]);
              const int64_t div =
                  divisor_override != 0 ? divisor_override : (count_include_pad ? padded : inside);
              dst[o] = static_cast<T>(sum / static_cast<A>(div));
            }
      }
    });
  });
}

Shape adaptive_sizes(const Tensor& x, int rank, const std::vector<int64_t>& output_size,
                     const std::string& where) {
  geometry_of(x, rank, x.sizes(), where);
  ANVIL_CHECK(is_floating(x.dtype()) && !is_float8(x.dtype()), where,
              "adaptive average pooling needs a floating input", "a float dtype",
              dtype_name(x.dtype()));
  const auto os = expand(output_size, rank, "output_size", where);
  Shape out = x.sizes();
  const size_t first = out.size() - static_cast<size_t>(rank);
  int64_t out_numel = 1;
  bool empty_in = false;
  for (size_t i = 0; i < static_cast<size_t>(rank); ++i) {
    ANVIL_CHECK(os[i] >= 0, where, "output_size must be non-negative", ">= 0", str(os[i]));
    out[first + i] = os[i];
    out_numel *= os[i];
    empty_in = empty_in || x.size(static_cast<int64_t>(first + i)) == 0;
  }
  ANVIL_CHECK(!(empty_in && out_numel > 0), where, "adaptive pooling needs a non-empty input plane",
              "every pooled dim > 0", x.type_str());
  return out;
}

void adaptive_avg_pool(const Tensor& x, int rank, const Tensor& out, const std::string& where,
                       bool parallel) {
  std::vector<int64_t> os;
  for (int i = 0; i < rank; ++i) os.push_back(out.size(out.dim() - rank + i));
  const Shape out_sizes = adaptive_sizes(x, rank, os, where);
  check_output(out, out_sizes, x.dtype(), where);
  const Geometry g = geometry_of(x, rank, out_sizes, where);
  if (shape_numel(out_sizes) == 0) return;
  const Tensor xc = x.contiguous();
  ANVIL_DISPATCH_FLOAT(x.dtype(), where, T, {
    using A = Acc<T>;
    const T* src = xc.data<T>();
    T* dst = out.data<T>();
    const int64_t cost = std::max(g.in_plane(), g.out_plane());
    for_range(parallel, g.planes, cost, [&](int64_t pb, int64_t pe) {
      for (int64_t p = pb; p < pe; ++p) {
        const T* plane = src + p * g.in_plane();
        int64_t o = p * g.out_plane();
        for (int64_t od = 0; od < g.out[0]; ++od)
          for (int64_t oh = 0; oh < g.out[1]; ++oh)
            for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
              const int64_t oi[3] = {od, oh, ow};
              int64_t lo[3], hi[3], count = 1;
              for (size_t d = 0; d < 3; ++d) {
                lo[d] = (oi[d] * g.in[d]) / g.out[d];
                hi[d] = ((oi[d] + 1) * g.in[d] + g.out[d] - 1) / g.out[d];
                count *= hi[d] - lo[d];
              }
              A sum = 0;
              for (int64_t id = lo[0]; id < hi[0]; ++id)
                for (int64_t ih = lo[1]; ih < hi[1]; ++ih)
                  for (int64_t iw = lo[2]; iw < hi[2]; ++iw)
                    sum += static_cast<A>(plane[(id * g.in[1] + ih) * g.in[2] + iw]);
              dst[o] = static_cast<T>(sum / static_cast<A>(count));
            }
      }
    });
  });
}

}  // namespace anvil::pool
