// Structural graph passes: clone, use counting, DCE, CSE, shape propagation.
#include "passes/graph_passes.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "ir/op_schema.h"
#include "ir/printer.h"

namespace anvil::passes {

namespace {

void copy_value_fields(const ir::Value& from, ir::Value& to) {
  to.kind = from.kind;
  to.type = from.type;
  to.sym = from.sym;
}

}  // namespace

GraphRebuilder::GraphRebuilder(const ir::Graph& src)
    : src_(src), g_(std::make_unique<ir::Graph>()) {
  for (size_t i = 0; i < src.inputs().size(); ++i) {
    const ir::Value* v = src.inputs()[i];
    ir::Value* nv = g_->add_input(v->name, v->type, src.input_specs()[i]);
    copy_value_fields(*v, *nv);
    map_[v] = nv;
  }
}

ir::Value* GraphRebuilder::remap(ir::Value* v) const {
  if (!v) return nullptr;
  auto it = map_.find(v);
  ANVIL_INTERNAL_ASSERT(it != map_.end(), "graph rebuild: value " + v->name + " used before defined");
  return it->second;
}

void GraphRebuilder::copy(const ir::Node& n) {
  auto nn = std::make_unique<ir::Node>();
  nn->schema = n.schema;
  nn->name = n.name;
  nn->target = n.target;
  nn->outputs_as_list = n.outputs_as_list;
  nn->metadata = n.metadata;
  nn->subgraphs = n.subgraphs;  // read-only: the compiler clones a subgraph before its passes
  nn->args = n.args;
  for (auto& a : nn->args) {
    a.value = remap(a.value);
    for (auto& v : a.values) v = remap(v);
    for (auto& r : a.symints) r.value = remap(r.value);
  }
  for (const ir::Value* o : n.outputs) {
    if (!o) {
      nn->outputs.push_back(nullptr);
      continue;
    }
    ir::Value* no = g_->new_value(o->name, o->kind);
    copy_value_fields(*o, *no);
    map_[o] = no;
    nn->outputs.push_back(no);
  }
  g_->append(std::move(nn));
}

std::unique_ptr<ir::Graph> GraphRebuilder::finish() {
  for (const auto& o : src_.output_specs()) {
    ir::OutputSpec spec = o;
    spec.value = o.value ? remap(o.value) : nullptr;
    g_->output_specs().push_back(spec);
  }
  g_->constants = src_.constants;
  g_->symbol_ranges = src_.symbol_ranges;
  g_->attributes = src_.attributes;
  return std::move(g_);
}

std::unique_ptr<ir::Graph> clone_graph(const ir::Graph& src) {
  GraphRebuilder b(src);
  for (const ir::Node* n : src.nodes()) b.copy(*n);
  return b.finish();
}

void replace_all_uses(ir::Graph& graph, ir::Value* from, ir::Value* to) {
  for (ir::Node* n : graph.nodes())
    for (auto& a : n->args) {
      if (a.value == from) a.value = to;
      for (auto& v : a.values)
        if (v == from) v = to;
      for (auto& r : a.symints)
        if (r.value == from) r.value = to;
    }
  for (auto& o : graph.output_specs())
    if (o.value == from) o.value = to;
}

std::map<const ir::Value*, int> use_counts(const ir::Graph& graph) {
  std::map<const ir::Value*, int> uses;
  for (const ir::Node* n : graph.nodes())
    for (const ir::Value* v : n->input_values()) ++uses[v];
  for (const auto& o : graph.output_specs())
    if (o.value) ++uses[o.value];
  return uses;
}

bool has_side_effects(const ir::Node& node) {
  if (!node.schema) return true;
  if (node.schema->mutates_arg >= 0) return true;
  switch (node.schema->category) {
    case ir::OpCategory::kCollective:
    case ir::OpCategory::kControlFlow:
      return true;
    default:
      break;
  }
  // Random ops advance a generator: never folded, merged (two randn give different values) or
  // dropped (the stream stays in step with PyTorch's).
  return node.target == "aten._assert_scalar.default" ||
         node.target == "aten.sym_constrain_range_for_size.default" ||
         node.target == "aten.randn.default" || node.target == "aten.rand.default" ||
         node.target == "aten.randn_like.default" || node.target == "aten.rand_like.default" ||
         node.target == "aten.randperm.default";
}

int dce(ir::Graph& graph) {
  int removed = 0;
  bool changed = true;
  while (changed) {
    changed = false;
    auto uses = use_counts(graph);
    auto nodes = graph.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      ir::Node* n = *it;
      if (has_side_effects(*n)) continue;
      bool used = false;
      for (const ir::Value* o : n->outputs)
        if (o && uses[o] > 0) used = true;
      if (used) continue;
      for (const ir::Value* v : n->input_values()) --uses[v];
      graph.erase(n);
      ++removed;
      changed = true;
    }
  }
  return removed;
}

std::set<const ir::Value*> mutated_inputs(const ir::Graph& graph) {
  std::set<const ir::Value*> out;
  // In-place writes go through views too: follow view chains back to their base.
  std::map<const ir::Value*, const ir::Value*> base;
  for (const ir::Value* v : graph.inputs()) base[v] = v;
  for (const ir::Node* n : graph.nodes()) {
    const ir::Value* b = nullptr;
    if (n->schema && n->schema->category == ir::OpCategory::kView && !n->args.empty() &&
        n->args[0].value)
      b = base.count(n->args[0].value) ? base[n->args[0].value] : nullptr;
    const int m = n->schema ? n->schema->mutates_arg : -1;
    if (m >= 0 && m < static_cast<int>(n->args.size()) && n->args[m].value) {
      const ir::Value* t = n->args[m].value;
      if (base.count(t) && base[t]) out.insert(base[t]);
      b = base.count(t) ? base[t] : nullptr;  // the result aliases the written tensor
    }
    // A written list (all_reduce_coalesced_'s inputs): each entry is written.
    if (m >= 0 && m < static_cast<int>(n->args.size()))
      for (const ir::Value* t : n->args[m].values)
        if (t && base.count(t) && base[t]) out.insert(base[t]);
    for (const ir::Value* o : n->outputs)
      if (o) base[o] = b;
  }
  std::map<std::string, const ir::Value*> by_target;
  for (const auto& s : graph.input_specs())
    if (!s.target.empty()) by_target[s.target] = s.value;
  for (const auto& o : graph.output_specs())
    if ((o.kind == ir::OutputKind::kBufferMutation ||
         o.kind == ir::OutputKind::kParameterMutation ||
         o.kind == ir::OutputKind::kUserInputMutation)) {
      if (by_target.count(o.target)) out.insert(by_target[o.target]);
      if (const ir::Value* v = graph.find_value(o.target)) out.insert(v);
    }
  return out;
}

namespace {

/// Values that are written in place somewhere, or are views whose base is.
std::set<const ir::Value*> written_values(const ir::Graph& graph) {
  std::set<const ir::Value*> out;
  for (const ir::Node* n : graph.nodes()) {
    const int m = n->schema ? n->schema->mutates_arg : -1;
    if (m >= 0 && m < static_cast<int>(n->args.size()) &&
        (n->args[m].value || !n->args[m].values.empty())) {
      if (n->args[m].value) out.insert(n->args[m].value);
      for (const ir::Value* t : n->args[m].values)  // a written list
        if (t) out.insert(t);
      for (const ir::Value* o : n->outputs)
        if (o) out.insert(o);
    }
  }
  // Views share storage: propagate both ways along view edges until stable.
  bool changed = true;
  while (changed) {
    changed = false;
    for (const ir::Node* n : graph.nodes()) {
      if (!n->schema || n->schema->category != ir::OpCategory::kView || n->args.empty()) continue;
      const ir::Value* in = n->args[0].value;
      if (!in) continue;
      bool any = out.count(in) > 0;
      for (const ir::Value* o : n->outputs)
        if (o && out.count(o)) any = true;
      if (!any) continue;
      if (out.insert(in).second) changed = true;
      for (const ir::Value* o : n->outputs)
        if (o && out.insert(o).second) changed = true;
    }
  }
  for (const ir::Value* v : mutated_inputs(graph)) out.insert(v);
  return out;
}

}  // namespace

int cse(ir::Graph& graph) {
  const auto written = written_values(graph);
  std::map<std::string, ir::Node*> seen;
  int replaced = 0;
  for (ir::Node* n : graph.nodes()) {
    if (has_side_effects(*n) || n->outputs.empty()) continue;
    if (n->schema && n->schema->category == ir::OpCategory::kMeta) continue;
    bool skip = false;
    for (const ir::Value* v : n->input_values())
      if (written.count(v)) skip = true;
    for (const ir::Value* o : n->outputs)
      if (o && written.count(o)) skip = true;
    if (skip) continue;
    std::string key = n->target + "(";
    for (const auto& a : n->args) key += a.name + "=" + ir::print_arg_value(a) + ",";
    key += ")";
    auto it = seen.find(key);
    if (it == seen.end()) {
      seen[key] = n;
      continue;
    }
    ir::Node* prev = it->second;
    if (prev->outputs.size() != n->outputs.size()) continue;
    bool compatible = true;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      if (!n->outputs[i]) continue;
      if (!prev->outputs[i] || prev->outputs[i]->kind != n->outputs[i]->kind) compatible = false;
    }
    if (!compatible) continue;
    for (size_t i = 0; i < n->outputs.size(); ++i)
      if (n->outputs[i]) replace_all_uses(graph, n->outputs[i], prev->outputs[i]);
    ++replaced;
  }
  if (replaced) dce(graph);
  return replaced;
}

int propagate_shapes(ir::Graph& graph) {
  int changed = 0;
  for (ir::Node* n : graph.nodes()) {
    if (!n->schema || !n->schema->shape) continue;
    std::vector<ir::TensorType> types;
    try {
      types = n->schema->shape(*n);
    } catch (const Error&) {
      continue;  // the recorded types stand (the verifier reports real inconsistencies)
    }
    size_t k = 0;
    for (ir::Value* o : n->outputs) {
      if (k >= types.size()) break;
      if (o && o->kind != ir::ValueKind::kTensor) continue;
      if (o) {
        const ir::TensorType& t = types[k];
        // The export's sizes were simplified with the symbols' ranges (sympy): keep them when
        // they have the rule's dtype and rank; take the rule's type otherwise.
        if (o->type.dtype != t.dtype || o->type.sizes.size() != t.sizes.size()) {
          o->type.dtype = t.dtype;
          o->type.sizes = t.sizes;
          o->type.strides.clear();
          ++changed;
        }
      }
      ++k;
    }
  }
  return changed;
}

}  // namespace anvil::passes

namespace anvil::passes {

std::vector<std::string> unlowered_nodes(const ir::Graph& graph) {
  std::vector<std::string> out;
  for (const ir::Node* n : graph.nodes()) {
    if (n->schema && (n->schema->lowering == ir::Lowering::kNone ||
                      n->schema->lowering == ir::Lowering::kDecompose))
      out.push_back(n->name + " (" + n->target + "): " +
                    (n->schema->lowering == ir::Lowering::kNone
                         ? "no lowering (ops.def: None)"
                         : "a decomposition the compiler did not apply"));
    for (const auto& sub : n->subgraphs) {
      if (!sub) continue;
      for (auto& line : unlowered_nodes(*sub)) out.push_back(n->name + "/" + line);
    }
  }
  return out;
}

}  // namespace anvil::passes
