// embedding_bag.padding_idx and repeat_interleave.Tensor: shape rules and reference kernels,
// written from PyTorch's definitions (independent of the runtime's kernels).
//
// embedding_bag returns four tensors, following PyTorch 2.11's CPU kernel (_embedding_bag):
//   0 output       [B, D], weight's dtype: the per-bag sum (rows scaled by per_sample_weights) /
//                  mean / max of the weight rows; empty bags give zeros; rows equal to
//                  padding_idx are skipped (and not counted by mean). Sums accumulate in
//                  float (double for f64 weights) and round once to weight's dtype; mean
//                  divides the rounded sums by the bag sizes.
//   1 offset2bag   [n_indices] (bag of each index), or [0] for mode sum on f32 / f16 / bf16
//                  weights without padding_idx (PyTorch's meta function skips it there); the
//                  kernel fills whatever size the graph's type says.
//   2 bag_size     [B]: the number of non-padding indices per bag, in every mode (spec/aot.md
//                  case 43 expects the counts in mode sum too).
//   3 max_indices  mode max: [B, D], the weight row that won each element (the first maximum;
//                  0 for empty bags); other modes: a copy of bag_size.
// Bags are [offsets[b], offsets[b + 1]) (the last one ends at the number of indices unless
// include_last_offset); B = offsets.size(0) - include_last_offset for 1-D indices; 2-D indices
// [B, L] ignore offsets and give every bag L indices. Index outputs are int32 when indices and
// offsets are both int32, else int64.
#include <algorithm>
#include <type_traits>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

namespace sa = ir::shape_args;

/// embedding_bag's non-tensor arguments. padding_idx < 0 means none.
struct BagArgs {
  int64_t mode = 0;  // 0 sum, 1 mean, 2 max
  bool include_last_offset = false;
  int64_t padding_idx = -1;
};

/// The values of an int64 / int32 tensor in row-major order; `what` names it in the error for
/// other dtypes.
std::vector<int64_t> int_values(const Tensor& t, const std::string& where, const std::string& what) {
  if (t.numel() == 0) return {};
  if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32)
    throw Error(str("'", what, "' must be an integer tensor"), where, "int64 or int32",
                dtype_name(t.dtype()));
  const Tensor c = t.to(DType::kInt64).contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

/// The number of bags B; validates ranks and the mode.
int64_t num_bags(const Shape& weight, const Shape& indices, const Shape* offsets, const BagArgs& a,
                 const std::string& where) {
  ANVIL_CHECK(weight.size() == 2, where, "weight has to be a 2-D tensor", "[num_weights, D]",
              shape_str(weight));
  ANVIL_CHECK(a.mode >= 0 && a.mode <= 2, where, "unknown embedding_bag mode",
              "0 (sum), 1 (mean) or 2 (max)", std::to_string(a.mode));
  if (indices.size() == 2) return indices[0];
  ANVIL_CHECK(indices.size() == 1, where, "input has to be a 1-D or 2-D tensor", "1-D or 2-D",
              shape_str(indices));
  ANVIL_CHECK(offsets && offsets->size() == 1, where,
              "offsets has to be a 1-D tensor when input is 1-D", "1-D offsets",
              offsets ? shape_str(*offsets) : std::string("none"));
  const int64_t bags = (*offsets)[0] - (a.include_last_offset ? 1 : 0);
  ANVIL_CHECK(bags >= 0, where, "include_last_offset needs at least one offset", ">= 1 offsets",
              shape_str(*offsets));
  return bags;
}

/// The [start, end) range of every bag in the flattened indices.
std::vector<std::pair<int64_t, int64_t>> bag_ranges(const Tensor& indices,
                                                    const std::optional<Tensor>& offsets,
                                                    int64_t bags, bool include_last,
                                                    const std::string& where) {
  std::vector<std::pair<int64_t, int64_t>> r;
  if (indices.dim() == 2) {
    const int64_t l = indices.size(1);
    for (int64_t b = 0; b < bags; ++b) r.emplace_back(b * l, (b + 1) * l);
    return r;
  }
  const int64_t n = indices.numel();
  const std::vector<int64_t> off = int_values(*offsets, where, "offsets");
  if (!off.empty())
    ANVIL_CHECK(off[0] == 0, where,
                "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                "from position 0",
                "0", std::to_string(off[0]));
  for (int64_t b = 0; b < bags; ++b) {
    const int64_t s = off[static_cast<size_t>(b)];
    // Bag b ends where bag b + 1 starts; the last bag ends at n unless include_last_offset
    // gives its end.
    const bool has_end =
        b + 1 < static_cast<int64_t>(off.size()) && (include_last || b + 1 < bags);
    const int64_t e = has_end ? off[static_cast<size_t>(b + 1)] : n;
    ANVIL_CHECK(s >= 0 && s <= e && e <= n, where,
                str("offsets of bag ", b, " are out of order or out of range"),
                str("0 <= offsets[", b, "] <= offsets[", b + 1, "] <= ", n), str(s, ", ", e));
    r.emplace_back(s, e);
  }
  return r;
}

/// The reference embedding_bag (see the file comment) into the four outputs, whose sizes the
/// caller chose (output [B, D] of weight's dtype; the index outputs of their dtype).
void embedding_bag_ref(const Tensor& weight, const Tensor& indices,
                       const std::optional<Tensor>& offsets,
                       const std::optional<Tensor>& per_sample_weights, const BagArgs& a,
                       Tensor& output, Tensor& offset2bag, Tensor& bag_size, Tensor& max_indices,
                       const std::string& where) {
  const Shape osz = offsets ? offsets->sizes() : Shape{};
  const int64_t bags =
      num_bags(weight.sizes(), indices.sizes(), offsets ? &osz : nullptr, a, where);
  ANVIL_CHECK(is_floating(weight.dtype()) && !is_float8(weight.dtype()), where,
              "embedding_bag needs a floating weight", "f16, bf16, f32 or f64",
              dtype_name(weight.dtype()));
  const int64_t n = indices.numel(), rows = weight.size(0), d = weight.size(1);
  if (per_sample_weights) {
    ANVIL_CHECK(a.mode == 0, where, "per_sample_weights is only supported for mode='sum'", "mode 0",
                std::to_string(a.mode));
    ANVIL_CHECK(per_sample_weights->dtype() == weight.dtype() &&
                    per_sample_weights->sizes() == indices.sizes(),
                where, "per_sample_weights must have the dtype of weight and the shape of input",
                str(dtype_name(weight.dtype()), shape_str(indices.sizes())),
                per_sample_weights->type_str());
  }
  const std::vector<int64_t> idx = int_values(indices, where, "indices");
  for (int64_t k : idx)
    ANVIL_CHECK(k >= 0 && k < rows, where, str("index ", k, " is out of range"),
                str("an index in [0, ", rows - 1, "]"), std::to_string(k));
  const auto ranges = bag_ranges(indices, offsets, bags, a.include_last_offset, where);
  std::vector<int64_t> counts(static_cast<size_t>(bags), 0);
  std::vector<int64_t> argmax(a.mode == 2 ? static_cast<size_t>(bags * d) : 0, 0);
  std::vector<int64_t> o2b(static_cast<size_t>(n), 0);
  output = Tensor::zeros({bags, d}, weight.dtype());
  ANVIL_DISPATCH_FLOAT(weight.dtype(), where, T, {
    // Sums accumulate in float for the 16-bit floats (PyTorch's accumulation type), else in T.
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const Tensor wc = weight.contiguous();
    const T* wp = wc.data<T>();
    std::optional<Tensor> pc;
    if (per_sample_weights) pc = per_sample_weights->contiguous();
    const T* pp = pc ? pc->data<T>() : nullptr;
    T* op = output.data<T>();
    std::vector<A> acc(static_cast<size_t>(d));
    for (int64_t b = 0; b < bags; ++b) {
      std::fill(acc.begin(), acc.end(), A(0));
      int64_t cnt = 0;
      const auto [start, end] = ranges[static_cast<size_t>(b)];
      for (int64_t i = start; i < end; ++i) {
        o2b[static_cast<size_t>(i)] = b;
        const int64_t k = idx[static_cast<size_t>(i)];
        if (k == a.padding_idx) continue;
        const T* wr = wp + k * d;
        for (int64_t j = 0; j < d; ++j) {
          const A wv = static_cast<A>(wr[j]);
          if (a.mode == 2) {
            if (cnt == 0 || wv > acc[static_cast<size_t>(j)]) {  // strict: the first max wins
              acc[static_cast<size_t>(j)] = wv;
              argmax[static_cast<size_t>(b * d + j)] = k;
            }
          } else {
            acc[static_cast<size_t>(j)] += (pp ? static_cast<A>(pp[i]) : A(1)) * wv;
          }
        }
        ++cnt;
      }
      counts[static_cast<size_t>(b)] = cnt;
      for (int64_t j = 0; j < d; ++j) {
        T v = cast_value<T, A>(acc[static_cast<size_t>(j)]);
        // mean: torch divides the (rounded) per-bag sums by the bag sizes.
        if (a.mode == 1 && cnt > 0) v = cast_value<T, A>(static_cast<A>(v) / static_cast<A>(cnt));
        op[b * d + j] = v;
      }
    }
  });
  // offset2bag: [n] or [0].
  if (offset2bag.numel() > 0) {
    ANVIL_CHECK(offset2bag.numel() == n, where, "output 1 (offset2bag) has the wrong size",
                str("0 or ", n), offset2bag.type_str());
    offset2bag = Tensor::from_vector(o2b, offset2bag.sizes()).to(offset2bag.dtype(), true);
  }
  // bag_size: the counts, in every mode.
  std::vector<int64_t> bs(static_cast<size_t>(bag_size.numel()), 0);
  for (size_t b = 0; b < counts.size() && b < bs.size(); ++b) bs[b] = counts[b];
  if (!bs.empty()) bag_size = Tensor::from_vector(bs, bag_size.sizes()).to(bag_size.dtype(), true);
  // max_indices: the winning rows in mode max; a copy of bag_size otherwise.
  if (max_indices.numel() > 0) {
    std::vector<int64_t> mi(static_cast<size_t>(max_indices.numel()), 0);
    const std::vector<int64_t>& from = a.mode == 2 ? argmax : bs;
    std::copy(from.begin(), from.begin() + std::min(from.size(), mi.size()), mi.begin());
    max_indices = Tensor::from_vector(mi, max_indices.sizes()).to(max_indices.dtype(), true);
  }
}

/// Sum of a 1-D (or 0-dim) non-negative int64 / int32 repeats tensor.
int64_t repeat_interleave_size(const Tensor& repeats, const std::string& where) {
  ANVIL_CHECK(repeats.dim() <= 1, where, "repeats has to be a 1-D tensor", "1-D",
              repeats.type_str());
  ANVIL_CHECK(repeats.dtype() == DType::kInt64 || repeats.dtype() == DType::kInt32, where,
              "repeats has to be an int64 or int32 tensor", "int64 or int32",
              dtype_name(repeats.dtype()));
  int64_t total = 0;
  for (int64_t r : int_values(repeats, where, "repeats")) {
    ANVIL_CHECK(r >= 0, where, "repeats can not be negative", ">= 0", std::to_string(r));
    total += r;
  }
  return total;
}

/// The dtype of embedding_bag's index outputs: int32 when indices and offsets are both int32,
/// else int64 (PyTorch promotes them together).
DType bag_index_dtype(DType indices, std::optional<DType> offsets) {
  return indices == DType::kInt32 && (!offsets || *offsets == DType::kInt32) ? DType::kInt32
                                                                             : DType::kInt64;
}

/// A tensor type of `dtype` and `sizes` on `device`.
ir::TensorType make_type(DType dtype, std::vector<SymInt> sizes, Device device) {
  ir::TensorType t;
  t.dtype = dtype;
  t.sizes = std::move(sizes);
  t.device = device;
  return t;
}

}  // namespace

std::vector<ir::TensorType> shape_embedding_bag_padding_idx(const ir::Node& node) {
  const ir::TensorType& w = sa::type(node, "weight");
  const ir::TensorType& idx = sa::type(node, "indices");
  const bool has_off = sa::has(node, "offsets");
  const int64_t mode = sa::int_(node, "mode", 0);
  const bool last = sa::bool_(node, "include_last_offset", false);
  const int64_t padding_idx = sa::has(node, "padding_idx") ? sa::int_(node, "padding_idx") : -1;
  if (w.sizes.size() != 2) sa::fail(node, "weight has to be a 2-D tensor", "[N, D]", w.str());
  if (mode < 0 || mode > 2)
    sa::fail(node, "unknown embedding_bag mode", "0 (sum), 1 (mean) or 2 (max)", str(mode));
  if (!is_floating(w.dtype))
    sa::fail(node, "embedding_bag needs a floating weight", "a float dtype", dtype_name(w.dtype));
  if (idx.dtype != DType::kInt64 && idx.dtype != DType::kInt32)
    sa::fail(node, "indices must be int64 or int32", "int64 or int32", dtype_name(idx.dtype));
  SymInt bags;
  std::optional<DType> off_dtype;
  if (idx.sizes.size() == 2) {
    bags = idx.sizes[0];
  } else if (idx.sizes.size() == 1) {
    if (!has_off) sa::fail(node, "offsets has to be given for a 1-D input", "offsets", "None");
    const ir::TensorType& off = sa::type(node, "offsets");
    if (off.sizes.size() != 1) sa::fail(node, "offsets has to be a 1-D tensor", "1-D", off.str());
    off_dtype = off.dtype;
    bags = last ? off.sizes[0] - 1 : off.sizes[0];
  } else {
    sa::fail(node, "input has to be a 1-D or 2-D tensor", "1-D or 2-D", idx.str());
  }
  if (has_off && !off_dtype) off_dtype = sa::type(node, "offsets").dtype;
  const DType it = bag_index_dtype(idx.dtype, off_dtype);
  SymInt n = 1;
  for (const SymInt& s : idx.sizes) n = n * s;
  // PyTorch skips offset2bag on the sum fast path (see the file comment).
  const bool fast_sum =
      mode == 0 && padding_idx < 0 &&
      (w.dtype == DType::kFloat32 || w.dtype == DType::kFloat16 || w.dtype == DType::kBFloat16);
  std::vector<ir::TensorType> out;
  out.push_back(make_type(w.dtype, {bags, w.sizes[1]}, w.device));
  out.push_back(make_type(it, {fast_sum ? SymInt(0) : n}, w.device));
  out.push_back(make_type(it, {bags}, w.device));
  out.push_back(make_type(
      it, mode == 2 ? std::vector<SymInt>{bags, w.sizes[1]} : std::vector<SymInt>{bags}, w.device));
  return out;
}

std::vector<ir::RValue> kernel_embedding_bag_padding_idx(ir::KernelContext& ctx) {
  const Tensor& w = ctx.tensor("weight");
  const Tensor& idx = ctx.tensor("indices");
  const std::optional<Tensor> off = ctx.opt_tensor("offsets");
  BagArgs a;
  a.mode = ctx.int_arg("mode", 0);
  a.include_last_offset = ctx.bool_arg("include_last_offset", false);
  a.padding_idx = ctx.has("padding_idx") ? ctx.int_arg("padding_idx") : -1;
  const std::string where = ctx.where();
  const Shape osz = off ? off->sizes() : Shape{};
  const int64_t bags =
      num_bags(w.sizes(), idx.sizes(), off ? &osz : nullptr, a, where);
  const DType it =
      bag_index_dtype(idx.dtype(), off ? std::optional<DType>(off->dtype()) : std::nullopt);
  // Default sizes of the index outputs (see the shape rule); the graph's static types win when
  // they are known (PyTorch's meta function decides, e.g. offset2bag [0] on the sum fast path).
  const bool fast_sum = a.mode == 0 && a.padding_idx < 0 &&
                        (w.dtype() == DType::kFloat32 || w.dtype() == DType::kFloat16 ||
                         w.dtype() == DType::kBFloat16);
  std::vector<Shape> sizes = {Shape{fast_sum ? 0 : idx.numel()}, Shape{bags},
                              a.mode == 2 ? Shape{bags, w.size(1)} : Shape{bags}};
  const auto& outs = ctx.node().outputs;
  for (size_t k = 1; k < 4 && k < outs.size(); ++k) {
    if (!outs[k]) continue;
    Shape s;
    for (const SymInt& d : outs[k]->type.sizes)
      if (auto c = d.maybe_constant()) s.push_back(*c);
    if (s.size() == outs[k]->type.sizes.size()) sizes[k - 1] = s;
  }
  Tensor output = Tensor::empty({bags, w.size(1)}, w.dtype());
  Tensor offset2bag = Tensor::empty(sizes[0], it);
  Tensor bag_size = Tensor::empty(sizes[1], it);
  Tensor max_indices = Tensor::empty(sizes[2], it);
  embedding_bag_ref(w, idx, off, ctx.opt_tensor("per_sample_weights"), a, output, offset2bag,
                    bag_size, max_indices, where);
  return {output, offset2bag, bag_size, max_indices};
}

std::vector<ir::TensorType> shape_repeat_interleave_Tensor(const ir::Node& node) {
  const ir::TensorType& r = sa::type(node, "repeats");
  if (r.sizes.size() > 1) sa::fail(node, "repeats has to be a 1-D tensor", "1-D", r.str());
  if (r.dtype != DType::kInt64 && r.dtype != DType::kInt32)
    sa::fail(node, "repeats has to be an int64 or int32 tensor", "int64 or int32",
             dtype_name(r.dtype));
  // Without output_size the length is the sum of the repeats: known only at run time (a fresh
  // unbacked size, which the interpreter binds and the compiler rejects).
  const SymInt size = sa::has(node, "output_size") ? sa::symint(node, "output_size")
                                                   : SymInt::symbol("u_" + node.name);
  return {make_type(r.dtype, {size}, r.device)};
}

std::vector<ir::RValue> kernel_repeat_interleave_Tensor(ir::KernelContext& ctx) {
  const Tensor& r = ctx.tensor("repeats");
  const int64_t total = repeat_interleave_size(r, ctx.where());
  if (ctx.has("output_size") && ctx.int_arg("output_size") != total)
    ctx.fail("the sum of repeats does not match output_size", str(ctx.int_arg("output_size")),
             str(total));
  // [0] * repeats[0] ++ [1] * repeats[1] ++ ... in repeats' dtype.
  std::vector<int64_t> v;
  v.reserve(static_cast<size_t>(total));
  const std::vector<int64_t> reps = int_values(r, ctx.where(), "repeats");
  for (size_t i = 0; i < reps.size(); ++i)
    v.insert(v.end(), static_cast<size_t>(reps[i]), static_cast<int64_t>(i));
  return {Tensor::from_vector(v, {total}).to(r.dtype(), true)};
}

// _embedding_bag: the same op under its ATen-internal name (run_decompositions() and direct
// calls give it), with the same four outputs; padding_idx is an int there (-1: none).
std::vector<ir::TensorType> shape_embedding_bag_internal(const ir::Node& node) {
  return shape_embedding_bag_padding_idx(node);
}
std::vector<ir::RValue> kernel_embedding_bag_internal(ir::KernelContext& ctx) {
  return kernel_embedding_bag_padding_idx(ctx);
}

// ---- embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
// scale_grad_by_freq): the weight's gradient [num_weights, D]; row k sums grad_output's rows
// at the positions whose index is k (none for k == padding_idx), each divided by the number of
// times k occurs when scale_grad_by_freq. The compiler decomposes it into index_put with
// accumulation (passes/decompose_backward.cpp).

std::vector<ir::TensorType> shape_embedding_dense_backward(const ir::Node& node) {
  const ir::TensorType& g = sa::type(node, "grad_output");
  const ir::TensorType& idx = sa::type(node, "indices");
  if (idx.dtype != DType::kInt64 && idx.dtype != DType::kInt32)
    sa::fail(node, "indices must be int64 or int32", "int64 or int32", dtype_name(idx.dtype));
  if (!is_floating(g.dtype) || g.sizes.size() != idx.sizes.size() + 1)
    sa::fail(node, "grad_output must be floating with the indices' sizes plus the embedding dim",
             sym_shape_str(idx.sizes) + " + [D]", g.str());
  for (size_t d = 0; d < idx.sizes.size(); ++d)
    if (!(g.sizes[d] == idx.sizes[d]))
      sa::fail(node, "grad_output's leading sizes must be the indices' sizes",
               sym_shape_str(idx.sizes) + " + [D]", g.str());
  const SymInt n = sa::symint(node, "num_weights");
  if (n.is_constant() && n.constant() < 0)
    sa::fail(node, "num_weights must not be negative", ">= 0", n.str());
  return {make_type(g.dtype, {n, g.sizes.back()}, g.device)};
}

std::vector<ir::RValue> kernel_embedding_dense_backward(ir::KernelContext& ctx) {
  const Tensor& g = ctx.tensor("grad_output");
  const Tensor& idx = ctx.tensor("indices");
  const int64_t n = ctx.int_arg("num_weights"), pad = ctx.int_arg("padding_idx", -1);
  const bool scale = ctx.bool_arg("scale_grad_by_freq", false);
  if (!is_floating(g.dtype()) || g.dim() != idx.dim() + 1 || n < 0)
    ctx.fail("grad_output must be floating with the indices' sizes plus the embedding dim",
             shape_str(idx.sizes()) + " + [D]", g.type_str());
  const std::vector<int64_t> ks = int_values(idx, ctx.where(), "indices");
  const int64_t dim = g.size(-1);
  if (static_cast<int64_t>(ks.size()) * dim != g.numel())
    ctx.fail("grad_output must have one row per index", str(ks.size(), " rows"), g.type_str());
  std::vector<int64_t> count(static_cast<size_t>(n), 0);
  for (int64_t k : ks) {
    if (k < 0 || k >= n)
      ctx.fail("embedding_dense_backward: an index is out of range", str("0 <= index < ", n),
               str(k));
    ++count[static_cast<size_t>(k)];
  }
  const std::vector<double> gv = g.contiguous().to_doubles();
  std::vector<double> out(static_cast<size_t>(n * dim), 0.0);
  for (size_t p = 0; p < ks.size(); ++p) {
    const int64_t k = ks[p];
    if (k == pad) continue;
    const double f = scale ? 1.0 / static_cast<double>(count[static_cast<size_t>(k)]) : 1.0;
    for (int64_t j = 0; j < dim; ++j)
      out[static_cast<size_t>(k * dim + j)] +=
          gv[p * static_cast<size_t>(dim) + static_cast<size_t>(j)] * f;
  }
  return {Tensor::from_vector(out, {n, dim}).to(g.dtype())};
}

}  // namespace anvil::ops
