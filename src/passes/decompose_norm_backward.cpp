// Decompositions of the norm gradients and of training-mode batch norm into reductions and
// pointwise ops (run by decompose_losses, decompose_loss.cpp; reference kernels:
// ops/norm_backward.cpp):
//  - native_layer_norm_backward / native_group_norm_backward: with xhat = (x - mean) * rstd over
//    each normalised group, dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w * xhat)),
//    dw = sum(g * xhat) and db = sum(g) over the other dims (group norm on an
//    (N, G, C/G, HxW) view);
//  - _native_batch_norm_legit (.default, .no_stats), _native_batch_norm_legit_functional and
//    batch_norm with training=True: the mean and biased variance over all dims but 1, the
//    normalised output, save_mean / save_invstd, and running = (1 - momentum) * running +
//    momentum * batch (the unbiased variance), written back with copy_ where the op updates the
//    running statistics in place.
// 16-bit floats compute in float32 and round once. The op's shape rule runs first, so bad
// arguments give the interpreter's errors.
#include "core/error.h"
#include "passes/decompose_util.h"

namespace anvil::passes::detail {

namespace {

namespace sa = ir::shape_args;

bool is_half(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

[[noreturn]] void unsupported(const ir::Node& n, const std::string& what,
                              const std::string& expected, const std::string& actual) {
  throw Error(what + " is not supported by the compiler", "node " + n.name + " (" + n.target + ")",
              expected, actual);
}

/// The optional tensor argument `name` mapped into the new graph, or null.
ir::Value* opt(const ir::Node& n, const char* name, const ValueMap& in) {
  const ir::Arg* a = n.arg(name);
  return a && a->kind == ir::Arg::Kind::kTensor && a->value ? in(a->value) : nullptr;
}

/// Pointwise and reduction helpers over one Emitter.
struct Ops {
  Emitter& e;
  ir::Value* bin(const char* target, ir::Value* a, ir::Value* b, int out = -1) {
    return e.op_out(target, {tensor_arg("self", a), tensor_arg("other", b)}, out);
  }
  ir::Value* sub(ir::Value* a, ir::Value* b) { return bin("aten.sub.Tensor", a, b); }
  ir::Value* mul(ir::Value* a, ir::Value* b, int out = -1) {
    return bin("aten.mul.Tensor", a, b, out);
  }
  ir::Value* add(ir::Value* a, ir::Value* b, int out = -1) {
    return bin("aten.add.Tensor", a, b, out);
  }
  ir::Value* mean(ir::Value* x, std::vector<int64_t> dims) {
    return e.op("aten.mean.dim", {tensor_arg("self", x), ints_arg("dim", std::move(dims)),
                                  bool_arg("keepdim", true)});
  }
  ir::Value* sum(ir::Value* x, std::vector<int64_t> dims, int out = -1) {
    return e.op_out(
        "aten.sum.dim_IntList",
        {tensor_arg("self", x), ints_arg("dim", std::move(dims)), bool_arg("keepdim", false)}, out);
  }
  ir::Value* reshape(ir::Value* x, std::vector<int64_t> s, int out = -1) {
    return e.op_out("aten.reshape.default",
                    {tensor_arg("self", x), ints_arg("shape", std::move(s))}, out);
  }
  /// x in `dt` (x itself when it has it and is not a named output).
  ir::Value* cast(ir::Value* x, DType dt, int out = -1) {
    if (!x || (x->type.dtype == dt && out < 0)) return x;
    return e.op_out("aten._to_copy.default", {tensor_arg("self", x), dtype_arg("dtype", dt, true)},
                    out);
  }
  ir::Value* scale(ir::Value* x, double s) { return e.scale(x, s); }
};

/// dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) over `dims`.
ir::Value* norm_dx(Ops& o, ir::Value* g, ir::Value* xhat, ir::Value* rstd, ir::Value* w,
                   const std::vector<int64_t>& dims) {
  ir::Value* gw = w ? o.mul(g, w) : g;
  ir::Value* a = o.mean(gw, dims);
  ir::Value* b = o.mean(o.mul(gw, xhat), dims);
  return o.mul(rstd, o.sub(o.sub(gw, a), o.mul(xhat, b)));
}

std::vector<ir::Value*> layer_norm_backward(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  const std::vector<ir::TensorType> types = n.schema->shape(n);
  ir::Value* gy = in(n.arg("grad_out")->value);
  ir::Value* x = in(n.arg("input")->value);
  ir::Value* mean = in(n.arg("mean")->value);
  ir::Value* rstd = in(n.arg("rstd")->value);
  ir::Value* w = opt(n, "weight", in);
  const size_t rank = x->type.sizes.size(), k = sa::symints(n, "normalized_shape").size();
  const size_t axis = rank - k;
  const bool half = is_half(x->type.dtype);
  const DType work = half ? DType::kFloat32 : x->type.dtype;
  Emitter e(g, n);
  Ops o{e};
  gy = o.cast(gy, work);
  x = o.cast(x, work);
  mean = o.cast(mean, work);
  rstd = o.cast(rstd, work);
  w = o.cast(w, work);
  if (mean->type.sizes.size() != rank) {  // statistics as [rows]: the keepdim form
    std::vector<int64_t> s;
    for (size_t d = 0; d < rank; ++d) {
      const SymInt& v = x->type.sizes[d];
      if (d >= axis)
        s.push_back(1);
      else if (v.is_constant())
        s.push_back(v.constant());
      else if (d == 0)
        s.push_back(-1);
      else
        unsupported(n, "statistics of a symbolic shape", "static batch dims", x->type.str());
    }
    mean = o.reshape(mean, s);
    rstd = o.reshape(rstd, s);
  }
  std::vector<int64_t> dims, batch;
  for (size_t d = 0; d < rank; ++d) (d >= axis ? dims : batch).push_back(static_cast<int64_t>(d));
  ir::Value* xhat = o.mul(o.sub(x, mean), rstd);
  std::vector<ir::Value*> outs(3, nullptr);
  const auto wanted = [&](size_t i) { return i < n.outputs.size() && n.outputs[i]; };
  if (wanted(0)) outs[0] = o.cast(norm_dx(o, gy, xhat, rstd, w, dims), types[0].dtype, 0);
  auto over_batch = [&](ir::Value* v, int out) {
    if (batch.empty())
      return o.cast(e.op("aten.clone.default", {tensor_arg("self", v)}), types[out].dtype, out);
    if (!half && v->type.dtype == types[out].dtype) return o.sum(v, batch, out);
    return o.cast(o.sum(v, batch), types[out].dtype, out);
  };
  if (wanted(1)) outs[1] = over_batch(o.mul(gy, xhat), 1);
  if (wanted(2)) outs[2] = over_batch(gy, 2);
  return outs;
}

std::vector<ir::Value*> group_norm_backward(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  const std::vector<ir::TensorType> types = n.schema->shape(n);
  ir::Value* gy = in(n.arg("grad_out")->value);
  ir::Value* x = in(n.arg("input")->value);
  ir::Value* mean = in(n.arg("mean")->value);
  ir::Value* rstd = in(n.arg("rstd")->value);
  ir::Value* w = opt(n, "weight", in);
  const int64_t groups = sa::int_(n, "group");
  const auto& sizes = x->type.sizes;
  std::vector<int64_t> back = {-1};
  int64_t spatial = 1;
  for (size_t d = 1; d < sizes.size(); ++d) {
    if (!sizes[d].is_constant())
      unsupported(n, "group_norm over a symbolic channel or spatial size",
                  "static sizes after the batch dim", sym_shape_str(sizes));
    back.push_back(sizes[d].constant());
    if (d >= 2) spatial *= sizes[d].constant();
  }
  const int64_t c = sizes[1].constant(), cg = c / groups;
  const bool half = is_half(x->type.dtype);
  const DType work = half ? DType::kFloat32 : x->type.dtype;
  Emitter e(g, n);
  Ops o{e};
  const std::vector<int64_t> grouped = {-1, groups, cg, spatial}, stat = {-1, groups, 1, 1};
  ir::Value* xr = o.reshape(o.cast(x, work), grouped);
  ir::Value* gr = o.reshape(o.cast(gy, work), grouped);
  ir::Value* m = o.reshape(o.cast(mean, work), stat);
  ir::Value* r = o.reshape(o.cast(rstd, work), stat);
  ir::Value* wr = w ? o.reshape(o.cast(w, work), {1, groups, cg, 1}) : nullptr;
  ir::Value* xhat = o.mul(o.sub(xr, m), r);
  std::vector<ir::Value*> outs(3, nullptr);
  const auto wanted = [&](size_t i) { return i < n.outputs.size() && n.outputs[i]; };
  if (wanted(0)) {
    ir::Value* dx = o.reshape(norm_dx(o, gr, xhat, r, wr, {2, 3}), back, half ? -1 : 0);
    outs[0] = half ? o.cast(dx, types[0].dtype, 0) : dx;
  }
  auto per_channel = [&](ir::Value* v, int out) {
    const bool cast = half || types[out].dtype != work;
    ir::Value* s = o.reshape(o.sum(v, {0, 3}), {c}, cast ? -1 : out);
    return cast ? o.cast(s, types[out].dtype, out) : s;
  };
  if (wanted(1)) outs[1] = per_channel(o.mul(gr, xhat), 1);
  if (wanted(2)) outs[2] = per_channel(gr, 2);
  return outs;
}

/// Training batch norm. `stats_out`: the new running statistics are outputs 3 and 4
/// (_functional); `write_back`: they are copied into running_mean / running_var (.default,
/// batch_norm). `outputs`: how many of out, save_mean, save_invstd the op returns.
std::vector<ir::Value*> batch_norm_train(ir::Graph& g, const ir::Node& n, const ValueMap& in,
                                         bool stats_out, bool write_back, size_t outputs) {
  n.schema->shape(n);
  ir::Value* x = in(n.arg("input")->value);
  ir::Value* w = opt(n, "weight", in);
  ir::Value* b = opt(n, "bias", in);
  ir::Value* rm = opt(n, "running_mean", in);
  ir::Value* rv = opt(n, "running_var", in);
  const double eps = sa::float_(n, "eps"), momentum = sa::float_(n, "momentum");
  const auto& sizes = x->type.sizes;
  const size_t rank = sizes.size();
  if (!sizes[1].is_constant())
    unsupported(n, "batch_norm over a symbolic channel count", "a static C", x->type.str());
  const int64_t c = sizes[1].constant();
  const DType out_dt = x->type.dtype;
  const bool half = is_half(out_dt);
  Emitter e(g, n);
  Ops o{e};
  x = o.cast(x, half ? DType::kFloat32 : out_dt);
  std::vector<int64_t> dims = {0}, chan = {c};
  for (size_t d = 2; d < rank; ++d) {
    dims.push_back(static_cast<int64_t>(d));
    chan.push_back(1);
  }
  ir::Value* mean = o.mean(x, dims);
  ir::Value* d = o.sub(x, mean);
  ir::Value* var = o.mean(o.mul(d, d), dims);
  ir::Value* invstd = e.op(
      "aten.rsqrt.default",
      {tensor_arg("self",
                  e.op("aten.add.Scalar", {tensor_arg("self", var), float_arg("other", eps)}))});
  const int last = half ? -1 : 0;
  ir::Value* y = o.mul(d, invstd, !w && !b ? last : -1);
  if (w) y = o.mul(y, o.reshape(o.cast(w, x->type.dtype), chan), !b ? last : -1);
  if (b) y = o.add(y, o.reshape(o.cast(b, x->type.dtype), chan), last);
  std::vector<ir::Value*> outs(outputs + (stats_out ? 2 : 0), nullptr);
  outs[0] = half ? o.cast(y, out_dt, 0) : y;
  if (outputs == 3) {
    outs[1] = o.cast(o.reshape(mean, {c}, half ? -1 : 1), out_dt, half ? 1 : -1);
    outs[2] = o.cast(o.reshape(invstd, {c}, half ? -1 : 2), out_dt, half ? 2 : -1);
  }
  if (!rm && !rv) return outs;
  int64_t count = 1;
  for (size_t k = 0; k < rank; ++k) {
    if (k == 1) continue;
    if (!sizes[k].is_constant())
      unsupported(n, "running statistics over a symbolic batch", "static sizes", x->type.str());
    count *= sizes[k].constant();
  }
  auto update = [&](ir::Value* running, ir::Value* batch, double f, int out) {
    ir::Value* bv = o.cast(o.reshape(batch, {c}), running->type.dtype);
    return e.op_out("aten.add.Tensor",
                    {tensor_arg("self", o.scale(running, 1 - momentum)),
                     tensor_arg("other", o.scale(bv, momentum * f))},
                    out);
  };
  const double unbias = count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1;
  ir::Value* new_rm = rm ? update(rm, mean, 1.0, stats_out ? 3 : -1) : nullptr;
  ir::Value* new_rv = rv ? update(rv, var, unbias, stats_out ? 4 : -1) : nullptr;
  if (stats_out) {
    outs[3] = new_rm;
    outs[4] = new_rv;
  }
  if (write_back)
    for (auto [dst, src] : {std::pair{rm, new_rm}, std::pair{rv, new_rv}})
      if (dst) e.op("aten.copy_.default", {tensor_arg("self", dst), tensor_arg("src", src)});
  return outs;
}

}  // namespace

bool batch_norm_in_training(const ir::Node& n) {
  return n.target == "aten.batch_norm.default" && sa::bool_(n, "training", false);
}

std::vector<ir::Value*> decompose_norm_backward(ir::Graph& g, const ir::Node& n,
                                                const ValueMap& in) {
  const std::string& t = n.target;
  if (t == "aten.native_layer_norm_backward.default") return layer_norm_backward(g, n, in);
  if (t == "aten.native_group_norm_backward.default") return group_norm_backward(g, n, in);
  if (t == "aten._native_batch_norm_legit.default")
    return batch_norm_train(g, n, in, false, true, 3);
  if (t == "aten._native_batch_norm_legit.no_stats")
    return batch_norm_train(g, n, in, false, false, 3);
  if (t == "aten._native_batch_norm_legit_functional.default")
    return batch_norm_train(g, n, in, true, false, 3);
  if (batch_norm_in_training(n)) return batch_norm_train(g, n, in, false, true, 1);
  return {};
}

}  // namespace anvil::passes::detail
