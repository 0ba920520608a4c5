// An inference batch norm (and a ReLU after it) over a channel concatenation, computed per
// concatenated part: batch_norm(cat([x0, x1, ...], 1)) -> cat([batch_norm(x0, params[0:c0]),
// batch_norm(x1, params[c0:c0+c1]), ...], 1). DenseNet's layers each concatenate every earlier
// feature map and normalize the result (norm1, relu1, conv1): lowered as written, each layer
// copies all its features into the concatenation and then reads that copy to normalize it, four
// passes over the channels; per part, each part is read once and its normalized values are
// written into their slice of the concatenation, two passes. Each element is computed by the
// same formula from the same values, so the results are bit for bit those of the graph as
// written.
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/env_switch.h"
#include "passes/decompose_util.h"
#include "passes/graph_passes.h"

namespace anvil::passes {

namespace {

using detail::Emitter;
using detail::int_arg;
using detail::tensor_arg;

const char* const kParams[] = {"weight", "bias", "running_mean", "running_var"};

bool is_param(const std::string& name) {
  for (const char* p : kParams)
    if (name == p) return true;
  return false;
}

/// One rewrite: the norm reading the concatenation, whether a ReLU follows, the nodes the
/// parts replace (the norm, the ReLU, the copy_ of an in-place ReLU) and the value they stand for.
struct Match {
  const ir::Node* norm = nullptr;
  bool relu = false;
  std::vector<const ir::Node*> replaced;
  const ir::Value* last = nullptr;
};

/// The nodes reading each value (once each), and how many reads they make, from one walk.
class Readers {
 public:
  explicit Readers(const ir::Graph& g) : uses_(use_counts(g)) {
    for (const ir::Node* n : g.nodes())
      for (const ir::Value* in : n->input_values()) {
        Entry& e = of_[in];
        if (e.nodes.empty() || e.nodes.back() != n) e.nodes.push_back(n);
        ++e.reads;
      }
  }
  /// The nodes reading `v`, when every read of `v` is a node argument (none: an output too).
  std::vector<const ir::Node*> operator()(const ir::Value* v) const {
    const auto e = of_.find(v);
    const auto u = uses_.find(v);
    if (e == of_.end() || u == uses_.end() || u->second != e->second.reads) return {};
    return e->second.nodes;
  }

 private:
  struct Entry {
    std::vector<const ir::Node*> nodes;
    int reads = 0;
  };
  std::map<const ir::Value*, int> uses_;
  std::map<const ir::Value*, Entry> of_;
};

bool is_relu_of(const ir::Node* n, const ir::Value* v) {
  return n && n->target == "aten.relu.default" && n->outputs.size() == 1 && n->outputs[0] &&
         n->arg("self") && n->arg("self")->value == v;
}

std::optional<Match> match(const ir::Node& cat, const Readers& readers,
                           const std::set<const ir::Value*>& mutated) {
  if (cat.target != "aten.cat.default" || cat.outputs.size() != 1 || !cat.outputs[0]) return {};
  const ir::Value* out = cat.outputs[0];
  const size_t rank = out->type.sizes.size();
  const ir::Arg* tensors = cat.arg("tensors");
  if (rank < 2 || !tensors || tensors->values.empty()) return {};
  int64_t dim = 0;
  if (const ir::Arg* d = cat.arg("dim")) {
    if (d->kind != ir::Arg::Kind::kInt) return {};
    dim = d->i < 0 ? d->i + static_cast<int64_t>(rank) : d->i;
  }
  if (dim != 1 || !out->type.sizes[1].maybe_constant()) return {};
  for (const ir::Value* x : tensors->values)
    if (!x || x->type.sizes.size() != rank || x->type.dtype != out->type.dtype ||
        !x->type.sizes[1].maybe_constant())
      return {};
  const int64_t channels = *out->type.sizes[1].maybe_constant();

  Match m;
  const auto cat_readers = readers(out);
  if (cat_readers.size() != 1) return {};
  m.norm = cat_readers[0];
  if (m.norm->target != "aten.batch_norm.default" || m.norm->outputs.size() != 1 ||
      !m.norm->outputs[0])
    return {};
  const ir::Arg* input = m.norm->arg("input");
  const ir::Arg* training = m.norm->arg("training");
  if (!input || input->value != out || !training || training->kind != ir::Arg::Kind::kBool ||
      training->b)
    return {};
  for (const ir::Arg& a : m.norm->args) {
    if (!is_param(a.name)) continue;
    if (a.kind == ir::Arg::Kind::kNone) {
      if (a.name == "running_mean" || a.name == "running_var") return {};
      continue;
    }
    // a weight of the graph that nothing writes: the parts read it before the norm's place
    if (a.kind != ir::Arg::Kind::kTensor || !a.value || a.value->producer ||
        mutated.count(a.value) || a.value->type.sizes.size() != 1 ||
        a.value->type.sizes[0].maybe_constant() != channels)
      return {};
  }
  m.replaced = {m.norm};
  m.last = m.norm->outputs[0];
  // relu(norm), or the frontend's form of relu_(norm): v = relu(norm); copy_(norm, v), read on
  const ir::Value* y = m.norm->outputs[0];
  const auto norm_readers = readers(y);
  if (norm_readers.size() == 1 && is_relu_of(norm_readers[0], y)) {
    m.relu = true;
    m.replaced.push_back(norm_readers[0]);
    m.last = norm_readers[0]->outputs[0];
  } else if (norm_readers.size() == 2) {
    const ir::Node* r = is_relu_of(norm_readers[0], y) ? norm_readers[0] : norm_readers[1];
    const ir::Node* c = r == norm_readers[0] ? norm_readers[1] : norm_readers[0];
    if (is_relu_of(r, y) && c->target == "aten.copy_.default" && c->outputs.size() == 1 &&
        c->outputs[0] && c->arg("self") && c->arg("self")->value == y && c->arg("src") &&
        c->arg("src")->value == r->outputs[0] && readers(r->outputs[0]).size() == 1) {
      m.relu = true;
      m.replaced.push_back(r);
      m.replaced.push_back(c);
      m.last = c->outputs[0];
    }
  }
  return m;
}

}  // namespace

int norm_through_cat(std::unique_ptr<ir::Graph>& graph) {
  if (!env_switch("ANVIL_NORM_THROUGH_CAT", true)) return 0;
  const Readers readers(*graph);
  const auto mutated = mutated_inputs(*graph);
  std::map<const ir::Node*, Match> at_cat;  // by concatenation
  std::set<const ir::Node*> skipped;        // the norms and ReLUs the parts replace
  for (const ir::Node* n : graph->nodes())
    if (auto m = match(*n, readers, mutated)) {
      at_cat[n] = *m;
      skipped.insert(m->replaced.begin(), m->replaced.end());
    }
  if (at_cat.empty()) return 0;
  GraphRebuilder b(*graph);
  for (const ir::Node* n : graph->nodes()) {
    if (skipped.count(n)) continue;
    const auto it = at_cat.find(n);
    if (it == at_cat.end()) {
      b.copy(*n);
      continue;
    }
    // At the concatenation's place (its parts as it read them; the weights are the graph's,
    // never written): per part, the norm of its channels' slice of each parameter, the ReLU.
    const Match& m = it->second;
    Emitter e(b.graph(), *m.last->producer);
    std::vector<ir::Value*> parts;
    int64_t off = 0;
    for (ir::Value* x : n->arg("tensors")->values) {
      const int64_t len = *x->type.sizes[1].maybe_constant();
      std::vector<ir::Arg> args;
      for (const ir::Arg& a : m.norm->args) {
        ir::Arg c = a;
        if (a.name == "input") c.value = b.remap(x);
        if (is_param(a.name) && a.kind == ir::Arg::Kind::kTensor)
          c.value = e.op("aten.slice.Tensor",
                         {tensor_arg("self", b.remap(a.value)), int_arg("dim", 0),
                          int_arg("start", off), int_arg("end", off + len), int_arg("step", 1)});
        args.push_back(c);
      }
      ir::Value* v = e.op("aten.batch_norm.default", std::move(args));
      if (m.relu) v = e.op("aten.relu.default", {tensor_arg("self", v)});
      parts.push_back(v);
      off += len;
    }
    std::vector<ir::Arg> cat_args;
    for (const ir::Arg& a : n->args) {
      ir::Arg c = a;
      if (a.name == "tensors") c.values = parts;
      cat_args.push_back(c);
    }
    b.bind(m.last, e.op("aten.cat.default", std::move(cat_args), /*last=*/true));
  }
  graph = b.finish();
  return static_cast<int>(at_cat.size());
}

}  // namespace anvil::passes
