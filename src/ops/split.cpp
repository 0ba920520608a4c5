// Split family: split, split_with_sizes, chunk, unbind. Like shape.cpp, shape rules and kernels
// share one helper per op (kernels call it with constant sizes); the pieces are views sharing
// the input's storage.
#include <algorithm>

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

/// Lengths of the pieces of split(split_size) on a dim of size n. A symbolic n takes its piece
/// count from the node's outputs (`outputs_hint`).
SymShape split_lengths(const std::string& where, const SymInt& n, const SymInt& split_size,
                       size_t outputs_hint) {
  auto nc = n.maybe_constant(), sc = split_size.maybe_constant();
  if (sc && *sc < 0) fail_at(where, "split_size must be non-negative", ">= 0", std::to_string(*sc));
  int64_t count = 0;
  if (nc && sc) {
    if (*sc == 0 && *nc != 0)
      fail_at(where, "split_size can only be 0 if the dim's size is 0", "split_size > 0", "0");
    count = *sc == 0 ? 1 : std::max<int64_t>((*nc + *sc - 1) / *sc, 1);
  } else {
    if (outputs_hint == 0)
      fail_at(where, "split of a symbolic size needs the node's outputs to know the piece count",
              "node outputs", "none");
    count = static_cast<int64_t>(outputs_hint);
  }
  SymShape lens(count, split_size);
  lens.back() = n - split_size * SymInt(count - 1);
  return lens;
}

/// Piece lengths of chunk(chunks) on a dim of size n.
SymShape chunk_lengths(const std::string& where, const SymInt& n, int64_t chunks,
                       size_t outputs_hint) {
  if (chunks <= 0)
    fail_at(where, "chunk expects chunks to be greater than 0", "> 0", std::to_string(chunks));
  SymInt split_size = (n + SymInt(chunks - 1)).floordiv(chunks);
  if (is_const(split_size, 0) && is_const(n, 0)) return SymShape(chunks, SymInt(0));
  return split_lengths(where, n, split_size, outputs_hint);
}

/// Validates split_with_sizes' sizes against a dim of size n.
void check_split_sizes(const std::string& where, const SymInt& n, const SymShape& sizes) {
  SymInt total(0);
  for (const SymInt& s : sizes) {
    if (auto c = s.maybe_constant(); c && *c < 0)
      fail_at(where, "split_with_sizes: sizes must be non-negative", ">= 0", sym_shape_str(sizes));
    total = total + s;
  }
  if (total.is_constant() && n.is_constant() && total != n)
    fail_at(where, "split_with_sizes: sizes must sum to the dim's size", n.str(),
            sym_shape_str(sizes));
}

/// Narrows `t` along `dim` into pieces of the given lengths (views).
std::vector<RValue> split_views(const Tensor& t, int64_t dim, const SymShape& lens) {
  std::vector<RValue> out;
  int64_t off = 0;
  for (const SymInt& l : lens) {
    int64_t len = l.constant();
    out.emplace_back(t.slice(dim, off, off + len));
    off += len;
  }
  return out;
}

/// Piece types of a split along `dim`.
std::vector<TensorType> split_types(const TensorType& in, int64_t dim, const SymShape& lens) {
  std::vector<TensorType> out;
  for (const SymInt& l : lens) {
    SymShape s = in.sizes;
    s[dim] = l;
    out.push_back(typed(in, s));
  }
  return out;
}

/// Dim of a split-family op on `in` (which must not be 0-dim).
int64_t split_dim(const std::string& where, int64_t rank, int64_t dim, const char* op) {
  if (rank == 0)
    fail_at(where, str(op, " expects at least a 1-dimensional tensor"), "rank >= 1", "0");
  return wrap_dim(dim, rank, where);
}

}  // namespace

// ---- split / split_with_sizes / chunk / unbind -----------------------------------------------

std::vector<TensorType> shape_split_Tensor(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  std::string where = node_where(node);
  int64_t d =
      split_dim(where, static_cast<int64_t>(in.sizes.size()), sa::int_(node, "dim", 0), "split");
  return split_types(
      in, d,
      split_lengths(where, in.sizes[d], sa::symint(node, "split_size"), node.outputs.size()));
}
std::vector<RValue> kernel_split_Tensor(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  int64_t d = split_dim(ctx.where(), t.dim(), ctx.int_arg("dim", 0), "split");
  return split_views(t, d, split_lengths(ctx.where(), t.size(d), ctx.int_arg("split_size"), 0));
}

std::vector<TensorType> shape_split_with_sizes(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  std::string where = node_where(node);
  int64_t d = split_dim(where, static_cast<int64_t>(in.sizes.size()), sa::int_(node, "dim", 0),
                        "split_with_sizes");
  SymShape sizes = sa::symints(node, "split_sizes");
  check_split_sizes(where, in.sizes[d], sizes);
  return split_types(in, d, sizes);
}
std::vector<RValue> kernel_split_with_sizes(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  int64_t d = split_dim(ctx.where(), t.dim(), ctx.int_arg("dim", 0), "split_with_sizes");
  SymShape sizes = to_sym(ctx.ints("split_sizes"));
  check_split_sizes(ctx.where(), t.size(d), sizes);
  return split_views(t, d, sizes);
}

std::vector<TensorType> shape_chunk(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  std::string where = node_where(node);
  int64_t d =
      split_dim(where, static_cast<int64_t>(in.sizes.size()), sa::int_(node, "dim", 0), "chunk");
  return split_types(
      in, d, chunk_lengths(where, in.sizes[d], sa::int_(node, "chunks"), node.outputs.size()));
}
std::vector<RValue> kernel_chunk(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  int64_t d = split_dim(ctx.where(), t.dim(), ctx.int_arg("dim", 0), "chunk");
  return split_views(t, d, chunk_lengths(ctx.where(), t.size(d), ctx.int_arg("chunks"), 0));
}

std::vector<TensorType> shape_unbind_int(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  std::string where = node_where(node);
  int64_t d =
      split_dim(where, static_cast<int64_t>(in.sizes.size()), sa::int_(node, "dim", 0), "unbind");
  size_t count = node.outputs.size();
  if (auto n = in.sizes[d].maybe_constant())
    count = static_cast<size_t>(*n);
  else if (count == 0)
    sa::fail(node, "unbind of a symbolic dim needs the node's outputs to know the count",
             "node outputs", in.sizes[d].str());
  SymShape s = in.sizes;
  s.erase(s.begin() + d);
  return std::vector<TensorType>(count, typed(in, s));
}
std::vector<RValue> kernel_unbind_int(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  int64_t d = split_dim(ctx.where(), t.dim(), ctx.int_arg("dim", 0), "unbind");
  std::vector<RValue> out;
  for (int64_t i = 0; i < t.size(d); ++i) out.emplace_back(t.select(d, i));
  return out;
}

}  // namespace anvil::ops
