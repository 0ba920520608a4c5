// Higher-order ops the importer inlines into the graph:
// - higher_order.map_impl(body, xs, args) (torch._higher_order_ops.map): the body once per slice
//   of the mapped tensors along dim 0, each output stacked along a new dim 0. The leading size
//   must be static: the body is unrolled (a loop over a dynamic size is refused at import).
// - higher_order.invoke_subgraph(subgraph, identifier, *operands): a call of a
//   torch.compiler.nested_compile_region function, inlined at each call.
// - higher_order.auto_functionalized / auto_functionalized_v2(op, **kwargs): a mutating op run
//   on copies of the tensors it writes (what run_decompositions() makes of a custom op with
//   mutates_args). The copies are clones of the written tensors (v2: of their bases, the written
//   tensor a view of its clone); the op is applied in place through the in-place rule
//   (ir/inplace.h) and the outputs are its result and the clones. Only aten ops anvil knows can
//   be applied this way: a custom op's kernel is user Python, which anvil cannot run, so its
//   export is refused naming the op.
#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "frontend/pt2_internal.h"
#include "ir/inplace.h"
#include "ir/op_schema.h"

namespace anvil::frontend::detail {

std::string fresh_name(const ir::Graph& g, const std::set<std::string>& names,
                       const std::string& want) {
  std::string n = want;
  for (int k = 1; g.find_value(n) || names.count(n); ++k) n = want + "_" + std::to_string(k);
  return n;
}


std::vector<ir::Value*> inline_graph(ir::Graph& g, const ir::Graph& sub,
                                     const std::vector<ir::Value*>& operands,
                                     const std::string& prefix, std::set<std::string>& names,
                                     const std::string& where, const InlineHook& hook) {
  if (operands.size() != sub.inputs().size())
    throw Error("operands do not match the subgraph's inputs", where,
                str(sub.inputs().size(), " operands"), str(operands.size()));
  std::map<const ir::Value*, ir::Value*> map;
  for (size_t i = 0; i < operands.size(); ++i) map[sub.inputs()[i]] = operands[i];
  auto remap = [&](ir::Value* v) -> ir::Value* {
    if (!v) return v;
    auto it = map.find(v);
    if (it == map.end())
      throw Error("subgraph reads a value it does not define", where,
                  "a subgraph input or node output", v->name);
    return it->second;
  };
  for (const ir::Node* n : sub.nodes()) {
    auto node = std::make_unique<ir::Node>();
    node->schema = n->schema;
    node->target = n->target;
    node->name = fresh_name(g, names, prefix + n->name);
    node->outputs_as_list = n->outputs_as_list;
    node->metadata = n->metadata;
    node->subgraphs = n->subgraphs;
    node->args = n->args;
    for (ir::Arg& a : node->args) {
      a.value = remap(a.value);
      for (ir::Value*& v : a.values) v = remap(v);
      for (ir::IntRef& r : a.symints) r.value = remap(r.value);
    }
    if (hook) hook(*n, *node);
    for (const ir::Value* o : n->outputs) {
      if (!o) {
        node->outputs.push_back(nullptr);
        continue;
      }
      ir::Value* v = g.new_value(fresh_name(g, names, prefix + o->name), o->kind);
      v->type = o->type;
      v->sym = o->sym;
      map[o] = v;
      node->outputs.push_back(v);
    }
    names.insert(node->name);
    g.append(std::move(node));
  }
  std::vector<ir::Value*> results;
  for (const auto& o : sub.output_specs()) results.push_back(o.value ? remap(o.value) : nullptr);
  return results;
}

namespace {

ir::Arg tensor_arg(const std::string& name, ir::Value* v) {
  ir::Arg a;
  a.name = name;
  a.kind = ir::Arg::Kind::kTensor;
  a.value = v;
  return a;
}

ir::Arg int_arg(const std::string& name, int64_t i) {
  ir::Arg a;
  a.name = name;
  a.kind = ir::Arg::Kind::kInt;
  a.i = i;
  return a;
}

/// Appends node `target(args)` with one tensor output named after `name` and typed by the op's
/// shape rule; returns the output.
ir::Value* append_op(ir::Graph& g, std::set<std::string>& names, const std::string& target,
                     std::vector<ir::Arg> args, const std::string& name) {
  auto node = std::make_unique<ir::Node>();
  node->schema = ir::find_op(target);
  ANVIL_INTERNAL_ASSERT(node->schema, target + " is not in the op table");
  node->target = target;
  node->name = fresh_name(g, names, name);
  node->args = std::move(args);
  const std::vector<ir::TensorType> types = node->schema->shape(*node);
  ir::Value* out = g.new_value(node->name);
  out->type = types.at(0);
  node->outputs = {out};
  names.insert(node->name);
  g.append(std::move(node));
  return out;
}

/// Tensor or SymInt operands of `a` (one value or a list).
std::vector<ir::Value*> operand_values(const ir::Arg& a, const std::string& where) {
  switch (a.kind) {
    case ir::Arg::Kind::kTensor: return {a.value};
    case ir::Arg::Kind::kTensors: return a.values;
    case ir::Arg::Kind::kSymInt:
      if (a.symints.size() == 1 && a.symints[0].value) return {a.symints[0].value};
      break;
    case ir::Arg::Kind::kNone: return {};
    default: break;
  }
  throw Error("operand of an unsupported kind", where + ", argument " + a.name,
              "tensors or symbolic ints", "a constant or another kind");
}

std::vector<ir::Value*> inline_map(ir::Graph& g, const ir::Node& hop, std::set<std::string>& names,
                                   const std::string& where) {
  const ir::Arg* xs = hop.arg("xs");
  const ir::Arg* extra = hop.arg("args");
  if (!xs) throw Error("malformed map_impl", where, "(body, xs, args)", "no xs");
  const std::vector<ir::Value*> mapped = operand_values(*xs, where);
  const std::vector<ir::Value*> rest = extra ? operand_values(*extra, where) : std::vector<ir::Value*>{};
  if (mapped.empty()) throw Error("torch.map over no tensors", where, "mapped tensors", "none");
  int64_t n = -1;
  for (const ir::Value* x : mapped) {
    if (!x->is_tensor() || x->type.sizes.empty())
      throw Error("torch.map over a value without a leading dim", where,
                  "tensors of rank >= 1", x->name);
    auto c = x->type.sizes[0].maybe_constant();
    if (!c)
      throw Error("torch.map over a dynamic leading size is not supported (the body is unrolled)",
                  where, "a static leading size", x->type.str());
    if (n >= 0 && *c != n)
      throw Error("torch.map over tensors of different leading sizes", where, str(n), str(*c));
    n = *c;
  }
  if (n == 0) throw Error("torch.map over an empty leading dim", where, "a leading size >= 1", "0");
  const ir::Graph& body = hop.subgraph("body");
  std::vector<std::vector<ir::Value*>> per_output(body.output_specs().size());
  for (int64_t i = 0; i < n; ++i) {
    std::vector<ir::Value*> ops;
    for (ir::Value* x : mapped)
      ops.push_back(append_op(g, names, "aten.select.int",
                              {tensor_arg("self", x), int_arg("dim", 0), int_arg("index", i)},
                              hop.name + "_" + x->name + "_" + std::to_string(i)));
    ops.insert(ops.end(), rest.begin(), rest.end());
    const auto outs =
        inline_graph(g, body, ops, hop.name + "_" + std::to_string(i) + "_", names, where);
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!outs[k] || !outs[k]->is_tensor())
        throw Error("torch.map body returns a non-tensor", where, "tensor outputs",
                    "another kind");
      per_output[k].push_back(outs[k]);
    }
  }
  std::vector<ir::Value*> results;
  for (size_t k = 0; k < per_output.size(); ++k) {
    ir::Arg list;
    list.name = "tensors";
    list.kind = ir::Arg::Kind::kTensors;
    list.values = per_output[k];
    results.push_back(append_op(g, names, "aten.stack.default", {list, int_arg("dim", 0)},
                                hop.name + "_stack_" + std::to_string(k)));
  }
  return results;
}

/// The view of written argument `prefix` (auto_functionalized_v2's _X_... keys) of `base`.
/// A view's arguments come in sets (_size, _stride, _storage_offset; _slice_dim, _start, _end):
/// one missing raises Error naming it (`where` is the node).
ir::Value* v2_view(ir::Graph& g, std::set<std::string>& names, const ir::Node& hop,
                   const std::string& prefix, ir::Value* base, const std::string& where) {
  auto arg = [&](const std::string& k) { return hop.arg(prefix + k); };
  auto need = [&](const std::string& k, const std::string& with) -> const ir::Arg& {
    const ir::Arg* a = arg(k);
    if (!a)
      throw Error("auto_functionalized_v2 view argument missing", where,
                  str(prefix + k, " beside ", prefix + with), "none");
    return *a;
  };
  const std::string name = hop.name + prefix;
  if (arg("_storage_offset")) {
    ir::Arg size = need("_size", "_storage_offset"), stride = need("_stride", "_storage_offset"),
            off = *arg("_storage_offset");
    size.name = "size";
    stride.name = "stride";
    off.name = "storage_offset";
    return append_op(g, names, "aten.as_strided.default",
                     {tensor_arg("self", base), size, stride, off}, name);
  }
  if (arg("_slice_dim")) {
    ir::Arg dim = *arg("_slice_dim"), start = need("_slice_start", "_slice_dim"),
            end = need("_slice_end", "_slice_dim");
    dim.name = "dim";
    start.name = "start";
    end.name = "end";
    return append_op(g, names, "aten.slice.Tensor", {tensor_arg("self", base), dim, start, end},
                     name);
  }
  return base;  // the base itself, or an alias of it
}

std::vector<ir::Value*> inline_auto_functionalized(ir::Graph& g, const ir::Node& hop,
                                                   size_t n_outputs, std::set<std::string>& names,
                                                   const std::string& where) {
  const bool v2 = hop.target == "higher_order.auto_functionalized_v2";
  const ir::Arg* op = hop.arg("op");
  if (!op || op->kind != ir::Arg::Kind::kString)
    throw Error("malformed auto_functionalized", where, "the mutating op first", "none");
  const std::string target = ir::canonical_target(op->s);
  const ir::OpSchema* row = ir::find_op(target);
  const ir::OpSchema* functional = row ? nullptr : ir::inplace_functional(target);
  if (!(row && row->mutates_arg >= 0) && !functional)
    throw Error("a mutating custom op anvil cannot run: " + target +
                    " (its kernel is user Python; anvil runs aten ops it knows)",
                where, "an aten in-place op in anvil's op table", target);
  // the arguments of the op, the written one(s) replaced by views of fresh clones
  auto call = std::make_unique<ir::Node>();
  call->name = fresh_name(g, names, hop.name + "_op");
  call->target = target;
  call->schema = row;
  std::vector<ir::Value*> clones;
  const std::string written = "self";  // aten in-place ops write their self
  if (v2) {
    const ir::Arg* bases = hop.arg("_all_bases");
    for (ir::Value* b : bases ? operand_values(*bases, where) : std::vector<ir::Value*>{})
      clones.push_back(append_op(g, names, "aten.clone.default", {tensor_arg("self", b)},
                                 hop.name + "_" + b->name + "_clone"));
  }
  for (const ir::Arg& a : hop.args) {
    if (a.name == "op" || a.name.empty() || a.name[0] == '_') continue;
    ir::Arg c = a;
    if (!v2 && a.name == written) {
      if (a.kind != ir::Arg::Kind::kTensor)
        throw Error("auto_functionalized writes a non-tensor", where, "a tensor", a.name);
      clones.push_back(append_op(g, names, "aten.clone.default", {a},
                                 hop.name + "_" + a.value->name + "_clone"));
      c.value = clones.back();
    }
    call->args.push_back(c);
  }
  if (v2) {
    const ir::Arg* index = hop.arg("_" + written + "_base_index");
    if (!index || index->kind != ir::Arg::Kind::kInt || index->i < 0 ||
        index->i >= static_cast<int64_t>(clones.size()))
      throw Error("auto_functionalized_v2 without the base of the written tensor", where,
                  "_" + written + "_base_index into _all_bases", "none or out of range");
    ir::Value* v =
        v2_view(g, names, hop, "_" + written, clones[static_cast<size_t>(index->i)], where);
    call->args.insert(call->args.begin(), tensor_arg(written, v));
  }
  auto self = std::find_if(call->args.begin(), call->args.end(),
                           [&](const ir::Arg& a) { return a.name == written; });
  if (self == call->args.end() || !self->value)
    throw Error("auto_functionalized without the tensor its op writes", where, written, "none");
  std::rotate(call->args.begin(), self, self + 1);  // the written tensor first
  if (n_outputs < clones.size() + 1)
    throw Error("auto_functionalized outputs do not match its written tensors", where,
                str(clones.size() + 1, " or more"), str(n_outputs));
  ir::Value* result = g.new_value(call->name);
  result->type = call->args[0].value->type;
  call->outputs = {result};
  names.insert(call->name);
  if (functional) {
    const ir::Node* copy = ir::append_inplace(g, std::move(call), *functional);
    names.insert(copy->args[1].value->name);
  } else {
    g.append(std::move(call));
  }
  std::vector<ir::Value*> results(n_outputs - clones.size(), nullptr);
  results[0] = result;
  results.insert(results.end(), clones.begin(), clones.end());
  return results;
}

}  // namespace

const std::vector<std::string>* inlined_hop_arg_names(const std::string& target) {
  static const std::vector<std::string> kMap = {"body", "xs", "args"};
  static const std::vector<std::string> kInvoke = {"subgraph", "identifier"};
  static const std::vector<std::string> kAuto = {"op"};
  if (target == "higher_order.map_impl") return &kMap;
  if (target == "higher_order.invoke_subgraph") return &kInvoke;
  if (target == "higher_order.auto_functionalized" ||
      target == "higher_order.auto_functionalized_v2")
    return &kAuto;
  return nullptr;
}

std::vector<ir::Value*> inline_hop(ir::Graph& g, const ir::Node& hop, size_t n_outputs,
                                   std::set<std::string>& names) {
  const std::string where = "node " + hop.name + " (" + hop.target + ")";
  if (hop.target == "higher_order.map_impl") return inline_map(g, hop, names, where);
  if (hop.target == "higher_order.invoke_subgraph") {
    std::vector<ir::Value*> ops;
    for (const ir::Arg& a : hop.args)
      if (a.name.rfind("arg", 0) == 0)
        for (ir::Value* v : operand_values(a, where)) ops.push_back(v);
    return inline_graph(g, hop.subgraph("subgraph"), ops, hop.name + "_", names, where);
  }
  return inline_auto_functionalized(g, hop, n_outputs, names, where);
}

}  // namespace anvil::frontend::detail
