// Interpreter: runs an ir::Graph node by node with the reference kernels. The correctness
// oracle for every compiled path and `anvil run --interpret`.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "ir/op_schema.h"

namespace anvil::interp {

/// Executes a graph. Parameters, buffers and constants come from Graph::constants; buffers that
/// the graph mutates (in-place ops or buffer_mutation outputs) persist across run() calls in
/// this Interpreter's own copy of the state. The graph must outlive the interpreter.
/// Not thread-safe: one run at a time.
class Interpreter {
 public:
  explicit Interpreter(const ir::Graph& graph);

  /// Runs with the user inputs in signature order; returns the user outputs in order.
  /// Symbolic sizes are bound from the inputs' actual sizes and checked against their ranges;
  /// wrong count, dtype, rank, static dim or out-of-range symbolic dim raise Error naming the
  /// input, the dim, expected and actual. A float32 tensor is accepted (and converted) for a
  /// bfloat16 / float16 input. User outputs that alias the persistent state are copies; a
  /// user_input_mutation output is copied into the caller's input tensor.
  std::vector<Tensor> run(const std::vector<Tensor>& user_inputs);

  /// Current value of each parameter / buffer / constant by target name.
  const std::map<std::string, Tensor>& state() const { return state_; }
  /// The symbol values bound by the last run.
  const SymEnv& last_symbols() const { return symbols_; }

  /// Stride audit: when set, every node result whose graph type records strides (what PyTorch
  /// gave that value when the model was exported) is compared with the reference kernel's
  /// strides over the dims of size > 1, and each difference is appended to `*out` as
  /// "node (target) output k: strides [..], PyTorch [..]". Null turns it off.
  void audit_strides(std::vector<std::string>* out) { stride_audit_ = out; }

 private:
  /// Checks the user inputs against the signature, binds symbols_, and returns the tensors the
  /// graph will read (float32 inputs converted for 16-bit float slots).
  std::vector<Tensor> check_inputs(const std::vector<Tensor>& user_inputs);

  /// Runs a higher-order op (cond, while_loop) by running its subgraphs; returns its outputs.
  std::vector<ir::RValue> run_control_flow(const ir::Node& n, std::vector<ir::RValue> args);
  /// The interpreter of one subgraph (made on first use, kept for later runs).
  Interpreter& sub(const ir::Node& n, const std::string& arg);

  const ir::Graph& graph_;
  std::map<const ir::Graph*, std::unique_ptr<Interpreter>> subs_;
  std::map<std::string, Tensor> state_;
  SymEnv symbols_;
  std::vector<ir::Node*> nodes_;
  /// Indices into graph_.input_specs() of the inputs the caller passes, in order.
  std::vector<size_t> user_input_specs_;
  /// Per node: the values whose last reader it is (freed right after it runs).
  std::vector<std::vector<const ir::Value*>> free_after_;
  std::vector<std::string>* stride_audit_ = nullptr;
};

}  // namespace anvil::interp
