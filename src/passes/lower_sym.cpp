// Run-time symbols (spec/aot.md case 63): `u = x.item()` becomes an "anvil.item" step that stores
// the element into the run's symbol slot for u (RunState::usym in generated code), and
// `_assert_scalar(u > 3)` an "anvil.assert" step that fails the run with PyTorch's message when
// the condition is false. Values whose sizes use u are fine while they stay computed (inlined
// into their consumers, e.g. ones(u)[0:1]); a buffer or output sized by u is reported as a
// data-dependent size the compiler does not support.
#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "passes/lower_internal.h"

namespace anvil::passes::detail {

namespace {

/// The Value a SymInt / SymBool argument refers to (`value`, or symints[0]), or null.
const ir::Value* ref_value(const ir::Arg& a) {
  if (a.value) return a.value;
  if (a.kind == ir::Arg::Kind::kSymInt && !a.symints.empty()) return a.symints[0].value;
  return nullptr;
}

/// C++ text of a SymInt argument of a comparison node (a constant, or a SymInt value).
std::string operand_text(const ir::Arg& a) {
  if (a.kind == ir::Arg::Kind::kInt) return std::to_string(a.i);
  if (a.kind == ir::Arg::Kind::kSymInt && !a.symints.empty() && !a.symints[0].value)
    return std::to_string(a.symints[0].constant);
  const ir::Value* v = ref_value(a);
  if (v && v->kind == ir::ValueKind::kSymInt) return "(" + v->sym.str() + ")";
  return "";
}

}  // namespace

std::string sym_condition_text(const ir::Value* v) {
  static const std::map<std::string, std::string> kOps = {
      {"_operator.ge", ">="}, {"_operator.gt", ">"},  {"_operator.le", "<="},
      {"_operator.lt", "<"},  {"_operator.eq", "=="}, {"_operator.ne", "!="}};
  if (!v || !v->producer) return "";
  const ir::Node& n = *v->producer;
  auto op = kOps.find(n.target);
  if (op == kOps.end() || n.args.size() != 2) return "";
  const std::string a = operand_text(n.args[0]), b = operand_text(n.args[1]);
  if (a.empty() || b.empty()) return "";
  return a + " " + op->second + " " + b;
}

void Lowerer::lower_item(const ir::Node& n) {
  const ir::Value* out = n.outputs.empty() ? nullptr : n.outputs[0];
  const ir::Arg* self = n.arg("self");
  if (!out || out->kind != ir::ValueKind::kSymInt || !self || !self->value)
    fail("aten.item is compiled only for integer or bool tensors (a SymInt result)",
         "an integer / bool one-element tensor", out ? out->type.str() : "no result");
  std::set<std::string> syms;
  out->sym.collect_symbols(syms);
  if (syms.size() != 1 || !(out->sym == SymInt::symbol(*syms.begin())))
    fail("aten.item's result is not a plain run-time symbol", "a symbol such as u0",
         out->sym.str());
  TRefPtr t = ref(self->value);
  if (!t->is_buffer()) realize(*t, self->value->name);
  add_item_step(*this, out_name() + "_item", {n.name}, view_from(*t), t->buffer, *syms.begin());
}

void add_item_step(Lowerer& L, const std::string& name, const std::vector<std::string>& nodes,
                   const TensorView& count, int buffer, const std::string& symbol) {
  auto& ub = L.prog().unbacked_symbols;
  if (std::find(ub.begin(), ub.end(), symbol) == ub.end()) ub.push_back(symbol);
  ExternStep e;
  e.name = name;
  e.target = "anvil.item";
  e.nodes = nodes;
  e.inputs.push_back(count);
  e.attrs.push_back(str_attr("symbol", symbol));
  SNode s;
  s.kind = SNode::Kind::kExtern;
  s.nodes = nodes;
  s.reads.insert(buffer);
  s.ext = std::move(e);
  L.add_snode(std::move(s));
}

void Lowerer::lower_assert(const ir::Node& n) {
  const ir::Arg* cond = n.arg("self");
  const ir::Value* cv = cond ? ref_value(*cond) : nullptr;
  if (!cv) return;  // a constant condition was checked by the export
  const std::string text = sym_condition_text(cv);  // "" unless a comparison node produced cv
  if (text.empty()) return;
  // the run-time symbols the condition compares (collective scheduling keeps their users after
  // the check)
  std::set<std::string> syms;
  for (const ir::Arg& a : cv->producer->args)
    if (const ir::Value* v = ref_value(a); v && v->kind == ir::ValueKind::kSymInt)
      v->sym.collect_symbols(syms);
  std::vector<SymInt> checked;
  for (const std::string& u : prog_.unbacked_symbols)
    if (syms.count(u)) checked.push_back(SymInt::symbol(u));
  if (checked.empty()) return;  // over the inputs' symbols only: holds for the checked ranges
  const ir::Arg* msg = n.arg("assert_msg");
  ExternStep e;
  e.name = out_name() + "_assert";
  e.target = "anvil.assert";
  e.nodes = {n.name};
  e.attrs.push_back(str_attr("condition", text));
  e.attrs.push_back(ints_attr("symbols", checked));
  e.attrs.push_back(str_attr("message", msg && !msg->s.empty() ? msg->s
                                                                 : "assertion failed: " + text));
  SNode s;
  s.kind = SNode::Kind::kExtern;
  s.nodes = e.nodes;
  s.ext = std::move(e);
  add_snode(std::move(s));
}

}  // namespace anvil::passes::detail
