#include "ir/graph.h"

#include <algorithm>

#include "core/error.h"

namespace anvil::ir {

std::string TensorType::str() const { return std::string(dtype_name(dtype)) + sym_shape_str(sizes); }

bool TensorType::operator==(const TensorType& o) const {
  return dtype == o.dtype && sizes == o.sizes && device == o.device;
}

const Arg* Node::arg(const std::string& n) const {
  for (const auto& a : args)
    if (a.name == n) return &a;
  return nullptr;
}

std::vector<Value*> Node::input_values() const {
  std::vector<Value*> out;
  for (const auto& a : args) {
    if (a.value) out.push_back(a.value);
    for (Value* v : a.values)
      if (v) out.push_back(v);
    for (const auto& r : a.symints)
      if (r.value) out.push_back(r.value);
  }
  return out;
}

const Graph& Node::subgraph(const std::string& arg_name) const {
  const Arg* a = arg(arg_name);
  if (!a || a->kind != Arg::Kind::kGraph || a->i < 0 ||
      a->i >= static_cast<int64_t>(subgraphs.size()) || !subgraphs[static_cast<size_t>(a->i)])
    throw Error("missing subgraph argument", "node " + name + " (" + target + ")",
                "a graph argument '" + arg_name + "'", a ? "an argument of another kind" : "none");
  return *subgraphs[static_cast<size_t>(a->i)];
}

Value* Graph::new_value(const std::string& name, ValueKind kind) {
  ANVIL_CHECK(!name.empty(), "Graph::new_value", "value needs a name", "a non-empty name", "\"\"");
  ANVIL_CHECK(!by_name_.count(name), "Graph::new_value", "duplicate value name", "a unique name",
              name);
  values_.push_back(std::make_unique<Value>());
  Value* v = values_.back().get();
  v->name = name;
  v->kind = kind;
  by_name_[name] = v;
  return v;
}

Value* Graph::add_input(const std::string& name, TensorType type, InputSpec spec) {
  Value* v = new_value(name);
  v->type = std::move(type);
  spec.value = v;
  inputs_.push_back(v);
  input_specs_.push_back(spec);
  return v;
}

Node* Graph::append(std::unique_ptr<Node> node) {
  for (size_t i = 0; i < node->outputs.size(); ++i) {
    if (!node->outputs[i]) continue;
    node->outputs[i]->producer = node.get();
    node->outputs[i]->output_index = static_cast<int>(i);
  }
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

void Graph::erase(Node* node) {
  auto it = std::find_if(nodes_.begin(), nodes_.end(),
                         [&](const auto& p) { return p.get() == node; });
  ANVIL_INTERNAL_ASSERT(it != nodes_.end(), "erase of a node not in the graph");
  for (Value* out : node->outputs) {
    if (!out) continue;
    for (const auto& n : nodes_)
      for (Value* in : n->input_values())
        ANVIL_INTERNAL_ASSERT(in != out, "erase of node " + node->name + " whose output is used");
    out->producer = nullptr;
    by_name_.erase(out->name);
  }
  nodes_.erase(it);
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

Value* Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

namespace {
constexpr std::pair<InputKind, const char*> kInputKinds[] = {
    {InputKind::kUserInput, "user_input"}, {InputKind::kParameter, "parameter"},
    {InputKind::kBuffer, "buffer"},         {InputKind::kConstant, "tensor_constant"},
    {InputKind::kCustomObj, "custom_obj"},  {InputKind::kToken, "token"}};
constexpr std::pair<OutputKind, const char*> kOutputKinds[] = {
    {OutputKind::kUserOutput, "user_output"},
    {OutputKind::kBufferMutation, "buffer_mutation"},
    {OutputKind::kUserInputMutation, "user_input_mutation"},
    {OutputKind::kLossOutput, "loss_output"},
    {OutputKind::kGradient, "gradient_to_parameter"},
    {OutputKind::kToken, "token"},
    {OutputKind::kParameterMutation, "parameter_mutation"}};
}  // namespace

const char* input_kind_name(InputKind k) {
  for (auto& [kk, n] : kInputKinds)
    if (kk == k) return n;
  return "?";
}
const char* output_kind_name(OutputKind k) {
  for (auto& [kk, n] : kOutputKinds)
    if (kk == k) return n;
  return "?";
}
InputKind input_kind_from_name(const std::string& s) {
  for (auto& [kk, n] : kInputKinds)
    if (s == n) return kk;
  throw Error("unknown input kind", "graph signature",
              "user_input, parameter, buffer, tensor_constant, custom_obj or token", s);
}
OutputKind output_kind_from_name(const std::string& s) {
  for (auto& [kk, n] : kOutputKinds)
    if (s == n) return kk;
  throw Error("unknown output kind", "graph signature",
              "user_output, buffer_mutation, user_input_mutation, ...", s);
}

}  // namespace anvil::ir
