// Softmax and normalisations: softmax.int, _softmax, log_softmax.int, _log_softmax, layer_norm,
// native_layer_norm (with mean and rstd), batch_norm (inference; training in norm_backward.cpp)
// and _native_batch_norm_legit_no_training. Shape rules and reference kernels with torch's
// semantics. Softmax subtracts the row maximum; everything computes in float for 16-bit
// inputs and in double otherwise, and rounds once to the output dtype.
#include <cmath>
#include <optional>

#include "core/error.h"
#include "ops/registry.h"

namespace anvil::ops {

// ops/common.h (not included here: this file has its own node_where / wrap_dim helpers)
Tensor channels_last_like(const Tensor& value, const Tensor& input);

namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
namespace sa = ir::shape_args;

/// "node NAME (TARGET)", the location shape-rule errors name.
std::string node_where(const Node& node) { return "node " + node.name + " (" + node.target + ")"; }

/// Compute type: float for 16-bit floats, double for float32 / float64.
template <typename T>
using Compute =
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, double>;

/// Element offsets of `t` in row-major order of `t` with `dim` moved last (rank 0: {0}).
std::vector<int64_t> offsets_dim_last(const Tensor& t, int64_t dim) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(t.numel()));
  Tensor moved = t;
  if (t.dim() > 0) {
    Shape perm;
    for (int64_t d = 0; d < t.dim(); ++d)
      if (d != dim) perm.push_back(d);
    perm.push_back(dim);
    moved = t.permute(perm);
  }
  for_each_offset(moved.sizes(), moved.strides(), [&](int64_t off) { out.push_back(off); });
  return out;
}

/// Values of an optional 1-d parameter as doubles (nullopt when absent); checks its numel.
std::optional<std::vector<double>> param_values(const KernelContext& ctx, const std::string& name,
                                                int64_t want_numel) {
  auto t = ctx.opt_tensor(name);
  if (!t) return std::nullopt;
  if (t->numel() != want_numel)
    ctx.fail(str("'", name, "' has the wrong number of elements"), std::to_string(want_numel),
             shape_str(t->sizes()));
  return t->to_doubles();
}

// ---- softmax family

/// Output dtype of softmax.int / log_softmax.int: `dtype` if given, else the input's; must be a
/// floating dtype.
DType softmax_dtype(DType in, std::optional<DType> requested, const std::string& where) {
  const DType dt = requested ? *requested : in;
  if (!is_floating(dt))
    throw Error("softmax needs a floating dtype", where, "f16, bf16, f32 or f64", dtype_name(dt));
  return dt;
}

/// Output dtype of _softmax: half_to_float turns f16/bf16 into f32 (other inputs are an error).
DType internal_softmax_dtype(DType in, bool half_to_float, const std::string& where) {
  if (!half_to_float) return softmax_dtype(in, std::nullopt, where);
  if (in != DType::kFloat16 && in != DType::kBFloat16)
    throw Error("_softmax: half_to_float needs a 16-bit float input", where, "f16 or bf16",
                dtype_name(in));
  return DType::kFloat32;
}

/// Softmax (or log-softmax) of `x` along `dim`, result in `out_dtype`. `x` is converted to
/// `in_dtype` first (softmax's dtype argument casts the input before computing).
Tensor softmax_impl(const KernelContext& ctx, const Tensor& x_in, int64_t dim_arg, DType in_dtype,
                    DType out_dtype, bool log) {
  const Tensor x = x_in.to(in_dtype);
  const int64_t dim = wrap_dim(dim_arg, x.dim(), ctx.where());
  Tensor out = Tensor::empty(x.sizes(), out_dtype);
  if (x.numel() == 0) return out;
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  std::vector<int64_t> in_off = offsets_dim_last(x, dim);
  std::vector<int64_t> out_off = offsets_dim_last(out, dim);
  ANVIL_DISPATCH_FLOAT(in_dtype, ctx.where(), T, {
    using C = Compute<T>;
    const T* px = static_cast<const T*>(x.data_ptr());
    ANVIL_DISPATCH_FLOAT(out_dtype, ctx.where(), O, {
      O* po = out.data<O>();
      std::vector<C> row(static_cast<size_t>(n));
      for (size_t base = 0; base < in_off.size(); base += static_cast<size_t>(n)) {
        C mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          row[j] = cast_value<C, T>(px[in_off[base + j]]);
          if (row[j] > mx) mx = row[j];
        }
        // A NaN anywhere makes the sum NaN, so the row is NaN; a row of -inf gives NaN too
        // (exp(-inf - -inf)), as in torch.
        C sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += std::exp(row[j] - mx);
        const C log_sum = std::log(sum);
        for (int64_t j = 0; j < n; ++j) {
          const C v = log ? row[j] - mx - log_sum : std::exp(row[j] - mx) / sum;
          po[out_off[base + j]] = cast_value<O, C>(v);
        }
      }
    });
  });
  return out;
}

/// Shape rule of the softmax family: self's sizes, result dtype `dtype`.
std::vector<TensorType> softmax_shape(const Node& node, DType dtype) {
  TensorType out = sa::type(node, "self");
  wrap_dim(sa::int_(node, "dim"), static_cast<int64_t>(out.sizes.size()), node_where(node));
  out.dtype = dtype;
  out.strides.clear();
  return {out};
}

}  // namespace

std::vector<TensorType> shape_softmax_int(const Node& node) {
  return softmax_shape(node, softmax_dtype(sa::type(node, "self").dtype, sa::dtype(node, "dtype"),
                                           node_where(node)));
}

std::vector<RValue> kernel_softmax_int(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const DType dt = softmax_dtype(self.dtype(), ctx.dtype_arg("dtype"), ctx.where());
  return {softmax_impl(ctx, self, ctx.int_arg("dim"), dt, dt, false)};
}

std::vector<TensorType> shape_softmax_internal(const Node& node) {
  return softmax_shape(
      node, internal_softmax_dtype(sa::type(node, "self").dtype,
                                   sa::bool_(node, "half_to_float", false), node_where(node)));
}

std::vector<RValue> kernel_softmax_internal(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const DType out =
      internal_softmax_dtype(self.dtype(), ctx.bool_arg("half_to_float", false), ctx.where());
  return {softmax_impl(ctx, self, ctx.int_arg("dim"), self.dtype(), out, false)};
}

std::vector<TensorType> shape_log_softmax_int(const Node& node) { return shape_softmax_int(node); }

std::vector<RValue> kernel_log_softmax_int(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const DType dt = softmax_dtype(self.dtype(), ctx.dtype_arg("dtype"), ctx.where());
  return {softmax_impl(ctx, self, ctx.int_arg("dim"), dt, dt, true)};
}

// ---- layer_norm: normalises over the trailing normalized_shape dims (biased variance).

std::vector<TensorType> shape_layer_norm(const Node& node) {
  TensorType out = sa::type(node, "input");
  const std::vector<SymInt> norm = sa::symints(node, "normalized_shape");
  if (norm.size() > out.sizes.size())
    sa::fail(node, "layer_norm: normalized_shape has more dims than the input",
             str("at most ", out.sizes.size(), " dims"), sym_shape_str(norm));
  const size_t lead = out.sizes.size() - norm.size();
  for (size_t i = 0; i < norm.size(); ++i)
    if (norm[i] != out.sizes[lead + i])
      sa::fail(node, "layer_norm: normalized_shape does not match the input's trailing dims",
               sym_shape_str(out.sizes), sym_shape_str(norm));
  if (!is_floating(out.dtype))
    sa::fail(node, "layer_norm needs a floating input", "a floating dtype", dtype_name(out.dtype));
  out.strides.clear();
  return {out};
}

namespace {

/// layer_norm's output, and the mean and 1/sqrt(var + eps) of each normalised row (sizes of the
/// input with the normalised dims as 1, the input's dtype), as native_layer_norm returns them.
std::vector<RValue> layer_norm_impl(KernelContext& ctx) {
  const Tensor x = ctx.tensor("input").contiguous();
  const Shape norm = ctx.ints("normalized_shape");
  const int64_t nd = static_cast<int64_t>(norm.size());
  if (nd > x.dim())
    ctx.fail("layer_norm: normalized_shape has more dims than the input",
             str("at most ", x.dim(), " dims"), shape_str(norm));
  for (int64_t i = 0; i < nd; ++i)
    if (norm[i] != x.size(x.dim() - nd + i))
      ctx.fail("layer_norm: normalized_shape does not match the input's trailing dims",
               shape_str(x.sizes()), shape_str(norm));
  const int64_t m = shape_numel(norm);
  auto w = param_values(ctx, "weight", m);
  auto b = param_values(ctx, "bias", m);
  const double eps = ctx.float_arg("eps", 1e-5);
  Tensor out = Tensor::empty(x.sizes(), x.dtype());
  Shape stat_sizes = x.sizes();
  for (int64_t i = 0; i < nd; ++i) stat_sizes[static_cast<size_t>(x.dim() - nd + i)] = 1;
  Tensor mean_t = Tensor::empty(stat_sizes, x.dtype()), rstd_t = Tensor::empty(stat_sizes, x.dtype());
  const int64_t rows = m == 0 ? shape_numel(stat_sizes) : x.numel() / m;
  ANVIL_DISPATCH_FLOAT(x.dtype(), ctx.where(), T, {
    using C = Compute<T>;
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = px + r * m;
      C mean = 0;
      for (int64_t j = 0; j < m; ++j) mean += cast_value<C, T>(row[j]);
      mean /= static_cast<C>(m);
      C var = 0;
      for (int64_t j = 0; j < m; ++j) {
        const C d = cast_value<C, T>(row[j]) - mean;
        var += d * d;
      }
      var /= static_cast<C>(m);
      const C rstd = C(1) / std::sqrt(var + static_cast<C>(eps));
      mean_t.data<T>()[r] = cast_value<T, C>(mean);
      rstd_t.data<T>()[r] = cast_value<T, C>(rstd);
      for (int64_t j = 0; j < m; ++j) {
        C y = (cast_value<C, T>(row[j]) - mean) * rstd;
        if (w) y *= static_cast<C>((*w)[j]);
        if (b) y += static_cast<C>((*b)[j]);
        po[r * m + j] = cast_value<T, C>(y);
      }
    }
  });
  return {out, mean_t, rstd_t};
}

}  // namespace

std::vector<RValue> kernel_layer_norm(KernelContext& ctx) { return {layer_norm_impl(ctx)[0]}; }

// ---- native_layer_norm: (out, mean, rstd); mean / rstd keep the normalised dims as 1.

std::vector<TensorType> shape_native_layer_norm(const Node& node) {
  TensorType out = shape_layer_norm(node)[0];
  TensorType stat = out;
  const size_t nd = sa::symints(node, "normalized_shape").size();
  for (size_t i = out.sizes.size() - nd; i < out.sizes.size(); ++i) stat.sizes[i] = SymInt(1);
  return {out, stat, stat};
}

std::vector<RValue> kernel_native_layer_norm(KernelContext& ctx) { return layer_norm_impl(ctx); }

// ---- _log_softmax(self, dim, half_to_float)

std::vector<TensorType> shape_log_softmax_internal(const Node& node) {
  return shape_softmax_internal(node);
}

std::vector<RValue> kernel_log_softmax_internal(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const DType out =
      internal_softmax_dtype(self.dtype(), ctx.bool_arg("half_to_float", false), ctx.where());
  return {softmax_impl(ctx, self, ctx.int_arg("dim"), self.dtype(), out, true)};
}

// ---- batch norm (inference): y = (x - running_mean) / sqrt(running_var + eps) * w + b over
// channel dim 1.

namespace {

/// Checks batch-norm input rank and returns its type (shape rules).
TensorType batch_norm_type(const Node& node) {
  TensorType out = sa::type(node, "input");
  if (out.sizes.size() < 2)
    sa::fail(node, "batch_norm needs an input of rank >= 2 (N, C, ...)", "rank >= 2",
             std::to_string(out.sizes.size()));
  if (!is_floating(out.dtype))
    sa::fail(node, "batch_norm needs a floating input", "a floating dtype", dtype_name(out.dtype));
  out.strides.clear();
  return out;
}

/// Inference batch norm with running statistics.
Tensor batch_norm_impl(const KernelContext& ctx) {
  const Tensor& x = ctx.tensor("input");
  if (x.dim() < 2)
    ctx.fail("batch_norm needs an input of rank >= 2 (N, C, ...)", "rank >= 2",
             std::to_string(x.dim()));
  const int64_t c = x.size(1);
  if (!ctx.has("running_mean") || !ctx.has("running_var"))
    ctx.fail("batch_norm in inference mode needs running_mean and running_var", "both tensors",
             "None");
  auto w = param_values(ctx, "weight", c);
  auto b = param_values(ctx, "bias", c);
  const std::vector<double> mean = *param_values(ctx, "running_mean", c);
  const std::vector<double> var = *param_values(ctx, "running_var", c);
  const double eps = ctx.float_arg("eps", 1e-5);
  int64_t inner = 1;
  for (int64_t d = 2; d < x.dim(); ++d) inner *= x.size(d);
  Tensor out = Tensor::empty(x.sizes(), x.dtype());
  ANVIL_DISPATCH_FLOAT(x.dtype(), ctx.where(), T, {
    using C = Compute<T>;
    // y = x * alpha + beta per channel.
    std::vector<C> alpha(static_cast<size_t>(c)), beta(static_cast<size_t>(c));
    for (int64_t k = 0; k < c; ++k) {
      const double invstd = 1.0 / std::sqrt(var[k] + eps);
      const double a = invstd * (w ? (*w)[k] : 1.0);
      alpha[k] = static_cast<C>(a);
      beta[k] = static_cast<C>((b ? (*b)[k] : 0.0) - mean[k] * a);
    }
    const T* px = static_cast<const T*>(x.data_ptr());
    T* po = out.data<T>();
    int64_t i = 0;
    for_each_offset(x.sizes(), x.strides(), [&](int64_t off) {
      const int64_t k = (i / inner) % c;
      po[i] = cast_value<T, C>(cast_value<C, T>(px[off]) * alpha[k] + beta[k]);
      ++i;
    });
  });
  return channels_last_like(out, x);  // PyTorch's CPU kernel keeps a channels-last input so
}

}  // namespace

// Training (what torch.export keeps for a BatchNorm module in train()): batch statistics, and
// the running statistics updated in place (norm_backward.cpp).
Tensor batch_norm_train(const KernelContext& ctx);

std::vector<TensorType> shape_batch_norm(const Node& node) { return {batch_norm_type(node)}; }

std::vector<RValue> kernel_batch_norm(KernelContext& ctx) {
  if (ctx.bool_arg("training", false)) return {batch_norm_train(ctx)};
  return {batch_norm_impl(ctx)};
}

std::vector<TensorType> shape_native_batch_norm_no_training(const Node& node) {
  TensorType out = batch_norm_type(node);
  TensorType empty = out;
  empty.sizes = {SymInt(0)};
  return {out, empty, empty};
}

std::vector<RValue> kernel_native_batch_norm_no_training(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("input");
  return {batch_norm_impl(ctx), Tensor::empty({0}, x.dtype()), Tensor::empty({0}, x.dtype())};
}

}  // namespace anvil::ops
