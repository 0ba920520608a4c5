// OpSchema: what anvil knows about one export target (name, category, arity, shape rule,
// reference kernel), the registry that finds schemas by name, and KernelContext, the
// resolved runtime arguments a reference kernel reads.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace anvil::ir {

enum class OpCategory {
  kPointwise,
  kReduction,
  kView,
  kExtern,
  kCollective,
  kControlFlow,
  kCreation,  // makes a new tensor from sizes and values (arange, full, zeros)
  kSym,       // computes on symbolic ints (sym_size, operator.mul)
  kMeta,      // checks or no-ops (_assert_tensor_metadata)
};

/// How the compiler lowers an op: the `lowering` column of src/ops/ops.def, which
/// passes/lower.cpp dispatches on.
enum class Lowering {
  kPointwise,      // loop-kernel expressions, fused with neighbours (passes/lower_pointwise.cpp)
  kReduction,      // reduction kernels (passes/lower_reduce.cpp)
  kView,           // strided views, or copies into one buffer (passes/lower_view.cpp)
  kCreation,       // tensors from sizes and values (passes/lower_pointwise.cpp)
  kGemm,           // a GemmStep (passes/lower_matmul.cpp)
  kInPlace,        // the pure op's lowering, stored into the mutated argument
  kExtern,         // an extern step: a runtime kernel (CPU) or a generated kernel (CUDA)
  kDataDependent,  // output sizes known at run time (passes/lower_dynamic.cpp)
  kDecompose,      // rewritten into other ops before lowering (passes/decompose_loss.cpp)
  kSym,            // symbolic-int arithmetic (aten.item: a run-time symbol)
  kMeta,           // checks and no-ops
  kCollective,     // collective steps (passes/collectives.cpp)
  kControlFlow,    // cond / while_loop / map (passes/lower_control.cpp)
  kNone,           // interpreter only: a compile lists every such node at once
};
/// "Pointwise", "Extern", ... (the spelling of ops.def).
const char* lowering_name(Lowering lowering);

/// A runtime argument or result: what a KernelContext holds per argument.
using RValue = std::variant<std::monostate, Tensor, std::vector<Tensor>,
                            std::vector<std::optional<Tensor>>, int64_t, double, bool, std::string,
                            std::vector<int64_t>, std::vector<double>, std::vector<bool>, DType,
                            Device>;

/// The arguments of one node, resolved to runtime values (SymInts evaluated), for a kernel.
/// Lookups are by the argument names the export uses; absent arguments take the defaults the
/// kernel passes; a missing required argument or a wrong kind raises Error naming the node.
class KernelContext {
 public:
  KernelContext(const Node& node, std::vector<RValue> args);

  const Node& node() const { return node_; }
  /// True when argument `name` is present and not None.
  bool has(const std::string& name) const;
  const Tensor& tensor(const std::string& name) const;
  std::optional<Tensor> opt_tensor(const std::string& name) const;
  std::vector<Tensor> tensors(const std::string& name) const;
  std::vector<std::optional<Tensor>> opt_tensors(const std::string& name) const;
  int64_t int_arg(const std::string& name) const;
  int64_t int_arg(const std::string& name, int64_t dflt) const;
  /// Accepts int, float or bool arguments.
  double float_arg(const std::string& name) const;
  double float_arg(const std::string& name, double dflt) const;
  bool bool_arg(const std::string& name, bool dflt) const;
  std::string string_arg(const std::string& name, const std::string& dflt) const;
  /// Int lists; a single int argument becomes a one-element list.
  std::vector<int64_t> ints(const std::string& name) const;
  std::vector<int64_t> ints(const std::string& name, const std::vector<int64_t>& dflt) const;
  std::optional<DType> dtype_arg(const std::string& name) const;
  std::optional<Device> device_arg(const std::string& name) const;
  /// True when the argument was a Python float (matters for type promotion of scalars).
  bool is_float_scalar(const std::string& name) const;
  /// The raw value (monostate when absent).
  const RValue& raw(const std::string& name) const;
  /// "node add_1 (aten.add.Tensor)".
  std::string where() const;
  /// Throws Error located at this node.
  [[noreturn]] void fail(const std::string& what, const std::string& expected,
                         const std::string& actual) const;

 private:
  const Node& node_;
  std::vector<RValue> args_;
};

/// Static-argument accessors for shape rules. Each throws Error naming the node when the
/// argument is missing (and no default is given) or has the wrong kind.
namespace shape_args {
/// Type of tensor argument `name`.
const TensorType& type(const Node& node, const std::string& name);
/// True when the argument is present and not None.
bool has(const Node& node, const std::string& name);
int64_t int_(const Node& node, const std::string& name, std::optional<int64_t> dflt = std::nullopt);
double float_(const Node& node, const std::string& name, std::optional<double> dflt = std::nullopt);
bool bool_(const Node& node, const std::string& name, bool dflt);
/// Int lists as SymInts (constants, or the symbolic value of a SymInt Value); a single int or
/// SymInt argument becomes a one-element list.
std::vector<SymInt> symints(const Node& node, const std::string& name,
                            std::optional<std::vector<SymInt>> dflt = std::nullopt);
/// One int that may be symbolic.
SymInt symint(const Node& node, const std::string& name, std::optional<SymInt> dflt = std::nullopt);
std::optional<DType> dtype(const Node& node, const std::string& name);
/// Types of a tensor-list argument (None entries give nullopt).
std::vector<std::optional<TensorType>> types(const Node& node, const std::string& name);
/// Throws Error located at the node.
[[noreturn]] void fail(const Node& node, const std::string& what, const std::string& expected,
                       const std::string& actual);
}  // namespace shape_args

using KernelFn = std::vector<RValue> (*)(KernelContext&);
/// Computes the output types of a node from its inputs' types and its attributes. Returns one
/// TensorType per tensor output (empty for ops that yield only SymInts). Throws Error at the node.
using ShapeFn = std::vector<TensorType> (*)(const Node&);

/// One row of the op table.
struct OpSchema {
  const char* name;      // "aten.add.Tensor"
  OpCategory category;
  int min_args;          // number of leading arguments that must be present
  int max_args;          // most arguments accepted
  int mutates_arg;       // index of the argument an in-place op writes, else -1
  ShapeFn shape;
  KernelFn kernel;
  Lowering lowering = Lowering::kNone;  // how the compiler lowers it
};

/// Schema for an export target (with or without the "torch.ops." prefix), or null.
const OpSchema* find_op(const std::string& target);
/// Every registered schema, in table order. Throws Error when no table is registered.
const std::vector<OpSchema>& all_ops();
/// Installs the op table. The ops layer (src/ops/registry.cpp, above this one) calls it at static
/// initialisation, so the IR parses targets without depending on the layer that defines them.
void register_op_table(const std::vector<OpSchema>* table);
/// Strips "torch.ops." so "torch.ops.aten.add.Tensor" becomes "aten.add.Tensor".
std::string canonical_target(const std::string& target);

}  // namespace anvil::ir
