// The Lowerer core: signature, TRef helpers, realisation, reductions, in-place ops, the run.
#include <algorithm>

#include "core/error.h"
#include "passes/graph_passes.h"
#include "passes/lower_internal.h"

namespace anvil::passes::detail {

std::vector<SymInt> contiguous(const std::vector<SymInt>& sizes) {
  std::vector<SymInt> st(sizes.size());
  SymInt acc(1);
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = acc;
    acc = acc * sizes[i];
  }
  return st;
}

SymInt numel_of(const std::vector<SymInt>& sizes) {
  SymInt n(1);
  for (const auto& s : sizes) n = n * s;
  return n;
}

bool is_const(const SymInt& v, int64_t c) {
  auto k = v.maybe_constant();
  return k && *k == c;
}

/// True when the view covers a whole buffer of `sizes` in row-major order.
bool is_contiguous_view(const TRef& t) {
  if (!t.is_buffer() || !is_const(t.offset, 0)) return false;
  const auto want = contiguous(t.sizes);
  for (size_t d = 0; d < t.sizes.size(); ++d)
    if (!is_const(t.sizes[d], 1) && !(t.strides[d] == want[d])) return false;
  return true;
}

/// The value `v` views through view ops only (v itself when no view op produced it).
const ir::Value* view_root(const ir::Value* v) {
  while (v->producer && v->producer->schema &&
         v->producer->schema->category == ir::OpCategory::kView) {
    const ir::Value* src = nullptr;
    for (const ir::Value* in : v->producer->input_values())
      if (in && in->kind == ir::ValueKind::kTensor) {
        src = in;
        break;
      }
    if (!src) break;
    v = src;
  }
  return v;
}

namespace {

/// Effective number of readers: a view's readers count for the viewed value.
int effective_uses(const ir::Value* v,
                   const std::map<const ir::Value*, std::vector<const ir::Node*>>& readers,
                   const std::map<const ir::Value*, int>& out_uses, int depth = 0) {
  int n = 0;
  auto ou = out_uses.find(v);
  if (ou != out_uses.end()) n += ou->second;
  auto it = readers.find(v);
  if (it == readers.end()) return n;
  for (const ir::Node* r : it->second) {
    if (depth < 8 && r->schema && r->schema->category == ir::OpCategory::kView &&
        r->schema->mutates_arg < 0) {
      for (const ir::Value* o : r->outputs)
        if (o) n += effective_uses(o, readers, out_uses, depth + 1);
    } else {
      ++n;
    }
  }
  return n;
}

}  // namespace

Lowerer::Lowerer(const ir::Graph& graph, Program& program, const std::set<std::string>& folded)
    : graph_(graph), prog_(program), folded_(folded) {}

void Lowerer::fail(const std::string& what, const std::string& expected,
                   const std::string& actual) const {
  const std::string where =
      node_ ? "node " + node_->name + " (" + node_->target + ")" : std::string("lowering");
  throw Error(what, where, expected, actual);
}

std::string Lowerer::out_name(size_t i) const {
  if (node_ && i < node_->outputs.size() && node_->outputs[i]) return node_->outputs[i]->name;
  return node_ ? node_->name : "tmp";
}

int Lowerer::new_buffer(const std::string& name, DType dtype, const std::vector<SymInt>& sizes) {
  Buffer b;
  b.name = name;
  for (int k = 1;; ++k) {
    bool clash = false;
    for (const auto& o : prog_.buffers)
      if (o.name == b.name) clash = true;
    if (!clash) break;
    b.name = name + "_" + std::to_string(k);
  }
  b.kind = BufferKind::kArena;
  b.dtype = dtype;
  b.sizes = sizes;
  b.numel = numel_of(sizes);
  if (node_) b.nodes.push_back(node_->name);
  prog_.buffers.push_back(std::move(b));
  return static_cast<int>(prog_.buffers.size()) - 1;
}

TRefPtr Lowerer::view_of(int buffer, DType dtype, const std::vector<SymInt>& sizes,
                         const std::vector<SymInt>& strides, const SymInt& offset) {
  auto t = std::make_shared<TRef>();
  t->dtype = dtype;
  t->sizes = sizes;
  t->buffer = buffer;
  t->strides = strides;
  t->offset = offset;
  t->reads = {buffer};
  return t;
}

int Lowerer::load(const TRef& t, const Index& idx) {
  if (!t.is_buffer()) return t.fn(idx);
  SymInt off = t.offset;
  for (size_t d = 0; d < t.sizes.size(); ++d)
    if (!is_const(t.sizes[d], 1)) off = off + idx[d] * t.strides[d];
  return ex().load(t.buffer, off, t.dtype);
}

Index Lowerer::broadcast_index(const TRef& t, const std::vector<SymInt>& sizes, const Index& idx) {
  const size_t n = sizes.size(), r = t.sizes.size();
  Index out(r);
  for (size_t d = 0; d < r; ++d) {
    const size_t od = n - r + d;
    out[d] = (is_const(t.sizes[d], 1) && !is_const(sizes[od], 1)) ? SymInt(0) : idx[od];
  }
  return out;
}

TRefPtr Lowerer::computed(const std::vector<SymInt>& sizes, DType dtype, BodyFn fn,
                          const std::vector<TRefPtr>& inputs) {
  auto t = std::make_shared<TRef>();
  t->dtype = dtype;
  t->sizes = sizes;
  t->fn = std::move(fn);
  for (const auto& in : inputs) {
    if (!in) continue;
    t->reads.insert(in->reads.begin(), in->reads.end());
    if (!in->is_buffer())
      for (const auto& nm : in->nodes)
        if (std::find(t->nodes.begin(), t->nodes.end(), nm) == t->nodes.end())
          t->nodes.push_back(nm);
  }
  if (node_ && std::find(t->nodes.begin(), t->nodes.end(), node_->name) == t->nodes.end())
    t->nodes.push_back(node_->name);
  Index probe;
  for (size_t d = 0; d < sizes.size(); ++d)
    probe.push_back(SymInt::symbol("x" + std::to_string(d)));
  t->cost = ex().cost(t->fn(probe));
  return t;
}

void Lowerer::add_snode(SNode s) {
  if (s.kind == SNode::Kind::kPointwise || s.kind == SNode::Kind::kReduction) {
    s.writes.insert(s.buffer);
    Index probe;
    for (size_t d = 0; d < s.sizes.size(); ++d)
      probe.push_back(SymInt::symbol("x" + std::to_string(d)));
    std::vector<int> loads;
    ex().loads(s.body(probe), loads);
    for (int l : loads) s.reads.insert(ex().at(l).buffer);
  }
  snodes_.push_back(std::move(s));
}

void Lowerer::realize(TRef& t, const std::string& name, bool need_contiguous) {
  if (t.is_buffer() && (!need_contiguous || is_contiguous_view(t))) return;
  if (!t.is_buffer() && t.reshape_src) {
    auto src = std::make_shared<TRef>(*t.reshape_src);
    realize(*src, name, /*need_contiguous=*/true);
    t.buffer = src->buffer;
    t.strides = contiguous(t.sizes);
    t.offset = SymInt(0);
    t.fn = nullptr;
    t.cost = 0;
    t.reads = {src->buffer};
    t.reshape_src = nullptr;
    return;
  }
  const int b = new_buffer(name, t.dtype, t.sizes);
  TRef old = t;
  SNode s;
  s.kind = SNode::Kind::kPointwise;
  s.nodes = old.nodes.empty() && node_ ? std::vector<std::string>{node_->name} : old.nodes;
  s.sizes = old.sizes;
  s.body = [this, old](const Index& idx) { return load(old, idx); };
  s.buffer = b;
  s.strides = contiguous(old.sizes);
  s.offset = SymInt(0);
  s.dtype = old.dtype;
  prog_.buffers[static_cast<size_t>(b)].nodes = s.nodes;
  add_snode(std::move(s));
  t.buffer = b;
  t.strides = contiguous(t.sizes);
  t.offset = SymInt(0);
  t.fn = nullptr;
  t.cost = 0;
  t.reads = {b};
}

void Lowerer::store_into(const TRef& dst, const TRef& src_in) {
  ANVIL_INTERNAL_ASSERT(dst.is_buffer(), "store_into a computed tensor");
  TRef src = src_in;
  if (src.reads.count(dst.buffer)) {
    // Reading the destination elsewhere than the element being written (x[1:] = x[:-1]) would
    // see partly updated data: copy the source first.
    Index probe;
    for (size_t d = 0; d < dst.sizes.size(); ++d)
      probe.push_back(SymInt::symbol("x" + std::to_string(d)));
    SymInt at = dst.offset;
    for (size_t d = 0; d < dst.sizes.size(); ++d)
      if (!is_const(dst.sizes[d], 1)) at = at + probe[d] * dst.strides[d];
    std::vector<int> loads;
    ex().loads(load(src, broadcast_index(src, dst.sizes, probe)), loads);
    bool hazard = false;
    for (int l : loads)
      if (ex().at(l).buffer == dst.buffer && !(ex().at(l).index == at)) hazard = true;
    if (hazard) {
      const int tb = new_buffer(out_name() + "_src", src.dtype, src.sizes);
      auto tmp = view_of(tb, src.dtype, src.sizes, contiguous(src.sizes), SymInt(0));
      store_into(*tmp, src);
      src = *tmp;
    }
  }
  SNode s;
  s.kind = SNode::Kind::kPointwise;
  s.nodes = src.nodes;
  if (node_ && s.nodes.empty()) s.nodes.push_back(node_->name);
  s.sizes = dst.sizes;
  const DType dt = dst.dtype;
  const auto sizes = dst.sizes;
  s.body = [this, src, dt, sizes](const Index& idx) {
    return ex().cast(load(src, broadcast_index(src, sizes, idx)), dt);
  };
  s.buffer = dst.buffer;
  s.strides = dst.strides;
  s.offset = dst.offset;
  s.dtype = dt;
  add_snode(std::move(s));
}

TRefPtr Lowerer::reduce(const TRefPtr& in, const std::vector<int64_t>& dims, bool keepdim,
                        ReduceOp op, DType dtype) {
  const size_t n = in->sizes.size();
  std::vector<bool> red(n, false);
  for (int64_t d : dims) red[static_cast<size_t>(d)] = true;
  std::vector<SymInt> out_sizes;
  for (size_t d = 0; d < n; ++d) {
    if (!red[d])
      out_sizes.push_back(in->sizes[d]);
    else if (keepdim)
      out_sizes.push_back(SymInt(1));
  }
  const int b = new_buffer(out_name(), dtype, out_sizes);
  const auto ost = contiguous(out_sizes);
  SNode s;
  s.kind = SNode::Kind::kReduction;
  s.nodes = in->nodes;
  if (node_) s.nodes.push_back(node_->name);
  s.sizes = in->sizes;
  s.reduced = red;
  s.reduce = op;
  // The input as it is now: a computed input realized later (into a buffer whose store comes
  // after this reduction) must still be read as the expression it was here.
  s.body = [this, in_now = TRef(*in), dtype](const Index& idx) {
    return ex().cast(load(in_now, idx), dtype);
  };
  s.buffer = b;
  s.offset = SymInt(0);
  s.dtype = dtype;
  size_t od = 0;
  for (size_t d = 0; d < n; ++d) {
    if (red[d]) {
      s.strides.push_back(SymInt(0));
      if (keepdim) ++od;
    } else {
      s.strides.push_back(ost[od++]);
    }
  }
  prog_.buffers[static_cast<size_t>(b)].nodes = s.nodes;
  add_snode(std::move(s));
  return view_of(b, dtype, out_sizes, ost, SymInt(0));
}

int64_t Lowerer::wrap_dim(int64_t d, size_t rank) const {
  try {
    return ::anvil::wrap_dim(d, static_cast<int64_t>(rank), "lowering");
  } catch (const Error& e) {
    fail(e.what_part(), e.expected(), e.actual());  // names the node
  }
}

SymInt Lowerer::symint_arg(const std::string& name, std::optional<SymInt> dflt) {
  return ir::shape_args::symint(*node_, name, dflt);
}

std::vector<SymInt> Lowerer::symints_arg(const std::string& name) {
  return ir::shape_args::symints(*node_, name);
}

TRefPtr Lowerer::ref(const ir::Value* v) {
  auto it = vals_.find(v);
  if (it == vals_.end() || !it->second)
    fail("reads a value that has no lowered tensor", "a tensor value", v ? v->name : "null");
  return it->second;
}

TRefPtr Lowerer::arg(const std::string& name) {
  const ir::Arg* a = node_->arg(name);
  if (!a || a->kind != ir::Arg::Kind::kTensor || !a->value) return nullptr;
  return ref(a->value);
}

const ir::TensorType& Lowerer::out_type(size_t i) const {
  if (i >= node_->outputs.size() || !node_->outputs[i])
    fail("node has no tensor output " + std::to_string(i));
  return node_->outputs[i]->type;
}

void Lowerer::bind(size_t i, TRefPtr t) {
  if (i < node_->outputs.size() && node_->outputs[i]) vals_[node_->outputs[i]] = std::move(t);
}

void Lowerer::setup_signature() {
  const auto mutated = mutated_inputs(graph_);
  // Devices of every input, reported together before any code is generated (spec/aot.md case
  // 80). float8 inputs are accepted: the kernels load and store them through
  // include/anvil/anvil_fp8.h.
  std::string devices;
  for (const auto& spec : graph_.input_specs()) {
    const ir::Value* v = spec.value;
    if (!v || v->kind != ir::ValueKind::kTensor) continue;
    const std::string what = str(ir::input_kind_name(spec.kind), " '",
                                 spec.target.empty() ? v->name : spec.target, "'");
    const Device::Type target = options ? options->target_device : Device::Type::kCPU;
    if (!v->type.device.is_cpu() && v->type.device.type != target)
      devices += str(devices.empty() ? "" : ", ", what, " on ", v->type.device.str());
  }
  if (!devices.empty())
    throw Error("Device mismatch: the graph was recorded with tensors on another device than "
                "the CPU target (export it with CPU example inputs)",
                "compile (target cpu)", "every input and weight on cpu", devices);
  check_float8_uses(graph_);
  // Symbols: in order of first appearance in the user inputs' sizes.
  for (const auto& spec : graph_.input_specs()) {
    if (spec.kind != ir::InputKind::kUserInput || !spec.value || spec.constant_int) continue;
    if (spec.value->kind != ir::ValueKind::kTensor)
      throw Error("non-tensor user inputs are not supported by the compiler",
                  "input " + spec.value->name, "a tensor", "a " + spec.value->type.str());
    for (const auto& s : spec.value->type.sizes) {
      std::set<std::string> syms;
      s.collect_symbols(syms);
      for (const auto& nm : syms)
        if (std::find(prog_.symbols.begin(), prog_.symbols.end(), nm) == prog_.symbols.end())
          prog_.symbols.push_back(nm);
    }
  }
  for (const auto& nm : prog_.symbols) {
    auto it = graph_.symbol_ranges.find(nm);
    prog_.symbol_ranges[nm] =
        it != graph_.symbol_ranges.end() ? it->second : SymRange{0, SymRange::kSymMax};
  }
  int n_in = 0;
  std::map<std::string, int> by_target;
  for (const auto& spec : graph_.input_specs()) {
    if (!spec.value) continue;
    const ir::Value* v = spec.value;
    if (spec.kind == ir::InputKind::kUserInput) {
      if (spec.constant_int) continue;
      Buffer b;
      b.name = v->name;
      b.kind = BufferKind::kInput;
      b.index = n_in++;
      b.dtype = v->type.dtype;
      b.sizes = v->type.sizes;
      b.numel = numel_of(b.sizes);
      prog_.buffers.push_back(b);
      const int id = static_cast<int>(prog_.buffers.size()) - 1;
      prog_.inputs.push_back({v->name, v->type.dtype, v->type.sizes, id});
      vals_[v] = view_of(id, v->type.dtype, v->type.sizes, contiguous(v->type.sizes), SymInt(0));
      continue;
    }
    if (spec.kind != ir::InputKind::kParameter && spec.kind != ir::InputKind::kBuffer &&
        spec.kind != ir::InputKind::kConstant)
      continue;
    const bool is_mut = mutated.count(v) > 0;
    if (!is_mut && uses_[v] == 0) continue;  // unused weight: not in the package
    auto ct = graph_.constants.find(spec.target);
    if (ct == graph_.constants.end())
      throw Error("no tensor for constant input", "input " + v->name,
                  "a tensor named " + spec.target, "none");
    int id = -1;
    if (by_target.count(spec.target)) {
      id = by_target[spec.target];
    } else if (!is_mut) {  // two names for one tensor: one constant
      for (const auto& c : prog_.constants) {
        const Tensor& a = c.tensor;
        const Tensor& b = ct->second;
        if (!c.is_mutable && a.storage() == b.storage() &&
            a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() &&
            a.strides() == b.strides() && a.dtype() == b.dtype())
          id = c.buffer;
      }
    }
    if (id < 0) {
      ConstantSpec c;
      c.name = v->name;
      c.original_name = spec.target;
      c.kind = folded_.count(spec.target) || spec.target.rfind("folded.", 0) == 0 ? "folded"
               : spec.kind == ir::InputKind::kParameter                           ? "parameter"
               : spec.kind == ir::InputKind::kBuffer                              ? "buffer"
                                                                                  : "constant";
      c.is_mutable = is_mut;
      c.tensor = ct->second.is_contiguous() ? ct->second : ct->second.contiguous();
      Buffer b;
      b.name = v->name;
      b.kind = BufferKind::kConstant;
      b.index = static_cast<int>(prog_.constants.size());
      b.dtype = c.tensor.dtype();
      for (int64_t s : c.tensor.sizes()) b.sizes.emplace_back(s);
      b.numel = numel_of(b.sizes);
      prog_.buffers.push_back(b);
      id = static_cast<int>(prog_.buffers.size()) - 1;
      c.buffer = id;
      prog_.constants.push_back(std::move(c));
    }
    by_target[spec.target] = id;
    if (is_mut) mutable_buffers_.insert(id);
    const Buffer& b = prog_.buffers[static_cast<size_t>(id)];
    vals_[v] = view_of(id, b.dtype, b.sizes, contiguous(b.sizes), SymInt(0));
  }
}

void Lowerer::realize_readers_of(int buffer) {
  // In value-name order, not the map's (pointer) order: the buffers and steps this creates must
  // come out the same on every compile.
  auto by_name = [](const auto& a, const auto& b) { return a.first->name < b.first->name; };
  auto read_later = [&](const ir::Value* v) {
    auto lu = last_use_.find(v);
    return lu != last_use_.end() && lu->second > node_pos_;
  };
  // Copies lowered as aliases of the buffer (clone, contiguous, _to_copy: copy_aliases) and
  // views of them must keep the value from before the write: each becomes a real copy. A view
  // of an alias that views the whole buffer is rebased onto the alias's copy (same layout).
  std::vector<std::pair<const ir::Value*, TRefPtr>> aliases, alias_views;
  for (auto& [v, t] : vals_) {
    if (!t || !t->is_buffer() || t->buffer != buffer || !read_later(v)) continue;
    const ir::Value* root = view_root(v);
    if (!copy_aliases.count(root)) continue;
    (root == v ? aliases : alias_views).emplace_back(v, t);
  }
  std::sort(aliases.begin(), aliases.end(), by_name);
  std::sort(alias_views.begin(), alias_views.end(), by_name);
  std::map<const ir::Value*, int> copied;  // alias -> its copy, when it viewed the whole buffer
  for (auto& [v, t] : aliases) {
    const int nb = new_buffer(v->name, t->dtype, t->sizes);
    auto fresh = view_of(nb, t->dtype, t->sizes, contiguous(t->sizes), SymInt(0));
    store_into(*fresh, *t);
    const Buffer& b = prog_.buffers[static_cast<size_t>(buffer)];
    if (t->dtype == b.dtype && t->sizes == b.sizes && is_contiguous_view(*t)) copied[v] = nb;
    vals_[v] = fresh;
    copy_aliases.erase(v);
  }
  for (auto& [v, t] : alias_views) {
    auto c = copied.find(view_root(v));
    if (c != copied.end()) {
      vals_[v] = view_of(c->second, t->dtype, t->sizes, t->strides, t->offset);
      continue;
    }
    const int nb = new_buffer(v->name, t->dtype, t->sizes);
    auto fresh = view_of(nb, t->dtype, t->sizes, contiguous(t->sizes), SymInt(0));
    store_into(*fresh, *t);
    vals_[v] = fresh;
  }
  std::vector<std::pair<const ir::Value*, TRefPtr>> todo;
  for (auto& [v, t] : vals_) {
    if (!t || t->is_buffer() || !t->reads.count(buffer) || !read_later(v)) continue;
    todo.emplace_back(v, t);
  }
  std::sort(todo.begin(), todo.end(), by_name);
  for (auto& [v, t] : todo) realize(*t, v->name);
}

void Lowerer::lower_inplace(const ir::Node& n) {
  const int m = n.schema->mutates_arg;
  const ir::Arg& a = n.args[static_cast<size_t>(m)];
  if (a.kind != ir::Arg::Kind::kTensor || !a.value) fail("in-place op without a tensor to write");
  TRefPtr self = ref(a.value);
  if (copy_aliases.count(a.value)) {  // the copy becomes real before it is written
    const int nb = new_buffer(a.value->name, self->dtype, self->sizes);
    auto fresh = view_of(nb, self->dtype, self->sizes, contiguous(self->sizes), SymInt(0));
    store_into(*fresh, *self);
    copy_aliases.erase(a.value);
    vals_[a.value] = fresh;
    self = fresh;
  }
  if (const ir::Value* root = view_root(a.value); root != a.value && copy_aliases.count(root)) {
    // A write through a view of a copy (y = x.clone(); y[1:].mul_(2)): the copy becomes real
    // first and its views are rebased onto it, so the write lands in the copy, not in x.
    const TRefPtr rt = ref(root);
    if (!is_contiguous_view(*rt))
      fail("in-place write through a view of a copy that is not a whole buffer",
           "a copy of a whole buffer", root->name);
    const int old = rt->buffer;
    const int nb = new_buffer(root->name, rt->dtype, rt->sizes);
    auto fresh = view_of(nb, rt->dtype, rt->sizes, contiguous(rt->sizes), SymInt(0));
    store_into(*fresh, *rt);
    copy_aliases.erase(root);
    for (auto& [v, t] : vals_)
      if (v != root && t && t->is_buffer() && t->buffer == old && view_root(v) == root)
        t = view_of(nb, t->dtype, t->sizes, t->strides, t->offset);
    vals_[root] = fresh;
    self = ref(a.value);
  }
  if (!self->is_buffer()) {
    // A copy of a view would take the write instead of its root (run() makes roots buffers);
    // a reshape that strides cannot express is a copy in PyTorch too.
    if (view_root(a.value) != a.value && !self->reshape_src)
      fail("in-place write to a view that is not a strided view of a buffer",
           "a view that strides can express", a.value->name);
    realize(*self, a.value->name);
  }
  const Buffer& b = prog_.buffers[static_cast<size_t>(self->buffer)];
  // A write into a user input (the graph's own copy_ or in-place op on it, as non-strict
  // export leaves for dist.all_reduce(x) on an input) lands in the caller's tensor, as in eager.
  if (b.kind == BufferKind::kInput) prog_.inputs[static_cast<size_t>(b.index)].mutated = true;
  TRefPtr value = inplace_value(*this, n);
  const bool same_view = value->is_buffer() && value->dtype == self->dtype &&
                         value->sizes == self->sizes && value->strides == self->strides &&
                         value->offset == self->offset;
  if (same_view && value->buffer == self->buffer) {
    // Already there (relu_ / add_ that a convolution applied as it stored): nothing to write.
    bind(0, self);
    return;
  }
  if (same_view && view_root(a.value) == a.value && owned_buffer(self->buffer) &&
      owned_buffer(value->buffer) && is_contiguous_view(*self) &&
      !buffer_read_later(self->buffer) && !buffer_read_later(value->buffer)) {
    // Neither buffer is read again (CUDA: add_ of two convolutions' results, the add fused into
    // the second, which cannot write over its residual): the result is renamed, not copied.
    bind(0, value);
    return;
  }
  realize_readers_of(self->buffer);
  store_into(*self, *value);
  if (b.kind == BufferKind::kConstant) {
    mutable_buffers_.insert(self->buffer);
    prog_.constants[static_cast<size_t>(b.index)].is_mutable = true;
  }
  bind(0, self);
}

void Lowerer::lower_node(const ir::Node& n) {
  if (!n.schema) fail("op not in the op table");
  using ir::Lowering;
  const Lowering how = n.schema->lowering;  // the row's `lowering` column in src/ops/ops.def
  switch (how) {
    case Lowering::kSym:
      if (n.target == "aten.item.default" || n.target == "aten._local_scalar_dense.default")
        return lower_item(n);  // a run-time symbol
      return;  // SymInt values carry their expressions
    case Lowering::kMeta:
      if (n.target == "aten._assert_scalar.default") return lower_assert(n);
      return;  // assertions over the inputs' symbols hold for the ranges
    case Lowering::kCollective:
      return lower_collective(*this, n);
    case Lowering::kControlFlow:
      return lower_control_flow(*this, n);
    case Lowering::kNone:
    case Lowering::kDecompose:  // compile_to_program lists these before lowering starts
      fail("op has no compiled lowering", "an op whose ops.def row names a lowering",
           ir::lowering_name(how));
    default:
      break;
  }
  wait_collectives_for(*this, n);
  if (lower_data_dependent(*this, n)) return;  // nonzero, x[mask]: sizes known at run time
  bool done = false;
  switch (how) {
    case Lowering::kInPlace:
      if (n.schema->mutates_arg < 0) break;
      lower_inplace(n);
      return;
    case Lowering::kView:
      done = lower_view(*this, n);
      break;
    case Lowering::kPointwise:
    case Lowering::kCreation:
      done = lower_pointwise(*this, n);
      break;
    case Lowering::kReduction:
      done = lower_reduction(*this, n);
      break;
    case Lowering::kGemm:
      done = lower_matmul(*this, n);
      break;
    case Lowering::kExtern:
      lower_extern(*this, n);
      return;
    default:
      break;
  }
  // The table and the lowering code disagree: a bug in anvil, not in the model.
  if (!done)
    fail("the op table names a lowering that does not handle this op",
         std::string("a ") + ir::lowering_name(how) + " lowering for " + n.target +
             " (src/ops/ops.def)",
         "none in passes/lower*.cpp");
}

void Lowerer::run() {
  uses_ = use_counts(graph_);
  const auto nodes = graph_.nodes();
  auto& readers = readers_;
  std::map<const ir::Value*, int> out_uses;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const ir::Value* v : nodes[i]->input_values()) {
      last_use_[v] = i;
      auto& r = readers[v];
      if (r.empty() || r.back() != nodes[i]) r.push_back(nodes[i]);
    }
  for (const auto& o : graph_.output_specs())
    if (o.value) {
      last_use_[o.value] = nodes.size();
      ++out_uses[o.value];
    }
  setup_signature();
  // Values that a user output views, or that several user outputs return.
  std::set<const ir::Value*> output_roots;
  {
    std::map<const ir::Value*, int> returned;
    for (const auto& o : graph_.output_specs()) {
      if ((o.kind != ir::OutputKind::kUserOutput && o.kind != ir::OutputKind::kLossOutput) ||
          !o.value || o.value->kind != ir::ValueKind::kTensor)
        continue;
      const ir::Value* r = view_root(o.value);
      if (r != o.value || ++returned[r] > 1) output_roots.insert(r);
    }
    // An in-place op writing a view writes its root: the root becomes a buffer as soon as it
    // is computed, so the view is a strided view of that buffer and later readers see the write.
    for (const ir::Node* n : nodes) {
      const int m = n->schema ? n->schema->mutates_arg : -1;
      if (m < 0 || static_cast<size_t>(m) >= n->args.size() || !n->args[m].value) continue;
      const ir::Value* r = view_root(n->args[m].value);
      if (r != n->args[m].value) output_roots.insert(r);
    }
  }
  // Sizes must be computable from the inputs' sizes, or be run-time symbols (aten.item) that only
  // values never stored in a buffer use (checked again on the buffers after lowering).
  std::set<std::string> run_time;
  for (const ir::Node* n : nodes) {
    if ((n->target == "aten.item.default" || n->target == "aten._local_scalar_dense.default") &&
        !n->outputs.empty() && n->outputs[0])
      n->outputs[0]->sym.collect_symbols(run_time);
    if (is_data_dependent_producer(*n) && !n->outputs.empty() && n->outputs[0] &&
        n->outputs[0]->is_tensor() && !n->outputs[0]->type.sizes.empty())
      n->outputs[0]->type.sizes[0].collect_symbols(run_time);  // the count (lower_dynamic.cpp)
  }
  for (const ir::Node* n : nodes)
    for (const ir::Value* o : n->outputs) {
      if (!o || o->kind != ir::ValueKind::kTensor) continue;
      std::set<std::string> syms;
      for (const auto& s : o->type.sizes) s.collect_symbols(syms);
      for (const auto& s : syms)
        if (std::find(prog_.symbols.begin(), prog_.symbols.end(), s) == prog_.symbols.end() &&
            !run_time.count(s))
          throw Error("data-dependent sizes are not supported by the compiler",
                      "node " + n->name + " (" + n->target + ")",
                      "sizes made of the inputs' symbols", "symbol " + s + " in " + o->type.str());
    }
  for (size_t i = 0; i < nodes.size(); ++i) {
    node_ = nodes[i];
    node_pos_ = i;
    try {
      lower_node(*node_);
    } catch (const Error& e) {
      const std::string where = "node " + node_->name + " (" + node_->target + ")";
      if (e.where().find(where) != std::string::npos) throw;
      throw e.with_context(where);
    }
    // Multi-use computations that are not cheap are materialised once; so are values that
    // outputs view or return more than once (they share its storage: finish_outputs).
    for (const ir::Value* o : node_->outputs) {
      if (!o || o->kind != ir::ValueKind::kTensor) continue;
      auto it = vals_.find(o);
      if (it == vals_.end() || !it->second || it->second->is_buffer()) continue;
      const bool shared = effective_uses(o, readers, out_uses) > 1;
      if ((shared && (it->second->cost > 1 ||
                      (materialize_gemm_sums_ && is_gemm_result_sum(*node_, *it->second)))) ||
          output_roots.count(o))
        realize(*it->second, o->name);
    }
  }
  node_ = nullptr;
  wait_all_collectives(*this);
  finish_outputs();
  // Buffers sized by run-time symbols: planned at the capacity of a count (nonzero / mask
  // indexing), or, for a value without a bound (e.g. split sizes read from a tensor), allocated
  // during the run once the value is known (Buffer::run_time_sized).
  for (Buffer& b : prog_.buffers) {
    std::set<std::string> syms;
    b.numel.collect_symbols(syms);
    for (const auto& s : b.sizes) s.collect_symbols(syms);
    for (const auto& u : prog_.unbacked_symbols)
      if (syms.count(u) && !prog_.unbacked_capacity.count(u)) b.run_time_sized = true;
    // The capacity of a count bounds a dim equal to the count, not an expression such as
    // s0 - u0: such buffers are allocated during the run too.
    for (const auto& d : b.sizes) {
      std::set<std::string> ds;
      d.collect_symbols(ds);
      const bool counted = std::any_of(ds.begin(), ds.end(), [&](const std::string& x) {
        return prog_.unbacked_capacity.count(x) > 0;
      });
      if (counted && !d.as_symbol()) b.run_time_sized = true;
    }
    if (b.run_time_sized && b.kind != BufferKind::kArena && b.kind != BufferKind::kOutput)
      throw Error("data-dependent sizes are not supported by the compiler",
                  "buffer " + b.name + " (graph nodes: " +
                      (b.nodes.empty() ? std::string("-") : b.nodes.front()) + ")",
                  "an intermediate or an output sized by run-time values",
                  std::string("a ") + buffer_kind_name(b.kind) + " buffer");
  }
  // Outputs sized by a run-time count: their own contiguous storage (shaped after the run).
  for (const IoSpec& o : prog_.outputs) {
    std::set<std::string> syms;
    for (const auto& s : o.sizes) s.collect_symbols(syms);
    const bool dynamic = std::any_of(syms.begin(), syms.end(), [&](const std::string& s) {
      return std::find(prog_.unbacked_symbols.begin(), prog_.unbacked_symbols.end(), s) !=
             prog_.unbacked_symbols.end();
    });
    if (dynamic && (o.base != OutputBase::kOwn || !is_const(o.offset, 0) ||
                    (!o.strides.empty() && !(o.strides == contiguous(o.sizes)))))
      throw Error("an output with a data-dependent size must be its own contiguous tensor",
                  "output " + o.name, "a contiguous result", "a view of another tensor");
  }
}

TensorView view_from(const TRef& t) {
  TensorView v;
  v.buffer = t.buffer;
  v.dtype = t.dtype;
  v.sizes = t.sizes;
  v.strides = t.strides;
  v.offset = t.offset;
  return v;
}

ExternAttr str_attr(const std::string& name, const std::string& s) {
  ExternAttr a;
  a.name = name;
  a.kind = 2;
  a.s = s;
  return a;
}

ExternAttr int_attr(const std::string& name, const SymInt& i) {
  ExternAttr a;
  a.name = name;
  a.kind = 0;
  a.i = i;
  return a;
}

ExternAttr ints_attr(const std::string& name, const std::vector<SymInt>& v) {
  ExternAttr a;
  a.name = name;
  a.kind = 3;
  a.ints = v;
  return a;
}

bool Lowerer::owned_buffer(int b) const {
  if (b < 0) return false;
  const Buffer& buf = prog_.buffers[static_cast<size_t>(b)];
  return buf.kind == BufferKind::kArena && !buf.local && buf.alias_of < 0 &&
         !mutable_buffers_.count(b);
}

}  // namespace anvil::passes::detail
