// Control flow (spec/aot.md cases 64-75): torch.cond and while_loop compile into one step each.
// Every subgraph (the two branches; the condition and the body) is compiled on its own by
// compile_to_program into a sub-program with dense outputs, and the step runs the chosen
// sub-program over the parent's buffers: its operands are contiguous buffers of the parent,
// its results are written straight into the parent's result buffers, and its arena is a
// scratch buffer of the parent's plan (so the planned peak covers it).
//
//   anvil.cond : inputs  [pred tensor]? operands...     attrs condition (SymBool predicates)
//                outputs results..., scratch            subprograms {true, false}
//   anvil.while: inputs  carried..., additional...      attrs pred_off, carry_off (scratch bytes)
//                outputs results..., scratch            subprograms {cond, body}
//
// The while loop keeps its state in the results (A) and a second copy in the scratch (B): the
// body reads one and writes the other, the two swap after each iteration, and the final state
// is copied into A when it ended in B.
#include <algorithm>

#include "core/error.h"
#include "passes/collectives.h"
#include "passes/lower_internal.h"

namespace anvil::passes::detail {

namespace {

constexpr int64_t kScratchAlign = 64;

SymInt align_up(const SymInt& x) {
  return (x + SymInt(kScratchAlign - 1)).floordiv(SymInt(kScratchAlign)) * SymInt(kScratchAlign);
}

/// Prefixes the names of every step of `p` (and of its sub-programs, recursively) so that the
/// functions of all programs of one model are distinct.
void rename_steps(Program& p, const std::string& prefix) {
  for (Step& st : p.steps) {
    std::visit([&](auto& s) { s.name = prefix + s.name; }, st);
    if (auto* e = std::get_if<ExternStep>(&st))
      for (auto& sub : e->subprograms) {
        auto copy = std::make_shared<Program>(*sub);
        rename_steps(*copy, prefix);
        sub = std::move(copy);
      }
  }
}

/// Bytes of one element.
SymInt bytes_of(DType t, const std::vector<SymInt>& sizes) {
  return numel_of(sizes) * SymInt(static_cast<int64_t>(dtype_size(t)));
}

/// Compiles subgraph argument `arg` of control-flow node `n` into a sub-program that the parent
/// can run: tensor inputs and dense outputs only, no constants, collectives or run-time symbols,
/// and only symbols the parent binds.
std::shared_ptr<Program> compile_sub(Lowerer& L, const ir::Node& n, const std::string& arg,
                                     const std::string& prefix) {
  PipelineOptions o = L.options ? *L.options : PipelineOptions{};
  o.fold_constants = false;  // a subgraph's constants would need their own weights
  o.dense_outputs = true;
  auto sub = std::make_shared<Program>();
  try {
    *sub = compile_to_program(n.subgraph(arg), o);
  } catch (const Error& e) {
    throw e.with_context("node " + n.name + " (" + n.target + "): subgraph " + arg);
  }
  auto fail = [&](const std::string& what, const std::string& expected, const std::string& got) {
    L.fail(str("subgraph ", arg, ": ", what), expected, got);
  };
  if (!sub->constants.empty())
    fail("constants inside a control-flow subgraph are not supported", "operands only",
         str(sub->constants.size(), " constants (", sub->constants[0].original_name, ")"));
  if (!sub->unbacked_symbols.empty())
    fail("data-dependent sizes inside a control-flow subgraph are not supported",
         "sizes made of the inputs' symbols", sub->unbacked_symbols[0]);
  if (sub->stats.collectives > 0)
    fail("collectives inside a control-flow subgraph are not supported", "none",
         str(sub->stats.collectives, " collectives"));
  for (const auto& in : sub->inputs)
    if (in.mutated)  // the parent passes its operands as read-only
      fail("in-place writes to an operand inside a control-flow subgraph are not supported",
           "a subgraph that only reads its operands", "a write to " + in.name);
  const auto& parent = L.prog().symbols;
  for (const auto& s : sub->symbols)
    if (std::find(parent.begin(), parent.end(), s) == parent.end())
      fail("a subgraph size uses a symbol its caller does not bind",
           "the symbols of the model's inputs", s);
  const ir::Graph& g = n.subgraph(arg);
  if (sub->inputs.size() != g.inputs().size())
    fail("non-tensor subgraph inputs are not supported", str(g.inputs().size(), " tensors"),
         str(sub->inputs.size()));
  for (const auto& out : sub->outputs)
    if (out.base != OutputBase::kOwn || !is_const(out.offset, 0))
      fail("a subgraph output is not in its own storage", "dense outputs", out.name);
  rename_steps(*sub, prefix);
  return sub;
}

/// The operands of tensor-list argument `name`, each realised as a contiguous buffer view.
std::vector<TensorView> operand_views(Lowerer& L, const ir::Node& n, const std::string& name,
                                      std::set<int>& reads) {
  std::vector<TensorView> out;
  const ir::Arg* a = n.arg(name);
  if (!a) return out;
  for (const ir::Value* v : a->values) {
    if (!v || v->kind != ir::ValueKind::kTensor)
      L.fail("control-flow operands must be tensors", "tensors", "None or a SymInt in " + name);
    TRefPtr t = L.ref(v);
    L.realize(*t, v->name, /*need_contiguous=*/true);
    out.push_back(view_from(*t));
    reads.insert(t->buffer);
  }
  return out;
}

/// New contiguous result buffers bound to the node's outputs.
std::vector<TensorView> result_views(Lowerer& L, const ir::Node& n, std::set<int>& writes) {
  std::vector<TensorView> out;
  const auto& parent = L.prog().symbols;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const ir::Value* v = n.outputs[i];
    if (!v || v->kind != ir::ValueKind::kTensor)
      L.fail("a control-flow result that is not a tensor value is not supported",
             "tensor results", str("result ", i, v ? " of another kind" : " without a value"));
    std::set<std::string> syms;
    for (const auto& s : v->type.sizes) s.collect_symbols(syms);
    for (const auto& s : syms)
      if (std::find(parent.begin(), parent.end(), s) == parent.end())
        L.fail("a control-flow result whose size depends on the branch taken is not supported",
               "sizes made of the inputs' symbols", v->type.str());
    const int b = L.new_buffer(L.out_name(i), v->type.dtype, v->type.sizes);
    TRefPtr t = L.view_of(b, v->type.dtype, v->type.sizes, contiguous(v->type.sizes), SymInt(0));
    L.bind(i, t);
    out.push_back(view_from(*t));
    writes.insert(b);
  }
  return out;
}

}  // namespace

void lower_control_flow(Lowerer& L, const ir::Node& n) {
  wait_collectives_for(L, n);
  const bool is_cond = n.target == "higher_order.cond";
  if (!is_cond && n.target != "higher_order.while_loop")
    L.fail("unknown control-flow op", "higher_order.cond or higher_order.while_loop", n.target);
  ExternStep e;
  e.name = L.out_name() + (is_cond ? "_cond" : "_while");
  e.target = is_cond ? "anvil.cond" : "anvil.while";
  e.nodes = {n.name};
  SNode s;
  s.kind = SNode::Kind::kExtern;
  s.nodes = e.nodes;
  SymInt scratch(0);
  if (is_cond) {
    const ir::Arg* pred = n.arg("pred");
    if (!pred) L.fail("torch.cond without a predicate", "pred", "none");
    if (pred->kind == ir::Arg::Kind::kTensor && pred->value &&
        pred->value->kind == ir::ValueKind::kTensor) {
      TRefPtr t = L.ref(pred->value);
      L.realize(*t, pred->value->name);
      e.inputs.push_back(view_from(*t));
      s.reads.insert(t->buffer);
    } else {
      const ir::Value* v = pred->value ? pred->value
                           : pred->symints.empty() ? nullptr
                                                   : pred->symints[0].value;
      std::string text = sym_condition_text(v);
      if (text.empty() && pred->kind == ir::Arg::Kind::kBool) text = pred->b ? "1" : "0";
      if (text.empty())
        L.fail("unsupported torch.cond predicate", "a bool tensor or a comparison of sizes",
               v ? v->name : "another kind");
      e.attrs.push_back(str_attr("condition", text));
    }
    for (const auto& v : operand_views(L, n, "operands", s.reads)) e.inputs.push_back(v);
    e.subprograms = {compile_sub(L, n, "true_fn", e.name + "_t_"),
                     compile_sub(L, n, "false_fn", e.name + "_f_")};
    e.outputs = result_views(L, n, s.writes);
    for (const auto& sub : e.subprograms)
      if (sub->outputs.size() != e.outputs.size())
        L.fail("the branches return a different number of results than the node has",
               str(e.outputs.size()), str(sub->outputs.size()));
    scratch = SymInt::max(e.subprograms[0]->arena_bytes, e.subprograms[1]->arena_bytes);
  } else {
    std::vector<TensorView> carried = operand_views(L, n, "carried_inputs", s.reads);
    for (const auto& v : carried) e.inputs.push_back(v);
    for (const auto& v : operand_views(L, n, "additional_inputs", s.reads)) e.inputs.push_back(v);
    e.subprograms = {compile_sub(L, n, "cond_fn", e.name + "_c_"),
                     compile_sub(L, n, "body_fn", e.name + "_b_")};
    e.outputs = result_views(L, n, s.writes);
    if (e.outputs.size() != carried.size() || e.subprograms[1]->outputs.size() != carried.size() ||
        e.subprograms[0]->outputs.size() != 1)
      L.fail("while_loop results differ from its carried inputs", str(carried.size()),
             str(e.outputs.size(), " results, ", e.subprograms[1]->outputs.size(),
                 " body outputs"));
    // scratch: [sub-program arena][predicate][B copy of every carried value]
    SymInt off = align_up(SymInt::max(e.subprograms[0]->arena_bytes, e.subprograms[1]->arena_bytes));
    e.attrs.push_back(int_attr("pred_off", off));
    off = off + SymInt(kScratchAlign);
    for (size_t i = 0; i < carried.size(); ++i) {
      e.attrs.push_back(int_attr("carry_off", off));
      off = off + align_up(bytes_of(carried[i].dtype, carried[i].sizes));
    }
    scratch = off;
  }
  // the sub-programs' arena (and the loop's state) lives in a scratch buffer of this plan
  const int sb = L.new_buffer(e.name + "_scratch", DType::kUInt8, {align_up(scratch) + SymInt(1)});
  e.outputs.push_back(view_from(*L.view_of(sb, DType::kUInt8, {align_up(scratch) + SymInt(1)},
                                           {SymInt(1)}, SymInt(0))));
  s.writes.insert(sb);
  s.ext = std::move(e);
  L.add_snode(std::move(s));
}

}  // namespace anvil::passes::detail
