// More reductions and scans with PyTorch's semantics: any / all (every form), argmin, max.dim /
// min.dim (values and indices), prod, the variance family (var / std / var_mean / std_mean, by
// `correction` or `unbiased`), logsumexp and cumprod. Output dtypes: any / all give bool (uint8
// for uint8 inputs), prod / cumprod give int64 for integral and bool inputs, var / std need a
// floating input, logsumexp promotes integers to float32. Ties in argmin / max.dim / min.dim take
// the first index; a NaN wins (its first occurrence) and makes the value NaN.
#include <cmath>
#include <optional>

#include "core/error.h"
#include "ops/reduce_util.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
using namespace reduce;  // NOLINT: the shared reduction helpers (reduce_util.h)
namespace sa = ir::shape_args;

// ---- any / all

/// Result dtype of any / all: bool, or uint8 for uint8 inputs.
DType logical_dtype(DType in) { return in == DType::kUInt8 ? DType::kUInt8 : DType::kBool; }

/// any / all of `self` over `dims` (empty: every dim). An empty reduction gives False for any,
/// True for all.
Tensor logical_impl(const KernelContext& ctx, const std::vector<int64_t>& dims, bool keepdim,
                    bool all) {
  const Tensor& self = ctx.tensor("self");
  auto mask = reduce_mask(dims, self.dim(), ctx.where());
  ReducePlan p = plan_reduce(self.to(DType::kBool), mask, keepdim);
  Tensor out = Tensor::empty(p.out_sizes, DType::kBool);
  bool* o = out.data<bool>();
  for (int64_t g = 0; g < p.groups; ++g) o[g] = all;
  const bool* in = static_cast<const bool*>(p.moved.data_ptr());
  for_each_grouped(p, [&](int64_t g, int64_t, int64_t off) {
    o[g] = all ? (o[g] && in[off]) : (o[g] || in[off]);
  });
  return self.dtype() == DType::kUInt8 ? out.to(DType::kUInt8) : out;
}

/// The dims of any.dims (absent / None: every dim).
std::vector<int64_t> opt_dims(const Node& node) { return static_ints(node, "dim", {}); }

std::vector<TensorType> logical_shape(const Node& node, const std::vector<int64_t>& dims) {
  return reduce_shape(node, dims, sa::bool_(node, "keepdim", false),
                      logical_dtype(sa::type(node, "self").dtype));
}

// ---- argmin / max.dim / min.dim

/// Index (and value) of the first maximum (or minimum) of each group; a NaN wins at its first
/// occurrence. `what` names the op in the empty-reduction error.
std::pair<Tensor, Tensor> arg_extreme(const KernelContext& ctx, const Tensor& self,
                                      const std::vector<int64_t>& dims, bool keepdim, bool is_max,
                                      const char* what) {
  auto mask = reduce_mask(dims, self.dim(), ctx.where());
  ReducePlan p = plan_reduce(self, mask, keepdim);
  if (p.group_size == 0 && p.groups > 0)
    ctx.fail(str(what, "(): expected reduction dim to have non-zero size"),
             "a non-empty reduction", "0 elements");
  Tensor values = Tensor::empty(p.out_sizes, self.dtype());
  Tensor out = Tensor::empty(p.out_sizes, DType::kInt64);
  ANVIL_DISPATCH_REAL(self.dtype(), ctx.where(), T, {
    using C = CmpType<T>;
    std::vector<C> best(static_cast<size_t>(p.groups));
    int64_t* idx = out.data<int64_t>();
    const T* in = static_cast<const T*>(p.moved.data_ptr());
    T* vals = values.data<T>();
    for_each_grouped(p, [&](int64_t g, int64_t j, int64_t off) {
      const C v = static_cast<C>(in[off]);
      const bool better = is_max ? v > best[g] : v < best[g];
      if (j == 0 || (!is_nan_value(best[g]) && (is_nan_value(v) || better))) {
        best[g] = v;
        idx[g] = j;
        vals[g] = in[off];
      }
    });
  });
  return {values, out};
}

/// Shape rule of max.dim / min.dim: values (self's dtype) and int64 indices.
std::vector<TensorType> value_index_shape(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  auto v = reduce_shape(node, {sa::int_(node, "dim")}, sa::bool_(node, "keepdim", false), in.dtype);
  TensorType i = v[0];
  i.dtype = DType::kInt64;
  return {v[0], i};
}

std::vector<RValue> value_index_kernel(KernelContext& ctx, bool is_max) {
  auto [v, i] = arg_extreme(ctx, ctx.tensor("self"), {ctx.int_arg("dim")},
                            ctx.bool_arg("keepdim", false), is_max, is_max ? "max" : "min");
  return {v, i};
}

// ---- prod

/// Product of `self` in `out_dtype` over `dims` (empty: every dim); integers multiply in int64
/// (wrapping like torch), floats in double, 16-bit floats in float.
Tensor prod_impl(const KernelContext& ctx, const std::vector<int64_t>& dims, bool keepdim,
                 DType out_dtype) {
  const Tensor& self = ctx.tensor("self");
  auto mask = reduce_mask(dims, self.dim(), ctx.where());
  ReducePlan p = plan_reduce(self.to(out_dtype), mask, keepdim);
  Tensor out = Tensor::empty(p.out_sizes, out_dtype);
  ANVIL_DISPATCH_REAL(out_dtype, ctx.where(), T, {
    using Acc = typename SumAcc<T>::type;
    std::vector<Acc> acc(static_cast<size_t>(p.groups), Acc(1));
    const T* in = static_cast<const T*>(p.moved.data_ptr());
    for_each_grouped(p, [&](int64_t g, int64_t, int64_t off) {
      if constexpr (std::is_integral_v<Acc>)
        acc[g] = static_cast<Acc>(static_cast<uint64_t>(acc[g]) *
                                  static_cast<uint64_t>(static_cast<Acc>(in[off])));
      else
        acc[g] *= static_cast<Acc>(static_cast<CmpType<T>>(in[off]));
    });
    T* o = out.data<T>();
    for (int64_t g = 0; g < p.groups; ++g) o[g] = cast_value<T, Acc>(acc[g]);
  });
  return out;
}

// ---- var / std / var_mean / std_mean

/// The arguments of a variance-family node: dims (empty: every dim), correction, keepdim.
struct Moments {
  std::vector<int64_t> dims;
  double correction = 1;
  bool keepdim = false;
};

/// Reads dim / correction (or unbiased) / keepdim from a shape-rule node.
Moments moments_args(const Node& node) {
  Moments m;
  m.dims = static_ints(node, "dim", {});
  if (sa::has(node, "unbiased")) m.correction = sa::bool_(node, "unbiased", true) ? 1 : 0;
  if (sa::has(node, "correction")) m.correction = sa::float_(node, "correction");
  m.keepdim = sa::bool_(node, "keepdim", false);
  return m;
}

/// var / std need a floating input (complex is not supported here).
DType moments_dtype(DType in, const std::string& where) {
  if (!is_floating(in))
    throw Error("std and var only support floating point dtypes", where,
                "a floating input", dtype_name(in));
  return in;
}

std::vector<TensorType> moments_shape(const Node& node, bool with_mean) {
  const Moments m = moments_args(node);
  auto t = reduce_shape(node, m.dims, m.keepdim,
                        moments_dtype(sa::type(node, "self").dtype, node_where(node)));
  if (with_mean) t.push_back(t[0]);
  return t;
}

/// Variance (or standard deviation) and mean over the node's dims, in double: the sum of squared
/// deviations from the mean divided by max(0, N - correction) (0/0 gives NaN, like torch).
std::vector<RValue> moments_kernel(KernelContext& ctx, bool take_sqrt, bool with_mean) {
  const Tensor& self = ctx.tensor("self");
  const DType dt = moments_dtype(self.dtype(), ctx.where());
  const Moments m = moments_args(ctx.node());
  auto mask = reduce_mask(m.dims, self.dim(), ctx.where());
  ReducePlan p = plan_reduce(self.to(DType::kFloat64), mask, m.keepdim);
  std::vector<double> sum(static_cast<size_t>(p.groups), 0.0), sq(sum.size(), 0.0);
  const double* in = p.moved.data<double>();
  for_each_grouped(p, [&](int64_t g, int64_t, int64_t off) { sum[g] += in[off]; });
  const double n = static_cast<double>(p.group_size);
  for (double& s : sum) s /= n;
  for_each_grouped(p, [&](int64_t g, int64_t, int64_t off) {
    const double d = in[off] - sum[g];
    sq[g] += d * d;
  });
  const double denom = std::max(0.0, n - m.correction);
  for (double& v : sq) {
    v /= denom;
    if (take_sqrt) v = std::sqrt(v);
  }
  std::vector<RValue> out = {Tensor::from_vector(sq, p.out_sizes).to(dt)};
  if (with_mean) out.push_back(Tensor::from_vector(sum, p.out_sizes).to(dt));
  return out;
}

// ---- logsumexp

/// logsumexp's result dtype: floating inputs keep theirs, integers and bool give float32.
DType lse_dtype(DType in) { return is_floating(in) ? in : DType::kFloat32; }

}  // namespace

// ---- any / all

std::vector<TensorType> shape_any_default(const Node& node) { return logical_shape(node, {}); }
std::vector<RValue> kernel_any_default(KernelContext& ctx) {
  return {logical_impl(ctx, {}, false, false)};
}
std::vector<TensorType> shape_any_dims(const Node& node) {
  return logical_shape(node, opt_dims(node));
}
std::vector<RValue> kernel_any_dims(KernelContext& ctx) {
  return {logical_impl(ctx, ctx.ints("dim", {}), ctx.bool_arg("keepdim", false), false)};
}
std::vector<TensorType> shape_all_default(const Node& node) { return logical_shape(node, {}); }
std::vector<RValue> kernel_all_default(KernelContext& ctx) {
  return {logical_impl(ctx, {}, false, true)};
}
std::vector<TensorType> shape_all_dim(const Node& node) {
  return logical_shape(node, {sa::int_(node, "dim")});
}
std::vector<RValue> kernel_all_dim(KernelContext& ctx) {
  return {logical_impl(ctx, {ctx.int_arg("dim")}, ctx.bool_arg("keepdim", false), true)};
}

// ---- argmin: dim=None flattens (keepdim then keeps every dim as 1)

std::vector<TensorType> shape_argmin(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  if (in.dtype == DType::kBool)
    sa::fail(node, "argmin is not defined for bool tensors", "a numeric dtype", "bool");
  std::vector<int64_t> dims;
  if (sa::has(node, "dim")) dims = {sa::int_(node, "dim")};
  return reduce_shape(node, dims, sa::bool_(node, "keepdim", false), DType::kInt64);
}

std::vector<RValue> kernel_argmin(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  if (self.dtype() == DType::kBool)
    ctx.fail("argmin is not defined for bool tensors", "a numeric dtype", "bool");
  const bool keepdim = ctx.bool_arg("keepdim", false);
  if (ctx.has("dim"))
    return {arg_extreme(ctx, self, {ctx.int_arg("dim")}, keepdim, false, "argmin").second};
  // Flattened: the index into the row-major order; keepdim keeps every dim as 1.
  Tensor flat = self.contiguous().reshape({self.numel()});
  Tensor i = arg_extreme(ctx, flat, {0}, false, false, "argmin").second;
  return {keepdim ? i.reshape(Shape(static_cast<size_t>(self.dim()), 1)) : i};
}

// ---- max.dim / min.dim

std::vector<TensorType> shape_max_dim(const Node& node) { return value_index_shape(node); }
std::vector<RValue> kernel_max_dim(KernelContext& ctx) { return value_index_kernel(ctx, true); }
std::vector<TensorType> shape_min_dim(const Node& node) { return value_index_shape(node); }
std::vector<RValue> kernel_min_dim(KernelContext& ctx) { return value_index_kernel(ctx, false); }

// ---- prod

std::vector<TensorType> shape_prod_default(const Node& node) {
  return reduce_shape(node, {}, false,
                      sum_dtype(sa::type(node, "self").dtype, sa::dtype(node, "dtype")));
}
std::vector<RValue> kernel_prod_default(KernelContext& ctx) {
  return {prod_impl(ctx, {}, false, sum_dtype(ctx.tensor("self").dtype(), ctx.dtype_arg("dtype")))};
}
std::vector<TensorType> shape_prod_dim_int(const Node& node) {
  return reduce_shape(node, {sa::int_(node, "dim")}, sa::bool_(node, "keepdim", false),
                      sum_dtype(sa::type(node, "self").dtype, sa::dtype(node, "dtype")));
}
std::vector<RValue> kernel_prod_dim_int(KernelContext& ctx) {
  return {prod_impl(ctx, {ctx.int_arg("dim")}, ctx.bool_arg("keepdim", false),
                    sum_dtype(ctx.tensor("self").dtype(), ctx.dtype_arg("dtype")))};
}

// ---- var / std / var_mean / std_mean (.correction and .dim)

std::vector<TensorType> shape_var_correction(const Node& n) { return moments_shape(n, false); }
std::vector<RValue> kernel_var_correction(KernelContext& c) { return moments_kernel(c, false, false); }
std::vector<TensorType> shape_var_dim(const Node& n) { return moments_shape(n, false); }
std::vector<RValue> kernel_var_dim(KernelContext& c) { return moments_kernel(c, false, false); }
std::vector<TensorType> shape_std_correction(const Node& n) { return moments_shape(n, false); }
std::vector<RValue> kernel_std_correction(KernelContext& c) { return moments_kernel(c, true, false); }
std::vector<TensorType> shape_std_dim(const Node& n) { return moments_shape(n, false); }
std::vector<RValue> kernel_std_dim(KernelContext& c) { return moments_kernel(c, true, false); }
std::vector<TensorType> shape_var_mean_correction(const Node& n) { return moments_shape(n, true); }
std::vector<RValue> kernel_var_mean_correction(KernelContext& c) {
  return moments_kernel(c, false, true);
}
std::vector<TensorType> shape_var_mean_dim(const Node& n) { return moments_shape(n, true); }
std::vector<RValue> kernel_var_mean_dim(KernelContext& c) { return moments_kernel(c, false, true); }
std::vector<TensorType> shape_std_mean_correction(const Node& n) { return moments_shape(n, true); }
std::vector<RValue> kernel_std_mean_correction(KernelContext& c) {
  return moments_kernel(c, true, true);
}
std::vector<TensorType> shape_std_mean_dim(const Node& n) { return moments_shape(n, true); }
std::vector<RValue> kernel_std_mean_dim(KernelContext& c) { return moments_kernel(c, true, true); }

// ---- logsumexp(self, dim, keepdim): max + log(sum(exp(x - max))), the max taken as 0 when it
// is infinite (so all -inf gives -inf and a +inf gives +inf, as in torch).

std::vector<TensorType> shape_logsumexp(const Node& node) {
  return reduce_shape(node, static_ints(node, "dim", {}), sa::bool_(node, "keepdim", false),
                      lse_dtype(sa::type(node, "self").dtype));
}

std::vector<RValue> kernel_logsumexp(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const DType dt = lse_dtype(self.dtype());
  auto mask = reduce_mask(ctx.ints("dim", {}), self.dim(), ctx.where());
  ReducePlan p = plan_reduce(self.to(DType::kFloat64), mask, ctx.bool_arg("keepdim", false));
  std::vector<double> mx(static_cast<size_t>(p.groups), -INFINITY), s(mx.size(), 0.0);
  const double* in = p.moved.data<double>();
  for_each_grouped(p, [&](int64_t g, int64_t, int64_t off) {
    if (in[off] > mx[g]) mx[g] = in[off];  // NaN is skipped here and propagates through exp
  });
  for (double& m : mx)
    if (std::isinf(m)) m = 0;
  for_each_grouped(p, [&](int64_t g, int64_t, int64_t off) { s[g] += std::exp(in[off] - mx[g]); });
  for (size_t g = 0; g < s.size(); ++g) s[g] = std::log(s[g]) + mx[g];
  return {Tensor::from_vector(s, p.out_sizes).to(dt)};
}

// ---- cumprod: integral and bool inputs give int64 unless dtype is given.

std::vector<TensorType> shape_cumprod(const Node& node) { return shape_scan(node); }

std::vector<RValue> kernel_cumprod(KernelContext& ctx) {
  return scan_kernel<1>(ctx, [](auto acc, auto x) {
    using Acc = decltype(acc);
    if constexpr (std::is_integral_v<Acc>)  // wraps around as torch's int64 product does
      return static_cast<Acc>(static_cast<uint64_t>(acc) *
                              static_cast<uint64_t>(static_cast<Acc>(x)));
    else
      return static_cast<Acc>(acc * static_cast<Acc>(static_cast<CmpType<decltype(x)>>(x)));
  });
}

}  // namespace anvil::ops
