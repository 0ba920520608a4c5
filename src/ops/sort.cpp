// Sorting along a dim: sort (.default and .stable), argsort (.default and .stable) and topk,
// with PyTorch's order (core/sort_order.h: stable, NaN last ascending / first descending). topk
// takes the first k of that order (largest: descending, else ascending); with ties its indices
// keep index order, where PyTorch's partial sort may list equal values in another order.
// Compiled as extern calls (runtime/kernels/sort.cpp).
#include "core/error.h"
#include "core/sort_order.h"
#include "ops/common.h"
#include "ops/reduce_util.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
using reduce::CmpType;
namespace sa = ir::shape_args;

/// Shape rule: values (self's dtype, `k` along dim when given) and int64 indices.
std::vector<TensorType> sort_shape(const Node& node, std::optional<SymInt> k, bool values,
                                   bool indices) {
  TensorType v = sa::type(node, "self");
  v.strides.clear();
  const int64_t rank = static_cast<int64_t>(v.sizes.size());
  const int64_t d = wrap_dim(sa::int_(node, "dim", -1), rank, node_where(node));
  if (k && rank > 0) {
    const SymInt& n = v.sizes[static_cast<size_t>(d)];
    if (k->is_constant() && n.is_constant() && (k->constant() < 0 || k->constant() > n.constant()))
      sa::fail(node, "selected index k out of range", str("0 <= k <= ", n.str()), k->str());
    v.sizes[static_cast<size_t>(d)] = *k;
  }
  TensorType i = v;
  i.dtype = DType::kInt64;
  std::vector<TensorType> out;
  if (values) out.push_back(v);
  if (indices) out.push_back(i);
  return out;
}

/// Sorts every line of `self` along `dim`, keeping the first `k` (-1: all, values and indices
/// then laid out like a dense `self`, as PyTorch's sort allocates them with empty_like; topk's
/// are row-major); returns values and indices.
std::pair<Tensor, Tensor> sort_impl(const KernelContext& ctx, const Tensor& self, int64_t dim_arg,
                                    bool descending, int64_t k) {
  const bool whole = k < 0;
  const int64_t dim = wrap_dim(dim_arg, self.dim(), ctx.where());
  const int64_t n = self.dim() == 0 ? 1 : self.size(dim);
  if (k < 0) k = n;
  if (k > n) ctx.fail("selected index k out of range", str("0 <= k <= ", n), str(k));
  Shape out_sizes = self.sizes();
  if (self.dim() > 0) out_sizes[static_cast<size_t>(dim)] = k;
  Tensor values = whole ? empty_like_layout(self, self.dtype()) : Tensor::empty(out_sizes, self.dtype());
  Tensor indices =
      whole ? empty_like_layout(self, DType::kInt64) : Tensor::empty(out_sizes, DType::kInt64);
  if (values.numel() == 0 && self.numel() == 0) return {values, indices};
  const SortLines lines_of = sort_line_offsets(self, values, indices, dim);
  const auto& in_off = lines_of.in;
  const auto& v_off = lines_of.values;
  const auto& i_off = lines_of.indices;
  const int64_t lines = n == 0 ? 0 : static_cast<int64_t>(in_off.size()) / n;
  ANVIL_DISPATCH_REAL(self.dtype(), ctx.where(), T, {
    using C = CmpType<T>;
    const T* px = static_cast<const T*>(self.data_ptr());
    T* pv = static_cast<T*>(values.data_ptr());
    int64_t* pi = indices.data<int64_t>();
    std::vector<int64_t> order;
    for (int64_t l = 0; l < lines; ++l) {
      const int64_t* src = in_off.data() + l * n;
      sort_order<C>(n, [&](int64_t j) { return static_cast<C>(px[src[j]]); }, descending, order);
      for (int64_t j = 0; j < k; ++j) {
        pv[v_off[static_cast<size_t>(l * k + j)]] = px[src[order[static_cast<size_t>(j)]]];
        pi[i_off[static_cast<size_t>(l * k + j)]] = order[static_cast<size_t>(j)];
      }
    }
  });
  return {values, indices};
}

std::vector<RValue> sort_kernel(KernelContext& ctx) {
  auto [v, i] = sort_impl(ctx, ctx.tensor("self"), ctx.int_arg("dim", -1),
                          ctx.bool_arg("descending", false), -1);
  return {v, i};
}

std::vector<RValue> argsort_kernel(KernelContext& ctx) {
  return {sort_impl(ctx, ctx.tensor("self"), ctx.int_arg("dim", -1),
                    ctx.bool_arg("descending", false), -1)
              .second};
}

}  // namespace

std::vector<TensorType> shape_sort(const Node& n) { return sort_shape(n, std::nullopt, true, true); }
std::vector<RValue> kernel_sort(KernelContext& ctx) { return sort_kernel(ctx); }
std::vector<TensorType> shape_sort_stable(const Node& n) {
  return sort_shape(n, std::nullopt, true, true);
}
std::vector<RValue> kernel_sort_stable(KernelContext& ctx) { return sort_kernel(ctx); }
std::vector<TensorType> shape_argsort(const Node& n) {
  return sort_shape(n, std::nullopt, false, true);
}
std::vector<RValue> kernel_argsort(KernelContext& ctx) { return argsort_kernel(ctx); }
std::vector<TensorType> shape_argsort_stable(const Node& n) {
  return sort_shape(n, std::nullopt, false, true);
}
std::vector<RValue> kernel_argsort_stable(KernelContext& ctx) { return argsort_kernel(ctx); }

std::vector<TensorType> shape_topk(const Node& n) { return sort_shape(n, sa::symint(n, "k"), true, true); }
std::vector<RValue> kernel_topk(KernelContext& ctx) {
  const int64_t k = ctx.int_arg("k");
  if (k < 0) ctx.fail("selected index k out of range", "k >= 0", str(k));
  auto [v, i] = sort_impl(ctx, ctx.tensor("self"), ctx.int_arg("dim", -1),
                          ctx.bool_arg("largest", true), k);
  return {v, i};
}

}  // namespace anvil::ops
