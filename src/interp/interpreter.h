// Interpreter: runs an ir::Graph node by node with the reference kernels. The correctness
// oracle for every compiled path and `anvil run --interpret`.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace anvil::interp {

/// Executes a graph. Parameters, buffers and constants come from Graph::constants; buffers that
/// the graph mutates (in-place ops or buffer_mutation outputs) persist across run() calls in
/// this Interpreter's own copy of the state. Not thread-safe: one run at a time.
class Interpreter {
 public:
  explicit Interpreter(const ir::Graph& graph);

  /// Runs with the user inputs in signature order; returns the user outputs in order.
  /// Symbolic sizes are bound from the inputs' actual sizes and checked against their ranges;
  /// wrong count, dtype, rank, static dim or out-of-range symbolic dim raise Error naming the
  /// input, the dim, expected and actual.
  std::vector<Tensor> run(const std::vector<Tensor>& user_inputs);

  /// Current value of each parameter / buffer / constant by target name.
  const std::map<std::string, Tensor>& state() const { return state_; }
  /// The symbol values bound by the last run.
  const SymEnv& last_symbols() const { return symbols_; }

 private:
  const ir::Graph& graph_;
  std::map<std::string, Tensor> state_;
  SymEnv symbols_;
};

}  // namespace anvil::interp
