// Lowering rules for views (no copy: new strides over the same buffer, or an index map over a
// computed tensor), reshapes (grouped index maps when strides cannot express them), and
// cat / stack (copies of each input into a slice of one buffer).
#include <algorithm>

#include "core/error.h"
#include "passes/lower_internal.h"

namespace anvil::passes::detail {

namespace {

/// A view described by an index map (out index -> in index) and, for buffer inputs, new
/// strides / offset when it is affine.
TRefPtr map_view(Lowerer& L, const TRefPtr& in, const std::vector<SymInt>& out_sizes,
                 std::function<Index(const Index&)> map) {
  return L.computed(out_sizes, in->dtype,
                    [&L, in, map](const Index& idx) { return L.load(*in, map(idx)); }, {in});
}

TRefPtr strided(Lowerer& L, const TRefPtr& in, const std::vector<SymInt>& sizes,
                const std::vector<SymInt>& strides, const SymInt& offset) {
  auto t = L.view_of(in->buffer, in->dtype, sizes, strides, offset);
  return t;
}

/// Start and length of slice(start, end, step) on a dim of size n.
std::pair<SymInt, SymInt> slice_range(const SymInt& n, std::optional<SymInt> start,
                                      std::optional<SymInt> end, int64_t step) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto nc = n.maybe_constant();
  if (nc && (!start || start->is_constant()) && (!end || end->is_constant())) {
    int64_t s = start ? start->constant() : 0, e = end ? end->constant() : kMax;
    if (s < 0) s += *nc;
    if (e < 0) e += *nc;
    s = std::clamp<int64_t>(s, 0, *nc);
    e = std::clamp<int64_t>(e, s, *nc);
    return {SymInt(s), SymInt(e > s ? (e - s - 1) / step + 1 : 0)};
  }
  SymInt s = start ? *start : SymInt(0);
  if (auto c = s.maybe_constant(); c && *c < 0) s = n + *c;
  SymInt e = n;
  if (end && !is_const(*end, kMax)) {
    e = *end;
    if (auto c = e.maybe_constant(); c && *c < 0) e = n + *c;
    e = SymInt::min(e, n);
  }
  SymInt len = step == 1 ? e - s : (e - s + SymInt(step - 1)).floordiv(step);
  return {s, len};
}

/// One group of a reshape: in dims [i0, i1) and out dims [o0, o1) with equal element counts.
struct Group {
  size_t i0, i1, o0, o1;
};

/// Splits a reshape into groups of dims with equal products (structurally), or one group.
std::vector<Group> reshape_groups(const std::vector<SymInt>& in, const std::vector<SymInt>& out,
                                  const SymRanges& ranges) {
  auto probe = [&](const SymInt& s) -> int64_t {
    std::set<std::string> syms;
    s.collect_symbols(syms);
    SymEnv env;
    for (const auto& nm : syms) {
      auto it = ranges.find(nm);
      int64_t lo = it != ranges.end() ? it->second.min : 2;
      env[nm] = std::max<int64_t>(lo, 2) + 5;  // a value where sizes differ generically
    }
    try {
      return s.evaluate(env);
    } catch (const Error&) {
      return -1;
    }
  };
  std::vector<Group> groups;
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    Group g{i, i, o, o};
    SymInt pi(1), po(1);
    // take at least one dim from each side that has dims left
    if (i < in.size()) pi = in[g.i1++];
    if (o < out.size()) po = out[g.o1++];
    int guard = 0;
    while (!(pi == po) && guard++ < 64) {
      const int64_t vi = probe(pi), vo = probe(po);
      if ((vi <= vo || g.o1 == out.size()) && g.i1 < in.size())
        pi = pi * in[g.i1++];
      else if (g.o1 < out.size())
        po = po * out[g.o1++];
      else
        return {Group{0, in.size(), 0, out.size()}};
    }
    if (!(pi == po)) return {Group{0, in.size(), 0, out.size()}};
    // absorb trailing size-1 dims into this group
    while (g.i1 < in.size() && is_const(in[g.i1], 1) &&
           !(g.o1 < out.size() && is_const(out[g.o1], 1)))
      ++g.i1;
    while (g.o1 < out.size() && is_const(out[g.o1], 1) &&
           !(g.i1 < in.size() && is_const(in[g.i1], 1)))
      ++g.o1;
    groups.push_back(g);
    i = g.i1;
    o = g.o1;
  }
  return groups;
}

/// view / reshape / flatten / unflatten to `out_sizes`.
TRefPtr reshape(Lowerer& L, const TRefPtr& in, const std::vector<SymInt>& out_sizes) {
  const auto groups = reshape_groups(in->sizes, out_sizes, L.prog().symbol_ranges);
  if (in->is_buffer()) {
    // Strides exist when each group's in-dims are mergeable.
    std::vector<SymInt> st(out_sizes.size());
    bool ok = true;
    for (const Group& g : groups) {
      // chain: stride[d] == stride[next] * size[next] over non-1 dims
      std::vector<size_t> dims;
      for (size_t d = g.i0; d < g.i1; ++d)
        if (!is_const(in->sizes[d], 1)) dims.push_back(d);
      for (size_t k = 0; k + 1 < dims.size(); ++k)
        if (!(in->strides[dims[k]] == in->strides[dims[k + 1]] * in->sizes[dims[k + 1]]))
          ok = false;
      const SymInt base = dims.empty() ? SymInt(1) : in->strides[dims.back()];
      const auto cs =
          contiguous(std::vector<SymInt>(out_sizes.begin() + g.o0, out_sizes.begin() + g.o1));
      for (size_t k = g.o0; k < g.o1; ++k) st[k] = cs[k - g.o0] * base;
    }
    if (ok) return strided(L, in, out_sizes, st, in->offset);
  }
  const auto in_sizes = in->sizes;
  auto t = map_view(L, in, out_sizes, [groups, in_sizes, out_sizes](const Index& idx) {
    Index r(in_sizes.size(), SymInt(0));
    for (const Group& g : groups) {
      if (g.i1 - g.i0 == 1 && g.o1 - g.o0 == 1) {
        r[g.i0] = idx[g.o0];
        continue;
      }
      SymInt lin(0);
      const auto cso =
          contiguous(std::vector<SymInt>(out_sizes.begin() + g.o0, out_sizes.begin() + g.o1));
      for (size_t k = g.o0; k < g.o1; ++k)
        if (!is_const(out_sizes[k], 1)) lin = lin + idx[k] * cso[k - g.o0];
      const auto csi =
          contiguous(std::vector<SymInt>(in_sizes.begin() + g.i0, in_sizes.begin() + g.i1));
      bool first = true;
      for (size_t d = g.i0; d < g.i1; ++d) {
        if (is_const(in_sizes[d], 1)) continue;
        SymInt v = is_const(csi[d - g.i0], 1) ? lin : lin.floordiv(csi[d - g.i0]);
        if (!first) v = v.mod(in_sizes[d]);
        first = false;
        r[d] = v;
      }
    }
    return r;
  });
  t->reshape_src = in;
  return t;
}

/// permute with dims already normalised.
TRefPtr permute(Lowerer& L, const TRefPtr& in, const std::vector<int64_t>& dims) {
  std::vector<SymInt> sizes;
  for (int64_t d : dims) sizes.push_back(in->sizes[static_cast<size_t>(d)]);
  if (in->is_buffer()) {
    std::vector<SymInt> st;
    for (int64_t d : dims) st.push_back(in->strides[static_cast<size_t>(d)]);
    return strided(L, in, sizes, st, in->offset);
  }
  return map_view(L, in, sizes, [dims](const Index& idx) {
    Index r(dims.size());
    for (size_t k = 0; k < dims.size(); ++k) r[static_cast<size_t>(dims[k])] = idx[k];
    return r;
  });
}

/// A slice along dim d: start, length, step.
TRefPtr slice(Lowerer& L, const TRefPtr& in, size_t d, const SymInt& start, const SymInt& len,
              int64_t step) {
  std::vector<SymInt> sizes = in->sizes;
  sizes[d] = len;
  if (in->is_buffer()) {
    std::vector<SymInt> st = in->strides;
    st[d] = st[d] * SymInt(step);
    return strided(L, in, sizes, st, in->offset + start * in->strides[d]);
  }
  return map_view(L, in, sizes, [d, start, step](const Index& idx) {
    Index r = idx;
    r[d] = start + idx[d] * SymInt(step);
    return r;
  });
}

/// select(d, index) with index normalised.
TRefPtr select(Lowerer& L, const TRefPtr& in, size_t d, const SymInt& index) {
  std::vector<SymInt> sizes = in->sizes;
  sizes.erase(sizes.begin() + static_cast<long>(d));
  if (in->is_buffer()) {
    std::vector<SymInt> st = in->strides;
    st.erase(st.begin() + static_cast<long>(d));
    return strided(L, in, sizes, st, in->offset + index * in->strides[d]);
  }
  return map_view(L, in, sizes, [d, index](const Index& idx) {
    Index r = idx;
    r.insert(r.begin() + static_cast<long>(d), index);
    return r;
  });
}

/// Inserts / removes size-1 dims, or broadcasts: `out_sizes` is the target, `in_dim_of[k]` the
/// input dim of output dim k (-1 for a new dim), broadcast where sizes differ.
TRefPtr remap(Lowerer& L, const TRefPtr& in, const std::vector<SymInt>& out_sizes,
              const std::vector<int>& in_dim_of) {
  const size_t n_in = in->sizes.size();
  if (in->is_buffer()) {
    std::vector<SymInt> st;
    for (size_t k = 0; k < out_sizes.size(); ++k) {
      const int d = in_dim_of[k];
      if (d < 0 || (is_const(in->sizes[static_cast<size_t>(d)], 1) && !is_const(out_sizes[k], 1)))
        st.push_back(SymInt(0));
      else
        st.push_back(in->strides[static_cast<size_t>(d)]);
    }
    return strided(L, in, out_sizes, st, in->offset);
  }
  const auto in_sizes = in->sizes;
  return map_view(L, in, out_sizes, [in_dim_of, in_sizes, n_in](const Index& idx) {
    Index r(n_in, SymInt(0));
    for (size_t k = 0; k < idx.size(); ++k) {
      const int d = in_dim_of[k];
      if (d < 0) continue;
      r[static_cast<size_t>(d)] =
          is_const(in_sizes[static_cast<size_t>(d)], 1) ? SymInt(0) : idx[k];
    }
    return r;
  });
}


/// True when `strides` lay `sizes` out row-major (dims of size 1 may have any stride).
bool row_major(const std::vector<SymInt>& sizes, const std::vector<SymInt>& strides) {
  if (strides.empty()) return true;
  const auto want = contiguous(sizes);
  for (size_t d = 0; d < sizes.size(); ++d)
    if (!is_const(sizes[d], 1) && !(strides[d] == want[d])) return false;
  return true;
}

/// The value whose storage `v` views in PyTorch: back through view ops (and contiguous() of a
/// tensor already laid out so, which PyTorch returns as is) to a tensor that owns its storage.
/// Null when a reshape on the way copied or may have (its input not row-major).
const ir::Value* storage_owner(const ir::Value* v) {
  auto strides_of = [](const ir::Value* x) {
    return x->type.strides.empty() ? contiguous(x->type.sizes) : x->type.strides;
  };
  while (v->producer && v->producer->schema) {
    const ir::Node& p = *v->producer;
    const bool view = p.schema->category == ir::OpCategory::kView;
    if (!view && p.target != "aten.contiguous.default") break;
    const ir::Value* src = nullptr;
    for (const ir::Value* in : p.input_values())
      if (in && in->kind == ir::ValueKind::kTensor) {
        src = in;
        break;
      }
    if (!src) break;
    if (!view && !(strides_of(src) == strides_of(v))) break;  // contiguous() copied
    const bool may_copy = p.target == "aten.reshape.default" ||
                          p.target == "aten.flatten.using_ints" ||
                          p.target == "aten.reshape_as.default";
    if (may_copy && !row_major(src->type.sizes, src->type.strides)) return nullptr;
    v = src;
  }
  return v;
}

/// as_strided(self, size, stride, storage_offset): a view of the storage of the tensor `self`
/// views. Storage position p = offset + sum(idx * stride) is mapped back to that tensor's index
/// through PyTorch's layout of it (its recorded strides, dense), so the result is PyTorch's
/// whatever layout the compiled code gave the buffer; a row-major owner held in a row-major
/// buffer gives a plain strided view.
TRefPtr as_strided_view(Lowerer& L, const ir::Node& n, const ir::Value* self) {
  const ir::Value* owner = storage_owner(self);
  if (!owner)
    L.fail("as_strided over a reshape that copied its non-contiguous input",
           "as_strided over a view of a tensor's own storage", "a reshape of a non-row-major tensor");
  const std::vector<SymInt> sizes = L.symints_arg("size"), strides = L.symints_arg("stride");
  const TRefPtr base = L.ref(owner), in = L.ref(self);
  const std::vector<SymInt>& osz = owner->type.sizes;
  const std::vector<SymInt> ost = owner->type.strides.empty() ? contiguous(osz) : owner->type.strides;
  const bool rm = row_major(osz, ost);
  const bool flat = rm && is_contiguous_view(*base);  // storage position == buffer position
  SymInt off(0);
  if (ir::shape_args::has(n, "storage_offset")) {
    off = L.symint_arg("storage_offset");
  } else if (self != owner) {  // self's own offset (the .pt2 importer writes it explicitly)
    if (!flat || !in->is_buffer() || in->buffer != base->buffer)
      L.fail("as_strided without a storage_offset over a view whose offset the compiler cannot tell",
             "an explicit storage_offset", "none");
    off = in->offset;
  }
  // dims of the owner from the slowest to the fastest in storage, with their strides
  std::vector<size_t> order(osz.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  std::vector<SymInt> step = contiguous(osz);
  if (!rm) {
    std::vector<int64_t> c(osz.size());
    for (size_t d = 0; d < osz.size(); ++d) {
      auto v = ost[d].maybe_constant();
      if (!v || !osz[d].is_constant())
        L.fail("as_strided over a tensor with a symbolic non-row-major layout",
               "static strides or a row-major layout", sym_shape_str(ost));
      c[d] = *v;
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return c[a] > c[b]; });
    int64_t expect = 1;
    for (size_t k = order.size(); k-- > 0;) {
      const size_t d = order[k];
      const int64_t size = osz[d].constant();
      if (size != 1 && c[d] != expect)
        L.fail("as_strided over a tensor whose storage is not dense", "a dense layout",
               sym_shape_str(ost));
      step[d] = SymInt(size == 1 ? expect : c[d]);
      expect *= size;
    }
  }
  const SymInt numel = numel_of(osz);
  if (auto total = numel.maybe_constant(); total && off.is_constant()) {
    int64_t need = off.constant() + 1;
    bool known = true, empty = false;
    for (size_t k = 0; k < sizes.size() && known; ++k) {
      auto a = sizes[k].maybe_constant(), b = strides[k].maybe_constant();
      known = a && b;
      if (known) {
        empty = empty || *a == 0;
        need += (*a - 1) * *b;
      }
    }
    if (known && !empty && need > *total)
      L.fail("as_strided: the view is out of bounds for the storage of self",
             str("a storage of at least ", need, " elements"), str("a storage of ", *total, " elements"));
  }
  if (flat)
    return strided(L, base, sizes, strides, base->offset + off);
  return L.computed(sizes, base->dtype, [&L, base, order, step, osz, off, strides](const Index& idx) {
    SymInt p = off;
    for (size_t k = 0; k < idx.size(); ++k) p = p + idx[k] * strides[k];
    Index at(osz.size(), SymInt(0));
    for (size_t k = 0; k < order.size(); ++k) {
      const size_t d = order[k];
      if (is_const(osz[d], 1)) continue;
      SymInt i = p.floordiv(step[d]);
      at[d] = k == 0 ? i : i.mod(osz[d]);
    }
    return L.load(*base, at);
  }, {base});
}

}  // namespace

bool lower_view(Lowerer& L, const ir::Node& n) {
  const std::string& t = n.target;
  const bool cat = t == "aten.cat.default", stack = t == "aten.stack.default";
  if (n.schema->category != ir::OpCategory::kView && !cat && !stack) return false;
  if (cat || stack) {
    const ir::Arg* a = n.arg("tensors");
    if (!a) L.fail("cat needs tensors");
    const ir::TensorType& out = L.out_type();
    const size_t rank = out.sizes.size();
    int64_t dim = L.wrap_dim(ir::shape_args::int_(n, "dim", 0), stack ? rank : rank);
    if (stack) dim = L.wrap_dim(ir::shape_args::int_(n, "dim", 0), rank);
    const int b = L.new_buffer(L.out_name(), out.dtype, out.sizes);
    auto whole = L.view_of(b, out.dtype, out.sizes, contiguous(out.sizes), SymInt(0));
    SymInt pos(0);
    int64_t k = 0;
    for (const ir::Value* v : a->values) {
      if (!v) L.fail("cat input is None");
      TRefPtr src = L.ref(v);
      if (cat && src->sizes.size() == 1 && is_const(src->sizes[0], 0) && rank != 1) continue;
      TRefPtr dst;
      if (cat) {
        const SymInt len = src->sizes[static_cast<size_t>(dim)];
        dst = slice(L, whole, static_cast<size_t>(dim), pos, len, 1);
        pos = pos + len;
      } else {
        dst = select(L, whole, static_cast<size_t>(dim), SymInt(k++));
      }
      L.store_into(*dst, *src);
    }
    L.bind(0, whole);
    return true;
  }
  const ir::Arg* self = n.arg("self");
  if (!self || !self->value) L.fail("view without self");
  TRefPtr in = L.ref(self->value);
  const size_t rank = in->sizes.size();
  if (t == "aten.alias.default" || t == "aten.detach.default" || t == "aten.detach_.default") {
    L.bind(0, in);
    return true;
  }
  if (t == "aten.view.default" || t == "aten.reshape.default" || t == "aten._unsafe_view.default" ||
      t == "aten.flatten.using_ints" || t == "aten.unflatten.int" ||
      t == "aten.reshape_as.default") {
    L.bind(0, reshape(L, in, L.out_type().sizes));
    return true;
  }
  if (t == "aten.permute.default") {
    std::vector<int64_t> dims;
    for (const auto& d : ir::shape_args::symints(n, "dims"))
      dims.push_back(L.wrap_dim(d.constant(), rank));
    L.bind(0, permute(L, in, dims));
    return true;
  }
  if (t == "aten.numpy_T.default") {  // x.T: every dim reversed
    std::vector<int64_t> dims(rank);
    for (size_t d = 0; d < rank; ++d) dims[d] = static_cast<int64_t>(rank - 1 - d);
    L.bind(0, permute(L, in, dims));
    return true;
  }
  if (t == "aten.transpose.int" || t == "aten.transpose_.default" || t == "aten.t.default") {
    std::vector<int64_t> dims(rank);
    for (size_t d = 0; d < rank; ++d) dims[d] = static_cast<int64_t>(d);
    if (rank >= 2) {
      int64_t d0 = t == "aten.t.default" ? 0 : L.wrap_dim(ir::shape_args::int_(n, "dim0"), rank);
      int64_t d1 = t == "aten.t.default" ? 1 : L.wrap_dim(ir::shape_args::int_(n, "dim1"), rank);
      std::swap(dims[static_cast<size_t>(d0)], dims[static_cast<size_t>(d1)]);
    }
    L.bind(0, permute(L, in, dims));
    return true;
  }
  if (t == "aten.unsqueeze.default" || t.rfind("aten.squeeze.", 0) == 0 ||
      t == "aten.expand.default" || t == "aten.expand_as.default") {
    const auto& out = L.out_type().sizes;
    std::vector<int> in_dim_of(out.size(), -1);
    if (t == "aten.unsqueeze.default") {
      const int64_t d = L.wrap_dim(ir::shape_args::int_(n, "dim"), rank + 1);
      for (size_t k = 0, i = 0; k < out.size(); ++k)
        in_dim_of[k] = static_cast<int64_t>(k) == d ? -1 : static_cast<int>(i++);
    } else if (t.rfind("aten.squeeze.", 0) == 0) {
      // squeezed dims: size-1 input dims that the output no longer has
      std::vector<bool> drop(rank, false);
      if (t == "aten.squeeze.default") {
        for (size_t d = 0; d < rank; ++d) drop[d] = is_const(in->sizes[d], 1);
      } else {
        for (const auto& d : ir::shape_args::symints(n, "dim")) {
          const int64_t w = L.wrap_dim(d.constant(), rank);
          if (is_const(in->sizes[static_cast<size_t>(w)], 1)) drop[static_cast<size_t>(w)] = true;
        }
      }
      for (size_t d = 0, k = 0; d < rank; ++d)
        if (!drop[d]) in_dim_of[k++] = static_cast<int>(d);
    } else {  // expand: trailing alignment
      const size_t lead = out.size() - rank;
      for (size_t d = 0; d < rank; ++d) in_dim_of[lead + d] = static_cast<int>(d);
    }
    L.bind(0, remap(L, in, out, in_dim_of));
    return true;
  }
  if (t == "aten.slice.Tensor" || t == "aten.narrow.default") {
    const int64_t d = L.wrap_dim(ir::shape_args::int_(n, "dim", 0), rank);
    SymInt start(0), len;
    int64_t step = 1;
    if (t == "aten.narrow.default") {
      start = L.symint_arg("start");
      if (auto c = start.maybe_constant(); c && *c < 0)
        start = in->sizes[static_cast<size_t>(d)] + *c;
      len = L.symint_arg("length");
    } else {
      std::optional<SymInt> s, e;
      if (ir::shape_args::has(n, "start")) s = L.symint_arg("start");
      if (ir::shape_args::has(n, "end")) e = L.symint_arg("end");
      step = ir::shape_args::int_(n, "step", 1);
      auto r = slice_range(in->sizes[static_cast<size_t>(d)], s, e, step);
      start = r.first;
      len = L.out_type().sizes[static_cast<size_t>(d)];
    }
    L.bind(0, slice(L, in, static_cast<size_t>(d), start, len, step));
    return true;
  }
  if (t == "aten.select.int") {
    const int64_t d = L.wrap_dim(ir::shape_args::int_(n, "dim"), rank);
    SymInt idx = L.symint_arg("index");
    if (auto c = idx.maybe_constant(); c && *c < 0) idx = in->sizes[static_cast<size_t>(d)] + *c;
    L.bind(0, select(L, in, static_cast<size_t>(d), idx));
    return true;
  }
  if (t == "aten.as_strided.default") {
    L.bind(0, as_strided_view(L, n, self->value));
    return true;
  }
  if (t == "aten.diagonal.default") {  // dim1, dim2 removed; the diagonal last
    const int64_t off = ir::shape_args::int_(n, "offset", 0);
    const size_t d1 = static_cast<size_t>(L.wrap_dim(ir::shape_args::int_(n, "dim1", 0), rank));
    const size_t d2 = static_cast<size_t>(L.wrap_dim(ir::shape_args::int_(n, "dim2", 1), rank));
    const std::vector<SymInt> sizes = L.out_type().sizes;
    const SymInt s1 = off >= 0 ? SymInt(0) : SymInt(-off), s2 = off >= 0 ? SymInt(off) : SymInt(0);
    if (in->is_buffer()) {
      std::vector<SymInt> st;
      for (size_t k = 0; k < rank; ++k)
        if (k != d1 && k != d2) st.push_back(in->strides[k]);
      st.push_back(in->strides[d1] + in->strides[d2]);
      const bool empty = is_const(sizes.back(), 0);
      L.bind(0, strided(L, in, sizes, st,
                        empty ? in->offset
                              : in->offset + s1 * in->strides[d1] + s2 * in->strides[d2]));
      return true;
    }
    L.bind(0, map_view(L, in, sizes, [rank, d1, d2, s1, s2](const Index& idx) {
      Index r(rank, SymInt(0));
      size_t k = 0;
      for (size_t d = 0; d < rank; ++d)
        if (d != d1 && d != d2) r[d] = idx[k++];
      r[d1] = idx.back() + s1;
      r[d2] = idx.back() + s2;
      return r;
    }));
    return true;
  }
  if (t == "aten.split.Tensor" || t == "aten.split_with_sizes.default" ||
      t == "aten.chunk.default") {
    const int64_t d = L.wrap_dim(ir::shape_args::int_(n, "dim", 0), rank);
    SymInt pos(0);
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (!n.outputs[i]) continue;
      const SymInt len = n.outputs[i]->type.sizes[static_cast<size_t>(d)];
      L.bind(i, slice(L, in, static_cast<size_t>(d), pos, len, 1));
      pos = pos + len;
    }
    return true;
  }
  if (t == "aten.unbind.int") {
    const int64_t d = L.wrap_dim(ir::shape_args::int_(n, "dim", 0), rank);
    for (size_t i = 0; i < n.outputs.size(); ++i)
      if (n.outputs[i])
        L.bind(i, select(L, in, static_cast<size_t>(d), SymInt(static_cast<int64_t>(i))));
    return true;
  }
  L.fail("view op without a lowering rule");
}

}  // namespace anvil::passes::detail
