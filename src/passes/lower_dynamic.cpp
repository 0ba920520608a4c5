// Data-dependent sizes (spec/aot.md cases 60-62): aten.nonzero(x) and x[mask] return as many rows
// as the data has true elements, a run-time symbol u (torch.export's unbacked size). Each becomes
//   - an extern ("anvil.nonzero" / "anvil.mask_rows", runtime/kernels/dynamic.cpp) that writes
//     the rows at the start of a buffer sized for the count's capacity, and the count into a
//     one-element int64 buffer;
//   - an "anvil.item" step that stores the count in u's run-time symbol slot.
// Buffers and outputs whose sizes use u are planned / allocated at the capacity (the symbol's
// export range, or the number of elements the mask has), kernels loop over the actual u, and
// the runtime shapes a data-dependent output with u after the run (docs/design_notes.md).
#include <algorithm>

#include "core/error.h"
#include "passes/lower_internal.h"

namespace anvil::passes::detail {

namespace {

bool is_mask(DType t) { return t == DType::kBool || t == DType::kUInt8; }

/// The one boolean mask of an aten.index.Tensor node whose indices are exactly [mask], or null.
const ir::Value* single_mask(const ir::Node& n) {
  if (n.target != "aten.index.Tensor") return nullptr;
  const ir::Arg* idx = n.arg("indices");
  if (!idx) return nullptr;
  const ir::Value* mask = nullptr;
  for (const ir::Value* v : idx->values) {
    if (!v || !v->is_tensor() || !is_mask(v->type.dtype)) return nullptr;
    if (mask) return nullptr;
    mask = v;
  }
  return mask;
}

bool has_mask_index(const ir::Node& n) {
  if (n.target != "aten.index.Tensor") return false;
  const ir::Arg* idx = n.arg("indices");
  if (!idx) return false;
  return std::any_of(idx->values.begin(), idx->values.end(), [](const ir::Value* v) {
    return v && v->is_tensor() && is_mask(v->type.dtype);
  });
}

/// The run-time symbol a producer's result dim 0 is, or "" when the export fixed the count
/// (torch._check(len == 256) makes it a constant or an expression of the inputs' symbols).
std::string count_symbol(Lowerer& L, const ir::Value* out) {
  if (!out || out->type.sizes.empty())
    L.fail("a data-dependent result without a leading dim", "a tensor of rank >= 1",
           out ? out->type.str() : "none");
  const auto& backed = L.prog().symbols;
  std::set<std::string> lead;
  out->type.sizes[0].collect_symbols(lead);
  const bool fixed = std::all_of(lead.begin(), lead.end(), [&](const std::string& x) {
    return std::find(backed.begin(), backed.end(), x) != backed.end();
  });
  auto s = out->type.sizes[0].as_symbol();
  if (!fixed && !s)
    L.fail("the result count of a data-dependent op is not a run-time symbol",
           "a symbol such as u0", out->type.sizes[0].str());
  for (size_t d = 1; d < out->type.sizes.size(); ++d) {
    std::set<std::string> syms;
    out->type.sizes[d].collect_symbols(syms);
    for (const auto& x : syms)
      if (std::find(backed.begin(), backed.end(), x) == backed.end())
        L.fail("only the leading dim of a data-dependent result may be data-dependent",
               "sizes made of the inputs' symbols after dim 0", out->type.str());
  }
  return fixed ? std::string() : *s;
}

/// Records the capacity of run-time symbol `u`: min(`most`, its export range's max) (the
/// anvil.item step registers the symbol itself).
SymInt register_count(Lowerer& L, const std::string& u, const SymInt& most) {
  Program& p = L.prog();
  SymInt cap = most;
  auto r = L.graph().symbol_ranges.find(u);
  if (r != L.graph().symbol_ranges.end() && r->second.max != SymRange::kSymMax)
    cap = SymInt::min(most, SymInt(r->second.max));
  p.unbacked_capacity[u] = cap;
  return cap;
}

/// Emits extern `target` over `inputs` writing `rows` (capacity view) and the count, then the
/// anvil.item step setting `u`; with `u` empty the count is fixed (the rows view's size) and
/// the extern checks it instead ("exact").
void emit_producer(Lowerer& L, const ir::Node& n, const std::string& target,
                   const std::vector<TRefPtr>& inputs, const TensorView& rows, int rows_buffer,
                   const std::string& u) {
  const int cb = L.new_buffer(L.out_name() + "_count", DType::kInt64, {SymInt(1)});
  TensorView count;
  count.buffer = cb;
  count.dtype = DType::kInt64;
  count.sizes = {SymInt(1)};
  count.strides = {SymInt(1)};
  count.offset = SymInt(0);
  ExternStep e;
  e.name = L.out_name() + "_rows";
  e.target = target;
  e.nodes = {n.name};
  SNode s;
  s.kind = SNode::Kind::kExtern;
  s.nodes = e.nodes;
  for (const TRefPtr& t : inputs) {
    e.inputs.push_back(view_from(*t));
    s.reads.insert(t->buffer);
  }
  e.outputs = {rows, count};
  if (u.empty()) e.attrs.push_back(int_attr("exact", SymInt(1)));
  s.writes = {rows_buffer, cb};
  s.ext = std::move(e);
  L.add_snode(std::move(s));
  if (!u.empty()) add_item_step(L, L.out_name() + "_count_item", {n.name}, count, cb, u);
}

}  // namespace

bool is_data_dependent_producer(const ir::Node& n) {
  return n.target == "aten.nonzero.default" || has_mask_index(n);
}

bool lower_data_dependent(Lowerer& L, const ir::Node& n) {
  if (!is_data_dependent_producer(n)) return false;
  const ir::Value* out = n.outputs.empty() ? nullptr : n.outputs[0];
  const std::string u = count_symbol(L, out);
  const ir::Value* self = n.arg("self")->value;
  TRefPtr x = L.ref(self);
  L.realize(*x, self->name, /*need_contiguous=*/true);
  std::vector<TRefPtr> inputs = {x};
  const bool nonzero = n.target == "aten.nonzero.default";
  SymInt most = numel_of(x->sizes);  // rows at most: the elements the mask / input has
  if (!nonzero) {
    const ir::Value* mask = single_mask(n);
    if (!mask)
      L.fail("boolean-mask indexing is compiled only with the mask as the one index",
             "x[mask] with mask.shape == x.shape[:k]", "several or mixed indices");
    TRefPtr m = L.ref(mask);
    L.realize(*m, mask->name, /*need_contiguous=*/true);
    if (m->sizes.size() > x->sizes.size())
      L.fail("the mask has more dims than the indexed tensor", std::to_string(x->sizes.size()),
             std::to_string(m->sizes.size()));
    most = numel_of(m->sizes);
    inputs.push_back(m);
  }
  const ir::TensorType& ot = out->type;
  std::vector<SymInt> cap_sizes = ot.sizes;
  if (!u.empty()) cap_sizes[0] = register_count(L, u, most);
  const int b = L.new_buffer(L.out_name(), ot.dtype, ot.sizes);
  const TensorView rows =
      view_from(*L.view_of(b, ot.dtype, cap_sizes, contiguous(cap_sizes), SymInt(0)));
  emit_producer(L, n, nonzero ? "anvil.nonzero" : "anvil.mask_rows", inputs, rows, b, u);
  L.bind(0, L.view_of(b, ot.dtype, ot.sizes, contiguous(ot.sizes), SymInt(0)));
  return true;
}

}  // namespace anvil::passes::detail
