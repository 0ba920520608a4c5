// Discrete Fourier transforms of anvil tensors (torch.fft.fft / ifft / fftn / ifftn / rfft /
// irfft), shared by the reference kernels (src/ops/fft.cpp) and the runtime's extern kernels
// (src/runtime/kernels/fft.cpp). Computed with FFTW (libfftw3, GPL: see docs/externs.md):
// fftwf_* for complex64 / complex32, fftw_* for complex128. Plans are created and destroyed
// under one process-wide mutex (FFTW's planner is not thread-safe); executing is concurrent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace anvil {

/// The transform families of torch.fft that anvil implements.
enum class FftKind {
  kFft,    // fft(self, n, dim=-1, norm): complex -> complex, forward
  kIfft,   // ifft: inverse
  kFftn,   // fftn(self, s, dim, norm): several dims, forward
  kIfftn,  // ifftn: several dims, inverse
  kRfft,   // rfft(self, n, dim=-1, norm): real -> one-sided complex (n/2+1 along dim)
  kIrfft,  // irfft(self, n, dim=-1, norm): one-sided complex -> real of length n
};

/// The arguments of one transform as the export records them: `sizes` is the n (1-D kinds, at
/// most one value) or s argument (empty: the input's sizes), `dims` the dim argument (empty for
/// the n-D kinds: the last len(s) dims, or all dims), `norm` "backward" (or empty), "forward"
/// or "ortho".
struct FftArgs {
  FftKind kind = FftKind::kFft;
  std::vector<int64_t> sizes;
  std::vector<int64_t> dims;
  std::string norm;
};

/// The result dtype of a transform of an input of `in` dtype: complex kinds give the complex
/// dtype of the input's precision (f64 -> c128, f16 -> c32, else c64; complex stays); irfft
/// gives the real dtype of that complex dtype.
DType fft_result_dtype(FftKind kind, DType in);

/// The normalised transform dims and lengths (each >= 1) for an input of `sizes`; throws Error
/// naming `where` for out-of-range dims, repeated dims, lengths < 1, or len(s) != len(dim).
void fft_plan_dims(const FftArgs& args, const Shape& sizes, std::vector<int64_t>& dims,
                   std::vector<int64_t>& lengths, const std::string& where);

/// The result sizes of a transform of an input of `sizes` (rfft: the last transform dim
/// becomes n/2+1; irfft: n, default 2*(m-1)).
Shape fft_result_sizes(const FftArgs& args, const Shape& sizes, const std::string& where);

/// Computes the transform of `x` (any strides; real or complex) into a new contiguous tensor
/// of fft_result_dtype / fft_result_sizes. Throws Error naming `where` for bad arguments or when
/// anvil was built without FFTW.
Tensor fft_compute(const Tensor& x, const FftArgs& args, const std::string& where);

/// aten._fft_r2c (what run_decompositions() leaves of rfft / rfftn / fft of a real input): the
/// forward transform of real `x` over `dims`, one-sided along the last of them (n/2+1 values)
/// when `onesided`; `normalization` 0 scales by 1, 1 by 1/sqrt(n), 2 by 1/n. Throws Error naming
/// `where` for a complex input, bad dims or an unknown normalization.
Tensor fft_r2c(const Tensor& x, const std::vector<int64_t>& dims, int64_t normalization,
               bool onesided, const std::string& where);
/// aten._fft_c2r (irfft / irfftn): the inverse transform of one-sided complex `x` over `dims`,
/// the last of them of length `last_dim_size` in the real result; `normalization` as above.
Tensor fft_c2r(const Tensor& x, const std::vector<int64_t>& dims, int64_t normalization,
               int64_t last_dim_size, const std::string& where);
/// The result sizes of fft_r2c / fft_c2r (`last_size` < 0: r2c, one-sided when `onesided`).
Shape fft_r2c_c2r_sizes(const Shape& sizes, const std::vector<int64_t>& dims, bool onesided,
                        int64_t last_size, const std::string& where);


}  // namespace anvil
