#include "ir/inplace.h"

#include <algorithm>
#include <map>

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

const OpSchema* out_functional(const std::string& target) {
  const std::string t = canonical_target(target);
  if (t.rfind("aten.", 0) != 0 || find_op(t)) return nullptr;
  const size_t dot = t.find('.', 5);
  if (dot == std::string::npos) return nullptr;
  const std::string op = t.substr(0, dot), overload = t.substr(dot + 1);
  // out overloads whose functional twin PyTorch 2.11 names otherwise (from its schemas: every
  // overload with an `out` argument and the overload with the same arguments minus `out`)
  static const std::map<std::string, std::string> kIrregular = {
      {"aten.sum.IntList_out", "aten.sum.dim_IntList"}, {"aten.prod.int_out", "aten.prod.dim_int"},
      {"aten.mean.out", "aten.mean.dim"},               {"aten.mean.dtype_out", "aten.mean.default"},
      {"aten.std.out", "aten.std.dim"},                 {"aten.var.out", "aten.var.dim"},
      {"aten.all.out", "aten.all.dim"},                 {"aten.any.out", "aten.any.dim"},
      {"aten.all.all_out", "aten.all.default"},         {"aten.any.all_out", "aten.any.default"},
      {"aten.max.out", "aten.max.other"},               {"aten.min.out", "aten.min.other"},
      {"aten.max.unary_out", "aten.max.default"},       {"aten.min.unary_out", "aten.min.default"},
      {"aten.norm.out", "aten.norm.ScalarOpt_dim"},     {"aten.div.out_mode", "aten.div.Tensor_mode"},
      {"aten.xlogy.OutTensor", "aten.xlogy.Tensor"},    {"aten.bernoulli.float_out", "aten.bernoulli.p"},
      {"aten.norm.dtype_out", "aten.norm.ScalarOpt_dim_dtype"}};
  std::vector<std::string> candidates;
  if (auto it = kIrregular.find(t); it != kIrregular.end()) {
    candidates.push_back(it->second);
  } else if (overload == "out") {
    candidates = {op + ".default", op + ".Tensor"};
  } else if (overload.size() > 4 && overload.compare(overload.size() - 4, 4, "_out") == 0) {
    candidates.push_back(op + "." + overload.substr(0, overload.size() - 4));
  }
  for (const std::string& c : candidates)
    if (const OpSchema* f = find_op(c); f && f->mutates_arg < 0) return f;
  return nullptr;
}

Node* append_out_form(Graph& g, std::unique_ptr<Node> node, const OpSchema& functional) {
  const std::string where = "node " + node->name + " (" + node->target + ")";
  auto out_arg = std::find_if(node->args.begin(), node->args.end(),
                              [](const Arg& a) { return a.name == "out"; });
  if (out_arg == node->args.end() || out_arg->kind != Arg::Kind::kTensor || !out_arg->value)
    throw Error("out= op without a tensor to write", where, "a tensor `out` argument",
                out_arg == node->args.end() ? "none" : "an argument that is not a tensor");
  if (node->outputs.size() != 1 || !node->outputs[0] || !node->outputs[0]->is_tensor())
    throw Error("out= op that does not return the tensor it writes", where, "one tensor output",
                std::to_string(node->outputs.size()) + " outputs");
  Value* out_t = out_arg->value;
  Value* result = node->outputs[0];
  node->args.erase(out_arg);
  const std::string out_target = node->target;
  node->schema = &functional;
  node->target = functional.name;
  std::vector<TensorType> types = functional.shape(*node);
  if (types.size() != 1)
    throw Error("out= op whose functional form has several outputs", where, "one output",
                std::to_string(types.size()));
  if (kind_rank(types[0].dtype) > kind_rank(out_t->type.dtype))
    throw Error("out= result type cannot be cast to the out tensor's dtype", where,
                std::string("a result dtype that can be cast to ") + dtype_name(out_t->type.dtype),
                std::string(dtype_name(types[0].dtype)) + " (PyTorch refuses this cast too)");
  const bool same_sizes = types[0].sizes == out_t->type.sizes;
  if (!same_sizes && !out_t->producer)
    throw Error("out= tensor of other sizes than the result", where,
                "an out tensor of sizes " + sym_shape_str(types[0].sizes) +
                    " (PyTorch would resize the caller's tensor; anvil does not)",
                out_t->type.str());
  node->metadata["anvil_out_form_of"] = out_target;
  const std::string name = node->name;
  const bool cast = !same_sizes && types[0].dtype != out_t->type.dtype;
  if (!same_sizes && !cast) {  // out is resized to the result: the result is the value
    node->outputs = {result};
    return g.append(std::move(node));
  }
  Value* value = g.new_value(fresh_value_name(g, result->name + "_value"));
  value->type = types[0];
  value->type.device = out_t->type.device;
  node->outputs = {value};
  node->name = value->name;
  auto metadata = node->metadata;
  g.append(std::move(node));

  auto write = std::make_unique<Node>();
  write->name = name;
  write->metadata = std::move(metadata);
  Arg self;
  self.kind = Arg::Kind::kTensor;
  if (same_sizes) {  // copy_ into out (its views see the write, as in PyTorch)
    write->target = "aten.copy_.default";
    self.name = "self";
    self.value = out_t;
    Arg src;
    src.name = "src";
    src.kind = Arg::Kind::kTensor;
    src.value = value;
    write->args = {self, src};
  } else {  // resized to the result, in out's dtype
    write->target = "aten._to_copy.default";
    self.name = "self";
    self.value = value;
    Arg dt;
    dt.name = "dtype";
    dt.kind = Arg::Kind::kScalarType;
    dt.dtype = out_t->type.dtype;
    dt.kwarg = true;
    write->args = {self, dt};
  }
  write->schema = find_op(write->target);
  ANVIL_INTERNAL_ASSERT(write->schema, write->target + " is not in the op table");
  write->outputs = {result};
  return g.append(std::move(write));
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
