// Runtime extern kernels for the indexing ops: aten.embedding.default, aten.index.Tensor
// (advanced indexing: None entries, int64 / int32 index tensors broadcast together, bool / uint8
// masks, torch's rule for non-adjacent indexed dims), aten.index_select.default and
// aten.gather.default. Elements are copied bytewise (every dtype), inputs may have any strides,
// and large copies are split over the runtime thread pool. Out-of-range indices raise an Error
// naming the index, the dim and its size.
#include "runtime/kernels/kernel_util.h"

namespace anvil::runtime {

namespace {

/// Throws unless `v` indexes a dim of size `n` (negative values allowed when `allow_negative`);
/// returns the non-negative index.
int64_t check_index(const std::string& where, int64_t v, int64_t dim, int64_t n,
                    bool allow_negative) {
  const int64_t lo = allow_negative ? -n : 0;
  if (v < lo || v >= n)
    throw Error(str("index ", v, " is out of bounds for dim ", dim, " with size ", n), where,
                str("an index in [", lo, ", ", n - 1, "]"), std::to_string(v));
  return v < 0 ? v + n : v;
}

/// out[i] = src[offsets[0] + adv[offsets[1]]] for every row-major position i of `sizes`, where
/// offsets come from stride sets {src_strides, pos_strides}; elements of `es` bytes. Runs that
/// are contiguous in both `src` and `out` are copied with memcpy.
void gather_copy(char* out, const char* src, size_t es, const Shape& sizes,
                 const Shape& src_strides, const Shape& pos_strides,
                 const std::vector<int64_t>& adv) {
  if (shape_numel(sizes) == 0) return;
  Shape s = sizes;
  std::array<Shape, 3> st = {src_strides, pos_strides, Tensor::contiguous_strides(sizes)};
  kern::coalesce<3>(s, st);
  const size_t nd = s.size();
  if (nd > 0 && st[0][nd - 1] == 1 && st[1][nd - 1] == 0 && st[2][nd - 1] == 1) {
    const size_t run = static_cast<size_t>(s[nd - 1]) * es;
    const Shape outer(s.begin(), s.end() - 1);
    std::array<Shape, 3> ost;
    for (size_t k = 0; k < 3; ++k) ost[k] = Shape(st[k].begin(), st[k].end() - 1);
    parallel_for(0, shape_numel(outer), kern::grain_for(s[nd - 1]), [&](int64_t b, int64_t e) {
      kern::for_each_offsets<3>(outer, ost, b, e, [&](const std::array<int64_t, 3>& o) {
        std::memcpy(out + o[2] * es, src + (o[0] + adv[o[1]]) * es, run);
      });
    });
    return;
  }
  parallel_for(0, shape_numel(s), int64_t{1} << 14, [&](int64_t b, int64_t e) {
    kern::for_each_offsets<3>(s, st, b, e, [&](const std::array<int64_t, 3>& o) {
      kern::copy_element(out + o[2] * es, src + (o[0] + adv[o[1]]) * es, es);
    });
  });
}

// ---- embedding --------------------------------------------------------------------------------

/// The runtime kernel of aten.embedding.default.
int embedding_extern(ExternCall& call) {
  const std::string where = call.target();
  const Tensor w = call.input_tensor(0), idx = call.input_tensor(1);
  ANVIL_CHECK(w.dim() == 2, where, "'weight' must be 2-D", "[rows, dim]", w.type_str());
  // padding_idx, scale_grad_by_freq and sparse only change gradients: ignored at inference.
  const std::vector<int64_t> ids = kern::read_indices(idx, where, "indices");
  const int64_t rows = w.size(0), d = w.size(1);
  for (int64_t id : ids)
    ANVIL_CHECK(id >= 0 && id < rows, where,
                str("index ", id, " is out of range for an embedding table of ", rows, " rows"),
                str("an index in [0, ", rows, ")"), std::to_string(id));
  Shape out_sizes = idx.sizes();
  out_sizes.push_back(d);
  const Tensor out = kern::checked_output(call, 0, out_sizes, w.dtype());
  if (out.numel() == 0) return 0;
  const size_t es = w.element_size();
  const char* wp = static_cast<const char*>(w.data_ptr());
  char* op = static_cast<char*>(out.data_ptr());
  const int64_t rs = w.stride(0), cs = w.stride(1);
  const int64_t n = static_cast<int64_t>(ids.size());
  parallel_for(0, n, kern::grain_for(d), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      char* dst = op + static_cast<size_t>(r * d) * es;
      const char* src = wp + static_cast<size_t>(ids[r] * rs) * es;
      if (cs == 1) {
        std::memcpy(dst, src, static_cast<size_t>(d) * es);
      } else {
        for (int64_t j = 0; j < d; ++j) kern::copy_element(dst + j * es, src + j * cs * es, es);
      }
    }
  });
  return 0;
}

// ---- index.Tensor -----------------------------------------------------------------------------

/// True for the dtypes index.Tensor treats as boolean masks.
bool is_mask_dtype(DType t) { return t == DType::kBool || t == DType::kUInt8; }

/// Where index.Tensor puts the broadcast index dims: at the first indexed dim when the indexed
/// dims are adjacent, else in front (torch's rule). Returns the output's entry for each dim:
/// `self_vals` for self's other dims in order, `b_vals` for the broadcast dims.
Shape advanced_layout(const std::vector<bool>& indexed, const Shape& self_vals,
                      const Shape& b_vals) {
  std::vector<int64_t> adv;
  for (size_t d = 0; d < indexed.size(); ++d)
    if (indexed[d]) adv.push_back(static_cast<int64_t>(d));
  bool adjacent = true;
  for (size_t i = 1; i < adv.size(); ++i)
    if (adv[i] != adv[i - 1] + 1) adjacent = false;
  Shape out;
  if (adjacent) {
    for (int64_t d = 0; d < adv.front(); ++d) out.push_back(self_vals[d]);
    out.insert(out.end(), b_vals.begin(), b_vals.end());
    for (size_t d = adv.back() + 1; d < self_vals.size(); ++d) out.push_back(self_vals[d]);
  } else {
    out = b_vals;
    for (size_t d = 0; d < self_vals.size(); ++d)
      if (!indexed[d]) out.push_back(self_vals[d]);
  }
  return out;
}

/// The runtime kernel of aten.index.Tensor.
int index_tensor_extern(ExternCall& call) {
  const std::string where = call.target();
  const Tensor self = call.input_tensor(0);
  const int64_t rank = self.dim();
  const int64_t count = call.attr_int("indices", call.num_inputs() - 1);
  ANVIL_CHECK(count == call.num_inputs() - 1, where,
              "the 'indices' count does not match the inputs", str(call.num_inputs() - 1),
              std::to_string(count));
  // Per consumed dim of self: its index values (int64) and their shape, or none.
  struct DimIndex {
    std::vector<int64_t> values;
    Shape sizes, strides;
  };
  std::vector<std::optional<DimIndex>> per_dim;
  for (int32_t i = 1; i <= count; ++i) {
    const std::optional<Tensor> t = kern::opt_input(call, i);
    if (!t) {
      per_dim.emplace_back();
      continue;
    }
    if (is_mask_dtype(t->dtype())) {
      const int64_t k = t->dim();
      ANVIL_CHECK(k > 0, where, "a 0-dim boolean index is not supported", "rank >= 1", "0");
      const int64_t first = static_cast<int64_t>(per_dim.size());
      ANVIL_CHECK(first + k <= rank, where, str("too many indices for a tensor of rank ", rank),
                  str("<= ", rank), std::to_string(first + k));
      for (int64_t j = 0; j < k; ++j)
        ANVIL_CHECK(
            t->size(j) == self.size(first + j), where,
            str("the shape of the mask does not match the indexed tensor at dim ", first + j),
            shape_str(self.sizes()), shape_str(t->sizes()));
      // nonzero(): one coordinate list per mask dim.
      std::vector<DimIndex> coords(static_cast<size_t>(k));
      const char* mp = static_cast<const char*>(t->data_ptr());
      int64_t lin = 0;
      kern::for_each_offsets<1>(t->sizes(), {t->strides()}, 0, t->numel(),
                                [&](const std::array<int64_t, 1>& o) {
                                  if (mp[o[0]] != 0) {
                                    int64_t rest = lin;
                                    for (int64_t j = k; j-- > 0;) {
                                      coords[j].values.push_back(rest % t->size(j));
                                      rest /= t->size(j);
                                    }
                                  }
                                  ++lin;
                                });
      for (DimIndex& c : coords) {
        c.sizes = {static_cast<int64_t>(c.values.size())};
        c.strides = {1};
        per_dim.emplace_back(std::move(c));
      }
    } else if (t->dtype() == DType::kInt64 || t->dtype() == DType::kInt32) {
      DimIndex di;
      di.values = kern::read_indices(*t, where, "indices");
      di.sizes = t->sizes();
      di.strides = Tensor::contiguous_strides(di.sizes);
      per_dim.emplace_back(std::move(di));
    } else {
      throw Error("tensors used as indices must be long, int, byte or bool tensors", where,
                  "int64, int32, uint8 or bool", dtype_name(t->dtype()));
    }
  }
  ANVIL_CHECK(static_cast<int64_t>(per_dim.size()) <= rank, where,
              str("too many indices for a tensor of rank ", rank), str("<= ", rank),
              std::to_string(per_dim.size()));
  std::vector<bool> indexed(static_cast<size_t>(rank), false);
  Shape bshape;
  bool any = false;
  for (size_t d = 0; d < per_dim.size(); ++d) {
    if (!per_dim[d]) continue;
    indexed[d] = true;
    bshape = any ? broadcast_shapes(bshape, per_dim[d]->sizes, where) : per_dim[d]->sizes;
    any = true;
  }
  if (!any) {
    const Tensor out = kern::checked_output(call, 0, self.sizes(), self.dtype());
    kern::copy_cast(out, self);
    return 0;
  }
  const Shape out_sizes = advanced_layout(indexed, self.sizes(), bshape);
  const Tensor out = kern::checked_output(call, 0, out_sizes, self.dtype());
  // Offset (in elements of self) that the indexed dims contribute, per broadcast position.
  const int64_t bnumel = shape_numel(bshape);
  std::vector<int64_t> adv(static_cast<size_t>(bnumel), 0);
  for (size_t d = 0; d < per_dim.size(); ++d) {
    if (!per_dim[d]) continue;
    const DimIndex& di = *per_dim[d];
    // The index's strides under broadcasting to bshape (right-aligned, size-1 dims stride 0).
    Shape st(bshape.size(), 0);
    const size_t lead = bshape.size() - di.sizes.size();
    for (size_t j = 0; j < di.sizes.size(); ++j)
      st[lead + j] = di.sizes[j] == 1 ? 0 : di.strides[j];
    const int64_t size = self.size(static_cast<int64_t>(d)),
                  stride = self.stride(static_cast<int64_t>(d));
    int64_t i = 0;
    kern::for_each_offsets<1>(bshape, {st}, 0, bnumel, [&](const std::array<int64_t, 1>& o) {
      adv[i++] += check_index(where, di.values[o[0]], static_cast<int64_t>(d), size, true) * stride;
    });
  }
  if (out.numel() == 0) return 0;
  const Shape src_strides = advanced_layout(indexed, self.strides(), Shape(bshape.size(), 0));
  const Shape pos_strides = advanced_layout(indexed, Shape(static_cast<size_t>(rank), 0),
                                            Tensor::contiguous_strides(bshape));
  gather_copy(static_cast<char*>(out.data_ptr()), static_cast<const char*>(self.data_ptr()),
              self.element_size(), out_sizes, src_strides, pos_strides, adv);
  return 0;
}

// ---- index_select -----------------------------------------------------------------------------

/// The runtime kernel of aten.index_select.default.
int index_select_extern(ExternCall& call) {
  const std::string where = call.target();
  const Tensor self = call.input_tensor(0), index = call.input_tensor(1);
  ANVIL_CHECK(index.dim() <= 1, where, "index_select(): index must be a vector or a scalar",
              "rank <= 1", std::to_string(index.dim()));
  const int64_t d = wrap_dim(call.attr_int("dim"), self.dim(), where);
  const std::vector<int64_t> v = kern::read_indices(index, where, "index");
  if (self.dim() == 0) {
    ANVIL_CHECK(v.size() == 1, where, "index_select(): a 0-dim input needs exactly one index",
                "1 index", std::to_string(v.size()));
    check_index(where, v[0], d, 1, false);
    kern::copy_cast(kern::checked_output(call, 0, {}, self.dtype()), self);
    return 0;
  }
  Shape sizes = self.sizes();
  sizes[d] = static_cast<int64_t>(v.size());
  const Tensor out = kern::checked_output(call, 0, sizes, self.dtype());
  std::vector<int64_t> adv(v.size());
  for (size_t k = 0; k < v.size(); ++k)
    adv[k] = check_index(where, v[k], d, self.size(d), false) * self.stride(d);
  Shape src_strides = self.strides(), pos_strides(sizes.size(), 0);
  src_strides[d] = 0;
  pos_strides[d] = 1;
  gather_copy(static_cast<char*>(out.data_ptr()), static_cast<const char*>(self.data_ptr()),
              self.element_size(), sizes, src_strides, pos_strides, adv);
  return 0;
}

// ---- gather -----------------------------------------------------------------------------------

/// The runtime kernel of aten.gather.default.
int gather_extern(ExternCall& call) {
  const std::string where = call.target();
  const Tensor self0 = call.input_tensor(0), index = call.input_tensor(1);
  const int64_t d = wrap_dim(call.attr_int("dim"), self0.dim(), where);
  ANVIL_CHECK(index.dtype() == DType::kInt64, where, "gather(): expected dtype int64 for index",
              "int64", dtype_name(index.dtype()));
  ANVIL_CHECK(std::max<int64_t>(self0.dim(), 1) == std::max<int64_t>(index.dim(), 1), where,
              "gather(): index must have the same rank as the input", std::to_string(self0.dim()),
              std::to_string(index.dim()));
  if (self0.dim() == index.dim())
    for (int64_t k = 0; k < index.dim(); ++k)
      ANVIL_CHECK(k == d || index.size(k) <= self0.size(k), where,
                  str("gather(): index size ", index.size(k), " exceeds the input size ",
                      self0.size(k), " at dim ", k),
                  "index sizes <= input sizes outside dim", str(index.size(k)));
  const Tensor out = kern::checked_output(call, 0, index.sizes(), self0.dtype());
  if (out.numel() == 0) return 0;
  // Treat 0-dim tensors as 1-element vectors.
  const Shape self_sizes = self0.dim() == 0 ? Shape{1} : self0.sizes();
  Shape self_strides = self0.dim() == 0 ? Shape{1} : self0.strides();
  const Shape isizes = index.dim() == 0 ? Shape{1} : index.sizes();
  const Shape istrides = index.dim() == 0 ? Shape{1} : index.strides();
  const int64_t size_d = self_sizes[d], stride_d = self_strides[d];
  self_strides[d] = 0;
  const std::array<Shape, 2> st = {istrides, self_strides};
  const int64_t* ip = static_cast<const int64_t*>(index.data_ptr());
  const char* src = static_cast<const char*>(self0.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  const size_t es = self0.element_size();
  const int64_t n = out.numel();
  parallel_for(0, n, int64_t{1} << 14, [&](int64_t b, int64_t e) {
    int64_t i = b;
    kern::for_each_offsets<2>(isizes, st, b, e, [&](const std::array<int64_t, 2>& o) {
      const int64_t k = check_index(where, ip[o[0]], d, size_d, false);
      kern::copy_element(dst + i * es, src + (o[1] + k * stride_d) * es, es);
      ++i;
    });
  });
  return 0;
}

}  // namespace

/// Registers the indexing externs.
void register_index_externs() {
  register_extern("aten.embedding.default", embedding_extern);
  register_extern("aten.index.Tensor", index_tensor_extern);
  register_extern("aten.index_select.default", index_select_extern);
  register_extern("aten.gather.default", gather_extern);
}

}  // namespace anvil::runtime
