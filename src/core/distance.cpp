// Pairwise p-norm distances (core/distance.h).
#include "core/distance.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/for_range.h"

namespace anvil::distance {

namespace {

void check_input(const Tensor& t, const char* name, const std::string& where) {
  ANVIL_CHECK(t.dtype() == DType::kFloat32 || t.dtype() == DType::kFloat64, where,
              str("distances need a float32 or float64 ", name), "f32 or f64",
              dtype_name(t.dtype()));
}

void check_p(double p, const std::string& where) {
  ANVIL_CHECK(p >= 0, where, "distances need a non-negative p", "p >= 0", str(p));
}

/// The p-norm distance of two rows of m entries (strides sa, sb), in f64.
template <typename T>
double row_distance(const T* a, int64_t sa, const T* b, int64_t sb, int64_t m, double p) {
  double acc = 0;
  for (int64_t k = 0; k < m; ++k) {
    const double d = std::fabs(static_cast<double>(a[k * sa]) - static_cast<double>(b[k * sb]));
    if (p == 0)
      acc += d != 0 ? 1 : 0;
    else if (p == 1)
      acc += d;
    else if (p == 2)
      acc += d * d;
    else if (std::isinf(p))
      acc = std::isnan(d) || std::isnan(acc) ? std::numeric_limits<double>::quiet_NaN()
                                             : std::max(acc, d);
    else
      acc += std::pow(d, p);
  }
  if (p == 0 || p == 1 || std::isinf(p)) return acc;
  if (p == 2) return std::sqrt(acc);
  return std::pow(acc, 1 / p);
}

void check_output(const Tensor& t, const Shape& sizes, DType dtype, const std::string& where) {
  ANVIL_CHECK(t.sizes() == sizes && t.dtype() == dtype && t.is_contiguous(), where,
              "output does not match its shape rule",
              str("contiguous ", dtype_name(dtype), " of ", shape_numel(sizes), " elements"),
              t.type_str());
}

}  // namespace

Shape cdist_sizes(const Tensor& x1, const Tensor& x2, double p, std::optional<int64_t> compute_mode,
                  const std::string& where) {
  check_input(x1, "x1", where);
  check_input(x2, "x2", where);
  ANVIL_CHECK(x1.dtype() == x2.dtype(), where, "cdist needs x1 and x2 of one dtype",
              dtype_name(x1.dtype()), dtype_name(x2.dtype()));
  ANVIL_CHECK(x1.dim() >= 2 && x2.dim() >= 2, where, "cdist needs at least 2-D inputs",
              "[.., rows, columns]", str(x1.type_str(), " and ", x2.type_str()));
  ANVIL_CHECK(x1.size(-1) == x2.size(-1), where, "x1 and x2 must have the same number of columns",
              str(x1.size(-1)), str(x2.size(-1)));
  check_p(p, where);
  ANVIL_CHECK(!compute_mode || (*compute_mode >= 0 && *compute_mode <= 2), where,
              "unknown compute_mode", "0, 1 or 2", str(compute_mode.value_or(0)));
  // The batch dims broadcast (numpy rules).
  const int64_t b1 = x1.dim() - 2, b2 = x2.dim() - 2, nb = std::max(b1, b2);
  Shape out(static_cast<size_t>(nb));
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t s1 = i - (nb - b1) >= 0 ? x1.size(i - (nb - b1)) : 1;
    const int64_t s2 = i - (nb - b2) >= 0 ? x2.size(i - (nb - b2)) : 1;
    ANVIL_CHECK(s1 == s2 || s1 == 1 || s2 == 1, where, "cdist's batch dims must broadcast", str(s1),
                str(s2));
    out[static_cast<size_t>(i)] = s1 == 1 ? s2 : s1;
  }
  out.push_back(x1.size(-2));
  out.push_back(x2.size(-2));
  return out;
}

void cdist(const Tensor& x1, const Tensor& x2, double p, const Tensor& out,
           const std::string& where, bool parallel) {
  const Shape sizes = cdist_sizes(x1, x2, p, std::nullopt, where);
  check_output(out, sizes, x1.dtype(), where);
  const size_t nb = sizes.size() - 2;
  const int64_t rows1 = x1.size(-2), rows2 = x2.size(-2), m = x1.size(-1);
  // Both inputs expanded to the broadcast batch (a zero stride repeats a batch).
  Shape e1(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(nb));
  Shape e2 = e1;
  e1.push_back(rows1);
  e1.push_back(m);
  e2.push_back(rows2);
  e2.push_back(m);
  const Tensor a = x1.expand(e1), b = x2.expand(e2);
  Shape batch(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(nb));
  const int64_t batches = shape_numel(batch);
  ANVIL_DISPATCH_FLOAT(x1.dtype(), where, T, {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* pa = static_cast<const T*>(a.data_ptr());
      const T* pb = static_cast<const T*>(b.data_ptr());
      T* po = out.data<T>();
      for_range(parallel, batches * rows1, rows2 * m, [&](int64_t rb, int64_t re) {
        for (int64_t r = rb; r < re; ++r) {
          const int64_t bi = r / rows1, i = r % rows1;
          int64_t oa = 0, ob = 0, rem = bi;
          for (size_t d = nb; d-- > 0;) {
            const int64_t idx = rem % batch[d];
            rem /= batch[d];
            oa += idx * a.stride(static_cast<int64_t>(d));
            ob += idx * b.stride(static_cast<int64_t>(d));
          }
          for (int64_t j = 0; j < rows2; ++j)
            po[(bi * rows1 + i) * rows2 + j] =
                static_cast<T>(row_distance(pa + oa + i * a.stride(-2), a.stride(-1),
                                            pb + ob + j * b.stride(-2), b.stride(-1), m, p));
        }
      });
    }
  });
}

Shape pdist_sizes(const Tensor& x, double p, const std::string& where) {
  check_input(x, "input", where);
  ANVIL_CHECK(x.dim() == 2, where, "pdist needs a 2-D input", "[N, M]", x.type_str());
  check_p(p, where);
  const int64_t n = x.size(0);
  return {n * (n - 1) / 2};
}

void pdist(const Tensor& x, double p, const Tensor& out, const std::string& where, bool parallel) {
  const Shape sizes = pdist_sizes(x, p, where);
  check_output(out, sizes, x.dtype(), where);
  const int64_t n = x.size(0), m = x.size(1);
  ANVIL_DISPATCH_FLOAT(x.dtype(), where, T, {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* px = static_cast<const T*>(x.data_ptr());
      T* po = out.data<T>();
      for_range(parallel, n, n * m / 2 + 1, [&](int64_t ib, int64_t ie) {
        for (int64_t i = ib; i < ie; ++i) {
          int64_t o = i * (2 * n - i - 1) / 2;  // pairs (i', j) with i' < i come first
          for (int64_t j = i + 1; j < n; ++j)
            po[o++] = static_cast<T>(row_distance(px + i * x.stride(0), x.stride(1),
                                                  px + j * x.stride(0), x.stride(1), m, p));
        }
      });
    }
  });
}

}  // namespace anvil::distance
