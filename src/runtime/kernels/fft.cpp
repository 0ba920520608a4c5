// FFT extern kernels: aten.fft_fft / fft_ifft / fft_fftn / fft_ifftn / fft_rfft / fft_irfft
// (.default) and aten._fft_r2c / _fft_c2r. One tensor input `self` (any strides, real or
// complex), attributes n / s, dim and norm as the export records them (absent = ATen default;
// _fft_r2c / _fft_c2r: dim, normalization, onesided / last_dim_size). Computed by core/fft.h
// (FFTW) into a temporary, then copied into the preallocated output.
#include "core/fft.h"

#include <string>

#include "core/error.h"
#include "runtime/externs.h"

namespace anvil::runtime {

namespace {

/// Runs the transform of kind `kind` for `call`.
int fft_extern(ExternCall& call, FftKind kind) {
  const std::string where = call.target();
  ANVIL_CHECK(call.num_inputs() == 1 && call.num_outputs() == 1, where,
              "FFT calls have one input and one output", "1 input, 1 output",
              str(call.num_inputs(), " inputs, ", call.num_outputs(), " outputs"));
  FftArgs a;
  a.kind = kind;
  const bool one_dim = kind != FftKind::kFftn && kind != FftKind::kIfftn;
  if (one_dim) {
    if (call.has_attr("n")) a.sizes = {call.attr_int("n")};
    a.dims = {call.attr_int("dim", -1)};
  } else {
    a.sizes = call.attr_ints("s", {});
    a.dims = call.attr_ints("dim", {});
  }
  a.norm = call.attr_string("norm", "");
  const Tensor x = call.input_tensor(0);
  Tensor out = call.output_tensor(0);
  const Tensor r = fft_compute(x, a, where);
  ANVIL_CHECK(r.sizes() == out.sizes() && r.dtype() == out.dtype(), where,
              "the transform does not match the planned output", out.type_str(), r.type_str());
  out.copy_from(r);
  return 0;
}

/// aten._fft_r2c / aten._fft_c2r: one input; attrs dim, normalization, onesided /
/// last_dim_size.
int fft_r2c_c2r(ExternCall& call, bool c2r) {
  const std::string where = call.target();
  ANVIL_CHECK(call.num_inputs() == 1 && call.num_outputs() == 1, where,
              "FFT calls have one input and one output", "1 input, 1 output",
              str(call.num_inputs(), " inputs, ", call.num_outputs(), " outputs"));
  const std::vector<int64_t> dims = call.attr_ints("dim", {});
  const int64_t norm = call.attr_int("normalization", 0);
  const Tensor x = call.input_tensor(0);
  Tensor out = call.output_tensor(0);
  const Tensor r = c2r ? fft_c2r(x, dims, norm, call.attr_int("last_dim_size", 0), where)
                       : fft_r2c(x, dims, norm, call.attr_bool("onesided", true), where);
  ANVIL_CHECK(r.sizes() == out.sizes() && r.dtype() == out.dtype(), where,
              "the transform does not match the planned output", out.type_str(), r.type_str());
  out.copy_from(r);
  return 0;
}

/// One ExternFn per target.
int fft_fft(ExternCall& c) { return fft_extern(c, FftKind::kFft); }
int fft_ifft(ExternCall& c) { return fft_extern(c, FftKind::kIfft); }
int fft_fftn(ExternCall& c) { return fft_extern(c, FftKind::kFftn); }
int fft_ifftn(ExternCall& c) { return fft_extern(c, FftKind::kIfftn); }
int fft_rfft(ExternCall& c) { return fft_extern(c, FftKind::kRfft); }
int fft_irfft(ExternCall& c) { return fft_extern(c, FftKind::kIrfft); }
int fft_r2c_extern(ExternCall& c) { return fft_r2c_c2r(c, false); }
int fft_c2r_extern(ExternCall& c) { return fft_r2c_c2r(c, true); }

}  // namespace

/// Registers the FFT targets (ANVIL_EXTERN_FAMILIES: fft).
void register_fft_externs() {
  register_extern("aten.fft_fft.default", fft_fft);
  register_extern("aten.fft_ifft.default", fft_ifft);
  register_extern("aten.fft_fftn.default", fft_fftn);
  register_extern("aten.fft_ifftn.default", fft_ifftn);
  register_extern("aten.fft_rfft.default", fft_rfft);
  register_extern("aten.fft_irfft.default", fft_irfft);
  register_extern("aten._fft_r2c.default", fft_r2c_extern);
  register_extern("aten._fft_c2r.default", fft_c2r_extern);
}

}  // namespace anvil::runtime
