#include "core/fft.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <mutex>

#include "core/error.h"

#ifdef ANVIL_HAVE_FFTW
#include <fftw3.h>
#endif

namespace anvil {
namespace {

/// True for the inverse transforms (ifft, ifftn, irfft).
bool is_inverse(FftKind k) {
  return k == FftKind::kIfft || k == FftKind::kIfftn || k == FftKind::kIrfft;
}
/// True for the transforms over one dim (arguments n and dim).
bool is_one_dim(FftKind k) { return k != FftKind::kFftn && k != FftKind::kIfftn; }

/// `t` with dim `dim` zero-padded or truncated to `len` (t itself when it already has it).
Tensor resize_dim(const Tensor& t, int64_t dim, int64_t len) {
  if (t.size(dim) == len) return t;
  Shape sizes = t.sizes();
  sizes[static_cast<size_t>(dim)] = len;
  Tensor out = Tensor::zeros(sizes, t.dtype());
  const int64_t m = std::min(len, t.size(dim));
  if (m > 0) out.slice(dim, 0, m).copy_from(t.slice(dim, 0, m));
  return out;
}

/// The scale factor of a transform over `n` points in direction `inverse` with `norm`.
double norm_scale(const std::string& norm, bool inverse, double n, const std::string& where) {
  if (norm.empty() || norm == "backward") return inverse ? 1.0 / n : 1.0;
  if (norm == "forward") return inverse ? 1.0 : 1.0 / n;
  if (norm == "ortho") return 1.0 / std::sqrt(n);
  throw Error("Invalid normalization mode", where,
              "norm None, \"backward\", \"forward\" or \"ortho\"", "\"" + norm + "\"");
}

#ifdef ANVIL_HAVE_FFTW
/// FFTW's planner is not thread-safe: plan creation and destruction hold this mutex.
std::mutex& planner_mutex() {
  static std::mutex m;
  return m;
}

/// The FFTW entry points of one precision.
template <typename R>
struct Fftw;
template <>
struct Fftw<float> {
  using Plan = fftwf_plan;
  static Plan plan(int rank, const fftw_iodim64* dims, int hrank, const fftw_iodim64* how,
                   std::complex<float>* data, int sign) {
    auto* p = reinterpret_cast<fftwf_complex*>(data);
    return fftwf_plan_guru64_dft(rank, dims, hrank, how, p, p, sign, FFTW_ESTIMATE);
  }
  static void execute(Plan p) { fftwf_execute(p); }
  static void destroy(Plan p) { fftwf_destroy_plan(p); }
};
template <>
struct Fftw<double> {
  using Plan = fftw_plan;
  static Plan plan(int rank, const fftw_iodim64* dims, int hrank, const fftw_iodim64* how,
                   std::complex<double>* data, int sign) {
    auto* p = reinterpret_cast<fftw_complex*>(data);
    return fftw_plan_guru64_dft(rank, dims, hrank, how, p, p, sign, FFTW_ESTIMATE);
  }
  static void execute(Plan p) { fftw_execute(p); }
  static void destroy(Plan p) { fftw_destroy_plan(p); }
};
#endif

/// In-place unnormalised c2c transform of the contiguous complex tensor `t` over `dims`, then
/// multiplied by `scale`.
template <typename R>
void c2c_inplace(Tensor& t, const std::vector<int64_t>& dims, bool inverse, double scale,
                 const std::string& where) {
  using C = std::complex<R>;
  if (t.numel() == 0) return;
  C* data = t.data<C>();
  if (!dims.empty()) {
#ifdef ANVIL_HAVE_FFTW
    const Shape strides = Tensor::contiguous_strides(t.sizes());
    std::vector<fftw_iodim64> tdims, how;
    for (int64_t d : dims)
      tdims.push_back(
          {t.size(d), strides[static_cast<size_t>(d)], strides[static_cast<size_t>(d)]});
    for (int64_t d = 0; d < t.dim(); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end() && t.size(d) > 1)
        how.push_back(
            {t.size(d), strides[static_cast<size_t>(d)], strides[static_cast<size_t>(d)]});
    typename Fftw<R>::Plan plan;
    {
      std::lock_guard<std::mutex> lock(planner_mutex());
      plan =
          Fftw<R>::plan(static_cast<int>(tdims.size()), tdims.data(), static_cast<int>(how.size()),
                        how.data(), data, inverse ? FFTW_BACKWARD : FFTW_FORWARD);
    }
    if (!plan)
      throw Error("FFTW could not plan the transform", where, "a plannable transform",
                  t.type_str());
    Fftw<R>::execute(plan);
    {
      std::lock_guard<std::mutex> lock(planner_mutex());
      Fftw<R>::destroy(plan);
    }
#else
    throw Error("FFT ops need FFTW, and anvil was built without it", where,
                "anvil built with libfftw3-dev installed", "no FFTW");
#endif
  }
  if (scale != 1.0) {
    const R s = static_cast<R>(scale);
    const int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) data[i] *= s;
  }
}

/// The full spectrum of length n along `dim` from its first n/2+1 values (contiguous `h`):
/// X[k] = conj(X[n-k]) for k > n/2.
template <typename R>
Tensor hermitian_expand(const Tensor& h, int64_t dim, int64_t n) {
  using C = std::complex<R>;
  const int64_t m = h.size(dim);  // n/2 + 1
  Shape sizes = h.sizes();
  sizes[static_cast<size_t>(dim)] = n;
  Tensor full = Tensor::empty(sizes, h.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= h.size(d);
  for (int64_t d = dim + 1; d < h.dim(); ++d) inner *= h.size(d);
  const C* src = h.data<C>();
  C* dst = full.data<C>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i)
        dst[(o * n + k) * inner + i] =
            k < m ? src[(o * m + k) * inner + i] : std::conj(src[(o * m + (n - k)) * inner + i]);
  return full;
}

}  // namespace

DType fft_result_dtype(FftKind kind, DType in) {
  DType c = in;
  if (!is_complex(in)) {
    if (in == DType::kFloat64)
      c = DType::kComplex128;
    else if (in == DType::kFloat16)
      c = DType::kComplex32;
    else
      c = DType::kComplex64;
  }
  return kind == FftKind::kIrfft ? complex_to_real(c) : c;
}

void fft_plan_dims(const FftArgs& args, const Shape& sizes, std::vector<int64_t>& dims,
                   std::vector<int64_t>& lengths, const std::string& where) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  auto wrap = [&](int64_t d) {
    if (d < -rank || d >= rank || rank == 0)
      throw Error("Dimension out of range", where, str("a dim in [", -rank, ", ", rank - 1, "]"),
                  std::to_string(d));
    return d < 0 ? d + rank : d;
  };
  dims.clear();
  lengths.clear();
  if (is_one_dim(args.kind)) {
    if (args.dims.size() > 1 || args.sizes.size() > 1)
      throw Error("a 1-D transform takes one dim and one n", where, "one dim",
                  std::to_string(args.dims.size()));
    dims.push_back(wrap(args.dims.empty() ? -1 : args.dims[0]));
  } else if (!args.dims.empty()) {
    for (int64_t d : args.dims) dims.push_back(wrap(d));
    if (!args.sizes.empty() && args.sizes.size() != args.dims.size())
      throw Error("When given, dim and shape arguments must have the same length", where,
                  std::to_string(args.dims.size()), std::to_string(args.sizes.size()));
  } else {
    const int64_t k = args.sizes.empty() ? rank : static_cast<int64_t>(args.sizes.size());
    if (k > rank)
      throw Error("Got shape with more dims than the input has", where,
                  str("at most ", rank, " sizes"), std::to_string(k));
    for (int64_t d = rank - k; d < rank; ++d) dims.push_back(d);
  }
  for (size_t i = 0; i < dims.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (dims[i] == dims[j])
        throw Error("FFT dims must be unique", where, "distinct dims", std::to_string(dims[i]));
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t in = sizes[static_cast<size_t>(dims[i])];
    int64_t n = i < args.sizes.size() ? args.sizes[i] : -1;
    if (n == -1) n = args.kind == FftKind::kIrfft ? 2 * (in - 1) : in;
    if (n < 1)
      throw Error("Invalid number of data points specified", where, "at least 1 point",
                  std::to_string(n));
    lengths.push_back(n);
  }
}

Shape fft_result_sizes(const FftArgs& args, const Shape& sizes, const std::string& where) {
  std::vector<int64_t> dims, lengths;
  fft_plan_dims(args, sizes, dims, lengths, where);
  Shape out = sizes;
  for (size_t i = 0; i < dims.size(); ++i) out[static_cast<size_t>(dims[i])] = lengths[i];
  if (args.kind == FftKind::kRfft) out[static_cast<size_t>(dims[0])] = lengths[0] / 2 + 1;
  return out;
}

Tensor fft_compute(const Tensor& x, const FftArgs& args, const std::string& where) {
  std::vector<int64_t> dims, lengths;
  fft_plan_dims(args, x.sizes(), dims, lengths, where);
  if (args.kind == FftKind::kRfft && is_complex(x.dtype()))
    throw Error("rfft expects a real input tensor", where, "a real dtype", dtype_name(x.dtype()));
  const DType out_dt = fft_result_dtype(args.kind, x.dtype());
  const DType work = out_dt == DType::kComplex128 || out_dt == DType::kFloat64 ? DType::kComplex128
                                                                               : DType::kComplex64;
  const bool inverse = is_inverse(args.kind);
  double n_total = 1;
  for (int64_t n : lengths) n_total *= static_cast<double>(n);
  const double scale = norm_scale(args.norm, inverse, n_total, where);
  auto c2c = [&](Tensor& t, const std::vector<int64_t>& ds) {
    if (work == DType::kComplex128)
      c2c_inplace<double>(t, ds, inverse, scale, where);
    else
      c2c_inplace<float>(t, ds, inverse, scale, where);
  };
  if (args.kind == FftKind::kIrfft) {
    const int64_t dim = dims[0], n = lengths[0];
    Tensor h = resize_dim(x.to(work), dim, n / 2 + 1).contiguous();
    Tensor full = work == DType::kComplex128 ? hermitian_expand<double>(h, dim, n)
                                             : hermitian_expand<float>(h, dim, n);
    c2c(full, dims);
    return full.to(out_dt);  // complex -> real keeps the real part
  }
  Tensor t = x.to(work);
  for (size_t i = 0; i < dims.size(); ++i) t = resize_dim(t, dims[i], lengths[i]);
  t = t.clone();  // contiguous and owned: transformed in place
  c2c(t, dims);
  if (args.kind == FftKind::kRfft) t = t.slice(dims[0], 0, lengths[0] / 2 + 1).contiguous();
  return t.to(out_dt);
}

namespace {

/// The norm string of _fft_r2c / _fft_c2r's `normalization` (0: none, 1: 1/sqrt(n), 2: 1/n) for
/// a forward or an inverse transform.
std::string norm_of(int64_t normalization, bool inverse, const std::string& where) {
  if (normalization < 0 || normalization > 2)
    throw Error("unknown FFT normalization", where, "0 (none), 1 (1/sqrt(n)) or 2 (1/n)",
                std::to_string(normalization));
  if (normalization == 1) return "ortho";
  return (normalization == 2) != inverse ? "forward" : "backward";
}

/// `dims` normalised against `rank`, checked non-empty, in range and distinct.
std::vector<int64_t> r2c_dims(const std::vector<int64_t>& dims, size_t rank,
                              const std::string& where) {
  if (dims.empty()) throw Error("an FFT needs at least one dim", where, "dim non-empty", "[]");
  std::vector<int64_t> out;
  const int64_t r = static_cast<int64_t>(rank);
  for (int64_t d : dims) {
    if (d < -r || d >= r)
      throw Error("FFT dim out of range", where, str("[", -r, ", ", r - 1, "]"), str(d));
    const int64_t nd = d < 0 ? d + r : d;
    for (int64_t o : out)
      if (o == nd) throw Error("FFT dims must be distinct", where, "distinct dims", str(d));
    out.push_back(nd);
  }
  return out;
}

}  // namespace

Shape fft_r2c_c2r_sizes(const Shape& sizes, const std::vector<int64_t>& dims, bool onesided,
                        int64_t last_size, const std::string& where) {
  const std::vector<int64_t> ds = r2c_dims(dims, sizes.size(), where);
  Shape out = sizes;
  const size_t last = static_cast<size_t>(ds.back());
  if (last_size >= 0) {
    if (last_size < 1)
      throw Error("last_dim_size must be positive", where, ">= 1", std::to_string(last_size));
    out[last] = last_size;
  } else if (onesided) {
    out[last] = sizes[last] / 2 + 1;
  }
  return out;
}

Tensor fft_r2c(const Tensor& x, const std::vector<int64_t>& dims, int64_t normalization,
               bool onesided, const std::string& where) {
  if (is_complex(x.dtype()))
    throw Error("_fft_r2c expects a real input tensor", where, "a real dtype",
                dtype_name(x.dtype()));
  const std::vector<int64_t> ds = r2c_dims(dims, x.sizes().size(), where);
  const std::string norm = norm_of(normalization, false, where);
  if (!onesided) return fft_compute(x, {FftKind::kFftn, {}, ds, norm}, where);
  // rfftn: the one-sided real transform along the last dim, then complex ones along the others
  Tensor t = fft_compute(x, {FftKind::kRfft, {}, {ds.back()}, norm}, where);
  if (ds.size() == 1) return t;
  return fft_compute(t, {FftKind::kFftn, {}, std::vector<int64_t>(ds.begin(), ds.end() - 1), norm},
                     where);
}

Tensor fft_c2r(const Tensor& x, const std::vector<int64_t>& dims, int64_t normalization,
               int64_t last_dim_size, const std::string& where) {
  if (!is_complex(x.dtype()))
    throw Error("_fft_c2r expects a complex input tensor", where, "a complex dtype",
                dtype_name(x.dtype()));
  const std::vector<int64_t> ds = r2c_dims(dims, x.sizes().size(), where);
  if (last_dim_size < 1)
    throw Error("last_dim_size must be positive", where, ">= 1", std::to_string(last_dim_size));
  const std::string norm = norm_of(normalization, true, where);
  // irfftn: complex inverse transforms along all but the last dim, then the one-sided inverse
  Tensor t = x;
  if (ds.size() > 1)
    t = fft_compute(x, {FftKind::kIfftn, {}, std::vector<int64_t>(ds.begin(), ds.end() - 1), norm},
                    where);
  return fft_compute(t, {FftKind::kIrfft, {last_dim_size}, {ds.back()}, norm}, where);
}

}  // namespace anvil
