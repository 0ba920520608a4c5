// aten.scaled_dot_product_attention: shape rule and reference kernel, following PyTorch's math
// backend (_scaled_dot_product_attention_math, torch >= 2.5):
//   * f16 / bf16 inputs are computed in fp32 (f64 stays f64) and the result is rounded once;
//   * scores = q @ k^T * scale (scale defaults to 1/sqrt(E)), plus the mask: a bool mask
//     becomes 0 (True = attend) / -inf, a float mask is added; is_causal uses tril(ones(L, S))
//     (top-left aligned) and may not be combined with an explicit mask;
//   * softmax is torch's _safe_softmax: a row whose scores are all -inf (fully masked) gives
//     zeros, hence a zero output row, rather than NaN;
//   * enable_gqa repeat_interleaves key/value heads (dim -3) up to the query's head count; without
//     it, batch dims (heads included) follow ordinary broadcasting and a mismatch is an Error;
//   * dropout_p must be 0 (inference only).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace linalg_detail {  // defined in linalg.cpp
Tensor matmul_fused(const Tensor& a, const Tensor& b, const Tensor& addend, double alpha,
                    double beta, const std::string& where);
std::vector<SymInt> broadcast_sym(const std::vector<SymInt>& a, const std::vector<SymInt>& b,
                                  const ir::Node& node);
}  // namespace linalg_detail

namespace {

using ir::TensorType;

/// True when two sizes are provably different (both constant and unequal).
bool differ(const SymInt& a, const SymInt& b) {
  return a.is_constant() && b.is_constant() && a.constant() != b.constant();
}

/// repeat_interleave(t, reps, dim=-3): each head repeated `reps` times in a row.
Tensor repeat_heads(const Tensor& t, int64_t reps) {
  if (reps == 1) return t;
  Shape expanded = t.sizes();
  const size_t h = expanded.size() - 3;
  expanded.insert(expanded.begin() + static_cast<int64_t>(h) + 1, reps);
  Shape merged = t.sizes();
  merged[h] *= reps;
  return t.unsqueeze(static_cast<int64_t>(h) + 1).expand(expanded).reshape(merged);
}

/// Checks the GQA head counts and returns key/value with heads repeated to match the query.
void apply_gqa(const ir::KernelContext& ctx, const Tensor& q, Tensor& k, Tensor& v) {
  if (q.dim() < 3 || k.dim() < 3 || v.dim() < 3)
    ctx.fail("enable_gqa needs query, key and value with a head dim (-3)", "rank >= 3",
             q.type_str() + ", " + k.type_str() + ", " + v.type_str());
  const int64_t hq = q.size(-3), hk = k.size(-3), hv = v.size(-3);
  if (hq == hk && hk == hv) return;
  if (hk <= 0 || hv <= 0 || hq % hk != 0 || hq % hv != 0)
    ctx.fail("number of heads in key and value must divide the number of heads in query",
             str("key/value heads dividing ", hq), str(hk, " and ", hv));
  k = repeat_heads(k, hq / hk);
  v = repeat_heads(v, hq / hv);
}

/// Batch dims of a tensor (all but the last two).
Shape batch_of(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

/// In-place softmax over the last dim of a contiguous float/double tensor; rows that are all
/// -inf become all zeros (torch's _safe_softmax).
template <typename F>
void safe_softmax_rows(Tensor& t) {
  const int64_t cols = t.size(-1);
  if (cols == 0 || t.numel() == 0) return;
  const int64_t rows = t.numel() / cols;
  F* p = t.data<F>();
  for (int64_t r = 0; r < rows; ++r) {
    F* row = p + r * cols;
    F mx = -std::numeric_limits<F>::infinity();
    bool nan = false;
    for (int64_t j = 0; j < cols; ++j) {
      if (std::isnan(row[j])) nan = true;
      mx = std::max(mx, row[j]);
    }
    if (nan) {
      for (int64_t j = 0; j < cols; ++j) row[j] = std::numeric_limits<F>::quiet_NaN();
      continue;
    }
    if (mx == -std::numeric_limits<F>::infinity()) {
      for (int64_t j = 0; j < cols; ++j) row[j] = F(0);
      continue;
    }
    F sum = 0;
    for (int64_t j = 0; j < cols; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    for (int64_t j = 0; j < cols; ++j) row[j] /= sum;
  }
}

/// The additive mask in the compute dtype `cd`: bool True -> 0, False -> -inf; float masks are
/// converted; is_causal gives tril(ones(L, S)) as a bool mask. Undefined when there is none.
Tensor additive_mask(const ir::KernelContext& ctx, bool causal, int64_t l, int64_t s, DType cd) {
  Tensor bool_mask;
  if (causal) {
    if (ctx.has("attn_mask"))
      ctx.fail("an explicit attn_mask must not be set when is_causal=True", "attn_mask=None",
               ctx.tensor("attn_mask").type_str());
    bool_mask = Tensor::empty({l, s}, DType::kBool);
    bool* bp = bool_mask.data<bool>();
    for (int64_t i = 0; i < l; ++i)
      for (int64_t j = 0; j < s; ++j) bp[i * s + j] = j <= i;
  } else if (ctx.has("attn_mask")) {
    const Tensor& m = ctx.tensor("attn_mask");
    if (m.dtype() != DType::kBool) {
      if (!is_floating(m.dtype()))
        ctx.fail("attn_mask must be bool or floating", "bool or a float dtype",
                 dtype_name(m.dtype()));
      return m.to(cd);
    }
    bool_mask = m;
  } else {
    return Tensor();
  }
  // 0 where attending, -inf elsewhere: fill with -inf, then copy the bool mask's 0s over.
  Tensor out = Tensor::full(bool_mask.sizes(), -std::numeric_limits<double>::infinity(), cd);
  const bool* bp = bool_mask.data<bool>();
  int64_t i = 0;
  for_each_offset(bool_mask.sizes(), bool_mask.strides(), [&](int64_t o) {
    if (bp[o]) {
      if (cd == DType::kFloat64)
        out.data<double>()[i] = 0.0;
      else
        out.data<float>()[i] = 0.0f;
    }
    ++i;
  });
  return out;
}

}  // namespace

std::vector<TensorType> shape_sdpa(const ir::Node& node) {
  const TensorType& q = ir::shape_args::type(node, "query");
  const TensorType& k = ir::shape_args::type(node, "key");
  const TensorType& v = ir::shape_args::type(node, "value");
  for (const TensorType* t : {&q, &k, &v})
    if (t->sizes.size() < 2)
      ir::shape_args::fail(node, "query, key and value must have at least 2 dims", "rank >= 2",
                           t->str());
  if (q.dtype != k.dtype || q.dtype != v.dtype)
    ir::shape_args::fail(node, "query, key and value must share a dtype", dtype_name(q.dtype),
                         str(dtype_name(k.dtype), ", ", dtype_name(v.dtype)));
  if (!is_floating(q.dtype))
    ir::shape_args::fail(node, "attention needs floating inputs", "a float dtype",
                         dtype_name(q.dtype));
  if (differ(q.sizes.back(), k.sizes.back()))
    ir::shape_args::fail(node, "query and key head sizes differ", q.str(), k.str());
  if (differ(k.sizes[k.sizes.size() - 2], v.sizes[v.sizes.size() - 2]))
    ir::shape_args::fail(node, "key and value sequence lengths differ", k.str(), v.str());
  std::vector<SymInt> bq(q.sizes.begin(), q.sizes.end() - 2);
  std::vector<SymInt> bk(k.sizes.begin(), k.sizes.end() - 2);
  std::vector<SymInt> bv(v.sizes.begin(), v.sizes.end() - 2);
  if (ir::shape_args::bool_(node, "enable_gqa", false) && !bq.empty() && !bk.empty() &&
      !bv.empty()) {
    for (std::vector<SymInt>* b : {&bk, &bv}) {
      const auto hq = bq.back().maybe_constant(), h = b->back().maybe_constant();
      if (hq && h && (*h <= 0 || *hq % *h != 0))
        ir::shape_args::fail(node, "number of heads in key and value must divide the query's",
                             str("a divisor of ", *hq), std::to_string(*h));
      b->back() = bq.back();
    }
  }
  std::vector<SymInt> scores, out;
  try {
    scores = linalg_detail::broadcast_sym(bq, bk, node);
    out = linalg_detail::broadcast_sym(scores, bv, node);
  } catch (const Error&) {
    ir::shape_args::fail(node,
                         "batch / head dims of query, key and value do not broadcast (for "
                         "grouped-query attention pass enable_gqa=True)",
                         "broadcastable batch dims", q.str() + ", " + k.str() + ", " + v.str());
  }
  scores.push_back(q.sizes[q.sizes.size() - 2]);
  scores.push_back(k.sizes[k.sizes.size() - 2]);
  if (ir::shape_args::has(node, "attn_mask")) {
    // The mask is added in place to the scores, so it must broadcast to their shape.
    const TensorType& m = ir::shape_args::type(node, "attn_mask");
    bool ok = m.sizes.size() <= scores.size();
    for (size_t d = 1; ok && d <= m.sizes.size(); ++d) {
      const SymInt& ms = m.sizes[m.sizes.size() - d];
      ok = !differ(ms, scores[scores.size() - d]) || ms == SymInt(1);
    }
    if (!ok)
      ir::shape_args::fail(node, "attn_mask does not broadcast to the attention scores' shape",
                           sym_shape_str(scores), m.str());
  }
  out.push_back(q.sizes[q.sizes.size() - 2]);
  out.push_back(v.sizes.back());
  TensorType t;
  t.dtype = q.dtype;
  t.sizes = out;
  t.device = q.device;
  return {t};
}

std::vector<ir::RValue> kernel_sdpa(ir::KernelContext& ctx) {
  const Tensor& query = ctx.tensor("query");
  Tensor key = ctx.tensor("key");
  Tensor value = ctx.tensor("value");
  const Tensor* operands[] = {&query, &key, &value};
  for (const Tensor* t : operands)
    if (t->dim() < 2)
      ctx.fail("query, key and value must have at least 2 dims", "rank >= 2", t->type_str());
  if (query.dtype() != key.dtype() || query.dtype() != value.dtype())
    ctx.fail("query, key and value must share a dtype", dtype_name(query.dtype()),
             str(dtype_name(key.dtype()), ", ", dtype_name(value.dtype())));
  const DType dt = query.dtype();
  if (!is_floating(dt) || is_float8(dt))
    ctx.fail("attention needs f16, bf16, f32 or f64 inputs", "a float dtype", dtype_name(dt));
  const double dropout = ctx.float_arg("dropout_p", 0.0);
  if (dropout != 0.0)
    ctx.fail("dropout is not supported at inference", "dropout_p=0", str(dropout));
  const int64_t l = query.size(-2), e = query.size(-1), s = key.size(-2);
  if (key.size(-1) != e)
    ctx.fail("query and key head sizes differ", query.type_str(), key.type_str());
  if (value.size(-2) != s)
    ctx.fail("key and value sequence lengths differ", key.type_str(), value.type_str());
  if (ctx.bool_arg("enable_gqa", false)) apply_gqa(ctx, query, key, value);
  const Shape bq = batch_of(query), bk = batch_of(key), bv = batch_of(value);
  try {
    (void)broadcast_shapes(broadcast_shapes(bq, bk, ctx.where()), bv, ctx.where());
  } catch (const Error&) {
    ctx.fail(
        "batch / head dims of query, key and value do not broadcast (for grouped-query "
        "attention pass enable_gqa=True)",
        "broadcastable batch dims",
        query.type_str() + ", " + key.type_str() + ", " + value.type_str());
  }
  const double scale =
      ctx.has("scale") ? ctx.float_arg("scale") : 1.0 / std::sqrt(static_cast<double>(e));
  const DType cd = dt == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  const Tensor mask = additive_mask(ctx, ctx.bool_arg("is_causal", false), l, s, cd);
  if (mask.defined()) {
    Shape scores_shape = broadcast_shapes(bq, bk, ctx.where());
    scores_shape.push_back(l);
    scores_shape.push_back(s);
    bool ok = mask.dim() <= static_cast<int64_t>(scores_shape.size());
    for (int64_t d = 1; ok && d <= mask.dim(); ++d) {
      const int64_t m = mask.size(-d), want = scores_shape[scores_shape.size() - d];
      ok = m == want || m == 1;
    }
    if (!ok)
      ctx.fail("attn_mask does not broadcast to the attention scores' shape",
               shape_str(scores_shape), mask.type_str());
  }
  const Tensor qf = query.to(cd), kf = key.to(cd), vf = value.to(cd);
  Tensor scores =
      linalg_detail::matmul_fused(qf, kf.transpose(-2, -1), mask, scale, 1.0, ctx.where());
  if (cd == DType::kFloat64)
    safe_softmax_rows<double>(scores);
  else
    safe_softmax_rows<float>(scores);
  Tensor out = linalg_detail::matmul_fused(scores, vf, Tensor(), 1.0, 0.0, ctx.where());
  // PyTorch's CPU kernel for 4-D inputs with unit-stride, equal head dims gives the output
  // the query's layout (empty_like(query): the same dim order by stride). Later views rely on
  // those strides (torchvision's attention views the permuted output), so the reference gives
  // the same layout; other inputs get the math backend's contiguous result.
  const bool like_query = query.dim() == 4 && key.dim() == 4 && value.dim() == 4 &&
                          out.dim() == 4 && query.size(-1) == value.size(-1) &&
                          query.stride(-1) == 1 && key.stride(-1) == 1 && value.stride(-1) == 1;
  if (!like_query) return {out.to(dt)};
  Shape order = {0, 1, 2, 3};  // dims from outermost to innermost in the query's memory
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return query.stride(a) > query.stride(b); });
  Shape sizes, inverse(4);
  for (size_t k = 0; k < 4; ++k) {
    sizes.push_back(out.size(order[k]));
    inverse[static_cast<size_t>(order[k])] = static_cast<int64_t>(k);
  }
  Tensor laid = Tensor::empty(sizes, dt).permute(inverse);
  laid.copy_from(out.to(dt));
  return {laid};
}

}  // namespace anvil::ops
