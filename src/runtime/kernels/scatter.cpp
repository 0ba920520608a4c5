// Runtime extern kernels for aten.scatter.src / scatter.value, aten.scatter_add,
// aten.scatter_reduce.two and aten.index_put.default, and the Tensor-level implementations they
// share with the reference kernels (scatter.h). Values are combined in fp32 (f64 for double, int64 for integers and bool)
// and rounded once into the output.
#include "runtime/kernels/scatter.h"

#include "runtime/kernels/kernel_util.h"

namespace anvil::runtime::kern {

namespace {

/// The dtype values are combined in for an output of `dt`.
DType acc_dtype(DType dt, const std::string& where) {
  ANVIL_CHECK(is_supported(dt) && !is_complex(dt) && !is_float8(dt), where, "unsupported dtype",
              "a real dtype", dtype_name(dt));
  if (dt == DType::kFloat64) return DType::kFloat64;
  if (is_floating(dt)) return DType::kFloat32;
  return DType::kInt64;
}

/// A private contiguous copy of `t` in dtype `dt`.
Tensor private_copy(const Tensor& t, DType dt) { return t.to(dt, true).contiguous(); }

/// `cur` combined with `v` by reduction `r` (wrapping for integers; amax / amin propagate NaN).
template <typename A>
inline A combine(ScatterReduce r, A cur, A v) {
  switch (r) {
    case ScatterReduce::kSum:
    case ScatterReduce::kMean:
      if constexpr (std::is_integral_v<A>)
        return static_cast<A>(static_cast<uint64_t>(cur) + static_cast<uint64_t>(v));
      else
        return cur + v;
    case ScatterReduce::kProd:
      if constexpr (std::is_integral_v<A>)
        return static_cast<A>(static_cast<uint64_t>(cur) * static_cast<uint64_t>(v));
      else
        return cur * v;
    case ScatterReduce::kAmax:
      return (is_nan_value(v) || v > cur) ? v : cur;
    case ScatterReduce::kAmin:
      return (is_nan_value(v) || v < cur) ? v : cur;
    case ScatterReduce::kNone:
      break;
  }
  return v;
}

/// scatter_into on the accumulator `acc` (contiguous, type A) with src already in type A.
template <typename A>
void scatter_typed(Tensor& acc, int64_t dim, const Tensor& idx, const Tensor& src, bool scalar_src,
                   ScatterReduce reduce, bool include_self, const std::string& where) {
  A* ap = acc.data<A>();
  const A* sp = src.data<A>();
  const int64_t* ip = idx.data<int64_t>();
  const int64_t limit = acc.size(dim), dstride = acc.stride(dim);
  Shape astr = acc.strides();
  astr[dim] = 0;
  const Shape sstr = scalar_src ? Shape(idx.dim(), 0) : src.strides();
  const bool track = reduce != ScatterReduce::kNone;
  std::vector<uint8_t> touched(track ? static_cast<size_t>(acc.numel()) : 0, 0);
  std::vector<int64_t> count(reduce == ScatterReduce::kMean ? static_cast<size_t>(acc.numel()) : 0,
                             0);
  for_each_offsets<3>(
      idx.sizes(), {idx.strides(), sstr, astr}, 0, idx.numel(),
      [&](const std::array<int64_t, 3>& o) {
        const int64_t i = ip[o[0]];
        if (i < 0 || i >= limit)
          throw Error(
              str("index ", i, " is out of bounds for dimension ", dim, " with size ", limit),
              where, str("an index in [0, ", limit - 1, "]"), std::to_string(i));
        const int64_t t = o[2] + i * dstride;
        const A v = sp[o[1]];
        if (!track) {
          ap[t] = v;
          return;
        }
        if (!touched[t]) {
          touched[t] = 1;
          if (reduce == ScatterReduce::kMean) count[t] = include_self ? 1 : 0;
          if (!include_self) {
            ap[t] = v;
            if (reduce == ScatterReduce::kMean) count[t] = 1;
            return;
          }
        }
        ap[t] = combine<A>(reduce, ap[t], v);
        if (reduce == ScatterReduce::kMean) ++count[t];
      });
  if (reduce == ScatterReduce::kMean)
    for (size_t t = 0; t < count.size(); ++t) {
      if (!touched[t] || count[t] <= 1) continue;
      if constexpr (std::is_integral_v<A>) {
        const int64_t q = ap[t] / count[t];
        ap[t] = (ap[t] % count[t] != 0 && ap[t] < 0) ? q - 1 : q;  // floor division
      } else {
        ap[t] = ap[t] / static_cast<A>(count[t]);
      }
    }
}

}  // namespace

ScatterReduce parse_scatter_reduce(const std::string& reduce, const std::string& where) {
  if (reduce == "sum" || reduce == "add") return ScatterReduce::kSum;
  if (reduce == "prod" || reduce == "multiply") return ScatterReduce::kProd;
  if (reduce == "mean") return ScatterReduce::kMean;
  if (reduce == "amax") return ScatterReduce::kAmax;
  if (reduce == "amin") return ScatterReduce::kAmin;
  throw Error("unknown reduce mode", where, "sum, prod, mean, amax or amin", reduce);
}

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

void scatter_into(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                  bool scalar_src, ScatterReduce reduce, bool include_self,
                  const std::string& where) {
  if (out.numel() == 0 || index.numel() == 0) return;
  const DType adt = acc_dtype(out.dtype(), where);
  Tensor acc = private_copy(out, adt);
  Tensor idx = index.dim() == 0 ? index.reshape({1}) : index;
  Tensor a = acc.dim() == 0 ? acc.reshape({1}) : acc;
  Tensor s = src.to(adt);
  if (!scalar_src && s.dim() == 0) s = s.reshape({1});
  if (adt == DType::kFloat64)
    scatter_typed<double>(a, dim, idx, s, scalar_src, reduce, include_self, where);
  else if (adt == DType::kFloat32)
    scatter_typed<float>(a, dim, idx, s, scalar_src, reduce, include_self, where);
  else
    scatter_typed<int64_t>(a, dim, idx, s, scalar_src, reduce, include_self, where);
  copy_cast(out, acc);
}

void index_put_into(const Tensor& out, const std::vector<std::optional<Tensor>>& indices,
                    const Tensor& values, bool accumulate, const std::string& where) {
  const int64_t rank = out.dim();
  // 1. Masks become integer coordinates; every entry is int64 or None.
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
            t.size(j) == out.size(first + j), where,
            str("the shape of the mask does not match the indexed tensor at dim ", first + j),
            shape_str(out.sizes()), t.type_str());
      const Tensor m = t.to(DType::kInt64).contiguous();
      const int64_t* mp = m.data<int64_t>();
      std::vector<std::vector<int64_t>> coords(static_cast<size_t>(t.dim()));
      const Shape ms = m.sizes();
      for (int64_t p = 0; p < m.numel(); ++p) {
        if (!mp[p]) continue;
        int64_t rem = p;
        for (int64_t j = t.dim(); j-- > 0;) {
          coords[j].push_back(rem % ms[j]);
          rem /= ms[j];
        }
      }
      for (auto& c : coords)
        idx.emplace_back(Tensor::from_vector(c, {static_cast<int64_t>(c.size())}));
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
  // 2. Broadcast the index tensors; where the indexed dims go in the result.
  std::vector<int64_t> adv;
  Shape bshape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!idx[d]) continue;
    bshape = adv.empty() ? idx[d]->sizes() : broadcast_shapes(bshape, idx[d]->sizes(), where);
    adv.push_back(d);
  }
  if (adv.empty()) {  // no index tensors: the whole tensor
    const DType adt = acc_dtype(out.dtype(), where);
    Tensor acc = private_copy(out, adt);
    Tensor v = values.to(adt).expand(out.sizes());
    if (accumulate) {
      ANVIL_DISPATCH_REAL(adt, where, A, {
        if constexpr (std::is_same_v<A, float> || std::is_same_v<A, double> ||
                      std::is_same_v<A, int64_t>) {
          A* ap = acc.data<A>();
          const A* vp = v.data<A>();
          int64_t k = 0;
          for_each_offsets<1>(v.sizes(), {v.strides()}, 0, v.numel(),
                              [&](const std::array<int64_t, 1>& o) {
                                ap[k] = combine<A>(ScatterReduce::kSum, ap[k], vp[o[0]]);
                                ++k;
                              });
        }
      });
      copy_cast(out, acc);
    } else {
      copy_cast(out, v);
    }
    return;
  }
  bool adjacent = true;
  for (size_t i = 1; i < adv.size(); ++i)
    if (adv[i] != adv[i - 1] + 1) adjacent = false;
  // Result dims: each is either a B dim (kind -1 - j) or a dim d of out.
  std::vector<int64_t> res_dims;
  auto push_b = [&] {
    for (size_t j = 0; j < bshape.size(); ++j) res_dims.push_back(-1 - static_cast<int64_t>(j));
  };
  if (adjacent) {
    for (int64_t d = 0; d < adv.front(); ++d) res_dims.push_back(d);
    push_b();
    for (int64_t d = adv.back() + 1; d < rank; ++d) res_dims.push_back(d);
  } else {
    push_b();
    for (int64_t d = 0; d < rank; ++d)
      if (!idx[d]) res_dims.push_back(d);
  }
  Shape rsizes;
  for (int64_t r : res_dims) rsizes.push_back(r < 0 ? bshape[-1 - r] : out.size(r));
  ANVIL_CHECK(values.dim() <= static_cast<int64_t>(rsizes.size()), where,
              "shape mismatch: values cannot be broadcast to the indexing result",
              shape_str(rsizes), values.type_str());
  (void)broadcast_shapes(values.sizes(), rsizes, where);
  const DType adt = acc_dtype(out.dtype(), where);
  Tensor acc = private_copy(out, adt);
  const Tensor v = values.to(adt).expand(rsizes);
  std::vector<Tensor> flat;  // per indexed dim: its index broadcast to B, contiguous
  for (int64_t d : adv) flat.push_back(idx[d]->expand(bshape).contiguous());
  const int64_t n = shape_numel(rsizes), bn = shape_numel(bshape);
  Shape ri(rsizes.size(), 0);
  ANVIL_DISPATCH_REAL(adt, where, A, {
    if constexpr (std::is_same_v<A, float> || std::is_same_v<A, double> ||
                  std::is_same_v<A, int64_t>) {
      A* ap = acc.data<A>();
      const A* vp = v.data<A>();
      for (int64_t p = 0; p < n; ++p) {
        int64_t rem = p, boff = 0, bmul = 1, off = 0, voff = 0;
        for (size_t k = rsizes.size(); k-- > 0;) {
          ri[k] = rem % rsizes[k];
          rem /= rsizes[k];
          voff += ri[k] * v.stride(static_cast<int64_t>(k));
          const int64_t r = res_dims[k];
          if (r < 0) {
            boff += ri[k] * bmul;
            bmul *= rsizes[k];
          } else {
            off += ri[k] * acc.stride(r);
          }
        }
        (void)bn;
        for (size_t j = 0; j < adv.size(); ++j) {
          const int64_t d = adv[j], size = out.size(d);
          int64_t i = flat[j].data<int64_t>()[boff];
          if (i < -size || i >= size)
            throw Error(
                str("index ", i, " is out of bounds for dimension ", d, " with size ", size), where,
                str("an index in [", -size, ", ", size - 1, "]"), std::to_string(i));
          if (i < 0) i += size;
          off += i * acc.stride(d);
        }
        ap[off] = accumulate ? combine<A>(ScatterReduce::kSum, ap[off], vp[voff]) : vp[voff];
      }
    }
  });
  copy_cast(out, acc);
}

}  // namespace anvil::runtime::kern

namespace anvil::runtime {

namespace {

/// Output 0 filled with a copy of input 0 (self); checks the sizes and dtype.
Tensor self_copy_output(ExternCall& call, const Tensor& self) {
  const Tensor out = kern::checked_output(call, 0, self.sizes(), self.dtype());
  kern::copy_cast(out, self);
  return out;
}

/// aten.scatter.src (self, index, src; dim) and aten.scatter.value (self, index; dim, value).
int scatter_extern(ExternCall& call) {
  const Tensor self = call.input_tensor(0), index = call.input_tensor(1);
  const int64_t dim = wrap_dim(call.attr_int("dim"), self.dim(), call.target());
  const bool scalar = call.num_inputs() < 3;
  const Tensor src =
      scalar ? Tensor::scalar(call.attr_float("value"), self.dtype()) : call.input_tensor(2);
  kern::check_scatter_args(self.sizes(), dim, index, scalar ? nullptr : &src.sizes(),
                           call.target());
  const Tensor out = self_copy_output(call, self);
  kern::scatter_into(out, dim, index, src, scalar, kern::ScatterReduce::kNone, true, call.target());
  return 0;
}

/// aten.scatter_reduce.two (self, index, src; dim, reduce, include_self) and
/// aten.scatter_add.default (self, index, src; dim).
int scatter_reduce_extern(ExternCall& call) {
  const Tensor self = call.input_tensor(0), index = call.input_tensor(1),
               src = call.input_tensor(2);
  const int64_t dim = wrap_dim(call.attr_int("dim"), self.dim(), call.target());
  const auto reduce = kern::parse_scatter_reduce(call.attr_string("reduce", "sum"), call.target());
  kern::check_scatter_args(self.sizes(), dim, index, &src.sizes(), call.target());
  const Tensor out = self_copy_output(call, self);
  kern::scatter_into(out, dim, index, src, false, reduce, call.attr_bool("include_self", true),
                     call.target());
  return 0;
}

/// aten.index_put.default: self, indices... (count in attr "indices"), values; accumulate.
int index_put_extern(ExternCall& call) {
  const Tensor self = call.input_tensor(0);
  const int64_t count = call.attr_int("indices", call.num_inputs() - 2);
  ANVIL_CHECK(count >= 0 && count + 2 == call.num_inputs(), call.target(), "wrong number of inputs",
              str(count + 2), str(call.num_inputs()));
  std::vector<std::optional<Tensor>> indices;
  for (int32_t i = 1; i <= count; ++i) indices.push_back(kern::opt_input(call, i));
  const Tensor values = call.input_tensor(static_cast<int32_t>(count) + 1);
  const Tensor out = self_copy_output(call, self);
  kern::index_put_into(out, indices, values, call.attr_bool("accumulate", false), call.target());
  return 0;
}

}  // namespace

/// Registers the scatter / index_put externs.
void register_scatter_externs() {
  register_extern("aten.scatter.src", scatter_extern);
  register_extern("aten.scatter.value", scatter_extern);
  register_extern("aten.scatter_reduce.two", scatter_reduce_extern);
  register_extern("aten.scatter_add.default", scatter_reduce_extern);
  register_extern("aten.index_put.default", index_put_extern);
}

}  // namespace anvil::runtime
