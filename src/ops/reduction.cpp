// Reductions and scans: sum, mean, amax/amin, argmax, any, cumsum, diff, linalg_vector_norm. Shape rules and
// reference kernels with torch's semantics (output dtypes, keepdim, empty-dim rules, NaN
// propagation). Accumulation: 16-bit floats in float, float32/float64 in double, integers in
// int64; results are rounded once to the output dtype.
#include <cmath>
#include <optional>
#include <type_traits>

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

/// Result dtype of mean: floating (or complex) only, like torch.
DType mean_dtype(DType in, std::optional<DType> requested, const std::string& where) {
  if (requested) {
    if (!is_floating(*requested) && !is_complex(*requested))
      throw Error("mean(): could not infer output dtype; the dtype argument must be floating",
                  where, "a floating dtype", dtype_name(*requested));
    return *requested;
  }
  if (!is_floating(in) && !is_complex(in))
    throw Error("mean(): could not infer output dtype; the input must be floating (or pass dtype)",
                where, "a floating input dtype", dtype_name(in));
  return in;
}

/// Sum (or mean) of `self` converted to `out_dtype`, over `dims` (empty = all).
Tensor sum_impl(const KernelContext& ctx, const Tensor& self, const std::vector<int64_t>& dims,
                bool keepdim, DType out_dtype, bool mean) {
  auto mask = reduce_mask(dims, self.dim(), ctx.where());
  ReducePlan p = plan_reduce(self.to(out_dtype), mask, keepdim);
  Tensor out = Tensor::empty(p.out_sizes, out_dtype);
  ANVIL_DISPATCH_REAL(out_dtype, ctx.where(), T, {
    using Acc = typename SumAcc<T>::type;
    std::vector<Acc> acc(static_cast<size_t>(p.groups), Acc(0));
    const T* in = static_cast<const T*>(p.moved.data_ptr());
    for_each_grouped(p, [&](int64_t g, int64_t, int64_t off) {
      acc[g] += static_cast<Acc>(static_cast<CmpType<T>>(in[off]));
    });
    T* o = out.data<T>();
    for (int64_t g = 0; g < p.groups; ++g) {
      if constexpr (std::is_floating_point_v<Acc>) {
        o[g] = cast_value<T, Acc>(mean ? acc[g] / static_cast<Acc>(p.group_size) : acc[g]);
      } else {
        o[g] = cast_value<T, Acc>(acc[g]);
      }
    }
  });
  return out;
}

/// Dims of sum.dim_IntList / mean.dim: absent or None means every dim.
std::vector<int64_t> kernel_dims(const KernelContext& ctx) { return ctx.ints("dim", {}); }

/// amax / amin kernel body.
Tensor extreme_impl(const KernelContext& ctx, bool is_max) {
  const Tensor& self = ctx.tensor("self");
  auto mask = reduce_mask(ctx.ints("dim", {}), self.dim(), ctx.where());
  ReducePlan p = plan_reduce(self, mask, ctx.bool_arg("keepdim", false));
  if (p.group_size == 0 && p.groups > 0)
    ctx.fail(str(is_max ? "amax" : "amin", "(): expected reduction dims to have non-zero size"),
             "a non-empty reduction", "0 elements");
  Tensor out = Tensor::empty(p.out_sizes, self.dtype());
  ANVIL_DISPATCH_REAL(self.dtype(), ctx.where(), T, {
    using C = CmpType<T>;
    std::vector<C> best(static_cast<size_t>(p.groups));
    const T* in = static_cast<const T*>(p.moved.data_ptr());
    for_each_grouped(p, [&](int64_t g, int64_t j, int64_t off) {
      const C v = static_cast<C>(in[off]);
      if (j == 0 || is_nan_value(v)) {
        best[g] = v;
      } else if (!is_nan_value(best[g]) && (is_max ? v > best[g] : v < best[g])) {
        best[g] = v;
      }
    });
    T* o = out.data<T>();
    for (int64_t g = 0; g < p.groups; ++g) o[g] = cast_value<T, C>(best[g]);
  });
  return out;
}

}  // namespace

// ---- sum

std::vector<TensorType> shape_sum_default(const Node& node) {
  const TensorType& in = ir::shape_args::type(node, "self");
  return reduce_shape(node, {}, false, sum_dtype(in.dtype, ir::shape_args::dtype(node, "dtype")));
}

std::vector<RValue> kernel_sum_default(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  return {sum_impl(ctx, self, {}, false, sum_dtype(self.dtype(), ctx.dtype_arg("dtype")), false)};
}

std::vector<TensorType> shape_sum_dim_IntList(const Node& node) {
  const TensorType& in = ir::shape_args::type(node, "self");
  return reduce_shape(node, static_ints(node, "dim", {}),
                      ir::shape_args::bool_(node, "keepdim", false),
                      sum_dtype(in.dtype, ir::shape_args::dtype(node, "dtype")));
}

std::vector<RValue> kernel_sum_dim_IntList(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  return {sum_impl(ctx, self, kernel_dims(ctx), ctx.bool_arg("keepdim", false),
                   sum_dtype(self.dtype(), ctx.dtype_arg("dtype")), false)};
}

// ---- mean

std::vector<TensorType> shape_mean_default(const Node& node) {
  const TensorType& in = ir::shape_args::type(node, "self");
  return reduce_shape(node, {}, false,
                      mean_dtype(in.dtype, ir::shape_args::dtype(node, "dtype"), node_where(node)));
}

std::vector<RValue> kernel_mean_default(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  return {sum_impl(ctx, self, {}, false,
                   mean_dtype(self.dtype(), ctx.dtype_arg("dtype"), ctx.where()), true)};
}

std::vector<TensorType> shape_mean_dim(const Node& node) {
  const TensorType& in = ir::shape_args::type(node, "self");
  return reduce_shape(node, static_ints(node, "dim", {}),
                      ir::shape_args::bool_(node, "keepdim", false),
                      mean_dtype(in.dtype, ir::shape_args::dtype(node, "dtype"), node_where(node)));
}

std::vector<RValue> kernel_mean_dim(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  return {sum_impl(ctx, self, kernel_dims(ctx), ctx.bool_arg("keepdim", false),
                   mean_dtype(self.dtype(), ctx.dtype_arg("dtype"), ctx.where()), true)};
}

// ---- amax / amin

std::vector<TensorType> shape_amax(const Node& node) {
  return reduce_shape(node, static_ints(node, "dim", {}),
                      ir::shape_args::bool_(node, "keepdim", false),
                      ir::shape_args::type(node, "self").dtype);
}

std::vector<RValue> kernel_amax(KernelContext& ctx) { return {extreme_impl(ctx, true)}; }

std::vector<TensorType> shape_amin(const Node& node) {
  return reduce_shape(node, static_ints(node, "dim", {}),
                      ir::shape_args::bool_(node, "keepdim", false),
                      ir::shape_args::type(node, "self").dtype);
}

std::vector<RValue> kernel_amin(KernelContext& ctx) { return {extreme_impl(ctx, false)}; }

// ---- argmax: dim=None flattens (keepdim then keeps every dim as 1); ties take the first index,
// NaN counts as the maximum.

std::vector<TensorType> shape_argmax(const Node& node) {
  const TensorType& in = ir::shape_args::type(node, "self");
  if (in.dtype == DType::kBool)
    ir::shape_args::fail(node, "argmax is not defined for bool tensors", "a numeric dtype", "bool");
  std::vector<int64_t> dims;
  if (ir::shape_args::has(node, "dim")) dims = {ir::shape_args::int_(node, "dim")};
  return reduce_shape(node, dims, ir::shape_args::bool_(node, "keepdim", false), DType::kInt64);
}

std::vector<RValue> kernel_argmax(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  if (self.dtype() == DType::kBool)
    ctx.fail("argmax is not defined for bool tensors", "a numeric dtype", "bool");
  std::vector<int64_t> dims;
  if (ctx.has("dim")) dims = {ctx.int_arg("dim")};
  auto mask = reduce_mask(dims, self.dim(), ctx.where());
  ReducePlan p = plan_reduce(self, mask, ctx.bool_arg("keepdim", false));
  if (p.group_size == 0 && p.groups > 0)
    ctx.fail("argmax(): expected reduction dim to have non-zero size", "a non-empty reduction",
             "0 elements");
  Tensor out = Tensor::empty(p.out_sizes, DType::kInt64);
  ANVIL_DISPATCH_REAL(self.dtype(), ctx.where(), T, {
    using C = CmpType<T>;
    std::vector<C> best(static_cast<size_t>(p.groups));
    int64_t* idx = out.data<int64_t>();
    const T* in = static_cast<const T*>(p.moved.data_ptr());
    for_each_grouped(p, [&](int64_t g, int64_t j, int64_t off) {
      const C v = static_cast<C>(in[off]);
      const bool take = j == 0 || (!is_nan_value(best[g]) && (is_nan_value(v) || v > best[g]));
      if (take) {
        best[g] = v;
        idx[g] = j;
      }
    });
  });
  return {out};
}

// ---- any.dim: bool result (uint8 input gives uint8, like torch).

std::vector<TensorType> shape_any_dim(const Node& node) {
  const TensorType& in = ir::shape_args::type(node, "self");
  return reduce_shape(node, {ir::shape_args::int_(node, "dim")},
                      ir::shape_args::bool_(node, "keepdim", false),
                      in.dtype == DType::kUInt8 ? DType::kUInt8 : DType::kBool);
}

std::vector<RValue> kernel_any_dim(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  auto mask = reduce_mask({ctx.int_arg("dim")}, self.dim(), ctx.where());
  ReducePlan p = plan_reduce(self.to(DType::kBool), mask, ctx.bool_arg("keepdim", false));
  Tensor out = Tensor::empty(p.out_sizes, DType::kBool);
  bool* o = out.data<bool>();
  const bool* in = static_cast<const bool*>(p.moved.data_ptr());
  for_each_grouped(p, [&](int64_t g, int64_t, int64_t off) { o[g] = o[g] || in[off]; });
  return {self.dtype() == DType::kUInt8 ? out.to(DType::kUInt8) : out};
}

// ---- cumsum: integral and bool inputs give int64 unless dtype is given.

std::vector<TensorType> shape_cumsum(const Node& node) { return shape_scan(node); }

std::vector<RValue> kernel_cumsum(KernelContext& ctx) {
  return scan_kernel<0>(ctx, [](auto acc, auto x) {
    using Acc = decltype(acc);
    return static_cast<Acc>(acc + static_cast<Acc>(static_cast<CmpType<decltype(x)>>(x)));
  });
}

// ---- diff: n-th forward difference along dim, after concatenating prepend / append. Bool
// tensors use logical xor, like torch.

namespace {

/// Result dtype of diff: the promotion of self, prepend and append.
DType diff_dtype(DType self, std::optional<DType> pre, std::optional<DType> app) {
  DType dt = self;
  if (pre) dt = promote_types(dt, *pre);
  if (app) dt = promote_types(dt, *app);
  return dt;
}

}  // namespace

std::vector<TensorType> shape_diff(const Node& node) {
  namespace sa = ir::shape_args;
  const TensorType& in = sa::type(node, "self");
  const std::string where = node_where(node);
  if (in.sizes.empty())
    sa::fail(node, "diff expects a tensor with at least one dimension", "rank >= 1", "rank 0");
  const int64_t n = sa::int_(node, "n", 1);
  if (n < 0) sa::fail(node, "diff expects n to be non-negative", "n >= 0", std::to_string(n));
  const int64_t dim =
      wrap_dim(sa::int_(node, "dim", -1), static_cast<int64_t>(in.sizes.size()), where);
  TensorType out = in;
  out.strides.clear();
  SymInt len = in.sizes[dim];
  std::optional<DType> pre, app;
  for (const char* name : {"prepend", "append"}) {
    if (!sa::has(node, name)) continue;
    const TensorType& t = sa::type(node, name);
    if (t.sizes.size() != in.sizes.size())
      sa::fail(node, str("diff expects ", name, " to have the same rank as self"),
               std::to_string(in.sizes.size()), std::to_string(t.sizes.size()));
    len = len + t.sizes[dim];
    (std::string(name) == "prepend" ? pre : app) = t.dtype;
  }
  len = len - SymInt(n);
  if (len.is_constant() && len.constant() < 0) len = SymInt(0);
  out.sizes[dim] = len;
  out.dtype = diff_dtype(in.dtype, pre, app);
  return {out};
}

std::vector<RValue> kernel_diff(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  if (self.dim() == 0)
    ctx.fail("diff expects a tensor with at least one dimension", "rank >= 1", "rank 0");
  const int64_t n = ctx.int_arg("n", 1);
  if (n < 0) ctx.fail("diff expects n to be non-negative", "n >= 0", std::to_string(n));
  const int64_t dim = wrap_dim(ctx.int_arg("dim", -1), self.dim(), ctx.where());
  auto pre = ctx.opt_tensor("prepend");
  auto app = ctx.opt_tensor("append");
  const DType dt = diff_dtype(self.dtype(), pre ? std::optional(pre->dtype()) : std::nullopt,
                              app ? std::optional(app->dtype()) : std::nullopt);
  // Concatenate prepend, self, append along dim into one contiguous tensor of dtype dt.
  std::vector<Tensor> parts;
  for (const auto& t : {pre, std::optional<Tensor>(self), app}) {
    if (!t) continue;
    if (t->dim() != self.dim())
      ctx.fail("diff expects prepend/append to have the same rank as self",
               std::to_string(self.dim()), std::to_string(t->dim()));
    for (int64_t d = 0; d < self.dim(); ++d)
      if (d != dim && t->size(d) != self.size(d))
        ctx.fail(str("diff: prepend/append size mismatch at dim ", d), shape_str(self.sizes()),
                 shape_str(t->sizes()));
    parts.push_back(*t);
  }
  Shape cat_sizes = self.sizes();
  cat_sizes[dim] = 0;
  for (const Tensor& t : parts) cat_sizes[dim] += t.size(dim);
  Tensor cur = Tensor::empty(cat_sizes, dt);
  int64_t at = 0;
  for (const Tensor& t : parts) {
    cur.slice(dim, at, at + t.size(dim)).copy_from(t);
    at += t.size(dim);
  }
  for (int64_t step = 0; step < n; ++step) {
    const int64_t len = cur.size(dim);
    if (len == 0) break;
    Tensor hi = cur.slice(dim, 1, len), lo = cur.slice(dim, 0, len - 1);
    Tensor next = Tensor::empty(hi.sizes(), dt);
    ANVIL_DISPATCH_REAL(dt, ctx.where(), T, {
      std::vector<int64_t> lo_off;
      lo_off.reserve(static_cast<size_t>(lo.numel()));
      for_each_offset(lo.sizes(), lo.strides(), [&](int64_t off) { lo_off.push_back(off); });
      const T* ph = static_cast<const T*>(hi.data_ptr());
      const T* pl = static_cast<const T*>(lo.data_ptr());
      T* o = next.data<T>();
      size_t k = 0;
      for_each_offset(hi.sizes(), hi.strides(), [&](int64_t off) {
        const T a = ph[off], b = pl[lo_off[k]];
        if constexpr (std::is_same_v<T, bool>) {
          o[k] = a != b;
        } else {
          o[k] = cast_value<T, CmpType<T>>(static_cast<CmpType<T>>(a) - static_cast<CmpType<T>>(b));
        }
        ++k;
      });
    });
    cur = next;
  }
  return {cur};
}

// ---- linalg_vector_norm(self, ord=2, dim=None, keepdim=False, dtype=None): the p-norm of
// |x| over `dim` (every dim when None), accumulated in double: ord inf / -inf give max / min
// |x|, 0 the count of non-zeros, other p (sum |x|^p)^(1/p). Floating inputs only (PyTorch
// refuses integers); `dtype` casts the input first. The compiler decomposes it into abs, pow,
// sum / amax / amin and sqrt (passes/decompose_loss.cpp).

namespace {

DType vector_norm_dtype(DType in, std::optional<DType> want, const std::string& where) {
  if (!is_floating(in))
    throw Error("linalg.vector_norm expects a floating point input", where,
                "a float16 / bfloat16 / float32 / float64 tensor", dtype_name(in));
  if (want && !is_floating(*want))
    throw Error("linalg.vector_norm dtype must be floating", where, "a floating dtype",
                dtype_name(*want));
  return want ? *want : in;
}

}  // namespace

std::vector<TensorType> shape_linalg_vector_norm(const Node& node) {
  const TensorType& in = ir::shape_args::type(node, "self");
  if (ir::shape_args::has(node, "ord")) ir::shape_args::float_(node, "ord");
  return reduce_shape(node, static_ints(node, "dim", {}),
                      ir::shape_args::bool_(node, "keepdim", false),
                      vector_norm_dtype(in.dtype, ir::shape_args::dtype(node, "dtype"),
                                        node_where(node)));
}

std::vector<RValue> kernel_linalg_vector_norm(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const DType rt = vector_norm_dtype(self.dtype(), ctx.dtype_arg("dtype"), ctx.where());
  const double ord = ctx.float_arg("ord", 2.0);
  auto mask = reduce_mask(kernel_dims(ctx), self.dim(), ctx.where());
  const Tensor x = self.to(rt).to(DType::kFloat64);
  ReducePlan p = plan_reduce(x, mask, ctx.bool_arg("keepdim", false));
  if (p.group_size == 0 && p.groups > 0 && (ord < 0 || std::isinf(ord)))
    ctx.fail("linalg.vector_norm of an empty reduction with ord < 0 or inf",
             "a non-empty reduction", "0 elements");
  const bool inf = std::isinf(ord) && ord > 0, ninf = std::isinf(ord) && ord < 0;
  std::vector<double> acc(static_cast<size_t>(p.groups), inf ? 0.0 : ninf ? INFINITY : 0.0);
  const double* data = p.moved.data<double>();
  for_each_grouped(p, [&](int64_t g, int64_t, int64_t off) {
    const double a = std::fabs(data[off]);
    double& r = acc[static_cast<size_t>(g)];
    if (std::isnan(a) || std::isnan(r)) {
      r = NAN;
    } else if (inf) {
      r = std::max(r, a);
    } else if (ninf) {
      r = std::min(r, a);
    } else if (ord == 0) {
      r += a != 0;
    } else if (ord == 1) {
      r += a;
    } else if (ord == 2) {
      r += a * a;
    } else {
      r += std::pow(a, ord);
    }
  });
  for (double& r : acc) {
    if (ord == 2) r = std::sqrt(r);
    else if (!inf && !ninf && ord != 0 && ord != 1) r = std::pow(r, 1.0 / ord);
  }
  Tensor out = Tensor::from_vector(acc, p.out_sizes);
  return {out.to(rt)};
}

}  // namespace anvil::ops
