#include "ir/verifier.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "ir/op_schema.h"

namespace anvil::ir {

namespace {

const char* kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::kTensor:
      return "Tensor";
    case ValueKind::kSymInt:
      return "SymInt";
    case ValueKind::kSymFloat:
      return "SymFloat";
    case ValueKind::kSymBool:
      return "SymBool";
  }
  return "?";
}

/// True when `a` and `b` are the same size: structurally equal, or equal at sample points of
/// the symbols' ranges. SymInt does not simplify every identity (FloorDiv(s0*s1, s1) is s0, and
/// Min(128, s0) is s0 when s0 <= 128), so shape rules may write a size differently from the
/// export; sampling the ranges (both ends, then pseudo-random points) accepts those.
bool same_size(const SymInt& a, const SymInt& b, const SymRanges& ranges) {
  if (a == b) return true;
  std::set<std::string> syms;
  a.collect_symbols(syms);
  b.collect_symbols(syms);
  if (syms.empty()) return false;
  constexpr int kSamples = 64;
  constexpr int64_t kSpan = 4096;  // how far past the minimum unbounded ranges are sampled
  uint64_t state = 0x9e3779b97f4a7c15ull;
  int checked = 0;
  for (int k = 0; k < kSamples; ++k) {
    SymEnv env;
    for (const auto& name : syms) {
      auto it = ranges.find(name);
      int64_t lo = it == ranges.end() ? 1 : std::max<int64_t>(it->second.min, -kSpan);
      int64_t hi = it == ranges.end() || it->second.max == SymRange::kSymMax
                       ? lo + kSpan
                       : std::min<int64_t>(it->second.max, lo + (int64_t{1} << 40));
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      int64_t span = hi - lo + 1;
      env[name] = k == 0 ? lo : k == 1 ? hi : lo + static_cast<int64_t>((state >> 11) % span);
    }
    try {
      if (a.evaluate(env) != b.evaluate(env)) return false;
      ++checked;
    } catch (const Error&) {
      // e.g. a division by zero at this point: try others
    }
  }
  return checked > 0;
}

/// Walks the graph once, keeping the set of values defined so far.
class Verifier {
 public:
  Verifier(const Graph& g, const VerifyOptions& o) : g_(g), options_(o) {}

  void run() {
    auto nodes = g_.nodes();
    check_single_definitions(nodes);
    check_signature();
    for (const Node* n : nodes)
      for (const Value* v : n->outputs)
        if (v) node_outputs_.insert(v);
    for (size_t i = 0; i < nodes.size(); ++i) check_node(*nodes[i], i);
    for (size_t i = 0; i < g_.output_specs().size(); ++i) {
      const OutputSpec& s = g_.output_specs()[i];
      if (s.value && !defined_.count(s.value))
        throw Error("output spec refers to a value not defined in the graph",
                    "output " + std::to_string(i) + " (" + output_kind_name(s.kind) + ")",
                    "a graph input or node output", "%" + s.value->name);
    }
  }

 private:
  void define(const Value* v, const std::string& where) {
    if (!defined_.insert(v).second)
      throw Error("value defined twice", where, "one definition per value", "%" + v->name);
  }

  /// Every value is a graph input or one node output slot, never more than one of them.
  void check_single_definitions(const std::vector<Node*>& nodes) {
    std::unordered_map<const Value*, std::vector<std::string>> sites;
    for (const Value* v : g_.inputs()) sites[v].push_back("graph input");
    for (size_t i = 0; i < nodes.size(); ++i)
      for (size_t k = 0; k < nodes[i]->outputs.size(); ++k)
        if (const Value* v = nodes[i]->outputs[k])
          sites[v].push_back(where(*nodes[i], i) + " output " + std::to_string(k));
    for (const Node* n : nodes)  // report in graph order
      for (const Value* v : n->outputs) {
        if (!v || sites[v].size() < 2) continue;
        std::string all;
        for (const auto& s : sites[v]) all += (all.empty() ? "" : ", ") + s;
        throw Error("value defined twice", "value %" + v->name, "one definition", all);
      }
    for (const Value* v : g_.inputs())
      if (sites[v].size() > 1)
        throw Error("value defined twice", "value %" + v->name, "one definition",
                    std::to_string(sites[v].size()) + " graph inputs / node outputs");
  }

  void check_signature() {
    std::unordered_set<const Value*> spec_values;
    for (size_t i = 0; i < g_.input_specs().size(); ++i) {
      const InputSpec& s = g_.input_specs()[i];
      if (!s.value) continue;
      spec_values.insert(s.value);
      bool is_input = false;
      for (const Value* v : g_.inputs()) is_input = is_input || v == s.value;
      if (!is_input)
        throw Error("input spec's value is not a graph input",
                    "input " + std::to_string(i) + " (" + input_kind_name(s.kind) + ")",
                    "a value created by add_input", "%" + s.value->name);
    }
    for (const Value* v : g_.inputs()) {
      if (!spec_values.count(v))
        throw Error("graph input has no input spec", "graph input %" + v->name,
                    "an InputSpec naming it", "none");
      if (v->producer)
        throw Error("graph input has a producer node", "graph input %" + v->name, "no producer",
                    "node " + v->producer->name);
      define(v, "graph input %" + v->name);
    }
  }

  static std::string where(const Node& n, size_t index) {
    return (n.name.empty() ? "node #" + std::to_string(index) : "node " + n.name) + " (" +
           n.target + ")";
  }

  void check_ref(const Node& n, const std::string& w, const Arg& a, const Value* v,
                 ValueKind want) {
    const std::string what = "argument '" + a.name + "'";
    if (!defined_.count(v)) {
      bool later = node_outputs_.count(v) > 0;
      throw Error(what + (later ? " uses a value before the node that defines it"
                                : " uses a value defined nowhere in the graph"),
                  w, "a graph input or an output of an earlier node", "%" + v->name);
    }
    if (v->kind != want)
      throw Error(what + " refers to a value of the wrong kind", w, kind_name(want),
                  "%" + v->name + " of kind " + kind_name(v->kind));
  }

  void check_args(const Node& n, const std::string& w) {
    std::set<std::string> names;
    for (const Arg& a : n.args) {
      if (!names.insert(a.name).second)
        throw Error("argument name repeats", w, "distinct argument names", a.name);
      using K = Arg::Kind;
      switch (a.kind) {
        case K::kTensor:
          if (!a.value)
            throw Error("tensor argument '" + a.name + "' has no value", w, "%value", "null");
          check_ref(n, w, a, a.value, ValueKind::kTensor);
          break;
        case K::kTensors:
        case K::kOptTensors:
          for (const Value* v : a.values) {
            if (!v && a.kind == K::kTensors)
              throw Error("tensor list argument '" + a.name + "' holds a null entry", w, "%value",
                          "None");
            if (v) check_ref(n, w, a, v, ValueKind::kTensor);
          }
          break;
        case K::kSymInt:
        case K::kSymInts:
          if (a.kind == K::kSymInt && a.symints.size() != 1)
            throw Error("SymInt argument '" + a.name + "' must hold one int", w, "1 entry",
                        std::to_string(a.symints.size()) + " entries");
          for (const IntRef& r : a.symints)
            if (r.value) check_ref(n, w, a, r.value, ValueKind::kSymInt);
          break;
        default:
          break;
      }
    }
  }

  /// An in-place metadata change (transpose_) runs as its out-of-place form, which is right only
  /// when nothing reads the mutated value under its old name afterwards.
  void check_metadata_mutation(const Node& n, size_t index, const std::string& w) {
    const Arg* self = n.arg("self");
    if (!self || !self->value) return;
    const std::vector<Node*> nodes = g_.nodes();
    for (size_t j = index + 1; j < nodes.size(); ++j)
      for (const Value* v : nodes[j]->input_values())
        if (v == self->value)
          throw Error("a value is read after an in-place metadata change (" + n.target +
                          ") under its old name; not supported",
                      w, "later nodes read the node's output",
                      "node " + nodes[j]->name + " reads %" + v->name);
    for (const auto& o : g_.output_specs())
      if (o.value == self->value)
        throw Error("a graph output is the value an in-place metadata change mutated; not "
                    "supported",
                    w, "the node's output is returned", "%" + self->value->name);
  }

  void check_node(const Node& n, size_t index) {
    const std::string w = where(n, index);
    if (!n.schema)
      throw Error("node has no op schema", w, "a target from the op table (src/ops/ops.def)",
                  n.target);
    if (canonical_target(n.target) != n.schema->name)
      throw Error("node's schema does not match its target", w, n.schema->name, n.target);
    int count = static_cast<int>(n.args.size());
    if (count < n.schema->min_args || count > n.schema->max_args)
      throw Error(
          "wrong number of arguments", w,
          n.schema->min_args == n.schema->max_args
              ? std::to_string(n.schema->min_args)
              : std::to_string(n.schema->min_args) + " to " + std::to_string(n.schema->max_args),
          std::to_string(count));
    check_args(n, w);
    // OpSchema::name is a const char*: compare the text, not the pointer (a pointer comparison
    // held only where the compiler merged identical literals, i.e. never at -O0).
    if (std::string_view(n.schema->name) == "aten.transpose_.default")
      check_metadata_mutation(n, index, w);
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value* v = n.outputs[i];
      if (!v) continue;
      if (v->producer != &n || v->output_index != static_cast<int>(i))
        throw Error("output value does not point back at its node", w,
                    "producer " + n.name + " output " + std::to_string(i),
                    "%" + v->name + " with producer " + (v->producer ? v->producer->name : "none"));
      define(v, w + " output " + std::to_string(i));
    }
    if (options_.check_types) check_types(n, w);
  }

  void check_types(const Node& n, const std::string& w) {
    std::vector<TensorType> inferred;
    try {
      inferred = n.schema->shape(n);
    } catch (const Error& e) {
      if (std::string(e.what()).find("not implemented yet") != std::string::npos) return;
      throw e.with_context("verify");
    } catch (const std::exception& e) {
      throw Error(std::string("shape rule failed: ") + e.what(), w);
    }
    // Slots the shape rule describes: every output when the counts match, else the tensor
    // (and null) slots.
    std::vector<size_t> slots;
    if (inferred.size() == n.outputs.size()) {
      for (size_t i = 0; i < n.outputs.size(); ++i) slots.push_back(i);
    } else {
      for (size_t i = 0; i < n.outputs.size(); ++i)
        if (!n.outputs[i] || n.outputs[i]->is_tensor()) slots.push_back(i);
    }
    if (slots.size() != inferred.size())
      throw Error("shape rule gives a different number of outputs", w,
                  std::to_string(inferred.size()) + " tensor outputs (shape rule)",
                  std::to_string(slots.size()) + " recorded");
    for (size_t k = 0; k < slots.size(); ++k) {
      const Value* v = n.outputs[slots[k]];
      if (!v || !v->is_tensor()) continue;
      const TensorType& want = inferred[k];
      bool same = want.dtype == v->type.dtype && want.sizes.size() == v->type.sizes.size();
      for (size_t d = 0; same && d < want.sizes.size(); ++d)
        same = same_size(want.sizes[d], v->type.sizes[d], g_.symbol_ranges);
      if (!same)
        throw Error("output type does not match the shape rule",
                    w + " output " + std::to_string(slots[k]) + " %" + v->name,
                    want.str() + " (shape rule)", v->type.str() + " (recorded)");
    }
  }

  const Graph& g_;
  const VerifyOptions& options_;
  std::unordered_set<const Value*> defined_;
  std::unordered_set<const Value*> node_outputs_;
};

}  // namespace

void verify(const Graph& graph, const VerifyOptions& options) { Verifier(graph, options).run(); }

}  // namespace anvil::ir
