// Compile-time constant folding and batch_norm folding.
#include <cmath>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "ir/op_schema.h"
#include "passes/graph_passes.h"

namespace anvil::passes {

namespace {

/// True when every size of the type is a constant.
bool static_type(const ir::TensorType& t) {
  for (const auto& s : t.sizes)
    if (!s.is_constant()) return false;
  return true;
}

/// The constant tensors of the graph that no node writes: input value -> tensor.
std::unordered_map<const ir::Value*, Tensor> constant_inputs(const ir::Graph& graph) {
  const auto mutated = mutated_inputs(graph);
  std::unordered_map<const ir::Value*, Tensor> out;
  for (const auto& spec : graph.input_specs()) {
    if (spec.kind != ir::InputKind::kParameter && spec.kind != ir::InputKind::kBuffer &&
        spec.kind != ir::InputKind::kConstant)
      continue;
    if (!spec.value || mutated.count(spec.value)) continue;
    auto it = graph.constants.find(spec.target);
    if (it == graph.constants.end()) continue;
    out[spec.value] = it->second;
  }
  return out;
}

/// Resolves a node's arguments when every one of them is known at compile time.
std::optional<std::vector<ir::RValue>> resolve_const(
    const ir::Node& n, const std::unordered_map<const ir::Value*, ir::RValue>& env) {
  using K = ir::Arg::Kind;
  std::vector<ir::RValue> out;
  auto int_of = [&](const ir::IntRef& r) -> std::optional<int64_t> {
    if (!r.value) return r.constant;
    if (auto c = r.value->sym.maybe_constant(); c && r.value->kind == ir::ValueKind::kSymInt)
      return *c;
    return std::nullopt;
  };
  auto tensor_of = [&](const ir::Value* v) -> const Tensor* {
    auto it = env.find(v);
    if (it == env.end()) return nullptr;
    return std::get_if<Tensor>(&it->second);
  };
  for (const auto& a : n.args) {
    switch (a.kind) {
      case K::kNone:
        out.emplace_back(std::monostate{});
        break;
      case K::kTensor: {
        if (!a.value) {
          out.emplace_back(std::monostate{});
          break;
        }
        if (a.value->kind == ir::ValueKind::kSymInt) {
          auto c = a.value->sym.maybe_constant();
          if (!c) return std::nullopt;
          out.emplace_back(*c);
          break;
        }
        const Tensor* t = tensor_of(a.value);
        if (!t) return std::nullopt;
        out.emplace_back(*t);
        break;
      }
      case K::kTensors: {
        std::vector<Tensor> ts;
        for (const ir::Value* v : a.values) {
          const Tensor* t = v ? tensor_of(v) : nullptr;
          if (!t) return std::nullopt;
          ts.push_back(*t);
        }
        out.emplace_back(std::move(ts));
        break;
      }
      case K::kOptTensors: {
        std::vector<std::optional<Tensor>> ts;
        for (const ir::Value* v : a.values) {
          if (!v) {
            ts.emplace_back(std::nullopt);
            continue;
          }
          const Tensor* t = tensor_of(v);
          if (!t) return std::nullopt;
          ts.emplace_back(*t);
        }
        out.emplace_back(std::move(ts));
        break;
      }
      case K::kInt:
      case K::kLayout:
      case K::kMemoryFormat:
        out.emplace_back(a.i);
        break;
      case K::kFloat:
        out.emplace_back(a.f);
        break;
      case K::kBool:
        out.emplace_back(a.b);
        break;
      case K::kString:
      case K::kGraph:
        out.emplace_back(a.s);
        break;
      case K::kInts:
        out.emplace_back(a.ints);
        break;
      case K::kFloats:
        out.emplace_back(a.floats);
        break;
      case K::kBools:
        out.emplace_back(a.bools);
        break;
      case K::kSymInt: {
        if (a.symints.empty()) return std::nullopt;
        auto c = int_of(a.symints[0]);
        if (!c) return std::nullopt;
        out.emplace_back(*c);
        break;
      }
      case K::kSymInts: {
        std::vector<int64_t> v;
        for (const auto& r : a.symints) {
          auto c = int_of(r);
          if (!c) return std::nullopt;
          v.push_back(*c);
        }
        out.emplace_back(std::move(v));
        break;
      }
      case K::kScalarType:
        out.emplace_back(a.dtype);
        break;
      case K::kDevice:
        out.emplace_back(a.device);
        break;
    }
  }
  return out;
}

/// True for ops folding may evaluate.
bool foldable_op(const ir::Node& n) {
  if (!n.schema || !n.schema->kernel || has_side_effects(n)) return false;
  switch (n.schema->category) {
    case ir::OpCategory::kPointwise:
    case ir::OpCategory::kReduction:
    case ir::OpCategory::kView:
    case ir::OpCategory::kExtern:
    case ir::OpCategory::kCreation:
      break;
    default:
      return false;
  }
  for (const ir::Value* o : n.outputs)
    if (o && (o->kind != ir::ValueKind::kTensor || !static_type(o->type))) return false;
  return !n.outputs.empty();
}

/// Adds a folded constant input for `value` (its tensor made contiguous) and returns it.
ir::Value* add_folded_input(ir::Graph& graph, const std::string& base_name, const Tensor& t,
                            std::set<std::string>& folded) {
  std::string name = base_name + "_folded";
  for (int k = 1; graph.find_value(name); ++k) name = base_name + "_folded" + std::to_string(k);
  const std::string target = "folded." + name;
  ir::TensorType type;
  type.dtype = t.dtype();
  for (int64_t s : t.sizes()) type.sizes.emplace_back(s);
  ir::InputSpec spec;
  spec.kind = ir::InputKind::kConstant;
  spec.target = target;
  ir::Value* v = graph.add_input(name, type, spec);
  graph.constants[target] = t.contiguous();
  folded.insert(target);
  return v;
}

}  // namespace

FoldResult fold_constants(ir::Graph& graph, int64_t max_creation_bytes) {
  FoldResult result;
  const size_t nodes_before = graph.num_nodes();
  std::unordered_map<const ir::Value*, ir::RValue> env;
  std::unordered_map<const ir::Value*, bool> from_weights;  // depends on a real constant
  std::unordered_map<const ir::Value*, const ir::Node*> folded_producer;
  for (const auto& [v, t] : constant_inputs(graph)) {
    env[v] = t;
    from_weights[v] = true;
  }
  for (const ir::Node* n : graph.nodes()) {
    if (!foldable_op(*n)) continue;
    auto args = resolve_const(*n, env);
    if (!args) continue;
    std::vector<ir::RValue> results;
    try {
      ir::KernelContext ctx(*n, std::move(*args));
      results = n->schema->kernel(ctx);
    } catch (const Error&) {
      continue;  // leave it to run time (where the error, if real, is reported)
    }
    if (results.size() == 1 && n->outputs.size() != 1)
      if (auto* l = std::get_if<std::vector<Tensor>>(&results[0])) {
        std::vector<ir::RValue> flat(l->begin(), l->end());
        results = std::move(flat);
      }
    if (results.size() < n->outputs.size()) continue;
    bool weights = false;
    for (const ir::Value* v : n->input_values())
      if (from_weights.count(v) && from_weights[v]) weights = true;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      const ir::Value* o = n->outputs[i];
      if (!o || !std::holds_alternative<Tensor>(results[i])) continue;
      env[o] = results[i];
      from_weights[o] = weights;
      folded_producer[o] = n;
    }
  }
  // Values a non-folded node or an output reads: materialise the first non-view ancestor. Both
  // lists keep graph order (not pointer order), so the folded constants, and with them the
  // constants table and the generated code, are the same on every compile.
  std::vector<const ir::Value*> frontier;
  std::set<const ir::Value*> in_frontier;
  auto add_frontier = [&](const ir::Value* v) {
    if (in_frontier.insert(v).second) frontier.push_back(v);
  };
  for (const ir::Node* n : graph.nodes()) {
    if (folded_producer.count(n->outputs.empty() ? nullptr : n->outputs[0])) continue;
    for (const ir::Value* v : n->input_values())
      if (folded_producer.count(v)) add_frontier(v);
  }
  for (const auto& o : graph.output_specs())
    if (o.value && folded_producer.count(o.value)) add_frontier(o.value);
  std::vector<const ir::Value*> materialise;
  std::set<const ir::Value*> in_materialise;
  for (const ir::Value* v : frontier) {
    const ir::Value* u = v;
    while (folded_producer.count(u) &&
           folded_producer[u]->schema->category == ir::OpCategory::kView) {
      const ir::Node* p = folded_producer[u];
      if (p->args.empty() || !p->args[0].value) break;
      u = p->args[0].value;
    }
    if (!folded_producer.count(u)) continue;  // a view chain of an original constant
    const Tensor& t = std::get<Tensor>(env[u]);
    if (!from_weights[u] && static_cast<int64_t>(t.nbytes()) > max_creation_bytes) continue;
    if (in_materialise.insert(u).second) materialise.push_back(u);
  }
  for (const ir::Value* u : materialise) {
    ir::Value* nv =
        add_folded_input(graph, u->name, std::get<Tensor>(env[u]), result.folded_targets);
    replace_all_uses(graph, const_cast<ir::Value*>(u), nv);
  }
  dce(graph);
  result.nodes_folded = static_cast<int>(nodes_before - graph.num_nodes());
  return result;
}

namespace {

/// The constant tensor bound to `v`, if it is one.
std::optional<Tensor> const_tensor(const ir::Graph& graph, const ir::Value* v,
                                   const std::set<const ir::Value*>& mutated) {
  if (!v || v->producer || mutated.count(v)) return std::nullopt;
  for (const auto& s : graph.input_specs()) {
    if (s.value != v) continue;
    if (s.kind != ir::InputKind::kParameter && s.kind != ir::InputKind::kBuffer &&
        s.kind != ir::InputKind::kConstant)
      return std::nullopt;
    auto it = graph.constants.find(s.target);
    if (it == graph.constants.end()) return std::nullopt;
    return it->second;
  }
  return std::nullopt;
}

}  // namespace

int fold_batch_norm(ir::Graph& graph, std::set<std::string>& folded) {
  int count = 0;
  const auto mutated = mutated_inputs(graph);
  auto uses = use_counts(graph);
  for (ir::Node* bn : graph.nodes()) {
    const bool native = bn->target == "aten._native_batch_norm_legit_no_training.default";
    if (bn->target != "aten.batch_norm.default" && !native) continue;
    const ir::Arg* training = bn->arg("training");
    if (training && training->kind == ir::Arg::Kind::kBool && training->b) continue;
    const ir::Arg* in = bn->arg("input");
    if (!in || !in->value || !in->value->producer || uses[in->value] != 1) continue;
    ir::Node* prod = in->value->producer;
    const bool conv =
        prod->target == "aten.conv2d.default" || prod->target == "aten.conv1d.default" ||
        prod->target == "aten.convolution.default";
    const bool lin = prod->target == "aten.linear.default";
    if (!conv && !lin) continue;
    if (prod->target == "aten.convolution.default") {
      const ir::Arg* tr = prod->arg("transposed");
      if (!tr || tr->b) continue;
    }
    if (native) {  // the saved mean / invstd outputs must be unused
      bool extra = false;
      for (size_t i = 1; i < bn->outputs.size(); ++i)
        if (bn->outputs[i] && uses[bn->outputs[i]] > 0) extra = true;
      if (extra) continue;
    }
    auto get = [&](ir::Node* n, const char* name) -> std::optional<Tensor> {
      const ir::Arg* a = n->arg(name);
      if (!a || a->kind == ir::Arg::Kind::kNone || !a->value) return std::nullopt;
      return const_tensor(graph, a->value, mutated);
    };
    auto w = get(prod, "weight");
    if (!w || !is_floating(w->dtype())) continue;
    const ir::Arg* bias_arg = prod->arg("bias");
    const bool has_bias = bias_arg && bias_arg->kind == ir::Arg::Kind::kTensor && bias_arg->value;
    std::optional<Tensor> b = has_bias ? get(prod, "bias") : std::nullopt;
    if (has_bias && !b) continue;
    auto mean = get(bn, "running_mean"), var = get(bn, "running_var");
    if (!mean || !var) continue;
    const ir::Arg* gw = bn->arg("weight");
    const ir::Arg* gb = bn->arg("bias");
    std::optional<Tensor> gamma, beta;
    if (gw && gw->value) {
      gamma = get(bn, "weight");
      if (!gamma) continue;
    }
    if (gb && gb->value) {
      beta = get(bn, "bias");
      if (!beta) continue;
    }
    double eps = 1e-5;
    if (const ir::Arg* e = bn->arg("eps")) eps = e->kind == ir::Arg::Kind::kInt ? e->i : e->f;
    const int64_t c = w->size(0);
    if (mean->numel() != c || var->numel() != c) continue;
    const std::vector<double> mv = mean->to_doubles(), vv = var->to_doubles();
    const std::vector<double> gv = gamma ? gamma->to_doubles() : std::vector<double>(c, 1.0);
    const std::vector<double> bv = beta ? beta->to_doubles() : std::vector<double>(c, 0.0);
    const std::vector<double> bias0 = b ? b->to_doubles() : std::vector<double>(c, 0.0);
    Tensor w64 = w->contiguous().to(DType::kFloat64, true);
    double* pw = w64.data<double>();
    const int64_t per = c ? w64.numel() / c : 0;
    Tensor nb = Tensor::empty({c}, DType::kFloat64);
    double* pb = nb.data<double>();
    for (int64_t k = 0; k < c; ++k) {
      const double scale = gv[k] / std::sqrt(vv[k] + eps);
      for (int64_t j = 0; j < per; ++j) pw[k * per + j] *= scale;
      pb[k] = (bias0[k] - mv[k]) * scale + bv[k];
    }
    ir::Value* nw =
        add_folded_input(graph, prod->outputs[0]->name + "_weight", w64.to(w->dtype()), folded);
    ir::Value* nbv =
        add_folded_input(graph, prod->outputs[0]->name + "_bias", nb.to(w->dtype()), folded);
    for (auto& a : prod->args) {
      if (a.name == "weight") a.value = nw;
      if (a.name == "bias") {
        a.kind = ir::Arg::Kind::kTensor;
        a.value = nbv;
      }
    }
    if (!prod->arg("bias")) {
      ir::Arg a;
      a.name = "bias";
      a.kind = ir::Arg::Kind::kTensor;
      a.value = nbv;
      // bias follows weight in every supported schema
      auto it = prod->args.begin();
      while (it != prod->args.end() && it->name != "weight") ++it;
      if (it != prod->args.end()) ++it;
      prod->args.insert(it, a);
    }
    replace_all_uses(graph, bn->outputs[0], prod->outputs[0]);
    ++count;
  }
  if (count) dce(graph);
  return count;
}

}  // namespace anvil::passes
