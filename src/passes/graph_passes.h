// Graph-level passes over ir::Graph (ATen level, before lowering to loop kernels). Each is a
// function that rewrites the graph in place; ir::verify can run after any of them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "ir/graph.h"

namespace anvil::passes {

/// A deep copy of `graph`: values (same names), nodes, signature, constants (shared tensors),
/// symbol ranges, attributes and node metadata.
std::unique_ptr<ir::Graph> clone_graph(const ir::Graph& graph);

/// Rebuilds a graph node by node, for clone_graph and for passes that replace some nodes by
/// others (decompose_losses): the inputs are copied at construction; each node of the source is
/// then either copied (`copy`) or replaced by nodes the pass appends to graph(), binding the old
/// result to its replacement (`bind`); finish() adds the outputs, constants, symbol ranges and
/// attributes and returns the new graph.
class GraphRebuilder {
 public:
  explicit GraphRebuilder(const ir::Graph& src);
  /// The graph being built.
  ir::Graph& graph() { return *g_; }
  /// The new value standing for source value `v` (null stays null); an internal error when `v`
  /// has none yet (read before defined).
  ir::Value* remap(ir::Value* v) const;
  /// Makes `now` stand for source value `old`.
  void bind(const ir::Value* old, ir::Value* now) { map_[old] = now; }
  /// Appends a copy of source node `n` (arguments remapped, outputs new values of the same names).
  void copy(const ir::Node& n);
  /// The finished graph (the rebuilder is spent).
  std::unique_ptr<ir::Graph> finish();

 private:
  const ir::Graph& src_;
  std::unique_ptr<ir::Graph> g_;
  std::map<const ir::Value*, ir::Value*> map_;
};

/// Replaces every read of `from` (node arguments, SymInt references, output specs) by `to`.
void replace_all_uses(ir::Graph& graph, ir::Value* from, ir::Value* to);

/// Number of reads of each value (node arguments and output specs).
std::map<const ir::Value*, int> use_counts(const ir::Graph& graph);

/// True when the node must stay even if nothing reads its outputs: in-place writes,
/// collectives, runtime assertions.
bool has_side_effects(const ir::Node& node);

/// Dead-code elimination: removes nodes without side effects whose outputs nobody reads.
/// Returns the number of nodes removed.
int dce(ir::Graph& graph);

/// Common-subexpression elimination: a node with the same target and the same arguments as an
/// earlier one (and no side effects, and no argument that is ever written in place) is replaced
/// by it. Returns the number of nodes replaced (they are removed).
int cse(ir::Graph& graph);

/// What constant folding did.
struct FoldResult {
  int nodes_folded = 0;                  // nodes removed (evaluated at compile time, or dead)
  std::set<std::string> folded_targets;  // InputSpec::target of each new "folded" constant
};

/// Constant folding at compile time: nodes whose inputs are all constants (parameters, buffers
/// and tensor constants that no node writes, static shapes) run through their reference
/// kernels; each computed value that a non-constant node (or an output) reads becomes a new
/// graph input of kind tensor_constant whose target is "folded.<value name>" (listed in the
/// result; the manifest gives them kind "folded"). Views of constants stay views (no copy).
/// Values made only from creation ops larger than `max_creation_bytes` are not materialised.
FoldResult fold_constants(ir::Graph& graph, int64_t max_creation_bytes = 1 << 20);

/// Folds inference batch_norm into a preceding conv2d / convolution (not transposed) or linear
/// whose weight, bias and the norm's parameters are constants and whose output only the norm
/// reads: weight' = weight * gamma / sqrt(var + eps) per output channel, bias' = (bias - mean) *
/// gamma / sqrt(var + eps) + beta. The new weight and bias are folded constants (added to
/// `folded`). Returns the number of norms folded.
int fold_batch_norm(ir::Graph& graph, std::set<std::string>& folded);

/// An inference batch_norm (and a relu / relu_ after it) whose input is a concatenation along
/// the channels (dim 1) that only it reads, with the graph's unwritten weights as parameters,
/// becomes a norm (and relu) per concatenated part over its slice of the parameters, then the
/// concatenation of the results: each part is read once and written normalized into its slice
/// (DenseNet) instead of copied, read and written again. Bit for bit the same values.
/// Rebuilds `graph` when it has such a norm; ANVIL_NORM_THROUGH_CAT=0 turns it off. Returns
/// the number of norms rewritten. The pipeline runs it where PipelineOptions::norm_through_cat
/// (the CPU targets; not CUDA) unless ANVIL_NORM_THROUGH_CAT says otherwise.
int norm_through_cat(std::unique_ptr<ir::Graph>& graph);

/// Symbolic shape propagation with the op table's shape rules: every node's output types are
/// computed in graph order; a value whose recorded dtype or rank disagrees with its rule (or a
/// value a pass created without a type) takes the rule's type. Recorded sizes of the same rank
/// stay (the export simplified them with the symbols' ranges: Min(128, s27) is s27 when
/// s27 <= 128); ir::verify checks both agree. Rules that fail leave the recorded types.
/// Returns the number of values whose types changed.
int propagate_shapes(ir::Graph& graph);

/// Replaces every aten.cross_entropy_loss.default by ops the lowering fuses (passes/
/// decompose_loss.cpp): lsm = log_softmax(self, class dim); probability targets give
/// -sum(lsm * t' * w) with t' = t * (1 - ls) + ls / C (mean: / (numel / C)); class-index targets
/// select -w[t] * lsm[t] with a one-hot mask (arange == target) and zero ignored targets (mean:
/// / sum of w[t] over the kept targets), mixed with the smoothing term as
/// (1 - ls) * nll + ls / C * smooth. Rebuilds `graph` only when it has such a node; throws Error
/// naming the node for variants it cannot express (a symbolic class count). Returns the number
/// of nodes decomposed. aten.linalg_vector_norm.default is decomposed here too: |x| reduced by
/// amax / amin (ord +-inf), a count of non-zeros (0), sum (1), sqrt of the sum of squares (2) or
/// (sum |x|^p)^(1/p), in float32 for 16-bit inputs. So are the gradient ops and training batch
/// norm of training exports (decompose_backward.cpp, decompose_norm_backward.cpp).
int decompose_losses(std::unique_ptr<ir::Graph>& graph);

/// Every node of `graph` (its subgraphs included) whose op has no compiled lowering: a row with
/// lowering None, or Decompose left undecomposed. One line each: "node (target): why".
std::vector<std::string> unlowered_nodes(const ir::Graph& graph);

/// Names of the graph inputs that some node writes in place or that a buffer / parameter
/// mutation output targets (their constants are mutable).
std::set<const ir::Value*> mutated_inputs(const ir::Graph& graph);

}  // namespace anvil::passes
