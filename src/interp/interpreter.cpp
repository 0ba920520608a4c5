// The reference interpreter: checks the user inputs against the export signature, then runs
// every node's reference kernel in order, freeing intermediates after their last reader.
#include "interp/interpreter.h"

#include "interp/collective_kernels.h"

#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "ir/op_schema.h"

namespace anvil::interp {

namespace {

using Env = std::unordered_map<const ir::Value*, ir::RValue>;

/// "node add_1 (aten.add.Tensor)", the same text KernelContext::where() produces.
std::string node_where(const ir::Node& n) { return "node " + n.name + " (" + n.target + ")"; }

/// "input 0 'x'".
std::string input_where(size_t pos, const ir::Value& v) {
  return str("input ", pos, " '", v.name, "'");
}

bool is_16bit_float(DType t) { return t == DType::kBFloat16 || t == DType::kFloat16; }

/// Affine solve of `expr(sym) == actual` for its single unbound symbol `sym` (torch binds
/// sizes such as 2*s0 the same way). Returns the value, or nullopt when there is none.
std::optional<int64_t> solve_for(const SymInt& expr, const std::string& sym, int64_t actual,
                                 SymEnv env) {
  try {
    env[sym] = 0;
    const int64_t b = expr.evaluate(env);
    env[sym] = 1;
    const int64_t a = expr.evaluate(env) - b;
    if (a == 0 || (actual - b) % a != 0) return std::nullopt;
    env[sym] = (actual - b) / a;
    if (expr.evaluate(env) != actual) return std::nullopt;
    return env[sym];
  } catch (const Error&) {
    return std::nullopt;
  }
}

/// True when every symbol of `s` has a value in `env`.
bool all_bound(const SymInt& s, const SymEnv& env) {
  if (s.is_constant()) return true;
  std::set<std::string> syms;
  s.collect_symbols(syms);
  for (const auto& n : syms)
    if (!env.count(n)) return false;
  return true;
}

/// The runtime integer held by a SymInt value: from the environment when a node produced it,
/// else its symbolic expression evaluated with the bound symbols.
int64_t int_value(const ir::Value& v, const Env& env, const SymEnv& symbols, const ir::Node& n) {
  auto it = env.find(&v);
  if (it != env.end()) {
    if (auto* i = std::get_if<int64_t>(&it->second)) return *i;
    if (auto* b = std::get_if<bool>(&it->second)) return *b;
    if (auto* t = std::get_if<Tensor>(&it->second); t && t->numel() == 1)
      return static_cast<int64_t>(t->item());
    throw Error("int argument refers to a value that is not an int", node_where(n), "a SymInt",
                v.name);
  }
  try {
    return v.sym.evaluate(symbols);
  } catch (const Error& e) {
    throw e.with_context(node_where(n) + ": value " + v.name);
  }
}

/// The tensor bound to `v`; throws Error naming the node when it is missing or not a tensor.
const Tensor& tensor_value(const ir::Value& v, const Env& env, const ir::Node& n) {
  auto it = env.find(&v);
  if (it == env.end())
    throw Error("reads a value that has no runtime value (freed or never produced)", node_where(n),
                "a live tensor", v.name);
  if (auto* t = std::get_if<Tensor>(&it->second)) return *t;
  throw Error("tensor argument refers to a non-tensor value", node_where(n), "Tensor", v.name);
}

/// Resolves one node argument into the runtime value a kernel reads.
ir::RValue resolve(const ir::Arg& a, const Env& env, const SymEnv& symbols, const ir::Node& n) {
  using K = ir::Arg::Kind;
  auto ref = [&](const ir::IntRef& r) {
    return r.value ? int_value(*r.value, env, symbols, n) : r.constant;
  };
  switch (a.kind) {
    case K::kNone:
      return std::monostate{};
    case K::kTensor:
      if (!a.value) return std::monostate{};
      if (a.value->kind == ir::ValueKind::kSymInt) return int_value(*a.value, env, symbols, n);
      return tensor_value(*a.value, env, n);
    case K::kTensors: {
      std::vector<Tensor> out;
      for (const ir::Value* v : a.values) {
        if (!v) throw Error("tensor list argument '" + a.name + "' holds None", node_where(n));
        out.push_back(tensor_value(*v, env, n));
      }
      return out;
    }
    case K::kOptTensors: {
      std::vector<std::optional<Tensor>> out;
      for (const ir::Value* v : a.values)
        out.push_back(v ? std::optional<Tensor>(tensor_value(*v, env, n)) : std::nullopt);
      return out;
    }
    case K::kInt:
    case K::kLayout:
    case K::kMemoryFormat:
      return a.i;
    case K::kFloat:
      return a.f;
    case K::kBool:
      return a.b;
    case K::kString:
    case K::kGraph:  // the subgraph's name; the interpreter runs control flow itself
      return a.s;
    case K::kInts:
      return a.ints;
    case K::kFloats:
      return a.floats;
    case K::kBools:
      return a.bools;
    case K::kSymInt:
      if (a.symints.empty())
        throw Error("SymInt argument '" + a.name + "' has no value", node_where(n));
      return ref(a.symints[0]);
    case K::kSymInts: {
      std::vector<int64_t> out;
      for (const auto& r : a.symints) out.push_back(ref(r));
      return out;
    }
    case K::kScalarType:
      return a.dtype;
    case K::kDevice:
      return a.device;
  }
  throw Error("argument '" + a.name + "' has an unknown kind", node_where(n));
}

/// Checks a kernel's tensor result against the value's static type; binds unbacked symbols
/// (a dim whose type is a single unbound symbol) from the actual size.
void check_result(const ir::Node& n, const ir::Value& v, const Tensor& t, SymEnv& symbols) {
  const auto& want = v.type;
  if (t.dtype() != want.dtype || t.dim() != static_cast<int64_t>(want.sizes.size()))
    throw Error("kernel result does not match the graph's type of " + v.name, node_where(n),
                want.str(), t.type_str());
  for (size_t d = 0; d < want.sizes.size(); ++d) {
    const SymInt& s = want.sizes[d];
    const int64_t actual = t.size(static_cast<int64_t>(d));
    if (!all_bound(s, symbols)) {
      if (auto sym = s.as_symbol()) symbols[*sym] = actual;
      continue;
    }
    if (s.evaluate(symbols) != actual)
      throw Error(str("kernel result dim ", d, " of ", v.name, " does not match the graph"),
                  node_where(n), str(want.str(), " = ", s.evaluate(symbols)), t.type_str());
  }
}

/// The stride differences of result `t` against PyTorch's recorded strides (dims of size > 1;
/// nothing when the graph records none), for Interpreter::audit_strides.
void audit_result(const ir::Node& n, size_t k, const ir::Value& v, const Tensor& t,
                  const SymEnv& symbols, std::vector<std::string>& out) {
  const auto& want = v.type.strides;
  if (want.empty() || want.size() != static_cast<size_t>(t.dim()) || t.numel() == 0) return;
  bool differ = false;
  std::string ws, gs;
  for (size_t d = 0; d < want.size(); ++d) {
    if (!all_bound(want[d], symbols)) return;
    const int64_t w = want[d].evaluate(symbols), g = t.stride(static_cast<int64_t>(d));
    ws += (d ? ", " : "") + std::to_string(w);
    gs += (d ? ", " : "") + std::to_string(g);
    if (t.size(static_cast<int64_t>(d)) > 1 && w != g) differ = true;
  }
  if (differ)
    out.push_back(str(node_where(n), " output ", k, " ", v.name, " ", t.type_str(), ": strides [",
                      gs, "], PyTorch [", ws, "]"));
}

/// True when `a` and `b` view the same elements of the same storage.
bool same_view(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage() && a.storage_offset() == b.storage_offset() &&
         a.sizes() == b.sizes() && a.strides() == b.strides() && a.dtype() == b.dtype();
}

}  // namespace

Interpreter::Interpreter(const ir::Graph& graph) : graph_(graph), nodes_(graph.nodes()) {
  const auto& specs = graph_.input_specs();
  // Tensors written in place (directly) by some node: they get a private copy like buffers.
  std::unordered_set<const ir::Value*> written;
  for (const ir::Node* n : nodes_) {
    const int m = n->schema ? n->schema->mutates_arg : -1;
    if (m >= 0 && m < static_cast<int>(n->args.size()) && n->args[m].value)
      written.insert(n->args[m].value);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& spec = specs[i];
    switch (spec.kind) {
      case ir::InputKind::kUserInput:
        if (spec.value && !spec.constant_int) user_input_specs_.push_back(i);
        break;
      case ir::InputKind::kParameter:
      case ir::InputKind::kBuffer:
      case ir::InputKind::kConstant: {
        auto it = graph_.constants.find(spec.target);
        if (it == graph_.constants.end()) break;  // reported by run() if the graph reads it
        const bool copy = spec.kind == ir::InputKind::kBuffer || written.count(spec.value);
        state_[spec.target] = copy ? it->second.clone() : it->second;
        break;
      }
      default:
        break;
    }
  }
  // Last use of every value: the last node reading it. Outputs of the graph live to the end.
  std::unordered_map<const ir::Value*, size_t> last;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (const ir::Value* v : nodes_[i]->outputs)
      if (v) last[v] = i;
    for (const ir::Value* v : nodes_[i]->input_values()) last[v] = i;
  }
  for (const auto& o : graph_.output_specs())
    if (o.value) last.erase(o.value);
  free_after_.resize(nodes_.size());
  for (const auto& [v, i] : last) free_after_[i].push_back(v);
}

std::vector<Tensor> Interpreter::check_inputs(const std::vector<Tensor>& user_inputs) {
  const auto& specs = graph_.input_specs();
  if (user_inputs.size() != user_input_specs_.size()) {
    std::string names;
    for (size_t k = 0; k < user_input_specs_.size(); ++k)
      names += (k ? ", " : "") + specs[user_input_specs_[k]].value->name;
    throw Error("wrong number of inputs", "Interpreter::run",
                str(user_input_specs_.size(), " (", names, ")"), str(user_inputs.size()));
  }
  symbols_.clear();
  std::map<std::string, std::string> bound_by;  // symbol -> "input 0 'x' dim 0"
  std::vector<Tensor> ins(user_inputs.size());
  // Pass 1: dtype, rank, static dims, and binding of dims that are a single symbol.
  for (size_t k = 0; k < user_inputs.size(); ++k) {
    const ir::Value& v = *specs[user_input_specs_[k]].value;
    const Tensor& t = user_inputs[k];
    const std::string where = input_where(k, v);
    if (!t.defined()) throw Error("input tensor is undefined", where, v.type.str(), "none");
    if (v.kind == ir::ValueKind::kSymInt) {  // an int input, passed as a one-element tensor
      if (t.numel() != 1 || !is_integral(t.dtype()))
        throw Error("int input needs a one-element integer tensor", where, "an int", t.type_str());
      ins[k] = t;
      if (auto s = v.sym.as_symbol()) symbols_[*s] = static_cast<int64_t>(t.item());
      continue;
    }
    const auto& want = v.type;
    ins[k] = t;
    if (t.dtype() != want.dtype) {
      if (is_16bit_float(want.dtype) && t.dtype() == DType::kFloat32) {
        ins[k] = t.to(want.dtype);
      } else {
        const std::string hint =
            is_16bit_float(want.dtype) ? " (or f32, converted)" : std::string();
        throw Error("wrong dtype", where, dtype_name(want.dtype) + hint, dtype_name(t.dtype()));
      }
    }
    if (t.dim() != static_cast<int64_t>(want.sizes.size()))
      throw Error("wrong rank", where, str(want.sizes.size(), " dims ", sym_shape_str(want.sizes)),
                  str(t.dim(), " dims ", shape_str(t.sizes())));
    for (size_t d = 0; d < want.sizes.size(); ++d) {
      const SymInt& s = want.sizes[d];
      const int64_t actual = t.size(static_cast<int64_t>(d));
      if (auto c = s.maybe_constant()) {
        if (*c != actual)
          throw Error(str("wrong size of dim ", d), where, str(*c, " (shape ", want.str(), ")"),
                      str(actual, " (shape ", shape_str(t.sizes()), ")"));
        continue;
      }
      auto sym = s.as_symbol();
      if (!sym) continue;  // an expression: pass 2
      auto it = symbols_.find(*sym);
      if (it != symbols_.end() && it->second != actual)
        throw Error(str("dim ", d, " (symbol ", *sym, ") disagrees with an earlier input"), where,
                    str(it->second, " (as ", bound_by[*sym], ")"), str(actual));
      auto range = graph_.symbol_ranges.find(*sym);
      if (range != graph_.symbol_ranges.end() && !range->second.contains(actual))
        throw Error(str("dim ", d, " (symbol ", *sym, ") is out of range"), where,
                    range->second.str(), str(actual));
      symbols_[*sym] = actual;
      bound_by[*sym] = str(where, " dim ", d);
    }
  }
  // Pass 2: dims given by expressions (solving for at most one still-unbound symbol).
  for (size_t k = 0; k < user_inputs.size(); ++k) {
    const ir::Value& v = *specs[user_input_specs_[k]].value;
    if (v.kind != ir::ValueKind::kTensor) continue;
    const std::string where = input_where(k, v);
    for (size_t d = 0; d < v.type.sizes.size(); ++d) {
      const SymInt& s = v.type.sizes[d];
      if (s.is_constant() || s.as_symbol()) continue;
      const int64_t actual = user_inputs[k].size(static_cast<int64_t>(d));
      std::set<std::string> syms;
      s.collect_symbols(syms);
      std::vector<std::string> unbound;
      for (const auto& n : syms)
        if (!symbols_.count(n)) unbound.push_back(n);
      if (unbound.size() == 1) {
        auto val = solve_for(s, unbound[0], actual, symbols_);
        if (!val)
          throw Error(str("dim ", d, " cannot equal ", s.str(), " for any ", unbound[0]), where,
                      s.str(), str(actual));
        auto range = graph_.symbol_ranges.find(unbound[0]);
        if (range != graph_.symbol_ranges.end() && !range->second.contains(*val))
          throw Error(str("dim ", d, " = ", s.str(), " puts symbol ", unbound[0], " out of range"),
                      where, str(unbound[0], " in ", range->second.str()),
                      str(actual, " (", unbound[0], " = ", *val, ")"));
        symbols_[unbound[0]] = *val;
      } else if (!unbound.empty()) {
        throw Error(str("dim ", d, " = ", s.str(), " has several unbound symbols"), where,
                    "sizes that determine every symbol", str(actual));
      }
      const int64_t want = s.evaluate(symbols_);
      if (want != actual)
        throw Error(str("wrong size of dim ", d, " (", s.str(), ")"), where, str(want),
                    str(actual));
    }
  }
  return ins;
}

Interpreter& Interpreter::sub(const ir::Node& n, const std::string& arg) {
  const ir::Graph& g = n.subgraph(arg);
  auto& slot = subs_[&g];
  if (!slot) slot = std::make_unique<Interpreter>(g);
  return *slot;
}

namespace {

/// The truth value of a predicate: a one-element tensor, a SymBool or an int.
bool truth(const ir::RValue& v, const ir::Node& n, const char* what) {
  if (auto* b = std::get_if<bool>(&v)) return *b;
  if (auto* i = std::get_if<int64_t>(&v)) return *i != 0;
  if (auto* t = std::get_if<Tensor>(&v)) {
    if (t->numel() != 1)
      throw Error(str(what, " must have exactly one element"), node_where(n), "1 element",
                  t->type_str());
    return t->item() != 0;
  }
  throw Error(str(what, " is not a boolean"), node_where(n), "a bool tensor or SymBool",
              "another kind");
}

/// Tensor-list argument `i` of a control-flow node (an absent list is empty).
std::vector<Tensor> tensor_list(const std::vector<ir::RValue>& args, size_t i) {
  if (i >= args.size()) return {};
  if (auto* l = std::get_if<std::vector<Tensor>>(&args[i])) return *l;
  return {};
}

}  // namespace

std::vector<ir::RValue> Interpreter::run_control_flow(const ir::Node& n,
                                                      std::vector<ir::RValue> args) {
  std::vector<ir::RValue> out;
  if (n.target == "higher_order.cond") {
    const bool p = truth(args.at(0), n, "the cond predicate");
    const std::vector<Tensor> operands = tensor_list(args, 3);
    try {
      for (Tensor& t : sub(n, p ? "true_fn" : "false_fn").run(operands)) out.emplace_back(t);
    } catch (const Error& e) {
      throw e.with_context(str(node_where(n), ": ", p ? "true" : "false", " branch"));
    }
    return out;
  }
  if (n.target == "higher_order.while_loop") {
    std::vector<Tensor> carried = tensor_list(args, 2);
    const std::vector<Tensor> extra = tensor_list(args, 3);
    for (Tensor& t : carried) t = t.clone();  // results never alias the loop's inputs
    Interpreter& cond = sub(n, "cond_fn");
    Interpreter& body = sub(n, "body_fn");
    for (int64_t iter = 0;; ++iter) {
      std::vector<Tensor> ins = carried;
      ins.insert(ins.end(), extra.begin(), extra.end());
      try {
        if (!truth(cond.run(ins).at(0), n, "the while_loop condition")) break;
        carried = body.run(ins);
      } catch (const Error& e) {
        throw e.with_context(str(node_where(n), ": iteration ", iter));
      }
    }
    for (Tensor& t : carried) out.emplace_back(t);
    return out;
  }
  throw Error("unknown control-flow op", node_where(n), "higher_order.cond or while_loop",
              n.target);
}

std::vector<Tensor> Interpreter::run(const std::vector<Tensor>& user_inputs) {
  const std::vector<Tensor> ins = check_inputs(user_inputs);
  const auto& specs = graph_.input_specs();
  Env env;
  for (size_t k = 0; k < ins.size(); ++k) {
    const ir::Value* v = specs[user_input_specs_[k]].value;
    if (v->kind == ir::ValueKind::kSymInt)
      env[v] = static_cast<int64_t>(ins[k].item());
    else
      env[v] = ins[k];
  }
  for (const auto& spec : specs) {
    if (!spec.value) continue;
    if (spec.kind == ir::InputKind::kUserInput && spec.constant_int) {
      env[spec.value] = *spec.constant_int;
    } else if (spec.kind == ir::InputKind::kParameter || spec.kind == ir::InputKind::kBuffer ||
               spec.kind == ir::InputKind::kConstant) {
      auto it = state_.find(spec.target);
      if (it == state_.end())
        throw Error(
            str("no weight loaded for ", input_kind_name(spec.kind), " '", spec.target, "'"),
            "Interpreter::run", "a tensor in Graph::constants", "none");
      env[spec.value] = it->second;
    }
  }

  for (size_t i = 0; i < nodes_.size(); ++i) {
    const ir::Node& n = *nodes_[i];
    if (!n.schema || !n.schema->kernel)
      throw Error("no reference kernel for this op", node_where(n), "an op from ops.def", n.target);
    std::vector<ir::RValue> args;
    args.reserve(n.args.size());
    for (const auto& a : n.args) args.push_back(resolve(a, env, symbols_, n));
    const int mut = n.schema->mutates_arg;
    std::optional<Tensor> target;
    if (mut >= 0 && mut < static_cast<int>(args.size()))
      if (auto* t = std::get_if<Tensor>(&args[mut])) target = *t;

    std::vector<ir::RValue> results;
    try {
      ir::KernelContext ctx(n, std::move(args));
      if (n.schema->category == ir::OpCategory::kControlFlow) {
        std::vector<ir::RValue> a;
        for (const auto& arg : n.args) a.push_back(ctx.raw(arg.name));
        results = run_control_flow(n, std::move(a));
      } else {
        results = n.schema->category == ir::OpCategory::kCollective ? run_collective_kernel(ctx)
                                                                     : n.schema->kernel(ctx);
      }
    } catch (const Error& e) {
      if (e.where().find(node_where(n)) != std::string::npos) throw;
      throw e.with_context(node_where(n));
    } catch (const std::exception& e) {
      throw Error(str("kernel failed: ", e.what()), node_where(n));
    }

    // In-place ops: the result lives in the written argument (a state_ buffer stays mutated).
    if (target) {
      if (results.empty()) results.emplace_back(*target);
      if (auto* r = std::get_if<Tensor>(&results[0]); r && !same_view(*r, *target)) {
        target->copy_from(*r);
        results[0] = *target;
      }
    }
    // A kernel returning one tensor list for several outputs (split, unbind).
    if (results.size() == 1 && n.outputs.size() != 1)
      if (auto* l = std::get_if<std::vector<Tensor>>(&results[0])) {
        std::vector<ir::RValue> flat(l->begin(), l->end());
        results = std::move(flat);
      }
    if (results.size() < n.outputs.size())
      throw Error("kernel returned too few results", node_where(n), str(n.outputs.size()),
                  str(results.size()));
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      const ir::Value* v = n.outputs[o];
      if (!v) continue;
      ir::RValue& r = results[o];
      if (v->kind == ir::ValueKind::kTensor) {
        auto* t = std::get_if<Tensor>(&r);
        if (!t || !t->defined())
          throw Error(str("kernel result ", o, " is not a tensor"), node_where(n), "Tensor",
                      "another kind");
        check_result(n, *v, *t, symbols_);
        if (stride_audit_) audit_result(n, o, *v, *t, symbols_, *stride_audit_);
      } else if (v->kind == ir::ValueKind::kSymInt) {
        if (auto* b = std::get_if<bool>(&r)) r = static_cast<int64_t>(*b);
        if (!std::holds_alternative<int64_t>(r))
          throw Error(str("kernel result ", o, " is not an int"), node_where(n), "int",
                      "another kind");
        if (auto s = v->sym.as_symbol(); s && !symbols_.count(*s))
          symbols_[*s] = std::get<int64_t>(r);
      }
      env[v] = std::move(r);
    }
    for (const ir::Value* v : free_after_[i]) env.erase(v);
  }

  // User outputs, in order. Those that alias the persistent state are copied so that a later
  // run (or the caller) cannot change one through the other.
  std::unordered_set<const void*> state_storages;
  for (const auto& [name, t] : state_) state_storages.insert(t.storage().get());
  std::vector<Tensor> outputs;
  for (size_t k = 0; k < graph_.output_specs().size(); ++k) {
    const auto& o = graph_.output_specs()[k];
    if (o.kind != ir::OutputKind::kUserOutput && o.kind != ir::OutputKind::kLossOutput) continue;
    if (!o.value)
      throw Error(str("output ", k, " is a constant the graph does not carry"), "Interpreter::run",
                  "a value", "none");
    auto it = env.find(o.value);
    if (it == env.end())
      throw Error(str("output ", k, " has no value"), "Interpreter::run", o.value->name, "none");
    if (auto* i = std::get_if<int64_t>(&it->second)) {
      outputs.push_back(Tensor::scalar(static_cast<double>(*i), DType::kInt64));
    } else if (auto* t = std::get_if<Tensor>(&it->second)) {
      outputs.push_back(state_storages.count(t->storage().get()) ? t->clone() : *t);
    } else {
      throw Error(str("output ", k, " is neither a tensor nor an int"), "Interpreter::run",
                  "Tensor", o.value->name);
    }
  }
  // Functionalized mutations: copy the new value into the buffer / the caller's input.
  for (const auto& o : graph_.output_specs()) {
    if (!o.value) continue;
    auto it = env.find(o.value);
    if (it == env.end() || !std::holds_alternative<Tensor>(it->second)) continue;
    const Tensor& val = std::get<Tensor>(it->second);
    if (o.kind == ir::OutputKind::kBufferMutation || o.kind == ir::OutputKind::kParameterMutation) {
      auto st = state_.find(o.target);
      if (st == state_.end())
        throw Error("mutation of an unknown buffer", "Interpreter::run", "a buffer name", o.target);
      if (!same_view(st->second, val)) {
        // Parameters are shared with the Graph until first written: detach before writing.
        if (graph_.constants.count(o.target) &&
            graph_.constants.at(o.target).storage() == st->second.storage())
          st->second = st->second.clone();
        st->second.copy_from(val);
      }
    } else if (o.kind == ir::OutputKind::kUserInputMutation) {
      for (size_t k = 0; k < user_input_specs_.size(); ++k) {
        if (specs[user_input_specs_[k]].value->name != o.target) continue;
        Tensor dst = user_inputs[k];
        if (!same_view(dst, val)) dst.copy_from(val);
      }
    }
  }
  return outputs;
}

}  // namespace anvil::interp
