// Shape family: views (view, reshape, flatten, permute, transpose, squeeze, expand, slice, ...)
// and joins (cat, stack); split.cpp has the splits (split, chunk, unbind), index.cpp indexing
// and repeat. Shape
// rules are symbolic and share one helper per op with the kernels (which call it with constant
// sizes), so a kernel and its shape rule cannot disagree. Views return tensors that share the
// input's storage.
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

namespace sa = ir::shape_args;
using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
using SymShape = std::vector<SymInt>;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();




/// Concrete sizes of a shape the kernels computed with the symbolic helpers.
Shape to_ints(const SymShape& s) {
  Shape out;
  out.reserve(s.size());
  for (const SymInt& x : s) out.push_back(x.constant());
  return out;
}


/// Product of s[begin, end).
SymInt product(const SymShape& s, size_t begin, size_t end) {
  SymInt p(1);
  for (size_t i = begin; i < end; ++i) p = p * s[i];
  return p;
}
SymInt product(const SymShape& s) { return product(s, 0, s.size()); }


/// True when a <= b for every value of the symbols (torch's sizes are positive symbols).
bool provably_le(const SymInt& a, const SymInt& b) {
  SymInt d = b - a;
  if (auto c = d.maybe_constant()) return *c >= 0;
  std::set<std::string> syms;
  d.collect_symbols(syms);
  SymRanges positive;
  for (const auto& s : syms) positive[s] = SymRange{1, SymRange::kSymMax};
  return d.bounds(positive).min >= 0;
}

/// x clamped to [lo, hi], folding the comparisons that can be decided symbolically.
SymInt clamp_sym(SymInt x, const SymInt& lo, const SymInt& hi) {
  if (!provably_le(x, hi)) x = provably_le(hi, x) ? hi : SymInt::min(x, hi);
  if (!provably_le(lo, x)) x = provably_le(x, lo) ? lo : SymInt::max(x, lo);
  return x;
}

/// Resolves a view/reshape size list against `numel` elements: one -1 is inferred (symbolic
/// sizes divide exactly when the factors allow it), constant element counts must match.
SymShape infer_size(const std::string& where, const SymShape& req, const SymInt& numel) {
  int64_t infer = -1;
  SymInt known(1);
  for (size_t i = 0; i < req.size(); ++i) {
    if (is_const(req[i], -1)) {
      if (infer >= 0)
        fail_at(where, "only one dimension can be inferred", "at most one -1", sym_shape_str(req));
      infer = static_cast<int64_t>(i);
    } else {
      if (auto c = req[i].maybe_constant(); c && *c < 0)
        fail_at(where, str("invalid shape dimension ", *c), "sizes >= 0 or one -1",
                sym_shape_str(req));
      known = known * req[i];
    }
  }
  SymShape out = req;
  auto nc = numel.maybe_constant();
  auto kc = known.maybe_constant();
  if (infer >= 0) {
    if (kc && *kc == 0)
      fail_at(where, "cannot infer the -1 dimension of a shape with a 0-sized dimension",
              "no 0 beside -1", sym_shape_str(req));
    if (nc && kc && *nc % *kc != 0)
      fail_at(where, "shape is invalid for the input's element count", str(*nc, " elements"),
              sym_shape_str(req));
    out[infer] = numel.floordiv(known);
  } else if (nc && kc && *nc != *kc) {
    fail_at(where, "shape is invalid for the input's element count", str(*nc, " elements"),
            sym_shape_str(req));
  }
  return out;
}

/// Sizes after expanding `in` to `req` (-1 keeps a size; new leading dims allowed).
SymShape expand_sizes(const std::string& where, const SymShape& in, const SymShape& req) {
  if (req.size() < in.size())
    fail_at(where, "expand: the number of sizes must be at least the tensor's rank",
            str(">= ", in.size(), " sizes"), sym_shape_str(req));
  size_t lead = req.size() - in.size();
  SymShape out(req.size());
  for (size_t i = 0; i < req.size(); ++i) {
    const SymInt& r = req[i];
    if (auto c = r.maybe_constant(); c && *c < -1)
      fail_at(where, str("expand: invalid size ", *c, " at dim ", i), "sizes >= -1",
              sym_shape_str(req));
    if (i < lead) {
      if (is_const(r, -1))
        fail_at(where, str("expand: -1 is not allowed in a new leading dim ", i),
                "an explicit size", sym_shape_str(req));
      out[i] = r;
      continue;
    }
    const SymInt& have = in[i - lead];
    if (is_const(r, -1) || r == have) {
      out[i] = have;
    } else if (is_const(have, 1) || !have.is_constant() || !r.is_constant()) {
      out[i] = r;  // broadcast a 1; symbolic mismatches were guarded equal by torch.export
    } else {
      fail_at(where,
              str("the expanded size (", r.str(), ") must match the existing size (", have.str(),
                  ") at non-singleton dim ", i),
              sym_shape_str(in), sym_shape_str(req));
    }
  }
  return out;
}

/// Sizes after flatten(start_dim, end_dim).
SymShape flatten_sizes(const std::string& where, const SymShape& in, int64_t start, int64_t end) {
  if (in.empty()) return {SymInt(1)};
  int64_t rank = static_cast<int64_t>(in.size());
  start = wrap_dim(start, rank, where);
  end = wrap_dim(end, rank, where);
  if (start > end)
    fail_at(where, "flatten: start_dim cannot come after end_dim", "start_dim <= end_dim",
            str(start, " > ", end));
  SymShape out(in.begin(), in.begin() + start);
  out.push_back(product(in, start, end + 1));
  out.insert(out.end(), in.begin() + end + 1, in.end());
  return out;
}

/// Sizes after unflatten(dim, sizes); one -1 in `sizes` is inferred from the dim's size.
SymShape unflatten_sizes(const std::string& where, const SymShape& in, int64_t dim,
                         const SymShape& sizes) {
  if (sizes.empty()) fail_at(where, "unflatten: sizes must be non-empty", "sizes", "[]");
  dim = wrap_dim(dim, static_cast<int64_t>(in.size()), where);
  if (in.empty()) fail_at(where, "unflatten: cannot unflatten a 0-dim tensor", "rank >= 1", "0");
  SymShape inner = infer_size(where, sizes, in[dim]);
  SymShape out(in.begin(), in.begin() + dim);
  out.insert(out.end(), inner.begin(), inner.end());
  out.insert(out.end(), in.begin() + dim + 1, in.end());
  return out;
}

/// Validates a permutation of `rank` dims; returns it with dims normalised.
Shape check_permutation(const std::string& where, const Shape& dims, int64_t rank) {
  if (static_cast<int64_t>(dims.size()) != rank)
    fail_at(where, "permute: number of dims does not match the tensor's rank", std::to_string(rank),
            shape_str(dims));
  Shape out(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    out[i] = wrap_dim(dims[i], rank, where);
    if (seen[out[i]]) fail_at(where, "permute: repeated dim", "a permutation", shape_str(dims));
    seen[out[i]] = true;
  }
  return out;
}

/// Dims a squeeze removes: `dims` (normalised) whose size is the constant 1.
std::vector<bool> squeeze_mask(const std::string& where, const SymShape& in, const Shape& dims) {
  std::vector<bool> drop(in.size(), false);
  std::vector<bool> seen(std::max<size_t>(in.size(), 1), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, static_cast<int64_t>(in.size()), where);
    if (seen[w])
      fail_at(where, str("squeeze: dim ", w, " appears more than once"), "unique dims",
              shape_str(dims));
    seen[w] = true;
    if (!in.empty() && is_const(in[w], 1)) drop[w] = true;
  }
  return drop;
}

/// Start and length of slice(dim, start, end, step) on a dim of size n, clamped like Python
/// slicing: exactly when everything is constant, symbolically (Min/Max) otherwise.
std::pair<SymInt, SymInt> slice_range(const std::string& where, const SymInt& n,
                                      std::optional<SymInt> start, std::optional<SymInt> end,
                                      int64_t step) {
  if (step <= 0) fail_at(where, "slice step must be positive", "step > 0", std::to_string(step));
  auto nc = n.maybe_constant();
  bool all_const = nc && (!start || start->is_constant()) && (!end || end->is_constant());
  if (all_const) {
    int64_t s = start ? start->constant() : 0, e = end ? end->constant() : kInt64Max;
    if (s < 0) s += *nc;
    if (e < 0) e += *nc;
    s = std::clamp<int64_t>(s, 0, *nc);
    e = std::clamp<int64_t>(e, s, *nc);
    return {SymInt(s), SymInt(e > s ? (e - s - 1) / step + 1 : 0)};
  }
  SymInt s = start ? *start : SymInt(0);
  if (auto c = s.maybe_constant(); c && *c < 0) s = n + *c;
  s = clamp_sym(s, 0, n);
  SymInt e = n;
  if (end && !is_const(*end, kInt64Max)) {
    e = *end;
    if (auto c = e.maybe_constant(); c && *c < 0) e = n + *c;
    e = clamp_sym(e, s, n);
  }
  SymInt len = step == 1 ? e - s : (e - s + SymInt(step - 1)).floordiv(step);
  return {s, len};
}


/// Output type of cat: legacy 1-D empty inputs (sizes [0]) are skipped, dtypes promote.
TensorType cat_type(const std::string& where, const std::vector<TensorType>& ins, int64_t dim) {
  if (ins.empty()) fail_at(where, "cat expects a non-empty list of tensors", ">= 1 tensor", "0");
  DType dt = ins[0].dtype;
  for (const auto& t : ins) dt = promote_types(dt, t.dtype);
  const TensorType* ref = nullptr;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].sizes.size() == 1 && is_const(ins[i].sizes[0], 0)) continue;
    if (ins[i].sizes.empty())
      fail_at(where, str("a 0-dim tensor (at position ", i, ") cannot be concatenated"),
              "rank >= 1", "0");
    if (!ref) ref = &ins[i];
  }
  if (!ref) {
    TensorType t = typed(ins[0], {SymInt(0)});
    t.dtype = dt;
    return t;
  }
  int64_t rank = static_cast<int64_t>(ref->sizes.size());
  int64_t d = wrap_dim(dim, rank, where);
  SymShape out = ref->sizes;
  out[d] = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    const SymShape& s = ins[i].sizes;
    if (s.size() == 1 && is_const(s[0], 0)) continue;
    if (static_cast<int64_t>(s.size()) != rank)
      fail_at(where, str("tensors must have the same rank (tensor ", i, ")"),
              sym_shape_str(ref->sizes), sym_shape_str(s));
    for (int64_t k = 0; k < rank; ++k)
      if (k != d && s[k].is_constant() && out[k].is_constant() && s[k] != out[k])
        fail_at(
            where,
            str("sizes of tensors must match except in dim ", d, " (tensor ", i, ", dim ", k, ")"),
            sym_shape_str(ref->sizes), sym_shape_str(s));
    out[d] = out[d] + s[d];
  }
  TensorType t = typed(*ref, out);
  t.dtype = dt;
  return t;
}

/// Output type of stack: equal input shapes, a new dim of size len(tensors) at `dim`.
TensorType stack_type(const std::string& where, const std::vector<TensorType>& ins, int64_t dim) {
  if (ins.empty()) fail_at(where, "stack expects a non-empty list of tensors", ">= 1 tensor", "0");
  DType dt = ins[0].dtype;
  for (size_t i = 0; i < ins.size(); ++i) {
    dt = promote_types(dt, ins[i].dtype);
    bool same = ins[i].sizes.size() == ins[0].sizes.size();
    for (size_t k = 0; same && k < ins[i].sizes.size(); ++k)
      if (ins[i].sizes[k].is_constant() && ins[0].sizes[k].is_constant() &&
          ins[i].sizes[k] != ins[0].sizes[k])
        same = false;
    if (!same)
      fail_at(where, str("stack expects each tensor to be equal size (entry ", i, ")"),
              sym_shape_str(ins[0].sizes), sym_shape_str(ins[i].sizes));
  }
  int64_t d = wrap_dim(dim, static_cast<int64_t>(ins[0].sizes.size()) + 1, where);
  SymShape out = ins[0].sizes;
  out.insert(out.begin() + d, SymInt(static_cast<int64_t>(ins.size())));
  TensorType t = typed(ins[0], out);
  t.dtype = dt;
  return t;
}

/// Input types of a tensor-list argument (None entries are an error).
std::vector<TensorType> list_types(const Node& node, const std::string& name) {
  std::vector<TensorType> out;
  for (auto& t : sa::types(node, name)) {
    if (!t) sa::fail(node, "argument '" + name + "' holds None", "Tensor[]", "None");
    out.push_back(*t);
  }
  return out;
}

std::vector<TensorType> list_types(const std::vector<Tensor>& ts) {
  std::vector<TensorType> out;
  for (const auto& t : ts) {
    TensorType ty;
    ty.dtype = t.dtype();
    ty.sizes = to_sym(t.sizes());
    out.push_back(ty);
  }
  return out;
}


/// Runs a Tensor view method and relocates its Error to the node.
template <typename F>
Tensor at_node(const KernelContext& ctx, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    ctx.fail(e.what_part(), e.expected(), e.actual());
  }
}

}  // namespace

// ---- view / reshape / _unsafe_view -----------------------------------------------------------

std::vector<TensorType> shape_view(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  return {typed(in, infer_size(node_where(node), sa::symints(node, "size"), product(in.sizes)))};
}
std::vector<RValue> kernel_view(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  Shape sizes = ctx.ints("size");
  return {at_node(ctx, [&] { return t.view(sizes); })};
}

std::vector<TensorType> shape_reshape(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  return {typed(in, infer_size(node_where(node), sa::symints(node, "shape"), product(in.sizes)))};
}
std::vector<RValue> kernel_reshape(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  Shape sizes = ctx.ints("shape");
  return {at_node(ctx, [&] { return t.reshape(sizes); })};
}

// reshape_as(self, other): reshape to other's sizes.
std::vector<TensorType> shape_reshape_as(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  return {typed(in, infer_size(node_where(node), sa::type(node, "other").sizes, product(in.sizes)))};
}
std::vector<RValue> kernel_reshape_as(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  const Shape sizes = ctx.tensor("other").sizes();
  return {at_node(ctx, [&] { return t.reshape(sizes); })};
}

std::vector<TensorType> shape_unsafe_view(const Node& node) { return shape_view(node); }
std::vector<RValue> kernel_unsafe_view(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  Shape sizes = ctx.ints("size");
  return {at_node(ctx, [&] { return t.reshape(sizes); })};
}

// ---- flatten / unflatten ---------------------------------------------------------------------

std::vector<TensorType> shape_flatten(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  return {typed(in, flatten_sizes(node_where(node), in.sizes, sa::int_(node, "start_dim", 0),
                                  sa::int_(node, "end_dim", -1)))};
}
std::vector<RValue> kernel_flatten(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  Shape out = to_ints(flatten_sizes(ctx.where(), to_sym(t.sizes()), ctx.int_arg("start_dim", 0),
                                    ctx.int_arg("end_dim", -1)));
  return {at_node(ctx, [&] { return t.reshape(out); })};
}

std::vector<TensorType> shape_unflatten(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  return {typed(in, unflatten_sizes(node_where(node), in.sizes, sa::int_(node, "dim"),
                                    sa::symints(node, "sizes")))};
}
std::vector<RValue> kernel_unflatten(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  Shape out = to_ints(unflatten_sizes(ctx.where(), to_sym(t.sizes()), ctx.int_arg("dim"),
                                      to_sym(ctx.ints("sizes"))));
  return {at_node(ctx, [&] { return t.view(out); })};
}

// ---- permute / transpose / t -----------------------------------------------------------------

std::vector<TensorType> shape_permute(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  SymShape dims = sa::symints(node, "dims");
  Shape p =
      check_permutation(node_where(node), to_ints(dims), static_cast<int64_t>(in.sizes.size()));
  SymShape out;
  for (int64_t d : p) out.push_back(in.sizes[d]);
  return {typed(in, out)};
}
std::vector<RValue> kernel_permute(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  Shape p = check_permutation(ctx.where(), ctx.ints("dims"), t.dim());
  return {t.permute(p)};
}

std::vector<TensorType> shape_transpose_int(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  int64_t rank = static_cast<int64_t>(in.sizes.size());
  int64_t d0 = wrap_dim(sa::int_(node, "dim0"), rank, node_where(node));
  int64_t d1 = wrap_dim(sa::int_(node, "dim1"), rank, node_where(node));
  SymShape out = in.sizes;
  if (rank > 0) std::swap(out[d0], out[d1]);
  return {typed(in, out)};
}
std::vector<RValue> kernel_transpose_int(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  int64_t d0 = wrap_dim(ctx.int_arg("dim0"), t.dim(), ctx.where());
  int64_t d1 = wrap_dim(ctx.int_arg("dim1"), t.dim(), ctx.where());
  return {t.transpose(d0, d1)};
}

// transpose_ changes `self`'s metadata in place; the graph reads the transposed tensor through
// the node's output (the verifier rejects a later read of `self`), so it is transpose.int.
std::vector<TensorType> shape_transpose_(const Node& node) { return shape_transpose_int(node); }
std::vector<RValue> kernel_transpose_(KernelContext& ctx) { return kernel_transpose_int(ctx); }

std::vector<TensorType> shape_t(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  if (in.sizes.size() > 2)
    sa::fail(node, "t() expects a tensor with <= 2 dims", "rank <= 2",
             std::to_string(in.sizes.size()));
  SymShape out = in.sizes;
  std::reverse(out.begin(), out.end());
  return {typed(in, out)};
}
std::vector<RValue> kernel_t(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  if (t.dim() > 2) ctx.fail("t() expects a tensor with <= 2 dims", "rank <= 2", t.type_str());
  return {t.dim() < 2 ? t : t.transpose(0, 1)};
}

// numpy_T (x.T): every dim reversed, a view.
std::vector<TensorType> shape_numpy_T(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  SymShape out = in.sizes;
  std::reverse(out.begin(), out.end());
  return {typed(in, out)};
}
std::vector<RValue> kernel_numpy_T(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  Shape p(static_cast<size_t>(t.dim()));
  for (int64_t d = 0; d < t.dim(); ++d) p[static_cast<size_t>(d)] = t.dim() - 1 - d;
  return {t.permute(p)};
}

// ---- unsqueeze / squeeze ---------------------------------------------------------------------

std::vector<TensorType> shape_unsqueeze(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  int64_t rank = static_cast<int64_t>(in.sizes.size());
  int64_t d = wrap_dim(sa::int_(node, "dim"), rank + 1, node_where(node));
  SymShape out = in.sizes;
  out.insert(out.begin() + d, SymInt(1));
  return {typed(in, out)};
}
std::vector<RValue> kernel_unsqueeze(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  return {t.unsqueeze(wrap_dim(ctx.int_arg("dim"), t.dim() + 1, ctx.where()))};
}

namespace {
/// Every dim of a rank-`rank` tensor.
Shape all_dims(size_t rank) {
  Shape d(rank);
  for (size_t i = 0; i < rank; ++i) d[i] = static_cast<int64_t>(i);
  return d;
}
/// Squeeze type: drops the masked dims.
std::vector<TensorType> squeeze_type(const Node& node, const Shape& dims) {
  const TensorType& in = sa::type(node, "self");
  std::vector<bool> drop = squeeze_mask(node_where(node), in.sizes, dims);
  SymShape out;
  for (size_t i = 0; i < in.sizes.size(); ++i)
    if (!drop[i]) out.push_back(in.sizes[i]);
  return {typed(in, out)};
}
/// Squeeze kernel: a view without the masked dims.
std::vector<RValue> squeeze_kernel(KernelContext& ctx, const Tensor& t, const Shape& dims) {
  std::vector<bool> drop = squeeze_mask(ctx.where(), to_sym(t.sizes()), dims);
  Tensor out = t;
  for (size_t i = drop.size(); i-- > 0;)
    if (drop[i]) out = out.squeeze(static_cast<int64_t>(i));
  return {out};
}
}  // namespace

std::vector<TensorType> shape_squeeze_default(const Node& node) {
  return squeeze_type(node, all_dims(sa::type(node, "self").sizes.size()));
}
std::vector<RValue> kernel_squeeze_default(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  return squeeze_kernel(ctx, t, all_dims(t.sizes().size()));
}
std::vector<TensorType> shape_squeeze_dim(const Node& node) {
  return squeeze_type(node, {sa::int_(node, "dim")});
}
std::vector<RValue> kernel_squeeze_dim(KernelContext& ctx) {
  return squeeze_kernel(ctx, ctx.tensor("self"), {ctx.int_arg("dim")});
}
std::vector<TensorType> shape_squeeze_dims(const Node& node) {
  return squeeze_type(node, to_ints(sa::symints(node, "dim")));
}
std::vector<RValue> kernel_squeeze_dims(KernelContext& ctx) {
  return squeeze_kernel(ctx, ctx.tensor("self"), ctx.ints("dim"));
}

// ---- expand / expand_as ----------------------------------------------------------------------

std::vector<TensorType> shape_expand(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  return {typed(in, expand_sizes(node_where(node), in.sizes, sa::symints(node, "size")))};
}
std::vector<RValue> kernel_expand(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  Shape out = to_ints(expand_sizes(ctx.where(), to_sym(t.sizes()), to_sym(ctx.ints("size"))));
  return {t.expand(out)};
}

std::vector<TensorType> shape_expand_as(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  return {typed(in, expand_sizes(node_where(node), in.sizes, sa::type(node, "other").sizes))};
}
std::vector<RValue> kernel_expand_as(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  Shape out =
      to_ints(expand_sizes(ctx.where(), to_sym(t.sizes()), to_sym(ctx.tensor("other").sizes())));
  return {t.expand(out)};
}

// ---- slice / select / narrow -----------------------------------------------------------------

std::vector<TensorType> shape_slice_Tensor(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  std::string where = node_where(node);
  if (in.sizes.empty())
    sa::fail(node, "slice() cannot be applied to a 0-dim tensor", "rank >= 1", "0");
  int64_t d = wrap_dim(sa::int_(node, "dim", 0), static_cast<int64_t>(in.sizes.size()), where);
  std::optional<SymInt> start, end;
  if (sa::has(node, "start")) start = sa::symint(node, "start");
  if (sa::has(node, "end")) end = sa::symint(node, "end");
  auto [s, len] = slice_range(where, in.sizes[d], start, end, sa::int_(node, "step", 1));
  SymShape out = in.sizes;
  out[d] = len;
  return {typed(in, out)};
}
std::vector<RValue> kernel_slice_Tensor(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  if (t.dim() == 0) ctx.fail("slice() cannot be applied to a 0-dim tensor", "rank >= 1", "0");
  int64_t d = wrap_dim(ctx.int_arg("dim", 0), t.dim(), ctx.where());
  std::optional<SymInt> start, end;
  if (ctx.has("start")) start = SymInt(ctx.int_arg("start"));
  if (ctx.has("end")) end = SymInt(ctx.int_arg("end"));
  int64_t step = ctx.int_arg("step", 1);
  auto [s, len] = slice_range(ctx.where(), SymInt(t.size(d)), start, end, step);
  Shape sizes = t.sizes(), strides = t.strides();
  sizes[d] = len.constant();
  strides[d] = t.stride(d) * step;
  return {t.as_strided(sizes, strides, t.storage_offset() + s.constant() * t.stride(d))};
}

std::vector<TensorType> shape_select_int(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  std::string where = node_where(node);
  if (in.sizes.empty())
    sa::fail(node, "select() cannot be applied to a 0-dim tensor", "rank >= 1", "0");
  int64_t d = wrap_dim(sa::int_(node, "dim"), static_cast<int64_t>(in.sizes.size()), where);
  SymInt index = sa::symint(node, "index");
  auto ic = index.maybe_constant(), nc = in.sizes[d].maybe_constant();
  if (ic && nc && (*ic < -*nc || *ic >= *nc))
    sa::fail(node, str("select(): index ", *ic, " out of range for dim ", d, " of size ", *nc),
             str("an index in [", -*nc, ", ", *nc - 1, "]"), std::to_string(*ic));
  SymShape out = in.sizes;
  out.erase(out.begin() + d);
  return {typed(in, out)};
}
std::vector<RValue> kernel_select_int(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  if (t.dim() == 0) ctx.fail("select() cannot be applied to a 0-dim tensor", "rank >= 1", "0");
  int64_t d = wrap_dim(ctx.int_arg("dim"), t.dim(), ctx.where());
  int64_t i = ctx.int_arg("index"), n = t.size(d);
  if (i < -n || i >= n)
    ctx.fail(str("select(): index ", i, " out of range for dim ", d, " of size ", n),
             str("an index in [", -n, ", ", n - 1, "]"), std::to_string(i));
  return {t.select(d, i)};
}

namespace {
/// Validates narrow's constant arguments against a dim of size n; returns the wrapped start.
int64_t narrow_start(const std::string& where, int64_t n, int64_t start, int64_t length) {
  if (start < -n || start > n)
    fail_at(where, str("narrow(): start ", start, " out of range for a dim of size ", n),
            str("[", -n, ", ", n, "]"), std::to_string(start));
  if (start < 0) start += n;
  if (length < 0 || start > n - length)
    fail_at(where,
            str("narrow(): start (", start, ") + length (", length, ") exceeds the dim's size"),
            str("<= ", n), std::to_string(start + length));
  return start;
}
}  // namespace

std::vector<TensorType> shape_narrow(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  std::string where = node_where(node);
  if (in.sizes.empty())
    sa::fail(node, "narrow() cannot be applied to a 0-dim tensor", "rank >= 1", "0");
  int64_t d = wrap_dim(sa::int_(node, "dim"), static_cast<int64_t>(in.sizes.size()), where);
  SymInt start = sa::symint(node, "start"), length = sa::symint(node, "length");
  auto sc = start.maybe_constant(), lc = length.maybe_constant(), nc = in.sizes[d].maybe_constant();
  if (sc && lc && nc) narrow_start(where, *nc, *sc, *lc);
  SymShape out = in.sizes;
  out[d] = length;
  return {typed(in, out)};
}
std::vector<RValue> kernel_narrow(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  if (t.dim() == 0) ctx.fail("narrow() cannot be applied to a 0-dim tensor", "rank >= 1", "0");
  int64_t d = wrap_dim(ctx.int_arg("dim"), t.dim(), ctx.where());
  int64_t length = ctx.int_arg("length");
  int64_t start = narrow_start(ctx.where(), t.size(d), ctx.int_arg("start"), length);
  return {t.slice(d, start, start + length)};
}

// ---- cat / stack -----------------------------------------------------------------------------

std::vector<TensorType> shape_cat(const Node& node) {
  return {cat_type(node_where(node), list_types(node, "tensors"), sa::int_(node, "dim", 0))};
}
std::vector<RValue> kernel_cat(KernelContext& ctx) {
  std::vector<Tensor> ts = ctx.tensors("tensors");
  int64_t dim = ctx.int_arg("dim", 0);
  TensorType ty = cat_type(ctx.where(), list_types(ts), dim);
  Tensor out = Tensor::empty(to_ints(ty.sizes), ty.dtype);
  if (ty.sizes.size() == 1 && out.numel() == 0) return {out};
  int64_t d = wrap_dim(dim, out.dim(), ctx.where());
  int64_t off = 0;
  for (const Tensor& t : ts) {
    if (t.dim() == 1 && t.size(0) == 0) continue;
    out.slice(d, off, off + t.size(d)).copy_from(t);
    off += t.size(d);
  }
  return {out};
}

std::vector<TensorType> shape_stack(const Node& node) {
  return {stack_type(node_where(node), list_types(node, "tensors"), sa::int_(node, "dim", 0))};
}
std::vector<RValue> kernel_stack(KernelContext& ctx) {
  std::vector<Tensor> ts = ctx.tensors("tensors");
  int64_t dim = ctx.int_arg("dim", 0);
  TensorType ty = stack_type(ctx.where(), list_types(ts), dim);
  Tensor out = Tensor::empty(to_ints(ty.sizes), ty.dtype);
  int64_t d = wrap_dim(dim, out.dim(), ctx.where());
  for (size_t i = 0; i < ts.size(); ++i) out.select(d, static_cast<int64_t>(i)).copy_from(ts[i]);
  return {out};
}

}  // namespace anvil::ops
