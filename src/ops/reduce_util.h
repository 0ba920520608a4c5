// Building blocks shared by the reduction families (reduction.cpp, reduction_more.cpp,
// sort.cpp): reduction masks and output sizes, a layout that groups each output element's inputs,
// accumulator and comparison types, and the shape rule of a plain reduction.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "ir/op_schema.h"
#include "ops/common.h"

namespace anvil::ops::reduce {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;

/// Which of `rank` dims a reduction over `dims` covers (empty `dims` = every dim). Repeated dims
/// are an error, as in torch. A 0-dim tensor gives an empty mask.
inline std::vector<bool> reduce_mask(const std::vector<int64_t>& dims, int64_t rank,
                              const std::string& where) {
  std::vector<bool> mask(static_cast<size_t>(rank), dims.empty());
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 1)), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, rank, where);
    if (seen[w])
      throw Error(str("dim ", w, " appears multiple times in the list of dims"), where,
                  "distinct dims", str(d));
    seen[w] = true;
    if (rank > 0) mask[w] = true;
  }
  return mask;
}

/// Output sizes of a reduction: reduced dims become 1 (keepdim) or disappear.
template <typename S>
std::vector<S> reduced_sizes(const std::vector<S>& sizes, const std::vector<bool>& mask,
                             bool keepdim) {
  std::vector<S> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!mask[i])
      out.push_back(sizes[i]);
    else if (keepdim)
      out.push_back(S(1));
  }
  return out;
}

/// A reduction laid out for a kernel: `moved` is the input with kept dims first and reduced dims
/// last, so its row-major element k belongs to output element k / group_size.
struct ReducePlan {
  Tensor moved;
  int64_t groups = 1;
  int64_t group_size = 1;
  Shape out_sizes;
};

/// Lays out the reduction of `t` over the dims set in `mask`.
inline ReducePlan plan_reduce(const Tensor& t, const std::vector<bool>& mask, bool keepdim) {
  ReducePlan p;
  Shape perm;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (!mask[d]) {
      perm.push_back(d);
      p.groups *= t.size(d);
    }
  for (int64_t d = 0; d < t.dim(); ++d)
    if (mask[d]) {
      perm.push_back(d);
      p.group_size *= t.size(d);
    }
  p.moved = t.permute(perm);
  p.out_sizes = reduced_sizes(t.sizes(), mask, keepdim);
  return p;
}

/// Calls f(group, index_in_group, offset) for every element of the plan's input.
template <typename F>
void for_each_grouped(const ReducePlan& p, F&& f) {
  int64_t k = 0;
  const int64_t r = p.group_size;
  for_each_offset(p.moved.sizes(), p.moved.strides(), [&](int64_t off) {
    f(k / r, k % r, off);
    ++k;
  });
}

/// Sum accumulator: float for 16-bit floats, double for float32/64, int64 for integers and bool.
template <typename T>
struct SumAcc {
  using type = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
};
template <>
struct SumAcc<Half> {
  using type = float;
};
template <>
struct SumAcc<BFloat16> {
  using type = float;
};

/// Comparison type: 16-bit floats compare as float, everything else natively.
template <typename T>
using CmpType = typename AccType<T>::type;

/// True for NaN (always false for integer types).
template <typename T>
inline bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<CmpType<T>>)
    return std::isnan(static_cast<CmpType<T>>(v));
  else
    return false;
}

/// Constant int list argument of a shape rule (symbolic entries are an error).
inline std::vector<int64_t> static_ints(const Node& node, const std::string& name,
                                 std::vector<int64_t> dflt) {
  if (!ir::shape_args::has(node, name)) return dflt;
  std::vector<int64_t> out;
  for (const SymInt& s : ir::shape_args::symints(node, name)) {
    if (!s.is_constant())
      ir::shape_args::fail(node, "argument '" + name + "' must be constant", "constant ints",
                           s.str());
    out.push_back(s.constant());
  }
  return out;
}

/// Shape rule shared by the reductions: `dims` over self, keepdim, result dtype.
inline std::vector<TensorType> reduce_shape(const Node& node, const std::vector<int64_t>& dims,
                                     bool keepdim, DType dtype) {
  const TensorType& in = ir::shape_args::type(node, "self");
  auto mask = reduce_mask(dims, static_cast<int64_t>(in.sizes.size()), node_where(node));
  TensorType out;
  out.dtype = dtype;
  out.sizes = reduced_sizes(in.sizes, mask, keepdim);
  out.device = in.device;
  return {out};
}

/// Default result dtype of sum/cumsum: integral (and bool) inputs give int64.
inline DType sum_dtype(DType in, std::optional<DType> requested) {
  if (requested) return *requested;
  return is_integral(in, /*include_bool=*/true) ? DType::kInt64 : in;
}

/// Shape rule of a cumulative scan (cumsum, cumprod): self's sizes along a valid `dim`, in
/// sum_dtype, contiguous.
inline std::vector<ir::TensorType> shape_scan(const ir::Node& node) {
  ir::TensorType out = ir::shape_args::type(node, "self");
  wrap_dim(ir::shape_args::int_(node, "dim"), static_cast<int64_t>(out.sizes.size()),
           node_where(node));
  out.dtype = sum_dtype(out.dtype, ir::shape_args::dtype(node, "dtype"));
  out.strides.clear();
  return {out};
}

/// Reference kernel of a cumulative scan of "self" along "dim" in sum_dtype: each line starts
/// from `Identity` and `step(acc, x)` (acc in the accumulation type, x an input element) gives
/// the next value, stored at every position.
template <int Identity, class Step>
std::vector<ir::RValue> scan_kernel(ir::KernelContext& ctx, Step step) {
  const Tensor& self = ctx.tensor("self");
  const DType dt = sum_dtype(self.dtype(), ctx.dtype_arg("dtype"));
  const int64_t dim = wrap_dim(ctx.int_arg("dim"), self.dim(), ctx.where());
  Tensor out = Tensor::empty(self.sizes(), dt);
  if (self.dim() == 0) {
    out.copy_from(self);
    return {out};
  }
  std::vector<bool> mask(static_cast<size_t>(self.dim()), false);
  mask[dim] = true;
  ReducePlan pin = plan_reduce(self.to(dt), mask, true);
  ReducePlan pout = plan_reduce(out, mask, true);
  std::vector<int64_t> out_off;
  out_off.reserve(static_cast<size_t>(out.numel()));
  for_each_offset(pout.moved.sizes(), pout.moved.strides(),
                  [&](int64_t off) { out_off.push_back(off); });
  ANVIL_DISPATCH_REAL(dt, ctx.where(), T, {
    using Acc = typename SumAcc<T>::type;
    const T* in = static_cast<const T*>(pin.moved.data_ptr());
    T* o = out.data<T>();
    Acc acc = static_cast<Acc>(Identity);
    size_t k = 0;
    for_each_grouped(pin, [&](int64_t, int64_t j, int64_t off) {
      if (j == 0) acc = static_cast<Acc>(Identity);
      acc = step(acc, in[off]);
      o[out_off[k++]] = cast_value<T, Acc>(acc);
    });
  });
  return {out};
}

}  // namespace anvil::ops::reduce
