#include "ir/inplace.h"

#include "core/error.h"

namespace anvil::ir {

namespace {

/// 0 bool, 1 integral, 2 floating, 3 complex: PyTorch's can_cast refuses a higher kind into a
/// lower one (a float result written into an int tensor).
int kind_rank(DType t) {
  if (t == DType::kBool) return 0;
  if (is_complex(t)) return 3;
  if (is_floating(t)) return 2;
  return 1;
}

std::string fresh_value_name(const Graph& g, const std::string& want) {
  std::string n = want;
  for (int k = 1; g.find_value(n); ++k) n = want + "_" + std::to_string(k);
  return n;
}

}  // namespace

const OpSchema* inplace_functional(const std::string& target) {
  const std::string t = canonical_target(target);
  if (t.rfind("aten.", 0) != 0 || find_op(t)) return nullptr;
  const size_t dot = t.find('.', 5);
  if (dot == std::string::npos) return nullptr;
  const std::string name = t.substr(5, dot - 5);
  if (name.size() < 2 || name.back() != '_' || name.front() == '_') return nullptr;
  const OpSchema* f = find_op("aten." + name.substr(0, name.size() - 1) + t.substr(dot));
  if (!f || f->mutates_arg >= 0) return nullptr;
  return f;
}

Node* append_inplace(Graph& g, std::unique_ptr<Node> node, const OpSchema& functional) {
  const std::string where = "node " + node->name + " (" + node->target + ")";
  if (node->args.empty() || node->args[0].kind != Arg::Kind::kTensor || !node->args[0].value)
    throw Error("in-place op without a tensor to write", where, "a tensor as its first argument",
                "none");
  if (node->outputs.size() != 1 || !node->outputs[0] || !node->outputs[0]->is_tensor())
    throw Error("in-place op that does not return the tensor it writes", where,
                "one tensor output", std::to_string(node->outputs.size()) + " outputs");
  Value* self = node->args[0].value;
  Value* out = node->outputs[0];
  const std::string inplace_target = node->target;

  node->schema = &functional;
  node->target = functional.name;
  std::vector<TensorType> types = functional.shape(*node);
  if (types.size() != 1)
    throw Error("in-place op whose functional form has several outputs", where, "one output",
                std::to_string(types.size()));
  if (kind_rank(types[0].dtype) > kind_rank(self->type.dtype))
    throw Error("in-place result type cannot be cast to self's dtype", where,
                std::string("a result dtype that can be cast to ") + dtype_name(self->type.dtype),
                std::string(dtype_name(types[0].dtype)) + " (PyTorch refuses this cast too)");
  Value* value = g.new_value(fresh_value_name(g, out->name + "_value"));
  value->type = types[0];
  value->type.device = self->type.device;
  node->outputs = {value};
  const std::string name = node->name;
  node->name = value->name;
  node->metadata["anvil_inplace_of"] = inplace_target;
  auto metadata = node->metadata;
  g.append(std::move(node));

  auto copy = std::make_unique<Node>();
  copy->schema = find_op("aten.copy_.default");
  ANVIL_INTERNAL_ASSERT(copy->schema, "aten.copy_.default is not in the op table");
  copy->target = "aten.copy_.default";
  copy->name = name;
  copy->metadata = std::move(metadata);
  Arg a;
  a.name = "self";
  a.kind = Arg::Kind::kTensor;
  a.value = self;
  Arg src;
  src.name = "src";
  src.kind = Arg::Kind::kTensor;
  src.value = value;
  copy->args = {a, src};
  copy->outputs = {out};
  return g.append(std::move(copy));
}

}  // namespace anvil::ir
