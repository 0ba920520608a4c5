// Higher-order control flow: torch.cond (pred, true_fn, false_fn, operands) and
// torch._higher_order_ops.while_loop (cond_fn, body_fn, carried_inputs, additional_inputs).
// Their branches and bodies are subgraphs (ir::Node::subgraphs). The shape rules check the
// subgraphs' signatures against the operands; running them is the interpreter's job
// (interp/interpreter.cpp) and the compiler's (passes/lower_control.cpp), so the kernels here
// only reject a direct call.
#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

using ir::Node;
using ir::TensorType;

/// Tensor types of a subgraph's outputs.
std::vector<TensorType> output_types(const Node& node, const ir::Graph& g, const char* which) {
  std::vector<TensorType> out;
  for (const auto& o : g.output_specs()) {
    if (!o.value || !o.value->is_tensor())
      ir::shape_args::fail(node, str(which, " returns a non-tensor value"), "tensor outputs",
                           o.value ? o.value->name : "a constant");
    out.push_back(o.value->type);
  }
  return out;
}

/// Checks that subgraph `g` takes exactly `operands` (count, dtype, rank).
void check_inputs(const Node& node, const ir::Graph& g, const char* which,
                  const std::vector<std::optional<TensorType>>& operands) {
  if (g.inputs().size() != operands.size())
    ir::shape_args::fail(node, str(which, " takes a different number of operands"),
                         str(operands.size(), " inputs"), str(g.inputs().size()));
  for (size_t i = 0; i < operands.size(); ++i) {
    const ir::Value* in = g.inputs()[i];
    if (!operands[i] || !in->is_tensor())
      ir::shape_args::fail(node, str(which, " operand ", i, " is not a tensor"), "tensor operands",
                           in->name);
    if (in->type.dtype != operands[i]->dtype || in->type.sizes.size() != operands[i]->sizes.size())
      ir::shape_args::fail(node, str(which, " input ", i, " (", in->name, ") does not match its operand"),
                           operands[i]->str(), in->type.str());
  }
}

/// Operand types of tensor-list argument `name`, or an empty list when it is absent.
std::vector<std::optional<TensorType>> list_types(const Node& node, const std::string& name) {
  if (!ir::shape_args::has(node, name)) return {};
  return ir::shape_args::types(node, name);
}

}  // namespace

std::vector<TensorType> shape_hop_cond(const Node& node) {
  const auto operands = list_types(node, "operands");
  const ir::Graph& t = node.subgraph("true_fn");
  const ir::Graph& f = node.subgraph("false_fn");
  check_inputs(node, t, "true branch", operands);
  check_inputs(node, f, "false branch", operands);
  std::vector<TensorType> a = output_types(node, t, "true branch");
  std::vector<TensorType> b = output_types(node, f, "false branch");
  if (a.size() != b.size())
    ir::shape_args::fail(node, "the branches return different numbers of outputs",
                         str(a.size(), " (true branch)"), str(b.size(), " (false branch)"));
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype != b[i].dtype || a[i].sizes.size() != b[i].sizes.size())
      ir::shape_args::fail(node, str("the branches' output ", i, " differ"), a[i].str(), b[i].str());
  return a;
}

std::vector<ir::RValue> kernel_hop_cond(ir::KernelContext& ctx) {
  ctx.fail("torch.cond runs its branches in the interpreter", "the interpreter's control flow",
           "a direct kernel call");
}

std::vector<TensorType> shape_hop_while_loop(const Node& node) {
  const auto carried = list_types(node, "carried_inputs");
  auto all = carried;
  for (const auto& t : list_types(node, "additional_inputs")) all.push_back(t);
  const ir::Graph& c = node.subgraph("cond_fn");
  const ir::Graph& b = node.subgraph("body_fn");
  check_inputs(node, c, "while_loop condition", all);
  check_inputs(node, b, "while_loop body", all);
  const std::vector<TensorType> pred = output_types(node, c, "while_loop condition");
  if (pred.size() != 1 || pred[0].dtype != DType::kBool || !pred[0].sizes.empty())
    ir::shape_args::fail(node, "the while_loop condition must return one boolean scalar",
                         "bool[]", pred.empty() ? "nothing" : pred[0].str());
  const std::vector<TensorType> next = output_types(node, b, "while_loop body");
  if (next.size() != carried.size())
    ir::shape_args::fail(node, "the while_loop body returns a different number of values",
                         str(carried.size(), " (the carried inputs)"), str(next.size()));
  std::vector<TensorType> out;
  for (size_t i = 0; i < carried.size(); ++i) {
    if (next[i].dtype != carried[i]->dtype || next[i].sizes != carried[i]->sizes)
      ir::shape_args::fail(node, str("while_loop body output ", i, " changes its carried value's type"),
                           carried[i]->str(), next[i].str());
    out.push_back(*carried[i]);
  }
  return out;
}

std::vector<ir::RValue> kernel_hop_while_loop(ir::KernelContext& ctx) {
  ctx.fail("while_loop runs its body in the interpreter", "the interpreter's control flow",
           "a direct kernel call");
}

// wrap_with_autocast never reaches a graph: the importer inlines it (frontend/pt2_autocast.cpp).
std::vector<TensorType> shape_hop_wrap_with_autocast(const Node& node) {
  return output_types(node, node.subgraph("fn"), "autocast region");
}

std::vector<ir::RValue> kernel_hop_wrap_with_autocast(ir::KernelContext& ctx) {
  ctx.fail("autocast regions are inlined when a model is imported", "an inlined region",
           "a wrap_with_autocast node");
}

// wrap_with_set_grad_enabled (a torch.no_grad() region, e.g. rotary embeddings of LLaMA-family
// exports) never reaches a graph either: grad mode means nothing at inference, so the importer
// inlines its ops unchanged (frontend/pt2_autocast.cpp).
std::vector<TensorType> shape_hop_wrap_with_set_grad_enabled(const Node& node) {
  return output_types(node, node.subgraph("fn"), "set_grad_enabled region");
}

std::vector<ir::RValue> kernel_hop_wrap_with_set_grad_enabled(ir::KernelContext& ctx) {
  ctx.fail("set_grad_enabled regions are inlined when a model is imported", "an inlined region",
           "a wrap_with_set_grad_enabled node");
}

}  // namespace anvil::ops

namespace anvil::ops {

namespace {

/// The rule of a higher-order op the importer always inlines: reaching it is a malformed graph.
[[noreturn]] void inlined_at_import(const std::string& where, const std::string& what) {
  throw Error(what + " is inlined when a model is imported (frontend/pt2_hops.cpp)", where,
              "an inlined " + what, "a " + what + " node in the graph");
}

}  // namespace

// map_impl (torch.map: the body once per slice along dim 0), invoke_subgraph (a
// nested_compile_region call) and auto_functionalized / _v2 (a mutating op run on copies of the
// tensors it writes) never reach a graph: the importer inlines them (frontend/pt2_hops.cpp).
std::vector<TensorType> shape_hop_map_impl(const Node& node) {
  inlined_at_import(node_where(node), "torch.map (map_impl)");
}
std::vector<ir::RValue> kernel_hop_map_impl(ir::KernelContext& ctx) {
  inlined_at_import(ctx.where(), "torch.map (map_impl)");
}
std::vector<TensorType> shape_hop_invoke_subgraph(const Node& node) {
  inlined_at_import(node_where(node), "invoke_subgraph");
}
std::vector<ir::RValue> kernel_hop_invoke_subgraph(ir::KernelContext& ctx) {
  inlined_at_import(ctx.where(), "invoke_subgraph");
}
std::vector<TensorType> shape_hop_auto_functionalized(const Node& node) {
  inlined_at_import(node_where(node), "auto_functionalized");
}
std::vector<ir::RValue> kernel_hop_auto_functionalized(ir::KernelContext& ctx) {
  inlined_at_import(ctx.where(), "auto_functionalized");
}
std::vector<TensorType> shape_hop_auto_functionalized_v2(const Node& node) {
  inlined_at_import(node_where(node), "auto_functionalized_v2");
}
std::vector<ir::RValue> kernel_hop_auto_functionalized_v2(ir::KernelContext& ctx) {
  inlined_at_import(ctx.where(), "auto_functionalized_v2");
}

}  // namespace anvil::ops
