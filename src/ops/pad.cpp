// Padding and rolling: aten.pad (constant, reflect, replicate, circular), the Core ATen forms
// constant_pad_nd, reflection_pad{1,2,3}d and replication_pad{1,2,3}d, and aten.roll. Rows in
// ops.def under "pad.cpp"; the compiler lowers them as index maps (passes/lower_pad.cpp).
//
// PyTorch's rules, kept here: `pad` lists (left, right) pairs from the last dimension backwards,
// at most two per dimension. Constant padding may be negative (it crops). Reflect needs each pad
// below the dimension's size, circular at most the size, replicate a non-empty dimension; the
// non-constant modes pad the last 1, 2 or 3 dimensions of a tensor with one or two more
// (batch, channels) and take no negative pads.
#include <cmath>

#include "ops/common.h"
#include "ops/pad.h"
#include "ops/registry.h"

namespace anvil::ops {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;

namespace {

/// The (left, right) pads per padded dimension, innermost first: pairs[k] pads dim rank-1-k.
struct PadSpec {
  std::vector<std::pair<SymInt, SymInt>> pairs;
  std::string mode = "constant";
};

/// Which mode the target implies ("" for aten.pad, which reads its `mode` argument).
std::string target_mode(const std::string& target) {
  if (target.rfind("aten.reflection_pad", 0) == 0) return "reflect";
  if (target.rfind("aten.replication_pad", 0) == 0) return "replicate";
  if (target == "aten.constant_pad_nd.default") return "constant";
  return "";
}

/// Padded-dimension count a reflection_pad2d / replication_pad3d target fixes (0: any).
int target_dims(const std::string& target) {
  for (int k = 1; k <= 3; ++k)
    if (target.find("_pad" + std::to_string(k) + "d") != std::string::npos) return k;
  return 0;
}

const char* pad_arg_name(const std::string& target) {
  return target_mode(target).empty() || target == "aten.constant_pad_nd.default" ? "pad"
                                                                                  : "padding";
}

/// Validates the pads of a node against PyTorch's rules; `sizes` are the input's.
PadSpec pad_spec(const std::string& target, const std::vector<SymInt>& pads,
                 const std::string& mode_arg, const std::vector<SymInt>& sizes,
                 const std::string& where) {
  PadSpec p;
  p.mode = target_mode(target);
  if (p.mode.empty()) p.mode = mode_arg;
  if (p.mode != "constant" && p.mode != "reflect" && p.mode != "replicate" &&
      p.mode != "circular")
    fail_at(where, "unknown padding mode", "'constant', 'reflect', 'replicate' or 'circular'",
            "'" + p.mode + "'");
  const size_t rank = sizes.size();
  if (pads.size() % 2 != 0)
    fail_at(where, "padding length must be even", "pairs (left, right) per dimension",
            std::to_string(pads.size()) + " values");
  const size_t k = pads.size() / 2;
  if (k > rank)
    fail_at(where, "padding length too large", "at most 2 values per dimension of a rank-" +
                std::to_string(rank) + " tensor", std::to_string(pads.size()) + " values");
  if (const int want = target_dims(target); want && static_cast<size_t>(want) != k)
    fail_at(where, "padding length does not match the op", std::to_string(2 * want) + " values",
            std::to_string(pads.size()));
  if (p.mode != "constant") {
    if (k < 1 || k > 3 || (rank != k + 1 && rank != k + 2))
      fail_at(where, p.mode + " padding of " + std::to_string(k) + " dimension(s)",
              "a tensor of rank " + std::to_string(k + 1) + " or " + std::to_string(k + 2) +
                  " padding its last 1, 2 or 3 dimensions",
              "rank " + std::to_string(rank));
  }
  for (size_t j = 0; j < k; ++j) {
    const SymInt& l = pads[2 * j];
    const SymInt& r = pads[2 * j + 1];
    const SymInt& n = sizes[rank - 1 - j];
    const std::string dim = "dimension " + std::to_string(rank - 1 - j);
    const auto lc = l.maybe_constant(), rc = r.maybe_constant(), nc = n.maybe_constant();
    if (p.mode == "constant") {
      if (lc && rc && nc && *nc + *lc + *rc < 0)
        fail_at(where, "padding gives a negative size at " + dim, "size + pads >= 0",
                str(*nc, " + ", *lc, " + ", *rc));
    } else {
      if ((lc && *lc < 0) || (rc && *rc < 0))
        fail_at(where, p.mode + " padding must not be negative", "pads >= 0",
                str(lc ? *lc : 0, ", ", rc ? *rc : 0, " at ", dim));
      if (nc && lc && rc) {
        const int64_t big = std::max(*lc, *rc);
        if (p.mode == "reflect" && big >= *nc)
          fail_at(where, "reflect padding must be less than the input size at " + dim,
                  "pads < " + std::to_string(*nc), std::to_string(big));
        if (p.mode == "circular" && big > *nc)
          fail_at(where, "circular padding may not exceed the input size at " + dim,
                  "pads <= " + std::to_string(*nc), std::to_string(big));
        if (p.mode == "replicate" && *nc == 0 && big > 0)
          fail_at(where, "replicate padding of an empty dimension", "size > 0 at " + dim, "0");
      }
    }
    p.pairs.emplace_back(l, r);
  }
  return p;
}

PadSpec node_pad_spec(const Node& node) {
  const TensorType& self = ir::shape_args::type(node, "self");
  std::string mode = "constant";
  if (const ir::Arg* a = node.arg("mode"); a && a->kind == ir::Arg::Kind::kString) mode = a->s;
  return pad_spec(node.target, ir::shape_args::symints(node, pad_arg_name(node.target)), mode,
                  self.sizes, node_where(node));
}

/// Source index along a dimension of size n for output position j - left (`j` already shifted):
/// reflect, replicate or circular (never called for constant).
int64_t source_index(const std::string& mode, int64_t j, int64_t n) {
  if (mode == "reflect") return (n - 1) - std::llabs((n - 1) - std::llabs(j));
  if (mode == "replicate") return std::min(std::max<int64_t>(j, 0), n - 1);
  return ((j % n) + n) % n;  // circular
}

}  // namespace

// `pad` of a node, for passes/lower_pad.cpp: mode and (left, right) per dimension, innermost
// first. Declared in ops/pad.h.
PadInfo pad_info(const Node& node) {
  PadSpec p = node_pad_spec(node);
  PadInfo info;
  info.mode = p.mode;
  info.pairs = std::move(p.pairs);
  info.value = 0;
  if (const ir::Arg* v = node.arg("value")) {
    if (v->kind == ir::Arg::Kind::kFloat) info.value = v->f;
    if (v->kind == ir::Arg::Kind::kInt) info.value = static_cast<double>(v->i);
    if (v->kind == ir::Arg::Kind::kBool) info.value = v->b ? 1 : 0;
  }
  return info;
}

namespace {

std::vector<TensorType> pad_shape(const Node& node) {
  const TensorType& self = ir::shape_args::type(node, "self");
  const PadSpec p = node_pad_spec(node);
  std::vector<SymInt> sizes = self.sizes;
  for (size_t j = 0; j < p.pairs.size(); ++j) {
    SymInt& s = sizes[sizes.size() - 1 - j];
    s = s + p.pairs[j].first + p.pairs[j].second;
  }
  return {typed(self, sizes)};
}

std::vector<RValue> pad_kernel(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const std::vector<int64_t> raw = ctx.ints(pad_arg_name(ctx.node().target));
  const std::vector<SymInt> pads(raw.begin(), raw.end());
  const std::string mode_arg = ctx.string_arg("mode", "constant");
  const PadSpec p = pad_spec(ctx.node().target, pads, mode_arg, to_sym(self.sizes()), ctx.where());
  const int64_t rank = self.dim();
  if (p.mode == "constant") {
    const double value = ctx.has("value") ? ctx.float_arg("value") : 0.0;
    Shape sizes = self.sizes();
    for (size_t j = 0; j < p.pairs.size(); ++j)
      sizes[sizes.size() - 1 - j] += raw[2 * j] + raw[2 * j + 1];
    Tensor out = Tensor::full(sizes, value, self.dtype());
    // The input region that survives (negative pads crop) and where it lands.
    Tensor src = self, dst = out;
    for (size_t j = 0; j < p.pairs.size(); ++j) {
      const int64_t d = rank - 1 - static_cast<int64_t>(j);
      const int64_t l = raw[2 * j], r = raw[2 * j + 1], n = self.size(d);
      const int64_t s0 = std::max<int64_t>(0, -l), s1 = n - std::max<int64_t>(0, -r);
      if (s1 <= s0) return {out};
      src = src.slice(d, s0, s1);
      dst = dst.slice(d, std::max<int64_t>(0, l), std::max<int64_t>(0, l) + (s1 - s0));
    }
    dst.copy_from(src);
    return {channels_last_like(out, self)};  // constant_pad_nd keeps channels-last
  }
  // Non-constant modes: pad one dimension at a time, copying slices from their source index.
  Tensor cur = self;
  for (size_t j = 0; j < p.pairs.size(); ++j) {
    const int64_t d = rank - 1 - static_cast<int64_t>(j);
    const int64_t l = raw[2 * j], r = raw[2 * j + 1], n = cur.size(d);
    Shape sizes = cur.sizes();
    sizes[static_cast<size_t>(d)] = n + l + r;
    Tensor next = Tensor::empty(sizes, self.dtype());
    for (int64_t i = 0; i < n + l + r; ++i)
      next.select(d, i).copy_from(cur.select(d, source_index(p.mode, i - l, n)));
    cur = next;
  }
  return {cur};
}

// ---- roll: out[i] = self[(i - shift) mod n] along each listed dim; no dims rolls the
// flattened tensor and restores the shape.

struct RollSpec {
  std::vector<int64_t> shifts, dims;
};

RollSpec roll_spec(std::vector<int64_t> shifts, std::vector<int64_t> dims, int64_t rank,
                   const std::string& where) {
  if (shifts.empty()) fail_at(where, "roll needs shifts", "at least one shift", "none");
  if (dims.empty() && shifts.size() != 1)
    fail_at(where, "roll without dims takes one shift", "1 shift", std::to_string(shifts.size()));
  if (!dims.empty() && dims.size() != shifts.size())
    fail_at(where, "roll's shifts and dims differ in length", std::to_string(dims.size()),
            std::to_string(shifts.size()));
  for (int64_t& d : dims) {
    if (d < -std::max<int64_t>(rank, 1) || d >= std::max<int64_t>(rank, 1))
      fail_at(where, "roll dim out of range",
              "a dim in [" + std::to_string(-rank) + ", " + std::to_string(rank) + ")",
              std::to_string(d));
    if (d < 0) d += rank;
  }
  return {std::move(shifts), std::move(dims)};
}

}  // namespace

RollInfo roll_info(const Node& node) {
  const TensorType& self = ir::shape_args::type(node, "self");
  std::vector<int64_t> shifts, dims;
  for (const SymInt& s : ir::shape_args::symints(node, "shifts")) {
    if (!s.is_constant())
      ir::shape_args::fail(node, "a symbolic roll shift", "constant shifts", s.str());
    shifts.push_back(s.constant());
  }
  if (ir::shape_args::has(node, "dims"))
    for (const SymInt& d : ir::shape_args::symints(node, "dims")) dims.push_back(d.constant());
  RollSpec r = roll_spec(shifts, dims, static_cast<int64_t>(self.sizes.size()), node_where(node));
  return {std::move(r.shifts), std::move(r.dims)};
}

std::vector<TensorType> shape_roll(const Node& node) {
  roll_info(node);
  TensorType t = ir::shape_args::type(node, "self");
  t.strides.clear();
  return {t};
}

std::vector<RValue> kernel_roll(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const RollSpec r = roll_spec(ctx.ints("shifts"), ctx.ints("dims", {}), self.dim(), ctx.where());
  Tensor cur = r.dims.empty() ? self.contiguous().reshape({self.numel()}) : self;
  const std::vector<int64_t> dims = r.dims.empty() ? std::vector<int64_t>{0} : r.dims;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = dims[k], n = cur.size(d);
    Tensor next = Tensor::empty(cur.sizes(), cur.dtype());
    if (n > 0) {
      const int64_t s = ((r.shifts[k] % n) + n) % n;
      if (s > 0) next.slice(d, 0, s).copy_from(cur.slice(d, n - s, n));
      next.slice(d, s, n).copy_from(cur.slice(d, 0, n - s));
    }
    cur = next;
  }
  return {r.dims.empty() ? cur.reshape(self.sizes()) : cur};
}

// ---- flip: out[i] = self[n-1-i] along each listed dim (a copy, as in PyTorch).

std::vector<int64_t> flip_dims(const Node& node) {
  const int64_t rank = static_cast<int64_t>(ir::shape_args::type(node, "self").sizes.size());
  std::vector<int64_t> dims;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 1)), false);
  for (const SymInt& d : ir::shape_args::symints(node, "dims")) {
    const int64_t w = wrap_dim(d.constant(), rank, node_where(node));
    if (seen[static_cast<size_t>(w)])
      ir::shape_args::fail(node, "flip dim appears multiple times", "distinct dims",
                           std::to_string(d.constant()));
    seen[static_cast<size_t>(w)] = true;
    dims.push_back(w);
  }
  return dims;
}

std::vector<TensorType> shape_flip(const Node& node) {
  flip_dims(node);
  TensorType t = ir::shape_args::type(node, "self");
  t.strides.clear();
  return {t};
}

std::vector<RValue> kernel_flip(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  Tensor cur = self;
  for (int64_t d : flip_dims(ctx.node())) {
    Tensor next = Tensor::empty(cur.sizes(), cur.dtype());
    const int64_t n = cur.size(d);
    for (int64_t i = 0; i < n; ++i) next.select(d, i).copy_from(cur.select(d, n - 1 - i));
    cur = next;
  }
  return {layout_like(cur.contiguous(), self)};  // flip's result is empty_like(self)
}

// ---- the rows

std::vector<TensorType> shape_pad(const Node& n) { return pad_shape(n); }
std::vector<RValue> kernel_pad(KernelContext& c) { return pad_kernel(c); }
std::vector<TensorType> shape_constant_pad_nd(const Node& n) { return pad_shape(n); }
std::vector<RValue> kernel_constant_pad_nd(KernelContext& c) { return pad_kernel(c); }
std::vector<TensorType> shape_reflection_pad1d(const Node& n) { return pad_shape(n); }
std::vector<RValue> kernel_reflection_pad1d(KernelContext& c) { return pad_kernel(c); }
std::vector<TensorType> shape_reflection_pad2d(const Node& n) { return pad_shape(n); }
std::vector<RValue> kernel_reflection_pad2d(KernelContext& c) { return pad_kernel(c); }
std::vector<TensorType> shape_reflection_pad3d(const Node& n) { return pad_shape(n); }
std::vector<RValue> kernel_reflection_pad3d(KernelContext& c) { return pad_kernel(c); }
std::vector<TensorType> shape_replication_pad1d(const Node& n) { return pad_shape(n); }
std::vector<RValue> kernel_replication_pad1d(KernelContext& c) { return pad_kernel(c); }
std::vector<TensorType> shape_replication_pad2d(const Node& n) { return pad_shape(n); }
std::vector<RValue> kernel_replication_pad2d(KernelContext& c) { return pad_kernel(c); }
std::vector<TensorType> shape_replication_pad3d(const Node& n) { return pad_shape(n); }
std::vector<RValue> kernel_replication_pad3d(KernelContext& c) { return pad_kernel(c); }

}  // namespace anvil::ops
