// The graph IR: Values produced by Nodes, Nodes in topological order, a Graph that owns both,
// plus the export signature (parameters, buffers, constants, user inputs/outputs, mutations).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/symint.h"
#include "core/tensor.h"

namespace anvil::ir {

struct OpSchema;
class Node;

/// Static type of a tensor Value: dtype, symbolic sizes and strides, device.
struct TensorType {
  DType dtype = DType::kFloat32;
  std::vector<SymInt> sizes;
  std::vector<SymInt> strides;  // may be empty = contiguous / unknown
  Device device;
  std::string str() const;  // "f32[s77, 256]"
  bool operator==(const TensorType& o) const;
};

/// What kind of thing a Value carries.
enum class ValueKind { kTensor, kSymInt, kSymFloat, kSymBool };

/// An SSA value: a graph input or one output of a node.
class Value {
 public:
  std::string name;
  ValueKind kind = ValueKind::kTensor;
  TensorType type;            // kTensor
  SymInt sym;                 // kSymInt: its symbolic value, when known
  Node* producer = nullptr;   // null for graph inputs
  int output_index = 0;
  bool is_tensor() const { return kind == ValueKind::kTensor; }
};

/// An integer argument that is either a constant or a reference to a SymInt Value.
struct IntRef {
  int64_t constant = 0;
  Value* value = nullptr;  // when non-null, the int comes from this value at run time
  bool operator==(const IntRef& o) const = default;
};

/// One named argument of a node, mirroring torch.export's Argument union.
struct Arg {
  enum class Kind {
    kNone,
    kTensor,        // value
    kTensors,       // values
    kOptTensors,    // values, null entries are None
    kInt,           // i
    kFloat,         // f
    kBool,          // b
    kString,        // s
    kInts,          // ints
    kFloats,        // floats
    kBools,         // bools
    kSymInt,        // symints[0]
    kSymInts,       // symints
    kScalarType,    // dtype
    kDevice,        // device
    kLayout,        // i (torch.export Layout code)
    kMemoryFormat,  // i (torch.export MemoryFormat code)
    kGraph,         // i: index into Node::subgraphs; s: the subgraph's name (true_graph_0)
  };
  std::string name;
  Kind kind = Kind::kNone;
  bool kwarg = false;  // torch.export ArgumentKind: keyword-only
  Value* value = nullptr;
  std::vector<Value*> values;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<bool> bools;
  std::vector<IntRef> symints;
  DType dtype = DType::kFloat32;
  Device device;
};

class Graph;

/// One operation. `outputs` are the values it defines, in order; `outputs_as_list` marks ops
/// that return a list of tensors (split, unbind) rather than a tuple or single tensor.
class Node {
 public:
  const OpSchema* schema = nullptr;
  std::string name;    // the export's node name
  std::string target;  // "aten.add.Tensor" (torch.ops. prefix stripped)
  std::vector<Arg> args;
  std::vector<Value*> outputs;
  bool outputs_as_list = false;
  std::map<std::string, std::string> metadata;  // stack_trace, nn_module_stack, ...
  /// Subgraphs of a higher-order op (cond branches, while_loop condition and body), referenced
  /// by kGraph arguments. Each has its own value names; its inputs are user inputs in order.
  std::vector<std::shared_ptr<Graph>> subgraphs;

  /// The argument called `name`, or null.
  const Arg* arg(const std::string& name) const;
  /// Every tensor Value this node reads (tensor, tensor-list and symint references).
  std::vector<Value*> input_values() const;
  /// The subgraph of kGraph argument `name`; throws Error naming the node when absent.
  const Graph& subgraph(const std::string& name) const;
};

/// Role of each graph input in the export signature.
enum class InputKind { kUserInput, kParameter, kBuffer, kConstant, kCustomObj, kToken };
/// Role of each graph output.
enum class OutputKind { kUserOutput, kBufferMutation, kUserInputMutation, kLossOutput,
                        kGradient, kToken, kParameterMutation };

struct InputSpec {
  InputKind kind = InputKind::kUserInput;
  Value* value = nullptr;
  std::string target;       // parameter / buffer / constant name ("l1.weight"); empty for user inputs
  bool persistent = true;   // buffers
  std::optional<int64_t> constant_int;  // a user input that is a constant int / float / etc.
};

struct OutputSpec {
  OutputKind kind = OutputKind::kUserOutput;
  Value* value = nullptr;   // null when the output is a constant (see constant_output)
  std::string target;       // the mutated buffer / input name for mutations
};

/// A graph: owns its Values and Nodes. Nodes are kept in topological order.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Creates a graph input (placeholder) value.
  Value* add_input(const std::string& name, TensorType type, InputSpec spec = {});
  /// Creates a value not yet attached to anything (the frontend and parser fill it in).
  Value* new_value(const std::string& name, ValueKind kind = ValueKind::kTensor);
  /// Appends a node; it takes ownership. Sets each output's producer and index.
  Node* append(std::unique_ptr<Node> node);
  /// Removes a node that nothing reads (its outputs must be unused).
  void erase(Node* node);

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<InputSpec>& input_specs() const { return input_specs_; }
  std::vector<InputSpec>& input_specs() { return input_specs_; }
  std::vector<OutputSpec>& output_specs() { return output_specs_; }
  const std::vector<OutputSpec>& output_specs() const { return output_specs_; }
  /// Nodes in topological order.
  std::vector<Node*> nodes() const;
  size_t num_nodes() const { return nodes_.size(); }
  /// Value by name, or null.
  Value* find_value(const std::string& name) const;

  /// Weights: parameter / buffer / constant name (InputSpec::target) -> tensor.
  std::map<std::string, Tensor> constants;
  /// Ranges of the symbols that appear in symbolic sizes.
  SymRanges symbol_ranges;
  /// Free-form facts about the source (torch_version, schema_version, archive path).
  std::map<std::string, std::string> attributes;

 private:
  std::deque<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_;
  std::vector<InputSpec> input_specs_;
  std::vector<OutputSpec> output_specs_;
  std::map<std::string, Value*> by_name_;
};

const char* input_kind_name(InputKind k);
const char* output_kind_name(OutputKind k);
InputKind input_kind_from_name(const std::string& s);    // throws Error
OutputKind output_kind_from_name(const std::string& s);  // throws Error

}  // namespace anvil::ir
