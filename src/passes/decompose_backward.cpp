// Decompositions of the gradient ops of training exports into ops every target already has (run
// by decompose_losses, decompose_loss.cpp; reference kernels: ops/conv_backward.cpp and
// ops/embedding_bag.cpp):
//  - convolution_backward: grad_input is the transposed convolution of grad_output with the
//    weight (a plain convolution for a transposed forward); grad_weight a convolution of the
//    input with grad_output, batch and channels swapped so that the batch is summed (stride and
//    dilation exchange roles), cut to the kernel size; grad_bias a sum over all dims but 1.
//  - avg_pool2d_backward / _adaptive_avg_pool2d_backward: the pooling is separable, so
//    grad_input = Mh^T @ grad_output @ Mw per plane, M[o, i] = [i in window o] / its size (the
//    divisor factors into a row and a column part), built from arange and comparisons.
//  - max_pool2d_with_indices_backward: scatter_add of grad_output into each flat plane at the
//    indices.
//  - embedding_dense_backward: index_put with accumulation of grad_output's rows (zeroed at
//    padding_idx, divided by the index counts for scale_grad_by_freq) into zeros.
// The op's shape rule runs first, so bad arguments give the interpreter's errors.
#include "core/error.h"
#include "passes/decompose_util.h"

namespace anvil::passes::detail {

namespace {

namespace sa = ir::shape_args;

/// An absent optional argument.
ir::Arg none_arg(const std::string& name) {
  ir::Arg a;
  a.name = name;
  a.kind = ir::Arg::Kind::kNone;
  return a;
}

ir::Arg string_arg(const std::string& name, const std::string& s) {
  ir::Arg a;
  a.name = name;
  a.kind = ir::Arg::Kind::kString;
  a.s = s;
  return a;
}

/// A list of (optional) tensors, as index / index_put take them.
ir::Arg opt_tensors_arg(const std::string& name, std::vector<ir::Value*> vs) {
  ir::Arg a;
  a.name = name;
  a.kind = ir::Arg::Kind::kOptTensors;
  a.values = std::move(vs);
  return a;
}

/// Throws the compile error for a form a decomposition cannot express.
[[noreturn]] void unsupported(const ir::Node& n, const std::string& what,
                              const std::string& expected, const std::string& actual) {
  throw Error(what + " is not supported by the compiler", "node " + n.name + " (" + n.target + ")",
              expected, actual);
}

/// The static sizes of `v` from dim `from` on (a symbolic one is refused).
std::vector<int64_t> static_tail(const ir::Node& n, const ir::Value* v, size_t from) {
  std::vector<int64_t> out;
  const auto& sizes = v->type.sizes;
  for (size_t d = from; d < sizes.size(); ++d) {
    if (!sizes[d].is_constant())
      unsupported(n, "a symbolic size here", str("static sizes from dim ", from),
                  sym_shape_str(sizes));
    out.push_back(sizes[d].constant());
  }
  return out;
}

/// Constant ints of list argument `name` expanded to `k` values (a single value repeats).
std::vector<int64_t> ints_of(const ir::Node& n, const char* name, size_t k,
                             std::vector<int64_t> dflt) {
  std::vector<int64_t> v;
  for (const SymInt& s : sa::symints(n, name, std::vector<SymInt>{})) v.push_back(s.constant());
  if (v.empty()) v = std::move(dflt);
  if (v.size() == 1) v.assign(k, v[0]);
  return v;
}

/// Whether output `k` of `n` is read.
bool wanted(const ir::Node& n, size_t k) { return k < n.outputs.size() && n.outputs[k]; }

/// The emitting helpers shared by the decompositions below.
struct Ops {
  Emitter& e;
  ir::Value* reshape(ir::Value* x, std::vector<int64_t> s, int out = -1) {
    return e.op_out("aten.reshape.default",
                    {tensor_arg("self", x), ints_arg("shape", std::move(s))}, out);
  }
  ir::Value* permute(ir::Value* x, std::vector<int64_t> dims) {
    return e.op("aten.permute.default", {tensor_arg("self", x), ints_arg("dims", std::move(dims))});
  }
  ir::Value* slice(ir::Value* x, int64_t dim, int64_t end) {
    return e.op("aten.slice.Tensor",
                {tensor_arg("self", x), int_arg("dim", dim), int_arg("start", 0),
                 int_arg("end", end), int_arg("step", 1)});
  }
  ir::Value* conv(ir::Value* x, ir::Value* w, std::vector<int64_t> s, std::vector<int64_t> p,
                  std::vector<int64_t> d, bool transposed, std::vector<int64_t> op, int64_t groups,
                  int out = -1) {
    return e.op_out("aten.convolution.default",
                    {tensor_arg("input", x), tensor_arg("weight", w), none_arg("bias"),
                     ints_arg("stride", std::move(s)), ints_arg("padding", std::move(p)),
                     ints_arg("dilation", std::move(d)), bool_arg("transposed", transposed),
                     ints_arg("output_padding", std::move(op)), int_arg("groups", groups)},
                    out);
  }
  /// self <op>.Scalar int `v` (integer tensors stay integer).
  ir::Value* scalar(const char* target, ir::Value* x, const char* arg, int64_t v) {
    return e.op(target, {tensor_arg("self", x), int_arg(arg, v)});
  }
  ir::Value* binary(const char* target, ir::Value* a, ir::Value* b) {
    return e.op(target, {tensor_arg("self", a), tensor_arg("other", b)});
  }
  ir::Value* to(ir::Value* x, DType dt) {
    return e.op("aten._to_copy.default", {tensor_arg("self", x), dtype_arg("dtype", dt, true)});
  }
  ir::Value* arange(int64_t n) {
    return e.op("aten.arange.default",
                {int_arg("end", n), dtype_arg("dtype", DType::kInt64, true)});
  }
};

// ---- convolution_backward

std::vector<ir::Value*> convolution_backward(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  n.schema->shape(n);
  ir::Value* gy = in(n.arg("grad_output")->value);
  ir::Value* x = in(n.arg("input")->value);
  ir::Value* w = in(n.arg("weight")->value);
  const size_t sp = x->type.sizes.size() - 2;
  const std::vector<int64_t> xs = static_tail(n, x, 0), gs = static_tail(n, gy, 0);
  const std::vector<int64_t> ws = static_tail(n, w, 0);
  const auto s = ints_of(n, "stride", sp, {1}), p = ints_of(n, "padding", sp, {0});
  const auto d = ints_of(n, "dilation", sp, {1}), opad = ints_of(n, "output_padding", sp, {0});
  const bool transposed = sa::bool_(n, "transposed", false);
  const int64_t groups = sa::int_(n, "groups");
  const int64_t batch = xs[0], cin = xs[1], cout = gs[1];
  Emitter e(g, n);
  Ops o{e};
  std::vector<ir::Value*> outs(3, nullptr);
  std::vector<int64_t> spatial_ids;  // 3, 4 (.. 2 + sp) for the 5-D grouped views
  for (size_t i = 0; i < sp; ++i) spatial_ids.push_back(static_cast<int64_t>(3 + i));
  auto with_spatial = [&](std::vector<int64_t> head, const std::vector<int64_t>& sizes) {
    for (size_t i = 0; i < sp; ++i) head.push_back(sizes[2 + i]);
    return head;
  };
  auto order = [&](std::vector<int64_t> head) {
    head.insert(head.end(), spatial_ids.begin(), spatial_ids.end());
    return head;
  };
  if (wanted(n, 0)) {
    if (!transposed) {
      std::vector<int64_t> op(sp);
      for (size_t i = 0; i < sp; ++i)
        op[i] = xs[2 + i] + 2 * p[i] - d[i] * (ws[2 + i] - 1) - 1 - (gs[2 + i] - 1) * s[i];
      outs[0] = o.conv(gy, w, s, p, d, true, op, groups, 0);
    } else {
      outs[0] = o.conv(gy, w, s, p, d, false, std::vector<int64_t>(sp, 0), groups, 0);
    }
  }
  if (wanted(n, 1)) {
    // Batch folded into the channels, grouped: the input of the convolution is [C / G, G * N,
    // ...] and its weight [C_other, N, ...], so output channel c sums over the batch.
    ir::Value* lhs;
    ir::Value* rhs;
    if (!transposed) {
      lhs = o.reshape(o.permute(o.reshape(x, with_spatial({batch, groups, cin / groups}, xs)),
                                order({2, 1, 0})),
                      with_spatial({cin / groups, groups * batch}, xs));
      rhs = o.reshape(o.permute(o.reshape(gy, with_spatial({batch, groups, cout / groups}, gs)),
                                order({1, 2, 0})),
                      with_spatial({cout, batch}, gs));
    } else {
      lhs = o.reshape(o.permute(o.reshape(gy, with_spatial({batch, groups, cout / groups}, gs)),
                                order({2, 1, 0})),
                      with_spatial({cout / groups, groups * batch}, gs));
      rhs = o.reshape(o.permute(o.reshape(x, with_spatial({batch, groups, cin / groups}, xs)),
                                order({1, 2, 0})),
                      with_spatial({cin, batch}, xs));
    }
    ir::Value* r = o.conv(lhs, rhs, d, p, s, false, std::vector<int64_t>(sp, 0), groups);
    for (size_t i = 0; i < sp; ++i) {
      const int64_t k = ws[2 + i];
      if (!(r->type.sizes[2 + i] == SymInt(k))) r = o.slice(r, static_cast<int64_t>(2 + i), k);
    }
    std::vector<int64_t> back = {1, 0};
    for (size_t i = 0; i < sp; ++i) back.push_back(static_cast<int64_t>(2 + i));
    r = o.permute(r, back);
    outs[1] = e.op_out("aten.clone.default", {tensor_arg("self", r)}, 1);
  }
  if (wanted(n, 2)) {
    std::vector<int64_t> dims = {0};
    for (size_t i = 0; i < sp; ++i) dims.push_back(static_cast<int64_t>(2 + i));
    outs[2] =
        e.op_out("aten.sum.dim_IntList",
                 {tensor_arg("self", gy), ints_arg("dim", dims), bool_arg("keepdim", false)}, 2);
  }
  return outs;
}

// ---- pooling gradients: grad_input = Mh^T @ grad_output @ Mw

/// The (out, in) window matrix of one spatial dim: rows o select [start_o, end_o) with weight
/// 1 / count_o (count_o of 0: an empty window, all zero), in `dt`.
ir::Value* window_matrix(Ops& o, ir::Value* start, ir::Value* end, ir::Value* count, int64_t in,
                         DType dt) {
  Emitter& e = o.e;
  ir::Value* i = e.unsqueeze(o.arange(in), 0);
  ir::Value* inside =
      o.binary("aten.logical_and.default", o.binary("aten.ge.Tensor", i, e.unsqueeze(start, 1)),
               o.binary("aten.lt.Tensor", i, e.unsqueeze(end, 1)));
  ir::Value* c = o.to(e.unsqueeze(o.scalar("aten.clamp_min.default", count, "min", 1), 1), dt);
  return o.binary("aten.div.Tensor", o.to(inside, dt), c);
}

/// grad_input = Mh^T @ gy @ Mw over the last two dims, named as the node's output.
ir::Value* separable(Ops& o, ir::Value* gy, ir::Value* mh, ir::Value* mw) {
  Emitter& e = o.e;
  auto matmul = [&](ir::Value* a, ir::Value* b) {
    return e.op("aten.matmul.default", {tensor_arg("self", a), tensor_arg("other", b)});
  };
  auto swap = [&](ir::Value* v, bool last) {
    return e.op("aten.transpose.int",
                {tensor_arg("self", v), int_arg("dim0", -2), int_arg("dim1", -1)}, last);
  };
  ir::Value* t = swap(matmul(gy, mw), false);  // [.., W, OH]
  ir::Value* u = swap(matmul(t, mh), false);   // [.., H, W]
  return e.op("aten.clone.default", {tensor_arg("self", u)}, true);
}

std::vector<ir::Value*> avg_pool2d_backward(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  n.schema->shape(n);
  ir::Value* gy = in(n.arg("grad_output")->value);
  ir::Value* x = in(n.arg("self")->value);
  const size_t r = x->type.sizes.size();
  const std::vector<int64_t> hw = static_tail(n, x, r - 2), ohw = static_tail(n, gy, r - 2);
  const auto k = ints_of(n, "kernel_size", 2, {});
  auto s = ints_of(n, "stride", 2, {});
  if (s.empty()) s = k;
  const auto p = ints_of(n, "padding", 2, {0});
  const bool include_pad = sa::bool_(n, "count_include_pad", true);
  const int64_t divisor = sa::has(n, "divisor_override") ? sa::int_(n, "divisor_override") : 0;
  const DType dt = gy->type.dtype;
  Emitter e(g, n);
  Ops o{e};
  ir::Value* m[2];
  for (int i = 0; i < 2; ++i) {
    ir::Value* start =
        o.scalar("aten.add.Scalar", o.scalar("aten.mul.Scalar", o.arange(ohw[i]), "other", s[i]),
                 "other", -p[i]);
    ir::Value* end =
        o.scalar("aten.clamp_max.default", o.scalar("aten.add.Scalar", start, "other", k[i]), "max",
                 hw[i] + p[i]);
    ir::Value* pool = o.binary("aten.sub.Tensor", end, start);
    ir::Value* lo = o.scalar("aten.clamp_min.default", start, "min", 0);
    ir::Value* hi = o.scalar("aten.clamp_max.default", end, "max", hw[i]);
    ir::Value* count = include_pad ? pool : o.binary("aten.sub.Tensor", hi, lo);
    if (divisor != 0)  // the whole divisor on the column matrix
      count = e.op("aten.full_like.default",
                   {tensor_arg("self", lo), int_arg("fill_value", i == 0 ? 1 : divisor)});
    m[i] = window_matrix(o, lo, hi, count, hw[i], dt);
  }
  return {separable(o, gy, m[0], m[1])};
}

std::vector<ir::Value*> adaptive_avg_pool2d_backward(ir::Graph& g, const ir::Node& n,
                                                     const ValueMap& in) {
  n.schema->shape(n);
  ir::Value* gy = in(n.arg("grad_output")->value);
  ir::Value* x = in(n.arg("self")->value);
  const size_t r = x->type.sizes.size();
  const std::vector<int64_t> hw = static_tail(n, x, r - 2), ohw = static_tail(n, gy, r - 2);
  Emitter e(g, n);
  Ops o{e};
  auto floor_div = [&](ir::Value* v, int64_t by) {
    return e.op("aten.div.Scalar_mode", {tensor_arg("self", v), int_arg("other", by),
                                         string_arg("rounding_mode", "floor")});
  };
  ir::Value* m[2];
  for (int i = 0; i < 2; ++i) {
    ir::Value* oh = o.scalar("aten.mul.Scalar", o.arange(ohw[i]), "other", hw[i]);
    ir::Value* start = floor_div(oh, ohw[i]);  // floor(o * H / OH)
    ir::Value* end = floor_div(o.scalar("aten.add.Scalar", oh, "other", hw[i] + ohw[i] - 1),
                               ohw[i]);  // ceil((o + 1) * H / OH)
    m[i] = window_matrix(o, start, end, o.binary("aten.sub.Tensor", end, start), hw[i],
                         gy->type.dtype);
  }
  return {separable(o, gy, m[0], m[1])};
}

std::vector<ir::Value*> max_pool2d_with_indices_backward(ir::Graph& g, const ir::Node& n,
                                                         const ValueMap& in) {
  n.schema->shape(n);
  ir::Value* gy = in(n.arg("grad_output")->value);
  ir::Value* x = in(n.arg("self")->value);
  ir::Value* idx = in(n.arg("indices")->value);
  const size_t r = x->type.sizes.size();
  const std::vector<int64_t> hw = static_tail(n, x, r - 2), ohw = static_tail(n, gy, r - 2);
  const std::vector<int64_t> xs = static_tail(n, x, 1);
  Emitter e(g, n);
  Ops o{e};
  ir::Value* z =
      o.reshape(e.op("aten.zeros_like.default", {tensor_arg("self", x)}), {-1, hw[0] * hw[1]});
  ir::Value* sum =
      e.op("aten.scatter_add.default", {tensor_arg("self", z), int_arg("dim", 1),
                                        tensor_arg("index", o.reshape(idx, {-1, ohw[0] * ohw[1]})),
                                        tensor_arg("src", o.reshape(gy, {-1, ohw[0] * ohw[1]}))});
  std::vector<int64_t> back = {-1};
  back.insert(back.end(), xs.begin(), xs.end());
  return {o.reshape(sum, back, 0)};
}

// ---- embedding_dense_backward

std::vector<ir::Value*> embedding_dense_backward(ir::Graph& g, const ir::Node& n,
                                                 const ValueMap& in) {
  const ir::TensorType out = n.schema->shape(n).at(0);
  ir::Value* gy = in(n.arg("grad_output")->value);
  ir::Value* idx = in(n.arg("indices")->value);
  if (!out.sizes[0].is_constant() || !out.sizes[1].is_constant())
    unsupported(n, "a symbolic num_weights or embedding dim", "static sizes", out.str());
  const int64_t rows = out.sizes[0].constant(), dim = out.sizes[1].constant();
  const int64_t pad = sa::int_(n, "padding_idx", -1);
  const bool scale = sa::bool_(n, "scale_grad_by_freq", false);
  Emitter e(g, n);
  Ops o{e};
  auto zeros = [&](std::vector<int64_t> size) {
    return e.op("aten.zeros.default",
                {ints_arg("size", std::move(size)), dtype_arg("dtype", out.dtype, true)});
  };
  auto accumulate = [&](ir::Value* into, ir::Value* ids, ir::Value* values, bool last) {
    return e.op("aten.index_put.default",
                {tensor_arg("self", into), opt_tensors_arg("indices", {ids}),
                 tensor_arg("values", values), bool_arg("accumulate", true)},
                last);
  };
  ir::Value* ids = o.reshape(idx, {-1});
  ir::Value* rows_g = o.reshape(gy, {-1, dim});
  ir::Value* keep = e.unsqueeze(o.scalar("aten.ne.Scalar", ids, "other", pad), 1);
  rows_g = e.where_zero(keep, rows_g);
  if (scale) {
    ir::Value* ones = e.op("aten.ones_like.default",
                           {tensor_arg("self", ids), dtype_arg("dtype", out.dtype, true)});
    ir::Value* counts = accumulate(zeros({rows}), ids, ones, false);
    ir::Value* per =
        e.op("aten.index.Tensor", {tensor_arg("self", counts), opt_tensors_arg("indices", {ids})});
    rows_g = o.binary("aten.div.Tensor", rows_g, e.unsqueeze(per, 1));
  }
  return {accumulate(zeros({rows, dim}), ids, rows_g, true)};
}

}  // namespace

std::vector<ir::Value*> decompose_backward(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  const std::string& t = n.target;
  if (t == "aten.convolution_backward.default") return convolution_backward(g, n, in);
  if (t == "aten.avg_pool2d_backward.default") return avg_pool2d_backward(g, n, in);
  if (t == "aten._adaptive_avg_pool2d_backward.default")
    return adaptive_avg_pool2d_backward(g, n, in);
  if (t == "aten.max_pool2d_with_indices_backward.default")
    return max_pool2d_with_indices_backward(g, n, in);
  if (t == "aten.embedding_dense_backward.default") return embedding_dense_backward(g, n, in);
  return {};
}

}  // namespace anvil::passes::detail
