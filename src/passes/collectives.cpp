// Lowering of `_c10d_functional` collectives (spec/collectives.md §3 A-C). Each collective becomes
// two steps of the program: an issue step (an ExternStep whose target is the collective, see
// passes/collectives.h) and a wait step; codegen turns them into api->coll_issue / coll_wait.
//
// - all_reduce / broadcast (they have in-place forms) run in place on a buffer the compiled code
//   owns: the input's own buffer when it is an intermediate nothing reads later (stolen, no
//   copy), else a fresh copy (graph inputs, constants, shared intermediates, views of them are
//   never mutated). A computed (not yet materialised) input is written straight into the
//   collective's buffer by its producer kernel.
// - all_gather_into_tensor / reduce_scatter_tensor / all_to_all_single read their input where it
//   is (no defensive copy) and write a new buffer.
// - wait_tensor emits the wait step of the pending collective that produced its input and binds
//   its output to the same buffer (no new buffer, no copy); on anything else it is a no-op.
// - The in-place forms (all_reduce_, broadcast_) are rewritten to functional + wait + copy into
//   the mutated tensor.
// - A node that touches a pending collective's buffers without its wait (and the end of the
//   graph) gets the wait emitted first, so no reader ever sees an unfinished collective.
// Group names stay strings: they are resolved by the runtime, no group is needed here.
#include "passes/collectives.h"

#include <algorithm>

#include "core/error.h"
#include "passes/lower_internal.h"

namespace anvil::passes {

bool is_collective_issue(const ExternStep& e) {
  return e.target.rfind(kCollectivePrefix, 0) == 0 && e.target != kCollectiveWaitTarget;
}

bool is_collective_wait(const ExternStep& e) { return e.target == kCollectiveWaitTarget; }

int collective_id(const ExternStep& e) {
  for (const auto& a : e.attrs)
    if (a.name == "coll") return static_cast<int>(a.i.maybe_constant().value_or(-1));
  return -1;
}

std::string collective_attr(const ExternStep& e, const std::string& name) {
  const ExternAttr* a = find_attr(e, name);
  return a && a->kind == 2 ? a->s : "";
}

}  // namespace anvil::passes

namespace anvil::passes::detail {

namespace {

/// String argument `name` of the current node (group_name, reduce_op).
std::string string_arg(const Lowerer& L, const std::string& name) {
  const ir::Arg* a = L.node().arg(name);
  if (!a || a->kind != ir::Arg::Kind::kString)
    L.fail("collective argument '" + name + "' is missing or not a string", "a string",
           a ? "another kind" : "absent");
  return a->s;
}

/// A fresh contiguous buffer holding the value of `t` (the producer writes into it).
TRefPtr copy_of(Lowerer& L, const TRef& t, const std::string& name) {
  const int b = L.new_buffer(name, t.dtype, t.sizes);
  auto dst = L.view_of(b, t.dtype, t.sizes, contiguous(t.sizes), SymInt(0));
  L.store_into(*dst, t);
  return dst;
}

/// An in-place collective on a user input (dist.all_reduce(x) with x an input, as exported)
/// runs on a copy and writes the result back into the input: the caller's tensor changes, as
/// in eager (rule A.5: the collective itself never runs on the input's memory).
void mark_input_written(Lowerer& L, const TRef& self) {
  if (!self.is_buffer()) return;
  const Buffer& b = L.prog().buffers[static_cast<size_t>(self.buffer)];
  if (b.kind == BufferKind::kInput) L.prog().inputs[static_cast<size_t>(b.index)].mutated = true;
}

/// True when a buffer-backed view is dense in row-major order (any offset): what a collective
/// may send as it is (spec/collectives.md §5: strided memory is never sent as if it were dense;
/// the nccl backend refuses it).
bool dense_view(const TRef& t) {
  const auto want = contiguous(t.sizes);
  for (size_t d = 0; d < t.sizes.size(); ++d)
    if (!is_const(t.sizes[d], 1) && !(t.strides[d] == want[d])) return false;
  return true;
}

/// The buffer an in-place collective runs on (rules A.1-A.3, A.6).
TRefPtr owned_input(Lowerer& L, const ir::Value* v) {
  TRefPtr t = L.ref(v);
  const std::string name = L.out_name();
  if (t->is_buffer()) {
    if (L.owned_buffer(t->buffer) && !L.buffer_read_later(t->buffer) && !L.copy_aliases.count(v) &&
        dense_view(*t))
      return t;  // steal (a dense view stays a view; a strided one is copied: never sent)
    return copy_of(L, *t, name);
  }
  // computed: its producer kernel writes straight into the collective's buffer; readers after
  // the collective (if any) recompute from the pre-collective operands (rule A.3).
  return copy_of(L, *t, name);
}

/// An input read in place by an out-of-place collective: a dense view of its buffer as it is
/// (rule B.8: no defensive copy), else a contiguous copy (a transpose whose `contiguous()` the
/// lowering turned into a strided view, a computed value).
TRefPtr read_input(Lowerer& L, const ir::Value* v) {
  TRefPtr t = L.ref(v);
  if (t->is_buffer()) return dense_view(*t) ? t : copy_of(L, *t, v->name + "_dense");
  auto copy = std::make_shared<TRef>(*t);
  L.realize(*copy, v->name, /*need_contiguous=*/true);
  return copy;
}

/// Adds an issue or wait step: it reads its inputs and reads and writes its outputs.
void add_collective_snode(Lowerer& L, const ExternStep& e) {
  SNode s;
  s.kind = SNode::Kind::kExtern;
  s.nodes = e.nodes;
  s.ext = e;
  for (const auto& v : e.inputs) s.reads.insert(v.buffer);
  for (const auto& v : e.outputs) {
    s.reads.insert(v.buffer);
    s.writes.insert(v.buffer);
  }
  L.add_snode(std::move(s));
}

/// Adds the issue step of a new collective (id = next_collective) and records it as pending.
void emit_issue(Lowerer& L, ExternStep e, const std::vector<TRefPtr>& ins,
                const std::vector<TRefPtr>& outs, std::vector<const ir::Value*> results) {
  const int id = L.next_collective++;
  e.nodes = {L.node().name};
  e.attrs.push_back(int_attr("coll", SymInt(id)));
  for (const auto& t : ins) e.inputs.push_back(view_from(*t));
  for (const auto& t : outs) e.outputs.push_back(view_from(*t));
  Lowerer::PendingCollective pc;
  pc.id = id;
  pc.issue = e;
  for (const auto& v : e.inputs) pc.buffers.insert(v.buffer);
  for (const auto& v : e.outputs) {
    pc.buffers.insert(v.buffer);
    pc.writes.insert(v.buffer);
  }
  pc.results = std::move(results);
  add_collective_snode(L, e);
  L.pending_collectives.push_back(std::move(pc));
}

/// Adds the wait step of pending collective `index` and removes it from the pending list.
void emit_wait(Lowerer& L, size_t index) {
  Lowerer::PendingCollective pc = L.pending_collectives[index];
  L.pending_collectives.erase(L.pending_collectives.begin() + static_cast<std::ptrdiff_t>(index));
  ExternStep w;
  w.target = kCollectiveWaitTarget;
  w.nodes = pc.issue.nodes;
  w.inputs = pc.issue.inputs;
  w.outputs = pc.issue.outputs;
  w.attrs.push_back(int_attr("coll", SymInt(pc.id)));
  w.attrs.push_back(str_attr("group", collective_attr(pc.issue, "group")));
  add_collective_snode(L, w);
}

/// Emits waits for pending collectives that write a buffer in `reads` or touch one in `writes`.
void wait_touching(Lowerer& L, const std::set<int>& reads, const std::set<int>& writes) {
  for (size_t i = 0; i < L.pending_collectives.size();) {
    bool hit = false;
    for (int b : L.pending_collectives[i].writes)
      if (reads.count(b)) hit = true;
    for (int b : L.pending_collectives[i].buffers)
      if (writes.count(b)) hit = true;
    if (hit)
      emit_wait(L, i);
    else
      ++i;
  }
}

/// Buffers the lowered tensor arguments of `n` view or read.
std::set<int> buffers_of(Lowerer& L, const ir::Node& n) {
  std::set<int> bufs;
  for (const ir::Value* v : n.input_values()) {
    if (!v || v->kind != ir::ValueKind::kTensor) continue;
    try {
      TRefPtr t = L.ref(v);
      bufs.insert(t->reads.begin(), t->reads.end());
      if (t->is_buffer()) bufs.insert(t->buffer);
    } catch (const Error&) {
    }
  }
  return bufs;
}

/// The coalesced forms: one issue step over every tensor of the `inputs` list (rules A.5, B.9).
/// all_reduce_coalesced runs in place on owned buffers (stolen or copied per input, as for
/// all_reduce); the in-place form works on copies, waits and copies back; all_gather /
/// reduce_scatter read each input in place and write one new buffer per output.
void lower_coalesced(Lowerer& L, const ir::Node& n, const std::string& op) {
  const ir::Arg* list = n.arg("inputs");
  if (!list || list->values.empty()) L.fail("coalesced collective without input tensors");
  std::vector<const ir::Value*> ins(list->values.begin(), list->values.end());
  for (const ir::Value* v : ins)
    if (!v) L.fail("None in a coalesced collective's inputs", "tensors", "None");
  std::vector<const ir::Value*> outs(n.outputs.begin(), n.outputs.end());
  ExternStep e;
  e.attrs.push_back(str_attr("group", string_arg(L, "group_name")));
  if (op == "all_reduce_coalesced" || op == "all_reduce_coalesced_") {
    e.target = std::string(kCollectivePrefix) + "all_reduce";
    e.attrs.push_back(str_attr("reduce_op", string_arg(L, "reduce_op")));
    std::vector<TRefPtr> bufs;
    if (op == "all_reduce_coalesced") {
      for (const ir::Value* v : ins) bufs.push_back(owned_input(L, v));
      emit_issue(L, e, bufs, bufs, outs);
      for (size_t i = 0; i < bufs.size(); ++i) L.bind(i, bufs[i]);
      return;
    }
    std::vector<TRefPtr> selves;
    for (size_t i = 0; i < ins.size(); ++i) {
      TRefPtr self = L.ref(ins[i]);
      mark_input_written(L, *self);
      selves.push_back(self);
      bufs.push_back(copy_of(L, *self, L.out_name() + "_coll" + std::to_string(i)));
    }
    emit_issue(L, e, bufs, bufs, outs);
    emit_wait(L, L.pending_collectives.size() - 1);
    for (size_t i = 0; i < selves.size(); ++i) {
      if (!selves[i]->is_buffer()) L.realize(*selves[i], ins[i]->name);
      L.realize_readers_of(selves[i]->buffer);  // earlier readers keep the old value
      L.store_into(*selves[i], *bufs[i]);
      L.bind(i, selves[i]);
    }
    return;
  }
  const bool gather = op == "all_gather_into_tensor_coalesced";
  if (!gather && op != "reduce_scatter_tensor_coalesced")
    L.fail("collective not supported by the compiler",
           "all_reduce_coalesced(_), all_gather_into_tensor_coalesced, "
           "reduce_scatter_tensor_coalesced",
           n.target);
  e.target = std::string(kCollectivePrefix) + (gather ? "all_gather_into_tensor" : "reduce_scatter_tensor");
  if (!gather) e.attrs.push_back(str_attr("reduce_op", string_arg(L, "reduce_op")));
  e.attrs.push_back(int_attr("group_size", L.symint_arg("group_size")));
  std::vector<TRefPtr> srcs, dsts;
  for (size_t i = 0; i < ins.size(); ++i) {
    srcs.push_back(read_input(L, ins[i]));
    const ir::TensorType& ot = L.out_type(i);
    const int ob = L.new_buffer(L.out_name() + "_" + std::to_string(i), ot.dtype, ot.sizes);
    dsts.push_back(L.view_of(ob, ot.dtype, ot.sizes, contiguous(ot.sizes), SymInt(0)));
  }
  emit_issue(L, e, srcs, dsts, outs);
  for (size_t i = 0; i < dsts.size(); ++i) L.bind(i, dsts[i]);
}

}  // namespace

void wait_collectives_for(Lowerer& L, const ir::Node& n) {
  if (L.pending_collectives.empty()) return;
  std::set<int> writes;
  const int m = n.schema ? n.schema->mutates_arg : -1;
  if (m >= 0 && static_cast<size_t>(m) < n.args.size() && n.args[static_cast<size_t>(m)].value) {
    try {
      TRefPtr t = L.ref(n.args[static_cast<size_t>(m)].value);
      writes.insert(t->reads.begin(), t->reads.end());
      if (t->is_buffer()) writes.insert(t->buffer);
    } catch (const Error&) {
    }
  }
  wait_touching(L, buffers_of(L, n), writes);
}

void wait_all_collectives(Lowerer& L) {
  while (!L.pending_collectives.empty()) emit_wait(L, 0);
}

void lower_collective(Lowerer& L, const ir::Node& n) {
  const std::string& target = n.target;
  const std::string op = target.substr(std::string(kCollectivePrefix).size(),
                                       target.rfind('.') - std::string(kCollectivePrefix).size());
  const ir::Value* out = n.outputs.empty() ? nullptr : n.outputs[0];
  if (op == "wait_tensor") {
    const ir::Arg* a = n.arg("tensor");
    if (!a || !a->value) L.fail("wait_tensor without a tensor");
    TRefPtr t = L.ref(a->value);
    // the pending collective producing this value (or any whose buffers it reads)
    for (size_t i = 0; i < L.pending_collectives.size(); ++i) {
      const auto& rs = L.pending_collectives[i].results;
      if (std::find(rs.begin(), rs.end(), a->value) != rs.end()) {
        emit_wait(L, i);  // a coalesced call: the first wait on any of its outputs
        break;
      }
    }
    wait_collectives_for(L, n);
    L.bind(0, t);  // rule A.7: no new buffer, no copy
    return;
  }
  wait_collectives_for(L, n);  // a collective reading an unfinished one's result waits first
  if (op.find("_coalesced") != std::string::npos) {
    lower_coalesced(L, n, op);
    return;
  }
  const ir::Arg* in_arg = n.arg("input");
  if (!in_arg || !in_arg->value) L.fail("collective without an input tensor");
  const ir::Value* in = in_arg->value;
  ExternStep e;
  e.attrs.push_back(str_attr("group", string_arg(L, "group_name")));
  if (op == "all_reduce" || op == "broadcast" || op == "all_reduce_" || op == "broadcast_") {
    const bool inplace = op.back() == '_';
    const std::string base = inplace ? op.substr(0, op.size() - 1) : op;
    e.target = std::string(kCollectivePrefix) + base;
    if (base == "all_reduce")
      e.attrs.push_back(str_attr("reduce_op", string_arg(L, "reduce_op")));
    else
      e.attrs.push_back(int_attr("src", L.symint_arg("src")));
    if (!inplace) {
      TRefPtr buf = owned_input(L, in);
      emit_issue(L, e, {buf}, {buf}, {out});
      L.bind(0, buf);
      return;
    }
    // in-place form: functional collective on a copy + wait + copy into the mutated tensor
    TRefPtr self = L.ref(in);
    mark_input_written(L, *self);
    TRefPtr buf = copy_of(L, *self, L.out_name() + "_coll");
    emit_issue(L, e, {buf}, {buf}, {out});
    emit_wait(L, L.pending_collectives.size() - 1);
    if (!self->is_buffer()) L.realize(*self, in->name);
    L.realize_readers_of(self->buffer);  // earlier readers keep the old value
    L.store_into(*self, *buf);
    L.bind(0, self);
    return;
  }
  TRefPtr src = read_input(L, in);
  const ir::TensorType& ot = L.out_type(0);
  const int ob = L.new_buffer(L.out_name(), ot.dtype, ot.sizes);
  TRefPtr dst = L.view_of(ob, ot.dtype, ot.sizes, contiguous(ot.sizes), SymInt(0));
  e.target = std::string(kCollectivePrefix) + op;
  if (op == "all_gather_into_tensor") {
    e.attrs.push_back(int_attr("group_size", L.symint_arg("group_size")));
  } else if (op == "reduce_scatter_tensor") {
    e.attrs.push_back(str_attr("reduce_op", string_arg(L, "reduce_op")));
    e.attrs.push_back(int_attr("group_size", L.symint_arg("group_size")));
  } else if (op == "all_to_all_single") {
    const ir::Arg* os = n.arg("output_split_sizes");
    const ir::Arg* is = n.arg("input_split_sizes");
    if (os && os->kind != ir::Arg::Kind::kNone)
      e.attrs.push_back(ints_attr("output_split_sizes", L.symints_arg("output_split_sizes")));
    if (is && is->kind != ir::Arg::Kind::kNone)
      e.attrs.push_back(ints_attr("input_split_sizes", L.symints_arg("input_split_sizes")));
  } else {
    L.fail("collective not supported by the compiler",
           "all_reduce, broadcast, all_gather_into_tensor, reduce_scatter_tensor, "
           "all_to_all_single, wait_tensor",
           target);
  }
  emit_issue(L, e, {src}, {dst}, {out});
  L.bind(0, dst);
}

}  // namespace anvil::passes::detail
