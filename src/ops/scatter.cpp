// Scatter-style ops: scatter.src / scatter.value, scatter_add, scatter_reduce.two and index_put:
// shape rules and reference kernels. The reference loops follow PyTorch's definitions (and its
// CPU kernels' arithmetic), independently of the runtime's kernels, which they are the oracle for:
//   scatter:    out[..., index[i][j][k], ...] (reduce)= src[i][j][k] along `dim`, one index
//               element at a time in row-major order (last write wins without a reduction).
//               include_self = false first sets every scattered-to element to the reduction's
//               identity (0, 1, -inf / lowest, +inf / max); mean divides the rounded sum by the
//               number of contributions (self included when include_self), floor division for
//               integers. Values combine in PyTorch's accumulation type (float for f16 / bf16,
//               the element type otherwise; integers wrap).
//   index_put:  out[indices] = values, or out[indices] += values one element at a time in the
//               element type (PyTorch's serial CPU loop), in row-major order of the indexing
//               result.
// Outputs are new contiguous tensors of self's type.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

namespace sa = ir::shape_args;

/// The reduction of scatter / scatter_reduce.
enum class Reduce { kNone, kSum, kProd, kMean, kAmax, kAmin };

/// Parses scatter_reduce.two's `reduce` ("sum", "prod", "mean", "amax", "amin") or scatter's
/// ("add", "multiply").
Reduce parse_reduce(const std::string& reduce, const std::string& where) {
  if (reduce == "sum" || reduce == "add") return Reduce::kSum;
  if (reduce == "prod" || reduce == "multiply") return Reduce::kProd;
  if (reduce == "mean") return Reduce::kMean;
  if (reduce == "amax") return Reduce::kAmax;
  if (reduce == "amin") return Reduce::kAmin;
  throw Error("unknown reduce mode", where, "sum, prod, mean, amax or amin", reduce);
}

/// PyTorch's accumulation type for elements of type T: float for the 16-bit floats, T otherwise.
template <typename T>
using AccOf = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

/// a + b, wrapping for integers (bool: logical or).
template <typename A>
A add(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}

/// a * b, wrapping for integers (bool: logical and).
template <typename A>
A mul(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}

/// True for a floating NaN.
template <typename A>
bool isnan_(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return std::isnan(v);
  else
    return false;
}

/// `cur` combined with `v` by reduction `r` (amax / amin propagate NaN, like torch).
template <typename A>
A combine(Reduce r, A cur, A v) {
  switch (r) {
    case Reduce::kSum:
    case Reduce::kMean:
      return add(cur, v);
    case Reduce::kProd:
      return mul(cur, v);
    case Reduce::kAmax:
      if (isnan_(cur)) return cur;
      return (isnan_(v) || v > cur) ? v : cur;
    case Reduce::kAmin:
      if (isnan_(cur)) return cur;
      return (isnan_(v) || v < cur) ? v : cur;
    case Reduce::kNone:
      break;
  }
  return v;
}

/// The identity of reduction `r`, which include_self = false starts scattered-to elements from.
template <typename A>
A identity(Reduce r) {
  using L = std::numeric_limits<A>;
  switch (r) {
    case Reduce::kProd:
      return A(1);
    case Reduce::kAmax:
      if constexpr (L::has_infinity)
        return -L::infinity();
      else
        return L::lowest();
    case Reduce::kAmin:
      if constexpr (L::has_infinity)
        return L::infinity();
      else
        return L::max();
    default:
      return A(0);
  }
}

/// Row-major coordinates of linear position `p` in `sizes`.
void unravel(int64_t p, const Shape& sizes, Shape& coords) {
  coords.assign(sizes.size(), 0);
  for (size_t d = sizes.size(); d-- > 0;) {
    coords[d] = p % sizes[d];
    p /= sizes[d];
  }
}

/// Linear row-major offset of `coords` in a contiguous tensor of `sizes`.
int64_t ravel(const Shape& coords, const Shape& sizes) {
  int64_t off = 0;
  for (size_t d = 0; d < sizes.size(); ++d) off = off * sizes[d] + coords[d];
  return off;
}

/// Checks scatter's index against self / src sizes (same rank; index.size(d) <= src.size(d) for
/// every d and <= self.size(d) for d != dim) and its dtype (int64). `src` is null for a scalar.
void check_scatter_args(const Shape& self, int64_t dim, const Tensor& index, const Shape* src,
                        const std::string& where) {
  ANVIL_CHECK(index.dtype() == DType::kInt64, where, "scatter(): expected an int64 index", "int64",
              dtype_name(index.dtype()));
  const size_t rank = std::max<size_t>(self.size(), 1);
  const size_t irank = std::max<size_t>(index.dim(), 1);
  ANVIL_CHECK(index.numel() == 0 || irank == rank, where,
              "index tensor must have the same number of dimensions as self", str(rank, "-D"),
              index.type_str());
  if (src)
    ANVIL_CHECK(index.numel() == 0 || std::max<size_t>(src->size(), 1) == rank, where,
                "src must have the same number of dimensions as self", str(rank, "-D"),
                shape_str(*src));
  if (index.numel() == 0 || self.empty()) return;
  for (size_t d = 0; d < self.size(); ++d) {
    ANVIL_CHECK(static_cast<int64_t>(d) == dim || index.size(d) <= self[d], where,
                str("size of index dim ", d, " exceeds self's"), str("<= ", self[d]),
                index.type_str());
    if (src)
      ANVIL_CHECK(index.size(d) <= (*src)[d], where, str("size of index dim ", d, " exceeds src's"),
                  str("<= ", (*src)[d]), index.type_str());
  }
}

/// The scatter loop for elements of type T: `self` and `src` are contiguous T tensors, `index` a
/// contiguous int64 tensor, all of rank >= 1 (`src` holds one value when `scalar_src`). Returns
/// the result, contiguous.
template <typename T>
Tensor scatter_loop(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                    bool scalar_src, Reduce reduce, bool include_self, const std::string& where) {
  using A = AccOf<T>;
  const Shape& osz = self.sizes();
  const Shape& isz = index.sizes();
  const Shape& ssz = src.sizes();
  const int64_t n = self.numel(), limit = osz[static_cast<size_t>(dim)];
  const int64_t* ip = index.data<int64_t>();
  const T* sp = src.data<T>();
  std::vector<A> acc(static_cast<size_t>(n));
  const T* selfp = self.data<T>();
  for (int64_t t = 0; t < n; ++t) acc[static_cast<size_t>(t)] = cast_value<A, T>(selfp[t]);
  // The output element that index position p writes (bounds-checked).
  Shape c;
  auto target = [&](int64_t p) {
    unravel(p, isz, c);
    const int64_t i = ip[p];
    if (i < 0 || i >= limit)
      throw Error(str("index ", i, " is out of bounds for dimension ", dim, " with size ", limit),
                  where, str("an index in [0, ", limit - 1, "]"), std::to_string(i));
    Shape tc = c;
    tc[static_cast<size_t>(dim)] = i;
    return ravel(tc, osz);
  };
  if (reduce != Reduce::kNone && !include_self)
    for (int64_t p = 0; p < index.numel(); ++p)
      acc[static_cast<size_t>(target(p))] = identity<A>(reduce);
  // Contributions per element (mean): self counts once when include_self.
  std::vector<int64_t> count(static_cast<size_t>(n), include_self ? 1 : 0);
  for (int64_t p = 0; p < index.numel(); ++p) {
    const int64_t t = target(p);  // also sets c, the index position's coordinates
    const A v = cast_value<A, T>(scalar_src ? sp[0] : sp[ravel(c, ssz)]);
    const A cur = acc[static_cast<size_t>(t)];
    acc[static_cast<size_t>(t)] = reduce == Reduce::kNone ? v : combine<A>(reduce, cur, v);
    ++count[static_cast<size_t>(t)];
  }
  Tensor out = Tensor::empty(osz, dtype_of<T>());
  T* op = out.data<T>();
  for (int64_t t = 0; t < n; ++t) {
    T v = cast_value<T, A>(acc[static_cast<size_t>(t)]);
    const int64_t k = count[static_cast<size_t>(t)];
    if (reduce == Reduce::kMean && k > 1) {  // torch: out.div_(count) on the rounded sum
      if constexpr (std::is_integral_v<T>) {
        const int64_t s = static_cast<int64_t>(v);
        const int64_t q = s / k;
        v = static_cast<T>((s % k != 0 && s < 0) ? q - 1 : q);  // floor division
      } else {
        v = cast_value<T, A>(cast_value<A, T>(v) / static_cast<A>(k));
      }
    }
    op[t] = v;
  }
  return out;
}

/// self's type with contiguous strides.
ir::TensorType self_type(const ir::Node& node) {
  ir::TensorType t = sa::type(node, "self");
  t.strides.clear();
  return t;
}

/// Shape rule of the scatter family: checks index's dtype and rank, src's dtype.
ir::TensorType scatter_type(const ir::Node& node, bool has_src) {
  const ir::TensorType t = self_type(node);
  const ir::TensorType& index = sa::type(node, "index");
  if (index.dtype != DType::kInt64)
    sa::fail(node, "scatter(): expected an int64 index", "int64", dtype_name(index.dtype));
  if (index.sizes.size() != t.sizes.size() && !(index.sizes.empty() || t.sizes.empty()))
    sa::fail(node, "index tensor must have the same number of dimensions as self",
             str(t.sizes.size(), "-D"), index.str());
  if (has_src) {
    const ir::TensorType& src = sa::type(node, "src");
    if (src.dtype != t.dtype)
      sa::fail(node, "scatter(): expected self and src to have the same dtype", dtype_name(t.dtype),
               dtype_name(src.dtype));
  }
  return t;
}

/// A contiguous copy of self.
Tensor fresh_copy(const Tensor& self) { return self.contiguous().clone(); }

/// `t` as a rank >= 1 tensor (a 0-dim tensor becomes [1]).
Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

/// The reference kernel of scatter / scatter_reduce.
Tensor run_scatter(const ir::KernelContext& ctx, const Tensor& src, bool scalar_src, Reduce reduce,
                   bool include_self) {
  const Tensor& self = ctx.tensor("self");
  const Tensor& index = ctx.tensor("index");
  const std::string where = ctx.where();
  const int64_t rank = self.dim() == 0 ? 1 : self.dim();
  int64_t dim = ctx.int_arg("dim");
  if (dim < -rank || dim >= rank)
    ctx.fail("dimension out of range", str("a dim in [", -rank, ", ", rank - 1, "]"), str(dim));
  if (dim < 0) dim += rank;
  check_scatter_args(self.sizes(), dim, index, scalar_src ? nullptr : &src.sizes(), where);
  if (!scalar_src && src.dtype() != self.dtype())
    ctx.fail("scatter(): expected self and src to have the same dtype", dtype_name(self.dtype()),
             dtype_name(src.dtype()));
  if (self.numel() == 0 || index.numel() == 0) return fresh_copy(self);
  const Tensor self1 = at_least_1d(self.contiguous());
  const Tensor idx = at_least_1d(index.contiguous());
  const Tensor src1 = at_least_1d(src.to(self.dtype()).contiguous());
  Tensor out;
  ANVIL_DISPATCH_REAL(self.dtype(), where, T, {
    out = scatter_loop<T>(self1, dim, idx, src1, scalar_src, reduce, include_self, where);
  });
  return out.reshape(self.sizes());
}

/// The reference kernel of index_put: out[indices] = values (+= when `accumulate`), following
/// torch's advanced indexing. Boolean / uint8 masks stand for the coordinates of their true
/// elements (a k-D mask indexes k dims); None entries (and missing trailing entries) take the
/// whole dim; integer indices may be negative and broadcast together; the broadcast index dims
/// go where the indexed dims are when those are adjacent, else in front; values broadcast to
/// that indexing result.
Tensor index_put_ref(const Tensor& self, const std::vector<std::optional<Tensor>>& indices,
                     const Tensor& values, bool accumulate, const std::string& where) {
  const int64_t rank = self.dim();
  // 1. Masks become integer coordinates: every entry is an int64 tensor or None.
  std::vector<std::optional<Tensor>> idx;
  for (const auto& e : indices) {
    if (!e) {
      idx.emplace_back();
      continue;
    }
    const Tensor& t = *e;
    if (t.dtype() == DType::kBool || t.dtype() == DType::kUInt8) {
      ANVIL_CHECK(t.dim() >= 1, where, "a 0-dim boolean index is not supported", "rank >= 1", "0");
      const int64_t first = static_cast<int64_t>(idx.size());
      ANVIL_CHECK(first + t.dim() <= rank, where, "too many indices for the tensor",
                  str("<= ", rank, " dims"), str(first + t.dim()));
      for (int64_t j = 0; j < t.dim(); ++j)
        ANVIL_CHECK(
            t.size(j) == self.size(first + j), where,
            str("the shape of the mask does not match the indexed tensor at dim ", first + j),
            shape_str(self.sizes()), t.type_str());
      const Tensor m = t.to(DType::kInt64).contiguous();
      const int64_t* mp = m.data<int64_t>();
      std::vector<std::vector<int64_t>> coords(static_cast<size_t>(t.dim()));
      Shape c;
      for (int64_t p = 0; p < m.numel(); ++p) {
        if (mp[p] == 0) continue;
        unravel(p, m.sizes(), c);
        for (size_t j = 0; j < c.size(); ++j) coords[j].push_back(c[j]);
      }
      for (const auto& v : coords)
        idx.emplace_back(Tensor::from_vector(v, {static_cast<int64_t>(v.size())}));
    } else {
      ANVIL_CHECK(t.dtype() == DType::kInt64 || t.dtype() == DType::kInt32, where,
                  "tensors used as indices must be long, int, byte or bool tensors",
                  "int64, int32, uint8 or bool", dtype_name(t.dtype()));
      idx.emplace_back(t.to(DType::kInt64));
    }
  }
  ANVIL_CHECK(static_cast<int64_t>(idx.size()) <= rank, where, "too many indices for the tensor",
              str("<= ", rank), str(idx.size()));
  idx.resize(static_cast<size_t>(rank));
  // 2. The broadcast shape B of the index tensors, and the indexed dims.
  std::vector<int64_t> indexed;
  Shape bshape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!idx[static_cast<size_t>(d)]) continue;
    const Shape& s = idx[static_cast<size_t>(d)]->sizes();
    bshape = indexed.empty() ? s : broadcast_shapes(bshape, s, where);
    indexed.push_back(d);
  }
  // 3. The dims of the indexing result: each is either dim j of B (stored as -1 - j) or a
  //    non-indexed dim d of self.
  std::vector<int64_t> rdims;
  auto push_b = [&] {
    for (size_t j = 0; j < bshape.size(); ++j) rdims.push_back(-1 - static_cast<int64_t>(j));
  };
  bool adjacent = true;
  for (size_t i = 1; i < indexed.size(); ++i)
    if (indexed[i] != indexed[i - 1] + 1) adjacent = false;
  if (indexed.empty()) {
    for (int64_t d = 0; d < rank; ++d) rdims.push_back(d);
  } else if (adjacent) {
    for (int64_t d = 0; d < indexed.front(); ++d) rdims.push_back(d);
    push_b();
    for (int64_t d = indexed.back() + 1; d < rank; ++d) rdims.push_back(d);
  } else {
    push_b();
    for (int64_t d = 0; d < rank; ++d)
      if (!idx[static_cast<size_t>(d)]) rdims.push_back(d);
  }
  Shape rsizes;
  for (int64_t r : rdims)
    rsizes.push_back(r < 0 ? bshape[static_cast<size_t>(-1 - r)] : self.size(r));
  if (!indexed.empty()) {
    ANVIL_CHECK(values.dim() <= static_cast<int64_t>(rsizes.size()), where,
                "shape mismatch: values cannot be broadcast to the indexing result",
                shape_str(rsizes), values.type_str());
    (void)broadcast_shapes(values.sizes(), rsizes, where);
  }
  // 4. Every position of the indexing result writes (or adds into) one element of self.
  Tensor out = self.contiguous().clone();
  std::vector<Tensor> flat(static_cast<size_t>(rank));  // per indexed dim: index expanded to B
  for (int64_t d : indexed)
    flat[static_cast<size_t>(d)] = idx[static_cast<size_t>(d)]->expand(bshape).contiguous();
  const Shape& ssz = self.sizes();
  const int64_t n = shape_numel(rsizes);
  Shape rc, bc(bshape.size(), 0), sc(static_cast<size_t>(rank), 0);
  ANVIL_DISPATCH_REAL(self.dtype(), where, T, {
    using A = AccOf<T>;
    const Tensor v = values.to(self.dtype()).expand(rsizes).contiguous();
    T* o = out.data<T>();
    const T* vp = v.data<T>();
    for (int64_t p = 0; p < n; ++p) {
      unravel(p, rsizes, rc);
      for (size_t k = 0; k < rdims.size(); ++k) {
        if (rdims[k] < 0)
          bc[static_cast<size_t>(-1 - rdims[k])] = rc[k];
        else
          sc[static_cast<size_t>(rdims[k])] = rc[k];
      }
      const int64_t b = ravel(bc, bshape);
      for (int64_t d : indexed) {
        const int64_t size = ssz[static_cast<size_t>(d)];
        const int64_t i = flat[static_cast<size_t>(d)].data<int64_t>()[b];
        if (i < -size || i >= size)
          throw Error(str("index ", i, " is out of bounds for dimension ", d, " with size ", size),
                      where, str("an index in [", -size, ", ", size - 1, "]"), std::to_string(i));
        sc[static_cast<size_t>(d)] = i < 0 ? i + size : i;
      }
      T& dst = o[ravel(sc, ssz)];
      // torch's serial CPU loop: *dst += *src in the element type (16-bit floats add in float).
      dst = accumulate ? cast_value<T, A>(add<A>(cast_value<A, T>(dst), cast_value<A, T>(vp[p])))
                       : vp[p];
    }
  });
  return out;
}

}  // namespace

std::vector<ir::TensorType> shape_scatter_src(const ir::Node& node) {
  return {scatter_type(node, true)};
}
std::vector<ir::RValue> kernel_scatter_src(ir::KernelContext& ctx) {
  return {run_scatter(ctx, ctx.tensor("src"), false, Reduce::kNone, true)};
}

std::vector<ir::TensorType> shape_scatter_value(const ir::Node& node) {
  return {scatter_type(node, false)};
}
std::vector<ir::RValue> kernel_scatter_value(ir::KernelContext& ctx) {
  const Tensor v = scalar_tensor(scalar_arg(ctx, "value"), ctx.tensor("self").dtype());
  return {run_scatter(ctx, v, true, Reduce::kNone, true)};
}

std::vector<ir::TensorType> shape_scatter_reduce_two(const ir::Node& node) {
  (void)parse_reduce(node.arg("reduce") ? node.arg("reduce")->s : std::string(), node_where(node));
  return {scatter_type(node, true)};
}
std::vector<ir::RValue> kernel_scatter_reduce_two(ir::KernelContext& ctx) {
  const Reduce reduce = parse_reduce(ctx.string_arg("reduce", ""), ctx.where());
  return {run_scatter(ctx, ctx.tensor("src"), false, reduce, ctx.bool_arg("include_self", true))};
}

std::vector<ir::TensorType> shape_scatter_add(const ir::Node& node) {
  return {scatter_type(node, true)};
}
std::vector<ir::RValue> kernel_scatter_add(ir::KernelContext& ctx) {
  return {run_scatter(ctx, ctx.tensor("src"), false, Reduce::kSum, true)};
}

std::vector<ir::TensorType> shape_index_put(const ir::Node& node) {
  const ir::TensorType t = self_type(node);
  const ir::TensorType& values = sa::type(node, "values");
  if (values.dtype != t.dtype)
    sa::fail(node, "index_put requires the source and destination dtypes to match",
             dtype_name(t.dtype), dtype_name(values.dtype));
  size_t consumed = 0;
  for (const auto& idx : sa::types(node, "indices")) {
    if (idx && idx->dtype != DType::kInt64 && idx->dtype != DType::kInt32 &&
        idx->dtype != DType::kBool && idx->dtype != DType::kUInt8)
      sa::fail(node, "tensors used as indices must be long, int, byte or bool tensors",
               "int64, int32, uint8 or bool", dtype_name(idx->dtype));
    consumed += (idx && (idx->dtype == DType::kBool || idx->dtype == DType::kUInt8))
                    ? idx->sizes.size()
                    : 1;
  }
  if (consumed > t.sizes.size())
    sa::fail(node, str("too many indices for a tensor of rank ", t.sizes.size()),
             str("<= ", t.sizes.size()), str(consumed));
  return {t};
}
std::vector<ir::RValue> kernel_index_put(ir::KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const Tensor& values = ctx.tensor("values");
  if (values.dtype() != self.dtype())
    ctx.fail("index_put requires the source and destination dtypes to match",
             dtype_name(self.dtype()), dtype_name(values.dtype()));
  return {index_put_ref(self, ctx.opt_tensors("indices"), values, ctx.bool_arg("accumulate", false),
                        ctx.where())};
}

}  // namespace anvil::ops
