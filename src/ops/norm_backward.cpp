// Normalisations in training exports: native_layer_norm_backward and native_group_norm_backward
// (each of grad_input / grad_weight / grad_bias only where output_mask asks), and training-mode
// batch norm with batch statistics: _native_batch_norm_legit (.default, which also updates
// running_mean / running_var in place, and .no_stats), _native_batch_norm_legit_functional
// (run_decompositions()' form: the updated running statistics as outputs 3 and 4) and
// batch_norm.default with training=True (what torch.export of a BatchNorm module in train()
// keeps; norm.cpp calls batch_norm_train here).
//
// Gradients, from y = xhat * w + b with xhat = (x - mean) * rstd over each normalised group of
// M elements: dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w * xhat)), dw = sum g * xhat and
// db = sum g over the other dims. Batch statistics: the biased variance normalises; the running
// variance takes the unbiased one (n / (n - 1)), running = (1 - momentum) * running + momentum *
// batch. Reference kernels compute in double and round once; the compiler decomposes every op
// here into reductions and pointwise ops (passes/decompose_norm_backward.cpp).
#include <cmath>

#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
namespace sa = ir::shape_args;

namespace {

/// A type like `like` with `sizes` (strides cleared).
TensorType with_sizes(const TensorType& like, std::vector<SymInt> sizes) {
  TensorType t = like;
  t.sizes = std::move(sizes);
  t.strides.clear();
  return t;
}

/// The bool[3] output_mask (all true when absent).
std::vector<bool> output_mask(const Node& node) {
  const ir::Arg* a = node.arg("output_mask");
  if (!a || a->kind != ir::Arg::Kind::kBools) return {true, true, true};
  if (a->bools.size() != 3)
    sa::fail(node, "output_mask must have 3 values", "bool[3]", str(a->bools.size(), " values"));
  return a->bools;
}

/// Checks that tensor argument `name` is floating with dtype `dt` and `numel` elements (when
/// static; -1: any).
void check_param(const Node& node, const char* name, DType dt, const SymInt& numel) {
  if (!sa::has(node, name)) return;
  const TensorType& t = sa::type(node, name);
  SymInt n = 1;
  for (const SymInt& s : t.sizes) n = n * s;
  if (!is_floating(t.dtype) || (n.is_constant() && numel.is_constant() && n != numel))
    sa::fail(node, str(name, " must be floating with ", numel.str(), " elements"),
             str(dtype_name(dt), " with ", numel.str(), " elements"), t.str());
}

/// The gradients of one normalisation over `groups` rows of `per` elements laid out as
/// [outer][group][per] (layer norm: outer 1; group norm: outer N); the affine parameter of
/// element (group, i) is param(group, i) (-1: none). Fills dx, and accumulates dw / db per
/// parameter index.
template <typename P>
void norm_grads(int64_t rows, int64_t per, const double* g, const double* x, const double* mean,
                const double* rstd, const double* w, P&& param, double* dx, double* dw,
                double* db) {
  for (int64_t r = 0; r < rows; ++r) {
    const double* gr = g + r * per;
    const double* xr = x + r * per;
    double a = 0, b = 0;
    for (int64_t i = 0; i < per; ++i) {
      const int64_t k = param(r, i);
      const double xhat = (xr[i] - mean[r]) * rstd[r];
      const double gw = gr[i] * (w && k >= 0 ? w[k] : 1.0);
      a += gw;
      b += gw * xhat;
      if (k >= 0) {
        dw[k] += gr[i] * xhat;
        db[k] += gr[i];
      }
    }
    a /= static_cast<double>(per);
    b /= static_cast<double>(per);
    for (int64_t i = 0; i < per; ++i) {
      const int64_t k = param(r, i);
      const double xhat = (xr[i] - mean[r]) * rstd[r];
      const double gw = gr[i] * (w && k >= 0 ? w[k] : 1.0);
      dx[r * per + i] = rstd[r] * (gw - a - xhat * b);
    }
  }
}

/// A contiguous double copy of `t`.
Tensor doubles(const Tensor& t) { return t.contiguous().to(DType::kFloat64, true); }

/// The masked results: dx in x's dtype, dw / db in the parameters' dtype (`pdt`).
std::vector<RValue> masked(const std::vector<bool>& mask, const Tensor& dx, const Tensor& dw,
                           const Tensor& db, DType xdt, DType pdt) {
  std::vector<RValue> out(3);
  if (mask[0]) out[0] = dx.to(xdt);
  if (mask[1]) out[1] = dw.to(pdt);
  if (mask[2]) out[2] = db.to(pdt);
  return out;
}

}  // namespace

// ---- native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
// output_mask)

std::vector<TensorType> shape_native_layer_norm_backward(const Node& node) {
  const TensorType& g = sa::type(node, "grad_out");
  const TensorType& x = sa::type(node, "input");
  const std::vector<SymInt> norm = sa::symints(node, "normalized_shape");
  output_mask(node);
  if (!is_floating(x.dtype) || g.dtype != x.dtype || !(g.sizes == x.sizes))
    sa::fail(node, "grad_out must be floating with the input's dtype and sizes", x.str(), g.str());
  if (norm.empty() || norm.size() > x.sizes.size())
    sa::fail(node, "normalized_shape must name 1 to rank trailing dims", "1 to rank values",
             sym_shape_str(norm));
  const size_t axis = x.sizes.size() - norm.size();
  SymInt rows = 1, per = 1;
  for (size_t d = 0; d < x.sizes.size(); ++d) {
    if (d >= axis && !(x.sizes[d] == norm[d - axis]))
      sa::fail(node, "normalized_shape does not match the input's trailing dims",
               sym_shape_str(norm), x.str());
    (d < axis ? rows : per) = (d < axis ? rows : per) * x.sizes[d];
  }
  for (const char* stat : {"mean", "rstd"}) check_param(node, stat, x.dtype, rows);
  check_param(node, "weight", x.dtype, per);
  check_param(node, "bias", x.dtype, per);
  return {with_sizes(x, x.sizes), with_sizes(x, norm), with_sizes(x, norm)};
}

std::vector<RValue> kernel_native_layer_norm_backward(KernelContext& ctx) {
  const Tensor& g = ctx.tensor("grad_out");
  const Tensor& x = ctx.tensor("input");
  const std::vector<int64_t> norm = ctx.ints("normalized_shape");
  if (!is_floating(x.dtype()) || g.dtype() != x.dtype() || g.sizes() != x.sizes())
    ctx.fail("grad_out must be floating with the input's dtype and sizes", x.type_str(),
             g.type_str());
  if (norm.empty() || norm.size() > static_cast<size_t>(x.dim()))
    ctx.fail("normalized_shape must name 1 to rank trailing dims", "1 to rank values",
             shape_str(norm));
  const size_t axis = static_cast<size_t>(x.dim()) - norm.size();
  for (size_t d = axis; d < static_cast<size_t>(x.dim()); ++d)
    if (x.size(static_cast<int64_t>(d)) != norm[d - axis])
      ctx.fail("normalized_shape does not match the input's trailing dims", shape_str(norm),
               x.type_str());
  const int64_t per = shape_numel(norm), rows = per ? x.numel() / per : 0;
  const Tensor mean = doubles(ctx.tensor("mean")), rstd = doubles(ctx.tensor("rstd"));
  if (mean.numel() != rows || rstd.numel() != rows)
    ctx.fail("mean and rstd must have one value per normalised row", str(rows, " values"),
             str(mean.numel(), " and ", rstd.numel()));
  const auto wt = ctx.opt_tensor("weight");
  if (wt && wt->numel() != per)
    ctx.fail("weight must have normalized_shape's elements", str(per), wt->type_str());
  const Tensor w = wt ? doubles(*wt) : Tensor();
  const Tensor gd = doubles(g), xd = doubles(x);
  Tensor dx = Tensor::zeros(x.sizes(), DType::kFloat64);
  Tensor dw = Tensor::zeros(Shape(norm.begin(), norm.end()), DType::kFloat64);
  Tensor db = Tensor::zeros(Shape(norm.begin(), norm.end()), DType::kFloat64);
  norm_grads(
      rows, per, gd.data<double>(), xd.data<double>(), mean.data<double>(), rstd.data<double>(),
      wt ? w.data<double>() : nullptr, [](int64_t, int64_t i) { return i; }, dx.data<double>(),
      dw.data<double>(), db.data<double>());
  return masked(output_mask(ctx.node()), dx, dw, db, x.dtype(), wt ? wt->dtype() : x.dtype());
}

// ---- native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group,
// output_mask)

std::vector<TensorType> shape_native_group_norm_backward(const Node& node) {
  const TensorType& g = sa::type(node, "grad_out");
  const TensorType& x = sa::type(node, "input");
  output_mask(node);
  if (x.sizes.size() < 2)
    sa::fail(node, "group_norm needs an (N, C, *) input", "rank >= 2", x.str());
  if (!is_floating(x.dtype) || g.dtype != x.dtype || !(g.sizes == x.sizes))
    sa::fail(node, "grad_out must be floating with the input's dtype and sizes", x.str(), g.str());
  const int64_t groups = sa::int_(node, "group");
  const SymInt c = sa::symint(node, "C");
  if (groups <= 0)
    sa::fail(node, "group_norm needs a positive group count", "group > 0", str(groups));
  if (!(c == x.sizes[1]))
    sa::fail(node, "native_group_norm_backward: C does not match the input", x.sizes[1].str(),
             c.str());
  if (auto cc = c.maybe_constant(); cc && *cc % groups != 0)
    sa::fail(node, "group_norm: channels must be divisible by the group count", "C % group == 0",
             str("C = ", *cc, ", group = ", groups));
  for (const char* stat : {"mean", "rstd"})
    check_param(node, stat, x.dtype, x.sizes[0] * SymInt(groups));
  check_param(node, "weight", x.dtype, c);
  return {with_sizes(x, x.sizes), with_sizes(x, {c}), with_sizes(x, {c})};
}

std::vector<RValue> kernel_native_group_norm_backward(KernelContext& ctx) {
  const Tensor& g = ctx.tensor("grad_out");
  const Tensor& x = ctx.tensor("input");
  const int64_t groups = ctx.int_arg("group");
  if (x.dim() < 2 || !is_floating(x.dtype()) || g.dtype() != x.dtype() || g.sizes() != x.sizes())
    ctx.fail("grad_out and input must be floating (N, C, *) tensors of one dtype and size",
             x.type_str(), g.type_str());
  const int64_t n = x.size(0), c = x.size(1);
  if (groups <= 0 || c % groups != 0 || ctx.int_arg("C") != c || ctx.int_arg("N") != n)
    ctx.fail("N, C and group must describe the input (C divisible by group)",
             str("N = ", n, ", C = ", c),
             str("N = ", ctx.int_arg("N"), ", C = ", ctx.int_arg("C"), ", group = ", groups));
  const int64_t spatial = n * c ? x.numel() / (n * c) : 0, cg = c / groups;
  const Tensor mean = doubles(ctx.tensor("mean")), rstd = doubles(ctx.tensor("rstd"));
  if (mean.numel() != n * groups || rstd.numel() != n * groups)
    ctx.fail("mean and rstd must be (N, group)", str(n * groups, " values"),
             str(mean.numel(), " and ", rstd.numel()));
  const auto wt = ctx.opt_tensor("weight");
  if (wt && wt->numel() != c) ctx.fail("weight must have C values", str(c), wt->type_str());
  const Tensor w = wt ? doubles(*wt) : Tensor();
  const Tensor gd = doubles(g), xd = doubles(x);
  Tensor dx = Tensor::zeros(x.sizes(), DType::kFloat64);
  Tensor dw = Tensor::zeros({c}, DType::kFloat64), db = Tensor::zeros({c}, DType::kFloat64);
  norm_grads(
      n * groups, cg * spatial, gd.data<double>(), xd.data<double>(), mean.data<double>(),
      rstd.data<double>(), wt ? w.data<double>() : nullptr,
      [&](int64_t r, int64_t i) { return (r % groups) * cg + i / spatial; }, dx.data<double>(),
      dw.data<double>(), db.data<double>());
  return masked(output_mask(ctx.node()), dx, dw, db, x.dtype(), wt ? wt->dtype() : x.dtype());
}

// ---- training-mode batch norm

namespace {

/// Checks a training batch norm's input, weight / bias and (when `stats`) running statistics.
TensorType check_batch_norm_train(const Node& node, bool stats) {
  const TensorType& x = sa::type(node, "input");
  if (x.sizes.size() < 2)
    sa::fail(node, "batch_norm needs an input of rank >= 2 (N, C, ...)", "rank >= 2", x.str());
  if (!is_floating(x.dtype) || is_float8(x.dtype))
    sa::fail(node, "batch_norm needs a floating input", "a floating dtype", dtype_name(x.dtype));
  if (!sa::bool_(node, "training", true))
    sa::fail(node,
             "this batch norm form computes batch statistics: use "
             "_native_batch_norm_legit_no_training for inference",
             "training=True", "training=False");
  for (const char* p : {"weight", "bias"}) check_param(node, p, x.dtype, x.sizes[1]);
  if (stats)
    for (const char* p : {"running_mean", "running_var"}) {
      if (!sa::has(node, p)) sa::fail(node, str(p, " is required"), "a tensor", "None");
      check_param(node, p, x.dtype, x.sizes[1]);
    }
  return x;
}

/// Batch statistics of `x` (N, C, *): normalised output in x's dtype and layout, the per-channel
/// mean and 1/sqrt(var + eps), and the unbiased variance for the running statistics.
struct BatchNormTrain {
  Tensor out, mean, invstd;
  std::vector<double> mean_v, var_unbiased;
};

BatchNormTrain batch_norm_train_impl(const KernelContext& ctx, const Tensor& x, double eps) {
  if (x.dim() < 2 || !is_floating(x.dtype()))
    ctx.fail("batch_norm needs a floating input of rank >= 2 (N, C, ...)", "rank >= 2, floating",
             x.type_str());
  const int64_t n = x.size(0), c = x.size(1), sp = n * c ? x.numel() / (n * c) : 0;
  const int64_t count = n * sp;
  if (count <= 1)
    ctx.fail("batch_norm in training needs more than one value per channel", "N * spatial > 1",
             x.type_str());
  const Tensor xd = doubles(x);
  const double* px = xd.data<double>();
  std::vector<double> w(static_cast<size_t>(c), 1.0), b(static_cast<size_t>(c), 0.0);
  for (const char* p : {"weight", "bias"})
    if (auto t = ctx.opt_tensor(p)) {
      if (t->numel() != c)
        ctx.fail(str(p, " must have one value per channel"), str(c), t->type_str());
      (p[0] == 'w' ? w : b) = t->to_doubles();
    }
  BatchNormTrain r;
  std::vector<double> inv(static_cast<size_t>(c));
  r.mean_v.assign(static_cast<size_t>(c), 0.0);
  r.var_unbiased.assign(static_cast<size_t>(c), 0.0);
  Tensor out = Tensor::empty(x.sizes(), DType::kFloat64);
  double* po = out.data<double>();
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean = 0, var = 0;
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < sp; ++i) mean += px[(s * c + ch) * sp + i];
    mean /= static_cast<double>(count);
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < sp; ++i) {
        const double d = px[(s * c + ch) * sp + i] - mean;
        var += d * d;
      }
    const size_t k = static_cast<size_t>(ch);
    inv[k] = 1.0 / std::sqrt(var / static_cast<double>(count) + eps);
    r.mean_v[k] = mean;
    r.var_unbiased[k] = var / static_cast<double>(count - 1);
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < sp; ++i) {
        const int64_t at = (s * c + ch) * sp + i;
        po[at] = (px[at] - mean) * inv[k] * w[k] + b[k];
      }
  }
  r.out = channels_last_like(out.to(x.dtype()), x);
  r.mean = Tensor::from_vector(r.mean_v, {c}).to(x.dtype());
  r.invstd = Tensor::from_vector(inv, {c}).to(x.dtype());
  return r;
}

/// (1 - momentum) * running + momentum * batch, in running's dtype.
Tensor updated(const Tensor& running, const std::vector<double>& batch, double momentum,
               const KernelContext& ctx, const char* name) {
  if (running.numel() != static_cast<int64_t>(batch.size()))
    ctx.fail(str(name, " must have one value per channel"), str(batch.size()), running.type_str());
  std::vector<double> v = running.contiguous().to_doubles();
  for (size_t i = 0; i < v.size(); ++i) v[i] = (1 - momentum) * v[i] + momentum * batch[i];
  return Tensor::from_vector(v, running.sizes()).to(running.dtype());
}

/// The shape rule's outputs: (out, save_mean [C], save_invstd [C]).
std::vector<TensorType> train_types(const TensorType& x) {
  return {with_sizes(x, x.sizes), with_sizes(x, {x.sizes[1]}), with_sizes(x, {x.sizes[1]})};
}

}  // namespace

/// batch_norm.default with training=True (norm.cpp): the output with batch statistics; given
/// running statistics are updated in place, as PyTorch's kernel does.
Tensor batch_norm_train(const KernelContext& ctx) {
  const Tensor& x = ctx.tensor("input");
  BatchNormTrain r = batch_norm_train_impl(ctx, x, ctx.float_arg("eps"));
  const double m = ctx.float_arg("momentum");
  if (auto rm = ctx.opt_tensor("running_mean"))
    rm->copy_from(updated(*rm, r.mean_v, m, ctx, "running_mean"));
  if (auto rv = ctx.opt_tensor("running_var"))
    rv->copy_from(updated(*rv, r.var_unbiased, m, ctx, "running_var"));
  return r.out;
}

std::vector<TensorType> shape_native_batch_norm_legit(const Node& node) {
  return train_types(check_batch_norm_train(node, true));
}

// .default: also writes the new running statistics into running_mean / running_var.
std::vector<RValue> kernel_native_batch_norm_legit(KernelContext& ctx) {
  check_batch_norm_train(ctx.node(), true);
  const Tensor& x = ctx.tensor("input");
  BatchNormTrain r = batch_norm_train_impl(ctx, x, ctx.float_arg("eps"));
  const double m = ctx.float_arg("momentum");
  const Tensor& rm = ctx.tensor("running_mean");
  const Tensor& rv = ctx.tensor("running_var");
  Tensor new_rm = updated(rm, r.mean_v, m, ctx, "running_mean");
  Tensor new_rv = updated(rv, r.var_unbiased, m, ctx, "running_var");
  Tensor(rm).copy_from(new_rm);
  Tensor(rv).copy_from(new_rv);
  return {r.out, r.mean, r.invstd};
}

std::vector<TensorType> shape_native_batch_norm_legit_no_stats(const Node& node) {
  return train_types(check_batch_norm_train(node, false));
}

std::vector<RValue> kernel_native_batch_norm_legit_no_stats(KernelContext& ctx) {
  check_batch_norm_train(ctx.node(), false);
  BatchNormTrain r = batch_norm_train_impl(ctx, ctx.tensor("input"), ctx.float_arg("eps"));
  return {r.out, r.mean, r.invstd};
}

std::vector<TensorType> shape_native_batch_norm_legit_functional(const Node& node) {
  const TensorType x = check_batch_norm_train(node, true);
  std::vector<TensorType> t = train_types(x);
  t.push_back(with_sizes(sa::type(node, "running_mean"), sa::type(node, "running_mean").sizes));
  t.push_back(with_sizes(sa::type(node, "running_var"), sa::type(node, "running_var").sizes));
  return t;
}

// The functional form: the running statistics' new values as outputs 3 and 4.
std::vector<RValue> kernel_native_batch_norm_legit_functional(KernelContext& ctx) {
  check_batch_norm_train(ctx.node(), true);
  BatchNormTrain r = batch_norm_train_impl(ctx, ctx.tensor("input"), ctx.float_arg("eps"));
  const double m = ctx.float_arg("momentum");
  return {r.out, r.mean, r.invstd,
          updated(ctx.tensor("running_mean"), r.mean_v, m, ctx, "running_mean"),
          updated(ctx.tensor("running_var"), r.var_unbiased, m, ctx, "running_var")};
}

}  // namespace anvil::ops
