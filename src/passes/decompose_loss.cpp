// Graph-level decompositions: aten.cross_entropy_loss.default into ops the lowering fuses
// (log_softmax, a one-hot selection with arange / eq / where, sums, pointwise arithmetic); see
// decompose_losses in graph_passes.h for the formulas. The norms (linalg_vector_norm,
// group_norm, _weight_norm) are in decompose_norm.cpp; this file's pass runs them all.
#include <cmath>
#include <functional>

#include "core/error.h"
#include "ir/op_schema.h"
#include "passes/decompose_util.h"
#include "passes/graph_passes.h"

namespace anvil::passes {

namespace {

using namespace detail;  // NOLINT: the decomposition building blocks

constexpr const char* kCrossEntropy = "aten.cross_entropy_loss.default";
constexpr const char* kVectorNorm = "aten.linalg_vector_norm.default";
constexpr const char* kGroupNorm = "aten.group_norm.default";
constexpr const char* kWeightNorm = "aten._weight_norm.default";

/// Throws the compile error for a variant the decomposition cannot express.
[[noreturn]] void unsupported(const ir::Node& n, const std::string& what,
                              const std::string& expected, const std::string& actual) {
  throw Error("cross_entropy_loss: " + what + " is not supported by the compiler",
              "node " + n.name + " (" + n.target + ")", expected, actual);
}

/// Emits the decomposition of cross_entropy_loss node `n` whose inputs are already mapped
/// (`in` maps the old graph's values to the new one's); returns the value replacing its output.
ir::Value* decompose_cross_entropy(ir::Graph& g, const ir::Node& n,
                                   const std::function<ir::Value*(ir::Value*)>& in) {
  n.schema->shape(n);  // validates shapes, dtypes and arguments with the interpreter's messages
  namespace sa = ir::shape_args;
  const ir::Arg* self_arg = n.arg("self");
  const ir::Arg* target_arg = n.arg("target");
  const ir::Arg* weight_arg = n.arg("weight");
  ir::Value* x = in(self_arg->value);
  ir::Value* t = in(target_arg->value);
  ir::Value* w =
      weight_arg && weight_arg->kind == ir::Arg::Kind::kTensor ? in(weight_arg->value) : nullptr;
  const int64_t reduction = sa::int_(n, "reduction", 1);
  const int64_t ignore_index = sa::int_(n, "ignore_index", -100);
  const double ls = sa::float_(n, "label_smoothing", 0.0);
  const int64_t rank = static_cast<int64_t>(x->type.sizes.size());
  const int64_t cd = rank == 1 ? 0 : 1;
  const SymInt& csym = x->type.sizes[static_cast<size_t>(cd)];
  if (!csym.is_constant())
    unsupported(n, "a symbolic number of classes", "a static class dim", csym.str());
  const int64_t classes = csym.constant();
  const bool none = reduction == 0, mean = reduction == 1;

  Emitter e(g, n);
  ir::Value* lsm = e.op("aten.log_softmax.int", {tensor_arg("self", x), int_arg("dim", cd)});
  // Broadcasts a (C,) tensor along the class dim of the input: (1, C, 1, ...).
  auto along_classes = [&](ir::Value* v) {
    if (rank == 1) return v;
    v = e.unsqueeze(v, 0);
    for (int64_t d = 2; d < rank; ++d) v = e.unsqueeze(v, -1);
    return v;
  };
  ir::Value* wb = w ? along_classes(w) : nullptr;

  if (t->type.sizes == x->type.sizes) {
    // Probability targets: -sum(log_softmax * t' * w) over the class dim, then reduced.
    ir::Value* tt = t;
    if (ls > 0)
      tt = e.op("aten.add.Scalar", {tensor_arg("self", e.scale(t, 1 - ls)),
                                    float_arg("other", ls / static_cast<double>(classes))});
    ir::Value* p = e.mul(lsm, tt);
    if (wb) p = e.mul(p, wb);
    if (none) return e.neg(e.sum(p, cd), true);
    if (!mean) return e.neg(e.sum(p, -1), true);
    int64_t rows = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if (d == cd) continue;
      const SymInt& s = x->type.sizes[static_cast<size_t>(d)];
      if (!s.is_constant())
        unsupported(n, "reduction='mean' of probability targets with symbolic batch sizes",
                    "static sizes", sym_shape_str(x->type.sizes));
      rows *= s.constant();
    }
    return e.op(
        "aten.div.Scalar",
        {tensor_arg("self", e.neg(e.sum(p, -1))), float_arg("other", static_cast<double>(rows))},
        true);
  }

  // Class-index targets: a one-hot selection hit[i, c] = (c == t_i) picks -w[t_i] *
  // log_softmax[i, t_i]; valid_i = (t_i != ignore_index) zeroes ignored terms. (Targets outside
  // [0, C) select nothing here; the interpreter reports them.)
  ir::Value* tu = e.unsqueeze(t, cd);
  ir::Value* cls = along_classes(e.op(
      "aten.arange.default", {int_arg("end", classes), dtype_arg("dtype", DType::kInt64, true)}));
  ir::Value* hit = e.op("aten.eq.Tensor", {tensor_arg("self", cls), tensor_arg("other", tu)});
  ir::Value* valid =
      e.op("aten.ne.Scalar", {tensor_arg("self", t), int_arg("other", ignore_index)});
  ir::Value* lw = wb ? e.mul(lsm, wb) : lsm;
  ir::Value* picked = e.sum(e.where_zero(hit, lw), cd);
  ir::Value* smooth = nullptr;  // -sum_c w[c] * log_softmax[i, c], 0 where ignored
  if (ls > 0) smooth = e.where_zero(valid, e.neg(e.sum(lw, cd)));
  const double uniform = ls / static_cast<double>(classes);
  // (1 - ls) * a + ls / C * b, the final value.
  auto mix = [&](ir::Value* a, ir::Value* b) {
    return e.op("aten.add.Tensor",
                {tensor_arg("self", e.scale(a, 1 - ls)), tensor_arg("other", e.scale(b, uniform))},
                true);
  };
  if (none) {
    if (!smooth) return e.where_zero(valid, e.neg(picked), true);
    return mix(e.where_zero(valid, e.neg(picked)), smooth);
  }
  ir::Value* nll = e.where_zero(valid, e.neg(picked));
  const bool plain_last = !smooth && !mean;
  ir::Value* nll_red = e.sum(nll, -1, plain_last);
  if (plain_last) return nll_red;
  ir::Value* smooth_red = smooth ? e.sum(smooth, -1) : nullptr;
  if (mean) {
    // Divided by the sum of w[t_i] over the targets that are not ignored (their count without
    // weights); all ignored gives 0 / 0 = NaN, like torch.
    ir::Value* wt = wb ? e.where_zero(valid, e.sum(e.where_zero(hit, wb), cd))
                       : e.op("aten._to_copy.default",
                              {tensor_arg("self", valid), dtype_arg("dtype", x->type.dtype, true)});
    ir::Value* denom = e.sum(wt, -1);
    auto div = [&](ir::Value* a, bool last) {
      return e.op("aten.div.Tensor", {tensor_arg("self", a), tensor_arg("other", denom)}, last);
    };
    if (!smooth) return div(nll_red, true);
    nll_red = div(nll_red, false);
    smooth_red = div(smooth_red, false);
  }
  return mix(nll_red, smooth_red);
}

/// Whether the pass rewrites `n`: Decompose rows, and batch_norm in training.
bool decomposed(const ir::Node& n) {
  return n.schema && (n.schema->lowering == ir::Lowering::kDecompose || batch_norm_in_training(n));
}

/// The multi-output decompositions, tried in turn (empty: `n` is none of theirs).
std::vector<ir::Value*> decompose_multi(ir::Graph& g, const ir::Node& n, const ValueMap& in) {
  std::vector<ir::Value*> outs = decompose_reduction(g, n, in);
  if (outs.empty()) outs = decompose_backward(g, n, in);
  if (outs.empty()) outs = decompose_norm_backward(g, n, in);
  return outs;
}

}  // namespace

int decompose_losses(std::unique_ptr<ir::Graph>& graph) {
  int count = 0;
  for (const ir::Node* n : graph->nodes()) count += decomposed(*n);
  if (count == 0) return 0;
  GraphRebuilder b(*graph);
  const std::function<ir::Value*(ir::Value*)> remap = [&b](ir::Value* v) { return b.remap(v); };
  for (const ir::Node* n : graph->nodes()) {
    if (n->target == kCrossEntropy && !n->outputs.empty() && n->outputs[0])
      b.bind(n->outputs[0], decompose_cross_entropy(b.graph(), *n, remap));
    else if (n->target == kVectorNorm && !n->outputs.empty() && n->outputs[0])
      b.bind(n->outputs[0], decompose_vector_norm(b.graph(), *n, remap));
    else if (n->target == kGroupNorm && !n->outputs.empty() && n->outputs[0])
      b.bind(n->outputs[0], decompose_group_norm(b.graph(), *n, remap));
    else if (n->target == kWeightNorm && !n->outputs.empty() && n->outputs[0])
      b.bind(n->outputs[0], decompose_weight_norm(b.graph(), *n, remap));
    else if (auto outs = decomposed(*n) ? decompose_multi(b.graph(), *n, remap)
                                        : std::vector<ir::Value*>{};
             !outs.empty())
      for (size_t i = 0; i < outs.size() && i < n->outputs.size(); ++i) {
        if (n->outputs[i] && outs[i]) b.bind(n->outputs[i], outs[i]);
      }
    else
      b.copy(*n);
  }
  auto g = b.finish();
  graph = std::move(g);
  return count;
}

}  // namespace anvil::passes
