// Decompositions of the norms into ops the lowering fuses (run by decompose_losses,
// decompose_loss.cpp): linalg_vector_norm into abs, pow / mul, sum / amax / amin and sqrt;
// group_norm into a grouped view, mean, variance and the per-channel affine; _weight_norm into
// v * (g / sqrt(sum v*v over every dim but `dim`)). The op's shape rule runs first, so bad
// arguments give the interpreter's errors.
#include <cmath>

#include "core/error.h"
#include "passes/decompose_util.h"

namespace anvil::passes::detail {

/// linalg_vector_norm(x, ord, dim, keepdim, dtype) as |x| reduced: amax / amin for ord inf /
/// -inf, the count of non-zeros for 0, sum for 1, sqrt(sum |x|*|x|) for 2, and
/// (sum |x|^p)^(1/p) otherwise. 16-bit floats compute in float32 (PyTorch's opmath) and the
/// result is rounded once.
ir::Value* decompose_vector_norm(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  const ir::TensorType out = n.schema->shape(n).at(0);  // validates with the interpreter's rules
  namespace sa = ir::shape_args;
  ir::Value* x = in(n.arg("self")->value);
  const double ord = sa::has(n, "ord") ? sa::float_(n, "ord") : 2.0;
  const bool keep = sa::bool_(n, "keepdim", false);
  const int64_t rank = static_cast<int64_t>(x->type.sizes.size());
  std::vector<int64_t> dims;
  if (sa::has(n, "dim"))
    for (const SymInt& d : sa::symints(n, "dim")) dims.push_back(d.constant());
  if (dims.empty())
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  const bool half = out.dtype == DType::kFloat16 || out.dtype == DType::kBFloat16;
  const DType work = half ? DType::kFloat32 : out.dtype;
  Emitter e(g, n);
  auto to = [&](ir::Value* v, DType dt, bool last) {
    return e.op("aten._to_copy.default", {tensor_arg("self", v), dtype_arg("dtype", dt, true)},
                last);
  };
  if (x->type.dtype != work) x = to(x, work, false);
  auto finish = [&](const std::string& target, std::vector<ir::Arg> args) {
    if (!half) return e.op(target, std::move(args), true);
    return to(e.op(target, std::move(args)), out.dtype, true);
  };
  auto reduce = [&](const std::string& target, ir::Value* v, bool last) {
    std::vector<ir::Arg> args = {tensor_arg("self", v), ints_arg("dim", dims),
                                 bool_arg("keepdim", keep)};
    return last ? finish(target, std::move(args)) : e.op(target, std::move(args));
  };
  if (ord == 0) {
    ir::Value* nz = e.op("aten.ne.Scalar", {tensor_arg("self", x), int_arg("other", 0)});
    return reduce("aten.sum.dim_IntList", to(nz, work, false), true);
  }
  ir::Value* a = e.op("aten.abs.default", {tensor_arg("self", x)});
  if (std::isinf(ord)) return reduce(ord > 0 ? "aten.amax.default" : "aten.amin.default", a, true);
  if (ord == 1) return reduce("aten.sum.dim_IntList", a, true);
  if (ord == 2)
    return finish("aten.sqrt.default",
                  {tensor_arg("self", reduce("aten.sum.dim_IntList", e.mul(a, a), false))});
  ir::Value* p =
      e.op("aten.pow.Tensor_Scalar", {tensor_arg("self", a), float_arg("exponent", ord)});
  return finish("aten.pow.Tensor_Scalar",
                {tensor_arg("self", reduce("aten.sum.dim_IntList", p, false)),
                 float_arg("exponent", 1.0 / ord)});
}

/// group_norm(x, G, w, b, eps): x viewed as (-1, G, C/G * spatial), normalised over the last
/// dim with its biased variance (in float32 for 16-bit inputs), viewed back and scaled by
/// w[c] / shifted by b[c] broadcast over the spatial dims.
ir::Value* decompose_group_norm(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  const ir::TensorType out = n.schema->shape(n).at(0);
  namespace sa = ir::shape_args;
  ir::Value* x = in(n.arg("input")->value);
  const int64_t groups = sa::int_(n, "num_groups");
  const double eps = sa::float_(n, "eps", 1e-5);
  const auto& sizes = x->type.sizes;
  int64_t per_group = 1;
  for (size_t d = 1; d < sizes.size(); ++d) {
    if (!sizes[d].is_constant())
      throw Error("group_norm over a symbolic channel or spatial size is not supported by the "
                  "compiler", "node " + n.name + " (" + n.target + ")",
                  "static sizes after the batch dim", sym_shape_str(sizes));
    per_group *= sizes[d].constant();
  }
  per_group /= groups;
  const bool half = out.dtype == DType::kFloat16 || out.dtype == DType::kBFloat16;
  const DType work = half ? DType::kFloat32 : out.dtype;
  Emitter e(g, n);
  auto to = [&](ir::Value* v, DType dt) {
    return e.op("aten._to_copy.default", {tensor_arg("self", v), dtype_arg("dtype", dt, true)});
  };
  if (x->type.dtype != work) x = to(x, work);
  ir::Value* xr = e.op("aten.view.default",
                       {tensor_arg("self", x), ints_arg("size", {-1, groups, per_group})});
  auto mean = [&](ir::Value* v) {
    return e.op("aten.mean.dim",
                {tensor_arg("self", v), ints_arg("dim", {2}), bool_arg("keepdim", true)});
  };
  ir::Value* mu = mean(xr);
  ir::Value* d = e.op("aten.sub.Tensor", {tensor_arg("self", xr), tensor_arg("other", mu)});
  ir::Value* var = mean(e.mul(d, d));
  ir::Value* inv = e.op("aten.rsqrt.default",
                        {tensor_arg("self", e.op("aten.add.Scalar", {tensor_arg("self", var),
                                                                     float_arg("other", eps)}))});
  ir::Value* y = e.mul(d, inv);
  std::vector<int64_t> back = {-1};
  for (size_t k = 1; k < sizes.size(); ++k) back.push_back(sizes[k].constant());
  // weight / bias of shape (C,) broadcast as (C, 1, ..., 1)
  std::vector<int64_t> chan = {sizes[1].constant()};
  for (size_t k = 2; k < sizes.size(); ++k) chan.push_back(1);
  auto per_channel = [&](const char* name) -> ir::Value* {
    const ir::Arg* a = n.arg(name);
    if (!a || a->kind != ir::Arg::Kind::kTensor || !a->value) return nullptr;
    return e.op("aten.view.default", {tensor_arg("self", in(a->value)), ints_arg("size", chan)});
  };
  ir::Value* w = per_channel("weight");
  ir::Value* b = per_channel("bias");
  // The last node emitted takes the replaced output's name.
  y = e.op("aten.view.default", {tensor_arg("self", y), ints_arg("size", back)},
           !w && !b && !half);
  if (w) y = e.op("aten.mul.Tensor", {tensor_arg("self", y), tensor_arg("other", w)}, !b && !half);
  if (b) y = e.op("aten.add.Tensor", {tensor_arg("self", y), tensor_arg("other", b)}, !half);
  if (half)
    y = e.op("aten._to_copy.default", {tensor_arg("self", y), dtype_arg("dtype", out.dtype, true)},
             true);
  return y;
}

/// _weight_norm(v, g, dim) = v * (g / sqrt(sum(v * v, every dim but dim, keepdim))); dim -1
/// takes the norm of the whole tensor.
ir::Value* decompose_weight_norm(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  n.schema->shape(n);
  namespace sa = ir::shape_args;
  ir::Value* v = in(n.arg("v")->value);
  ir::Value* gain = in(n.arg("g")->value);
  const int64_t rank = static_cast<int64_t>(v->type.sizes.size());
  int64_t dim = sa::int_(n, "dim", 0);
  if (dim < -1) dim += rank;
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim) dims.push_back(d);
  Emitter e(g, n);
  ir::Value* sq = e.mul(v, v);
  ir::Value* s = e.op("aten.sum.dim_IntList", {tensor_arg("self", sq), ints_arg("dim", dims),
                                              bool_arg("keepdim", dim != -1)});
  ir::Value* norm = e.op("aten.sqrt.default", {tensor_arg("self", s)});
  ir::Value* scale = e.op("aten.div.Tensor", {tensor_arg("self", gain), tensor_arg("other", norm)});
  return e.op("aten.mul.Tensor", {tensor_arg("self", v), tensor_arg("other", scale)}, true);
}

}  // namespace anvil::passes::detail
