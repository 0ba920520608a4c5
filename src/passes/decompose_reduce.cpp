// Decompositions of reductions with several results or a composite formula into ops the
// lowering fuses (run by decompose_losses, decompose_loss.cpp): max.dim / min.dim into amax /
// amin plus argmax / argmin; var / std / var_mean / std_mean into a mean, the squared deviations,
// their sum and a division by max(0, N - correction); logsumexp into amax, exp, sum and log with
// an infinite maximum taken as 0; native_group_norm into grouped views, means and the affine;
// native_dropout (inference) into a copy and an all-True mask. The op's shape rule runs first, so bad arguments give the
// interpreter's errors.
#include <cmath>

#include "core/error.h"
#include "passes/decompose_util.h"

namespace anvil::passes::detail {

namespace {

namespace sa = ir::shape_args;

/// The reduction dims of argument `name` normalised against `rank` (absent, None or []: every
/// dim).
std::vector<int64_t> dims_of(const ir::Node& n, const std::string& name, int64_t rank) {
  std::vector<int64_t> dims;
  if (sa::has(n, name))
    for (const SymInt& d : sa::symints(n, name)) {
      int64_t v = d.constant();
      if (v < 0) v += std::max<int64_t>(rank, 1);
      dims.push_back(v);
    }
  if (dims.empty())
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  return dims;
}

/// True for f16 / bf16, which the decompositions compute in float32 (PyTorch's opmath).
bool is_half(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

/// x converted to `dt` (x itself when it has that dtype).
ir::Value* cast(Emitter& e, ir::Value* x, DType dt, int out = -1) {
  if (x->type.dtype == dt && out < 0) return x;
  return e.op_out("aten._to_copy.default", {tensor_arg("self", x), dtype_arg("dtype", dt, true)},
                  out);
}

/// max.dim / min.dim: values = amax / amin, indices = argmax / argmin (both take NaN as the
/// extreme, argmax / argmin at its first occurrence).
std::vector<ir::Value*> minmax_dim(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  n.schema->shape(n);
  const bool is_max = n.target == "aten.max.dim";
  ir::Value* x = in(n.arg("self")->value);
  const int64_t dim = sa::int_(n, "dim");
  const bool keep = sa::bool_(n, "keepdim", false);
  Emitter e(g, n);
  ir::Value* v = e.op_out(is_max ? "aten.amax.default" : "aten.amin.default",
                          {tensor_arg("self", x), ints_arg("dim", {dim}), bool_arg("keepdim", keep)},
                          0);
  ir::Value* i = e.op_out(is_max ? "aten.argmax.default" : "aten.argmin.default",
                          {tensor_arg("self", x), int_arg("dim", dim), bool_arg("keepdim", keep)},
                          1);
  return {v, i};
}

/// var / std (and with the mean): sum((x - mean)^2) / max(0, N - correction), its sqrt for std.
std::vector<ir::Value*> moments(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  const std::vector<ir::TensorType> types = n.schema->shape(n);
  const std::string& t = n.target;
  const bool is_std = t.rfind("aten.std", 0) == 0;
  const bool with_mean = t.find("_mean.") != std::string::npos;
  ir::Value* x = in(n.arg("self")->value);
  const int64_t rank = static_cast<int64_t>(x->type.sizes.size());
  const std::vector<int64_t> dims = dims_of(n, "dim", rank);
  double correction = 1;
  if (sa::has(n, "unbiased")) correction = sa::bool_(n, "unbiased", true) ? 1 : 0;
  if (sa::has(n, "correction")) correction = sa::float_(n, "correction");
  const bool keep = sa::bool_(n, "keepdim", false);
  int64_t count = 1;
  for (int64_t d : dims) {
    if (rank == 0) break;
    const SymInt& s = x->type.sizes[static_cast<size_t>(d)];
    if (!s.is_constant())
      throw Error("var / std over a symbolic size is not supported by the compiler",
                  "node " + n.name + " (" + n.target + ")", "static reduced sizes",
                  sym_shape_str(x->type.sizes));
    count *= s.constant();
  }
  const DType out = types[0].dtype;
  const bool half = is_half(out);
  Emitter e(g, n);
  if (half) x = cast(e, x, DType::kFloat32);
  std::vector<int64_t> rdims = rank == 0 ? std::vector<int64_t>{} : dims;
  auto mean = [&](ir::Value* v, bool keepdim, int o) {
    return e.op_out("aten.mean.dim",
                    {tensor_arg("self", v), ints_arg("dim", rdims), bool_arg("keepdim", keepdim)},
                    o);
  };
  ir::Value* mu = mean(x, true, -1);
  ir::Value* d = e.op("aten.sub.Tensor", {tensor_arg("self", x), tensor_arg("other", mu)});
  ir::Value* s = e.op("aten.sum.dim_IntList", {tensor_arg("self", e.mul(d, d)),
                                              ints_arg("dim", rdims), bool_arg("keepdim", keep)});
  const double denom = std::max(0.0, static_cast<double>(count) - correction);
  const bool last_var = !is_std && !half;
  ir::Value* var = e.op_out("aten.div.Scalar", {tensor_arg("self", s), float_arg("other", denom)},
                            last_var ? 0 : -1);
  if (is_std) var = e.op_out("aten.sqrt.default", {tensor_arg("self", var)}, half ? -1 : 0);
  if (half) var = cast(e, var, out, 0);
  std::vector<ir::Value*> outs = {var};
  if (with_mean) {
    ir::Value* m = mean(x, keep, half ? -1 : 1);
    outs.push_back(half ? cast(e, m, out, 1) : m);
  }
  return outs;
}

/// logsumexp(x, dim, keepdim) = log(sum(exp(x - m))) + m with m = amax(x) where it is finite,
/// else 0 (all -inf gives -inf, a +inf gives +inf; NaN propagates through amax).
std::vector<ir::Value*> logsumexp(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  const ir::TensorType out = n.schema->shape(n).at(0);
  ir::Value* x = in(n.arg("self")->value);
  const int64_t rank = static_cast<int64_t>(x->type.sizes.size());
  std::vector<int64_t> dims = rank == 0 ? std::vector<int64_t>{} : dims_of(n, "dim", rank);
  const bool keep = sa::bool_(n, "keepdim", false);
  const bool half = is_half(out.dtype);
  const DType work = half ? DType::kFloat32 : out.dtype;
  Emitter e(g, n);
  x = cast(e, x, work);
  auto shift = [&](bool keepdim) {
    ir::Value* m = e.op("aten.amax.default", {tensor_arg("self", x), ints_arg("dim", dims),
                                              bool_arg("keepdim", keepdim)});
    ir::Value* fin = e.op("aten.ne.Scalar",
                          {tensor_arg("self", e.op("aten.abs.default", {tensor_arg("self", m)})),
                           float_arg("other", INFINITY)});
    return e.where_zero(fin, m);
  };
  ir::Value* mk = shift(true);
  ir::Value* ex = e.op("aten.exp.default",
                       {tensor_arg("self", e.op("aten.sub.Tensor", {tensor_arg("self", x),
                                                                   tensor_arg("other", mk)}))});
  ir::Value* s = e.op("aten.sum.dim_IntList",
                      {tensor_arg("self", ex), ints_arg("dim", dims), bool_arg("keepdim", keep)});
  ir::Value* l = e.op("aten.log.default", {tensor_arg("self", s)});
  ir::Value* r = e.op_out("aten.add.Tensor",
                          {tensor_arg("self", l), tensor_arg("other", keep ? mk : shift(false))},
                          half ? -1 : 0);
  return {half ? cast(e, r, out.dtype, 0) : r};
}

/// native_group_norm(x, w, b, N, C, HxW, G, eps): x viewed as (N, G, -1), normalised over the
/// last dim (biased variance, float32 for 16-bit inputs), viewed back, scaled by w[c] and shifted
/// by b[c]; mean and rstd are the (N, G) statistics.
std::vector<ir::Value*> native_group_norm(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  const std::vector<ir::TensorType> types = n.schema->shape(n);
  ir::Value* x = in(n.arg("input")->value);
  const int64_t groups = sa::int_(n, "group");
  const double eps = sa::float_(n, "eps");
  const auto sizes = x->type.sizes;
  for (size_t d = 1; d < sizes.size(); ++d)
    if (!sizes[d].is_constant())
      throw Error("group_norm over a symbolic channel or spatial size is not supported by the "
                  "compiler", "node " + n.name + " (" + n.target + ")",
                  "static sizes after the batch dim", sym_shape_str(sizes));
  const DType out = types[0].dtype;
  const bool half = is_half(out);
  Emitter e(g, n);
  if (half) x = cast(e, x, DType::kFloat32);
  int64_t per_group = 1;
  for (size_t d = 1; d < sizes.size(); ++d) per_group *= sizes[d].constant();
  per_group /= groups;
  auto view = [&](ir::Value* v, std::vector<int64_t> to, int o = -1) {
    return e.op_out("aten.view.default", {tensor_arg("self", v), ints_arg("size", std::move(to))}, o);
  };
  auto mean = [&](ir::Value* v) {
    return e.op("aten.mean.dim",
                {tensor_arg("self", v), ints_arg("dim", {2}), bool_arg("keepdim", true)});
  };
  ir::Value* xr = view(x, {-1, groups, per_group});
  ir::Value* mu = mean(xr);
  ir::Value* d = e.op("aten.sub.Tensor", {tensor_arg("self", xr), tensor_arg("other", mu)});
  ir::Value* var = mean(e.mul(d, d));
  ir::Value* rstd = e.op("aten.rsqrt.default",
                         {tensor_arg("self", e.op("aten.add.Scalar", {tensor_arg("self", var),
                                                                      float_arg("other", eps)}))});
  std::vector<int64_t> back = {-1}, chan = {sizes[1].constant()};
  for (size_t k = 1; k < sizes.size(); ++k) back.push_back(sizes[k].constant());
  for (size_t k = 2; k < sizes.size(); ++k) chan.push_back(1);
  auto per_channel = [&](const char* name) -> ir::Value* {
    const ir::Arg* a = n.arg(name);
    if (!a || a->kind != ir::Arg::Kind::kTensor || !a->value) return nullptr;
    return view(in(a->value), chan);
  };
  ir::Value* w = per_channel("weight");
  ir::Value* b = per_channel("bias");
  const int last = half ? -1 : 0;
  ir::Value* y = view(e.mul(d, rstd), back, !w && !b ? last : -1);
  if (w) y = e.op_out("aten.mul.Tensor", {tensor_arg("self", y), tensor_arg("other", w)}, !b ? last : -1);
  if (b) y = e.op_out("aten.add.Tensor", {tensor_arg("self", y), tensor_arg("other", b)}, last);
  ir::Value* m2 = view(mu, {-1, groups}, half ? -1 : 1);
  ir::Value* r2 = view(rstd, {-1, groups}, half ? -1 : 2);
  if (half) return {cast(e, y, out, 0), cast(e, m2, out, 1), cast(e, r2, out, 2)};
  return {y, m2, r2};
}

/// native_dropout in inference: the input (a copy) and an all-True mask.
std::vector<ir::Value*> native_dropout(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  n.schema->shape(n);  // refuses training with p > 0
  ir::Value* x = in(n.arg("input")->value);
  Emitter e(g, n);
  ir::Value* y = e.op_out("aten.clone.default", {tensor_arg("self", x)}, 0);
  ir::Value* m = e.op_out("aten.ones_like.default",
                          {tensor_arg("self", x), dtype_arg("dtype", DType::kBool, true)}, 1);
  return {y, m};
}

}  // namespace

std::vector<ir::Value*> decompose_reduction(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  const std::string& t = n.target;
  if (t == "aten.max.dim" || t == "aten.min.dim") return minmax_dim(g, n, in);
  if (t.rfind("aten.var", 0) == 0 || t.rfind("aten.std", 0) == 0) return moments(g, n, in);
  if (t == "aten.logsumexp.default") return logsumexp(g, n, in);
  if (t == "aten.native_group_norm.default") return native_group_norm(g, n, in);
  if (t == "aten.native_dropout.default") return native_dropout(g, n, in);
  return {};
}

}  // namespace anvil::passes::detail
