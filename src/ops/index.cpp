// Indexing ops of the shape family: index.Tensor (advanced indexing with integer and boolean
// index tensors), index_select and gather, plus repeat (tiling). Their outputs are new tensors;
// the kernels copy elements bytewise, so they work for every dtype.
#include <cstring>

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



bool is_mask_dtype(DType t) { return t == DType::kBool || t == DType::kUInt8; }
bool is_index_dtype(DType t) { return t == DType::kInt64 || t == DType::kInt32; }

/// Throws unless `v` indexes a dim of size `n` (negative values allowed when `allow_negative`);
/// returns the non-negative index.
int64_t check_index(const std::string& where, int64_t v, int64_t dim, int64_t n,
                    bool allow_negative) {
  int64_t lo = allow_negative ? -n : 0;
  if (v < lo || v >= n)
    throw Error(str("index ", v, " is out of bounds for dim ", dim, " with size ", n), where,
                str("an index in [", lo, ", ", n - 1, "]"), std::to_string(v));
  return v < 0 ? v + n : v;
}

/// Values of an integer index tensor in row-major order.
std::vector<int64_t> index_values(const Tensor& index) {
  Tensor c = index.to(DType::kInt64).contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

/// Where the broadcast index dims go in index.Tensor's result: at the first indexed dim when
/// the indexed dims are adjacent, else in front (torch's rule).
struct AdvancedLayout {
  std::vector<int64_t> adv;  // indexed dims of self, ascending
  bool adjacent = true;
};

AdvancedLayout advanced_layout(const std::vector<bool>& indexed) {
  AdvancedLayout l;
  for (size_t d = 0; d < indexed.size(); ++d)
    if (indexed[d]) l.adv.push_back(static_cast<int64_t>(d));
  for (size_t i = 1; i < l.adv.size(); ++i)
    if (l.adv[i] != l.adv[i - 1] + 1) l.adjacent = false;
  return l;
}

/// index.Tensor's output sizes from self's sizes, which dims are indexed and the broadcast
/// index shape (generic over int64_t and SymInt).
template <typename S>
std::vector<S> advanced_sizes(const std::vector<S>& self, const AdvancedLayout& l,
                              const std::vector<S>& bshape) {
  std::vector<S> out;
  if (l.adjacent) {
    for (int64_t d = 0; d < l.adv.front(); ++d) out.push_back(self[d]);
    out.insert(out.end(), bshape.begin(), bshape.end());
    for (size_t d = l.adv.back() + 1; d < self.size(); ++d) out.push_back(self[d]);
  } else {
    out = bshape;
    std::vector<bool> idx(self.size(), false);
    for (int64_t d : l.adv) idx[d] = true;
    for (size_t d = 0; d < self.size(); ++d)
      if (!idx[d]) out.push_back(self[d]);
  }
  return out;
}

/// Output sizes of repeat(repeats), generic over int64_t and SymInt sizes.
template <typename S>
std::vector<S> repeat_sizes(const std::string& where, const std::vector<S>& in,
                            const std::vector<S>& reps) {
  if (reps.size() < in.size())
    throw Error("repeat: number of repeat dims can not be smaller than the tensor's rank", where,
                str(">= ", in.size()), std::to_string(reps.size()));
  size_t pad = reps.size() - in.size();
  std::vector<S> out(reps.size());
  for (size_t i = 0; i < reps.size(); ++i) {
    if (auto c = SymInt(reps[i]).maybe_constant(); c && *c < 0)
      throw Error("repeat: repeats must be non-negative", where, ">= 0", std::to_string(*c));
    out[i] = i < pad ? reps[i] : in[i - pad] * reps[i];
  }
  return out;
}

}  // namespace

// ---- index.Tensor ----------------------------------------------------------------------------

std::vector<TensorType> shape_index_Tensor(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  const std::string where = node_where(node);
  const size_t rank = in.sizes.size();
  std::vector<std::optional<SymShape>> per_dim;  // index shape per consumed dim of self
  int masks = 0;
  for (const auto& t : sa::types(node, "indices")) {
    if (!t) {
      per_dim.emplace_back();
    } else if (is_mask_dtype(t->dtype)) {
      size_t k = t->sizes.size();
      if (k == 0) sa::fail(node, "a 0-dim boolean index is not supported", "rank >= 1", "0");
      for (size_t j = 0; j < k; ++j) {
        size_t d = per_dim.size() + j;
        if (d < rank && t->sizes[j].is_constant() && in.sizes[d].is_constant() &&
            t->sizes[j] != in.sizes[d])
          sa::fail(node, str("the shape of the mask does not match the indexed tensor at dim ", d),
                   sym_shape_str(in.sizes), sym_shape_str(t->sizes));
      }
      // The number of true elements is only known at run time: a fresh unbacked size.
      SymInt count = SymInt::symbol("u_" + node.name + (masks ? "_" + std::to_string(masks) : ""));
      ++masks;
      for (size_t j = 0; j < k; ++j) per_dim.emplace_back(SymShape{count});
    } else if (is_index_dtype(t->dtype)) {
      per_dim.emplace_back(t->sizes);
    } else {
      sa::fail(node, "tensors used as indices must be long, int, byte or bool tensors",
               "int64, int32, uint8 or bool", dtype_name(t->dtype));
    }
  }
  if (per_dim.size() > rank)
    sa::fail(node, str("too many indices for a tensor of rank ", rank), str("<= ", rank),
             std::to_string(per_dim.size()));
  std::vector<bool> indexed(rank, false);
  SymShape bshape;
  bool any = false;
  for (size_t d = 0; d < per_dim.size(); ++d) {
    if (!per_dim[d]) continue;
    indexed[d] = true;
    bshape = any ? broadcast_sym_shapes(bshape, *per_dim[d], where) : *per_dim[d];
    any = true;
  }
  if (!any) return {typed(in, in.sizes)};
  return {typed(in, advanced_sizes(in.sizes, advanced_layout(indexed), bshape))};
}

// nonzero(self): the coordinates of the non-zero elements, (count, rank) int64, in row-major
// order. The count is data-dependent: a fresh unbacked size (the export names it, e.g. u0).
std::vector<TensorType> shape_nonzero(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  TensorType out;
  out.dtype = DType::kInt64;
  out.device = in.device;
  out.sizes = {SymInt::symbol("u_" + node.name), SymInt(static_cast<int64_t>(in.sizes.size()))};
  return {out};
}

std::vector<RValue> kernel_nonzero(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const int64_t rank = self.dim();
  const std::vector<double> v = self.to_doubles();
  std::vector<int64_t> coords;
  int64_t count = 0;
  for (int64_t lin = 0; lin < static_cast<int64_t>(v.size()); ++lin) {
    if (v[static_cast<size_t>(lin)] == 0) continue;
    ++count;
    const size_t at = coords.size();
    coords.resize(at + static_cast<size_t>(rank));
    int64_t rest = lin;
    for (int64_t j = rank; j-- > 0;) {
      coords[at + static_cast<size_t>(j)] = rest % self.size(j);
      rest /= self.size(j);
    }
  }
  return {Tensor::from_vector<int64_t>(coords, {count, rank})};
}

std::vector<RValue> kernel_index_Tensor(KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const std::string where = ctx.where();
  const int64_t rank = self.dim();
  std::vector<std::optional<Tensor>> per_dim;  // int64 index tensor per consumed dim of self
  for (const auto& t : ctx.opt_tensors("indices")) {
    if (!t) {
      per_dim.emplace_back();
    } else if (is_mask_dtype(t->dtype())) {
      const int64_t k = t->dim();
      if (k == 0) ctx.fail("a 0-dim boolean index is not supported", "rank >= 1", "0");
      const int64_t first = static_cast<int64_t>(per_dim.size());
      if (first + k > rank)
        ctx.fail(str("too many indices for a tensor of rank ", rank), str("<= ", rank),
                 std::to_string(first + k));
      for (int64_t j = 0; j < k; ++j)
        if (t->size(j) != self.size(first + j))
          ctx.fail(
              str("the shape of the mask does not match the indexed tensor at dim ", first + j),
              shape_str(self.sizes()), shape_str(t->sizes()));
      // nonzero(): the coordinates of the true elements, one index tensor per mask dim.
      std::vector<std::vector<int64_t>> coords(k);
      std::vector<double> m = t->to_doubles();
      for (int64_t lin = 0; lin < static_cast<int64_t>(m.size()); ++lin) {
        if (m[lin] == 0) continue;
        int64_t rest = lin;
        for (int64_t j = k; j-- > 0;) {
          coords[j].push_back(rest % t->size(j));
          rest /= t->size(j);
        }
      }
      for (int64_t j = 0; j < k; ++j)
        per_dim.emplace_back(
            Tensor::from_vector<int64_t>(coords[j], {static_cast<int64_t>(coords[j].size())}));
    } else if (is_index_dtype(t->dtype())) {
      per_dim.emplace_back(*t);
    } else {
      ctx.fail("tensors used as indices must be long, int, byte or bool tensors",
               "int64, int32, uint8 or bool", dtype_name(t->dtype()));
    }
  }
  if (static_cast<int64_t>(per_dim.size()) > rank)
    ctx.fail(str("too many indices for a tensor of rank ", rank), str("<= ", rank),
             std::to_string(per_dim.size()));
  std::vector<bool> indexed(rank, false);
  Shape bshape;
  bool any = false;
  for (size_t d = 0; d < per_dim.size(); ++d) {
    if (!per_dim[d]) continue;
    indexed[d] = true;
    bshape = any ? broadcast_shapes(bshape, per_dim[d]->sizes(), where) : per_dim[d]->sizes();
    any = true;
  }
  if (!any) return {self.clone()};
  const AdvancedLayout layout = advanced_layout(indexed);

  // Offset (in elements of self) that the indexed dims contribute, per broadcast position.
  const int64_t bnumel = shape_numel(bshape);
  std::vector<int64_t> adv_off(static_cast<size_t>(bnumel), 0);
  for (int64_t d : layout.adv) {
    std::vector<int64_t> v = index_values(per_dim[d]->expand(bshape));
    for (int64_t b = 0; b < bnumel; ++b)
      adv_off[b] += check_index(where, v[b], d, self.size(d), true) * self.stride(d);
  }

  // Output dims: self's other dims (stride in self) and the broadcast dims (stride in adv_off).
  Shape out_sizes = advanced_sizes(self.sizes(), layout, bshape);
  Shape src_strides = advanced_sizes(self.strides(), layout, Shape(bshape.size(), 0));
  Shape b_strides = advanced_sizes(Shape(rank, 0), layout, Tensor::contiguous_strides(bshape));

  Tensor out = Tensor::empty(out_sizes, self.dtype());
  const size_t es = self.element_size();
  char* dst = static_cast<char*>(out.data_ptr());
  const char* src = static_cast<const char*>(self.data_ptr());
  int64_t i = 0;
  for_each_offsets<2>(out_sizes, {src_strides, b_strides}, [&](const std::array<int64_t, 2>& off) {
    std::memcpy(dst + i * es, src + (off[0] + adv_off[off[1]]) * es, es);
    ++i;
  });
  return {out};
}

// ---- index_select ----------------------------------------------------------------------------

namespace {
/// Checks index_select's index (a vector or scalar of int64 / int32) at `where`.
void check_select_index(const std::string& where, DType dtype, size_t rank) {
  if (rank > 1)
    throw Error("index_select(): index must be a vector or a scalar", where, "rank <= 1",
                std::to_string(rank));
  if (!is_index_dtype(dtype))
    throw Error("index_select(): index must be int64 or int32", where, "int64 or int32",
                dtype_name(dtype));
}
}  // namespace

std::vector<TensorType> shape_index_select(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  const TensorType& index = sa::type(node, "index");
  const std::string where = node_where(node);
  check_select_index(where, index.dtype, index.sizes.size());
  int64_t d = wrap_dim(sa::int_(node, "dim"), static_cast<int64_t>(in.sizes.size()), where);
  SymInt n = index.sizes.empty() ? SymInt(1) : index.sizes[0];
  SymShape out = in.sizes;
  if (out.empty()) {
    if (n.is_constant() && n != SymInt(1))
      sa::fail(node, "index_select(): a 0-dim input needs exactly one index", "1 index", n.str());
  } else {
    out[d] = n;
  }
  return {typed(in, out)};
}

std::vector<RValue> kernel_index_select(KernelContext& ctx) {
  const Tensor& in = ctx.tensor("self");
  const Tensor& index = ctx.tensor("index");
  const std::string where = ctx.where();
  check_select_index(where, index.dtype(), static_cast<size_t>(index.dim()));
  int64_t d = wrap_dim(ctx.int_arg("dim"), in.dim(), where);
  std::vector<int64_t> v = index_values(index);
  if (in.dim() == 0) {
    if (v.size() != 1)
      ctx.fail("index_select(): a 0-dim input needs exactly one index", "1 index",
               std::to_string(v.size()));
    check_index(where, v[0], d, 1, false);
    return {in.clone()};
  }
  Shape sizes = in.sizes();
  sizes[d] = static_cast<int64_t>(v.size());
  Tensor out = Tensor::empty(sizes, in.dtype());
  for (size_t k = 0; k < v.size(); ++k)
    out.select(d, static_cast<int64_t>(k))
        .copy_from(in.select(d, check_index(where, v[k], d, in.size(d), false)));
  return {out};
}

// ---- gather ----------------------------------------------------------------------------------

namespace {
/// Checks gather's index against self (ranks equal, counting 0-dim as 1-dim; index no larger than
/// self outside `dim`; int64), generic over int64_t and SymInt sizes.
template <typename S>
void check_gather(const std::string& where, const std::vector<S>& self, const std::vector<S>& index,
                  DType index_dtype, int64_t dim) {
  if (index_dtype != DType::kInt64)
    throw Error("gather(): expected dtype int64 for index", where, "int64",
                dtype_name(index_dtype));
  size_t rs = std::max<size_t>(self.size(), 1), ri = std::max<size_t>(index.size(), 1);
  if (rs != ri)
    throw Error("gather(): index must have the same rank as the input", where,
                std::to_string(self.size()), std::to_string(index.size()));
  for (size_t k = 0; k < index.size() && self.size() == index.size(); ++k) {
    if (static_cast<int64_t>(k) == dim) continue;
    SymInt a(self[k]), b(index[k]);
    if (a.is_constant() && b.is_constant() && b.constant() > a.constant())
      throw Error(str("gather(): index size ", b.constant(), " exceeds the input size ",
                      a.constant(), " at dim ", k),
                  where, "index sizes <= input sizes outside dim", str(b.constant()));
  }
}
}  // namespace

std::vector<TensorType> shape_gather(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  const TensorType& index = sa::type(node, "index");
  const std::string where = node_where(node);
  int64_t d = wrap_dim(sa::int_(node, "dim"), static_cast<int64_t>(in.sizes.size()), where);
  check_gather(where, in.sizes, index.sizes, index.dtype, d);
  return {typed(in, index.sizes)};
}

std::vector<RValue> kernel_gather(KernelContext& ctx) {
  const Tensor& in0 = ctx.tensor("self");
  const Tensor& index = ctx.tensor("index");
  const std::string where = ctx.where();
  int64_t d = wrap_dim(ctx.int_arg("dim"), in0.dim(), where);
  check_gather(where, in0.sizes(), index.sizes(), index.dtype(), d);
  // Treat 0-dim tensors as 1-element vectors.
  Tensor in = in0.dim() == 0 ? in0.as_strided({1}, {1}, in0.storage_offset()) : in0;
  Shape isizes = index.dim() == 0 ? Shape{1} : index.sizes();
  std::vector<int64_t> v = index_values(index);
  Tensor out = Tensor::empty(index.sizes(), in.dtype());
  Shape base_strides = in.strides();
  base_strides[d] = 0;
  const size_t es = in.element_size();
  char* dst = static_cast<char*>(out.data_ptr());
  const char* src = static_cast<const char*>(in.data_ptr());
  int64_t i = 0;
  for_each_offsets<1>(isizes, {base_strides}, [&](const std::array<int64_t, 1>& off) {
    int64_t k = check_index(where, v[i], d, in.size(d), false);
    std::memcpy(dst + i * es, src + (off[0] + k * in.stride(d)) * es, es);
    ++i;
  });
  return {out};
}

// ---- repeat ----------------------------------------------------------------------------------

std::vector<TensorType> shape_repeat(const Node& node) {
  const TensorType& in = sa::type(node, "self");
  return {typed(in, repeat_sizes(node_where(node), in.sizes, sa::symints(node, "repeats")))};
}
std::vector<RValue> kernel_repeat(KernelContext& ctx) {
  const Tensor& t = ctx.tensor("self");
  Shape reps = ctx.ints("repeats");
  Shape out = repeat_sizes(ctx.where(), t.sizes(), reps);
  // View the input as [r0, s0, r1, s1, ...] with stride 0 on the repeat dims, then copy.
  size_t pad = reps.size() - static_cast<size_t>(t.dim());
  Shape sizes, strides;
  for (size_t i = 0; i < reps.size(); ++i) {
    sizes.push_back(reps[i]);
    strides.push_back(0);
    sizes.push_back(i < pad ? 1 : t.size(static_cast<int64_t>(i - pad)));
    strides.push_back(i < pad ? 0 : t.stride(static_cast<int64_t>(i - pad)));
  }
  Tensor tiled = t.as_strided(sizes, strides, t.storage_offset()).clone();
  return {tiled.view(out)};
}

}  // namespace anvil::ops
