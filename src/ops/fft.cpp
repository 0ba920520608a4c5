// Complex parts and FFTs: real / imag / view_as_real (views of a complex tensor's storage as its
// real dtype) and torch.fft's fft / ifft / fftn / ifftn / rfft / irfft (core/fft.h, FFTW). The
// compiler lowers the parts to pointwise code and calls the FFTs as runtime externs.
#include "core/fft.h"

#include <complex>

#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {
namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;

/// The input type of a one-input op, checked to be complex (what names the op in messages).
const TensorType& complex_input(const Node& node, const char* what) {
  const TensorType& t = ir::shape_args::type(node, "self");
  if (!is_complex(t.dtype))
    ir::shape_args::fail(node, std::string(what) + " is only supported for complex tensors",
                         "a complex tensor", dtype_name(t.dtype));
  return t;
}

/// A view of complex tensor `x`'s real (part 0) or imaginary (part 1) values.
Tensor part_view(const Tensor& x, int64_t part) {
  Shape strides = x.strides();
  for (auto& s : strides) s *= 2;
  return Tensor(x.storage(), complex_to_real(x.dtype()), x.sizes(), strides,
                x.storage_offset() * 2 + part);
}

/// The transform arguments of an FFT node as the kernels see them.
FftArgs kernel_fft_args(const KernelContext& ctx, FftKind kind) {
  FftArgs a;
  a.kind = kind;
  const bool one_dim = kind != FftKind::kFftn && kind != FftKind::kIfftn;
  if (one_dim) {
    if (ctx.has("n")) a.sizes = {ctx.int_arg("n")};
    a.dims = {ctx.has("dim") ? ctx.int_arg("dim") : -1};
  } else {
    if (ctx.has("s")) a.sizes = ctx.ints("s");
    if (ctx.has("dim")) a.dims = ctx.ints("dim");
  }
  if (ctx.has("norm")) a.norm = ctx.string_arg("norm", "");
  return a;
}

/// The output type of an FFT node: static transform lengths (symbolic sizes only on dims the
/// transform does not touch).
std::vector<TensorType> fft_shape(const Node& node, FftKind kind) {
  const TensorType& t = ir::shape_args::type(node, "self");
  const std::string where = node_where(node);
  if (!is_complex(t.dtype) && !is_floating(t.dtype) && !is_integral(t.dtype, true))
    ir::shape_args::fail(node, "unsupported input dtype for an FFT", "a real or complex dtype",
                         dtype_name(t.dtype));
  FftArgs a;
  a.kind = kind;
  auto constant = [&](const SymInt& v, const char* what) {
    auto c = v.maybe_constant();
    if (!c)
      ir::shape_args::fail(node, std::string("a symbolic ") + what + " is not supported for FFTs",
                           "a constant", v.str());
    return *c;
  };
  const bool one_dim = kind != FftKind::kFftn && kind != FftKind::kIfftn;
  if (one_dim) {
    if (ir::shape_args::has(node, "n"))
      a.sizes = {constant(ir::shape_args::symint(node, "n"), "n")};
    a.dims = {ir::shape_args::has(node, "dim") ? ir::shape_args::int_(node, "dim") : -1};
  } else {
    if (ir::shape_args::has(node, "s"))
      for (const SymInt& v : ir::shape_args::symints(node, "s"))
        a.sizes.push_back(constant(v, "s"));
    if (ir::shape_args::has(node, "dim"))
      for (const SymInt& v : ir::shape_args::symints(node, "dim"))
        a.dims.push_back(constant(v, "dim"));
  }
  // Dims and lengths from a placeholder shape: symbolic sizes must not be transformed.
  constexpr int64_t kSymbolic = int64_t{1} << 40;
  Shape sizes;
  for (const SymInt& s : t.sizes) sizes.push_back(s.maybe_constant().value_or(kSymbolic));
  std::vector<int64_t> dims, lengths;
  fft_plan_dims(a, sizes, dims, lengths, where);
  const Shape out_sizes = fft_result_sizes(a, sizes, where);
  TensorType out;
  out.dtype = fft_result_dtype(kind, t.dtype);
  out.device = t.device;
  out.sizes = t.sizes;
  for (int64_t d : dims) {
    const size_t k = static_cast<size_t>(d);
    if (sizes[k] == kSymbolic)
      ir::shape_args::fail(node, "an FFT over a dimension of symbolic size is not supported",
                           "a static size", t.sizes[k].str());
    out.sizes[k] = SymInt(out_sizes[k]);
  }
  return {out};
}

/// The reference kernel of an FFT node (core/fft.h).
std::vector<RValue> fft_kernel(KernelContext& ctx, FftKind kind) {
  return {fft_compute(ctx.tensor("self"), kernel_fft_args(ctx, kind), ctx.where())};
}

}  // namespace

// ---- real / imag / view_as_real

std::vector<TensorType> shape_real(const Node& node) {
  const TensorType& t = ir::shape_args::type(node, "self");
  TensorType out = t;
  out.dtype = complex_to_real(t.dtype);
  out.strides.clear();
  return {out};
}
std::vector<RValue> kernel_real(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  return {is_complex(x.dtype()) ? part_view(x, 0) : x};  // real of a real tensor is itself
}

std::vector<TensorType> shape_imag(const Node& node) {
  TensorType out = complex_input(node, "imag");
  out.dtype = complex_to_real(out.dtype);
  out.strides.clear();
  return {out};
}
std::vector<RValue> kernel_imag(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  if (!is_complex(x.dtype()))
    ctx.fail("imag is only supported for complex tensors", "a complex tensor",
             dtype_name(x.dtype()));
  return {part_view(x, 1)};
}

std::vector<TensorType> shape_view_as_real(const Node& node) {
  TensorType out = complex_input(node, "view_as_real");
  out.dtype = complex_to_real(out.dtype);
  out.sizes.push_back(SymInt(2));
  out.strides.clear();
  return {out};
}
std::vector<RValue> kernel_view_as_real(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  if (!is_complex(x.dtype()))
    ctx.fail("view_as_real is only supported for complex tensors", "a complex tensor",
             dtype_name(x.dtype()));
  Shape sizes = x.sizes(), strides = x.strides();
  for (auto& s : strides) s *= 2;
  sizes.push_back(2);
  strides.push_back(1);
  return {Tensor(x.storage(), complex_to_real(x.dtype()), sizes, strides, x.storage_offset() * 2)};
}

// ---- FFTs

#define ANVIL_FFT_OP_(ID, KIND)                                                             \
  std::vector<TensorType> shape_##ID(const Node& n) { return fft_shape(n, FftKind::KIND); } \
  std::vector<RValue> kernel_##ID(KernelContext& c) { return fft_kernel(c, FftKind::KIND); }

ANVIL_FFT_OP_(fft_fft, kFft)
ANVIL_FFT_OP_(fft_ifft, kIfft)
ANVIL_FFT_OP_(fft_fftn, kFftn)
ANVIL_FFT_OP_(fft_ifftn, kIfftn)
ANVIL_FFT_OP_(fft_rfft, kRfft)
ANVIL_FFT_OP_(fft_irfft, kIrfft)
#undef ANVIL_FFT_OP_

// ---- _fft_r2c(self, dim, normalization, onesided) / _fft_c2r(self, dim, normalization,
// last_dim_size): the forms run_decompositions() gives rfft / rfftn / irfft (core/fft.h).

namespace {

/// Output type of _fft_r2c (`c2r` false) or _fft_c2r over static transformed dims.
std::vector<TensorType> r2c_c2r_shape(const Node& node, bool c2r) {
  namespace sa = ir::shape_args;
  const TensorType& t = sa::type(node, "self");
  if (c2r ? !is_complex(t.dtype) : (!is_floating(t.dtype) || is_float8(t.dtype)))
    sa::fail(node, c2r ? "_fft_c2r expects a complex input" : "_fft_r2c expects a floating input",
             c2r ? "a complex dtype" : "a floating dtype", dtype_name(t.dtype));
  const int64_t norm = sa::int_(node, "normalization");
  if (norm < 0 || norm > 2)
    sa::fail(node, "unknown FFT normalization", "0, 1 or 2", std::to_string(norm));
  std::vector<int64_t> dims;
  for (const SymInt& d : sa::symints(node, "dim")) dims.push_back(d.constant());
  constexpr int64_t kSymbolic = int64_t{1} << 40;
  Shape sizes;
  for (const SymInt& s : t.sizes) sizes.push_back(s.maybe_constant().value_or(kSymbolic));
  int64_t last = -1;
  if (c2r) {
    const SymInt l = sa::symint(node, "last_dim_size");
    if (!l.is_constant())
      sa::fail(node, "a symbolic last_dim_size is not supported", "a constant", l.str());
    last = l.constant();
  }
  Shape out_sizes;
  try {
    out_sizes = fft_r2c_c2r_sizes(sizes, dims, sa::bool_(node, "onesided", true), last,
                                  node_where(node));
  } catch (const Error& e) {
    sa::fail(node, e.what(), "valid FFT dims", sym_shape_str(t.sizes));
  }
  TensorType out = t;
  out.strides.clear();
  out.dtype = c2r ? complex_to_real(t.dtype) : fft_result_dtype(FftKind::kRfft, t.dtype);
  for (int64_t d : dims) {
    const size_t k = static_cast<size_t>(d < 0 ? d + static_cast<int64_t>(sizes.size()) : d);
    if (sizes[k] == kSymbolic)
      sa::fail(node, "an FFT over a dimension of symbolic size is not supported",
               "a static size", t.sizes[k].str());
    out.sizes[k] = SymInt(out_sizes[k]);
  }
  return {out};
}

}  // namespace

std::vector<TensorType> shape_fft_r2c(const Node& node) { return r2c_c2r_shape(node, false); }
std::vector<RValue> kernel_fft_r2c(KernelContext& ctx) {
  return {fft_r2c(ctx.tensor("self"), ctx.ints("dim"), ctx.int_arg("normalization"),
                  ctx.bool_arg("onesided", true), ctx.where())};
}

std::vector<TensorType> shape_fft_c2r(const Node& node) { return r2c_c2r_shape(node, true); }
std::vector<RValue> kernel_fft_c2r(KernelContext& ctx) {
  return {fft_c2r(ctx.tensor("self"), ctx.ints("dim"), ctx.int_arg("normalization"),
                  ctx.int_arg("last_dim_size"), ctx.where())};
}

}  // namespace anvil::ops
