// group_norm, native_group_norm and _weight_norm (rows under "group_norm.cpp" in ops.def). group_norm(input,
// num_groups, weight, bias, eps) normalises each (sample, group) over its C / G channels and all
// spatial positions (biased variance), then applies the per-channel affine; _weight_norm(v, g,
// dim) is v * (g / ||v||), the 2-norm taken over every dim but `dim` (all dims for dim -1), as
// torch.nn.utils.weight_norm exports it. Reference kernels compute in double and round once; the
// compiler decomposes both into views, reductions and pointwise ops (passes/decompose_loss.cpp).
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

/// Checks group_norm's arguments against `x`'s sizes; returns the group count.
int64_t check_group_norm(const Node& node, const TensorType& x) {
  if (x.sizes.size() < 2) sa::fail(node, "group_norm needs an (N, C, *) input", "rank >= 2", x.str());
  if (!is_floating(x.dtype)) sa::fail(node, "group_norm needs a floating input", "a floating dtype", dtype_name(x.dtype));
  const int64_t g = sa::int_(node, "num_groups");
  const SymInt& c = x.sizes[1];
  if (g <= 0) sa::fail(node, "group_norm needs a positive group count", "num_groups > 0", std::to_string(g));
  if (auto cc = c.maybe_constant(); cc && *cc % g != 0)
    sa::fail(node, "group_norm: channels must be divisible by num_groups",
             "C % num_groups == 0", str("C = ", *cc, ", num_groups = ", g));
  for (const char* name : {"weight", "bias"})
    if (sa::has(node, name)) {
      const TensorType& p = sa::type(node, name);
      if (p.sizes.size() != 1 || p.sizes[0] != c)
        sa::fail(node, str("group_norm ", name, " must have one value per channel"),
                 "[" + c.str() + "]", p.str());
    }
  return g;
}

}  // namespace

std::vector<TensorType> shape_group_norm(const Node& node) {
  TensorType t = sa::type(node, "input");
  check_group_norm(node, t);
  t.strides.clear();
  return {t};
}

namespace {

/// group_norm of `input` with `g` groups in double, rounded once to the input's dtype; also the
/// mean and 1/sqrt(var + eps) of each (sample, group), shaped (N, G), as native_group_norm
/// returns them.
std::vector<RValue> group_norm_impl(const KernelContext& ctx, const Tensor& input, int64_t g,
                                    double eps) {
  const Tensor x = input.contiguous().to(DType::kFloat64, true);
  const int64_t n = x.size(0), c = x.size(1), per_c = c && n ? x.numel() / (n * c) : 0;
  const int64_t group = c / g * per_c;  // elements of one (sample, group)
  std::vector<double> w(static_cast<size_t>(c), 1.0), b(static_cast<size_t>(c), 0.0);
  if (auto wt = ctx.opt_tensor("weight")) w = wt->to_doubles();
  if (auto bt = ctx.opt_tensor("bias")) b = bt->to_doubles();
  Tensor out = Tensor::empty(x.sizes(), DType::kFloat64);
  std::vector<double> means(static_cast<size_t>(n * g)), rstds(means.size());
  const double* px = x.data<double>();
  double* po = out.data<double>();
  for (int64_t s = 0; s < n * g; ++s) {
    const double* row = px + s * group;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < group; ++i) mean += row[i];
    mean /= static_cast<double>(std::max<int64_t>(group, 1));
    for (int64_t i = 0; i < group; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<double>(std::max<int64_t>(group, 1));
    const double inv = 1.0 / std::sqrt(var + eps);
    means[static_cast<size_t>(s)] = mean;
    rstds[static_cast<size_t>(s)] = inv;
    for (int64_t i = 0; i < group; ++i) {
      const int64_t ch = (s % g) * (c / g) + i / per_c;
      po[s * group + i] = (row[i] - mean) * inv * w[static_cast<size_t>(ch)] + b[static_cast<size_t>(ch)];
    }
  }
  const DType dt = input.dtype();
  return {channels_last_like(out.to(dt), input), Tensor::from_vector(means, {n, g}).to(dt),
          Tensor::from_vector(rstds, {n, g}).to(dt)};
}

}  // namespace

std::vector<RValue> kernel_group_norm(KernelContext& ctx) {
  const Tensor& input = ctx.tensor("input");
  const int64_t g = check_group_norm(ctx.node(), sa::type(ctx.node(), "input"));
  return {group_norm_impl(ctx, input, g, ctx.float_arg("eps", 1e-5))[0]};
}

// ---- native_group_norm(input, weight, bias, N, C, HxW, group, eps) -> (out, mean, rstd); mean
// and rstd are (N, group) in the input's dtype. N, C and HxW must describe the input.

namespace {

int64_t check_native_group_norm(const Node& node, const TensorType& x) {
  if (x.sizes.size() < 2) sa::fail(node, "native_group_norm needs an (N, C, *) input", "rank >= 2", x.str());
  if (!is_floating(x.dtype)) sa::fail(node, "group_norm needs a floating input", "a floating dtype", dtype_name(x.dtype));
  const int64_t g = sa::int_(node, "group");
  if (g <= 0) sa::fail(node, "group_norm needs a positive group count", "group > 0", std::to_string(g));
  const SymInt c = sa::symint(node, "C");
  if (c != x.sizes[1]) sa::fail(node, "native_group_norm: C does not match the input", x.sizes[1].str(), c.str());
  if (auto cc = c.maybe_constant(); cc && *cc % g != 0)
    sa::fail(node, "group_norm: channels must be divisible by the group count",
             "C % group == 0", str("C = ", *cc, ", group = ", g));
  return g;
}

}  // namespace

std::vector<TensorType> shape_native_group_norm(const Node& node) {
  TensorType t = sa::type(node, "input");
  const int64_t g = check_native_group_norm(node, t);
  t.strides.clear();
  TensorType stat = t;
  stat.sizes = {t.sizes[0], SymInt(g)};
  return {t, stat, stat};
}

std::vector<RValue> kernel_native_group_norm(KernelContext& ctx) {
  const int64_t g = check_native_group_norm(ctx.node(), sa::type(ctx.node(), "input"));
  return group_norm_impl(ctx, ctx.tensor("input"), g, ctx.float_arg("eps"));
}

// ---- _weight_norm(v, g, dim=0)

std::vector<TensorType> shape_weight_norm(const Node& node) {
  TensorType v = sa::type(node, "v");
  const TensorType& g = sa::type(node, "g");
  if (!is_floating(v.dtype)) sa::fail(node, "_weight_norm needs a floating v", "a floating dtype", dtype_name(v.dtype));
  const int64_t rank = static_cast<int64_t>(v.sizes.size());
  const int64_t dim = sa::int_(node, "dim", 0);
  if (dim != -1) wrap_dim(dim, rank, node_where(node));
  broadcast_sym_shapes(v.sizes, g.sizes, node_where(node));
  v.strides.clear();
  return {v};
}

std::vector<RValue> kernel_weight_norm(KernelContext& ctx) {
  const Tensor& v = ctx.tensor("v");
  const Tensor& g = ctx.tensor("g");
  shape_weight_norm(ctx.node());
  int64_t dim = ctx.int_arg("dim", 0);
  const Tensor x = v.contiguous().to(DType::kFloat64, true);
  const double* px = x.data<double>();
  Shape norm_sizes(static_cast<size_t>(x.dim()), 1);
  std::vector<double> norms;
  if (dim == -1) {
    double s = 0;
    for (int64_t i = 0; i < x.numel(); ++i) s += px[i] * px[i];
    norms = {std::sqrt(s)};
  } else {
    dim = wrap_dim(dim, x.dim(), ctx.where());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
    const int64_t k = x.size(dim);
    norms.assign(static_cast<size_t>(k), 0.0);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t i = 0; i < inner; ++i) {
          const double e = px[(o * k + j) * inner + i];
          norms[static_cast<size_t>(j)] += e * e;
        }
    for (double& s : norms) s = std::sqrt(s);
    norm_sizes[static_cast<size_t>(dim)] = k;
  }
  const Tensor norm = Tensor::from_vector(norms, dim == -1 ? Shape{} : norm_sizes);
  const Tensor gd = g.to(DType::kFloat64);
  Tensor scale = map2<double, double, double>(gd, norm, [](double a, double b) { return a / b; }, ctx.where());
  Tensor out = map2<double, double, double>(x, scale, [](double a, double b) { return a * b; }, ctx.where());
  return {out.to(v.dtype())};
}

}  // namespace anvil::ops
