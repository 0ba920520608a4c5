// Building blocks of the graph-level decompositions (decompose_loss.cpp, decompose_norm.cpp):
// argument builders and Emitter, which appends the nodes replacing one source node.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"
#include "ir/op_schema.h"

namespace anvil::passes::detail {

/// Argument builders for the new nodes: a tensor, int, float, int list, bool or dtype argument
/// called `name`.
inline ir::Arg tensor_arg(const std::string& name, ir::Value* v) {
  ir::Arg a;
  a.name = name;
  a.kind = ir::Arg::Kind::kTensor;
  a.value = v;
  return a;
}

inline ir::Arg int_arg(const std::string& name, int64_t i) {
  ir::Arg a;
  a.name = name;
  a.kind = ir::Arg::Kind::kInt;
  a.i = i;
  return a;
}

inline ir::Arg float_arg(const std::string& name, double f) {
  ir::Arg a;
  a.name = name;
  a.kind = ir::Arg::Kind::kFloat;
  a.f = f;
  return a;
}

inline ir::Arg ints_arg(const std::string& name, std::vector<int64_t> ints) {
  ir::Arg a;
  a.name = name;
  a.kind = ir::Arg::Kind::kInts;
  a.ints = std::move(ints);
  return a;
}

inline ir::Arg bool_arg(const std::string& name, bool b) {
  ir::Arg a;
  a.name = name;
  a.kind = ir::Arg::Kind::kBool;
  a.b = b;
  return a;
}

inline ir::Arg dtype_arg(const std::string& name, DType dt, bool kwarg) {
  ir::Arg a;
  a.name = name;
  a.kind = ir::Arg::Kind::kScalarType;
  a.dtype = dt;
  a.kwarg = kwarg;
  return a;
}

/// Appends the nodes of one decomposition to a graph: each new node is named after the node it
/// replaces (NAME_ce<k>, the last one NAME itself), carries its metadata, and its output type
/// comes from the op table's shape rule.
class Emitter {
 public:
  Emitter(ir::Graph& graph, const ir::Node& source) : graph_(graph), source_(source) {}

  /// Appends `target(args)` and returns its output; `last` names it like the replaced output.
  ir::Value* op(const std::string& target, std::vector<ir::Arg> args, bool last = false) {
    return op_out(target, std::move(args), last ? 0 : -1);
  }

  /// Appends `target(args)`, naming its output like the replaced node's output `out` (when that
  /// output exists; -1: an intermediate name).
  ir::Value* op_out(const std::string& target, std::vector<ir::Arg> args, int out) {
    auto node = std::make_unique<ir::Node>();
    node->schema = ir::find_op(target);
    ANVIL_INTERNAL_ASSERT(node->schema != nullptr, "decompose_losses: unknown op " + target);
    const bool named = out >= 0 && static_cast<size_t>(out) < source_.outputs.size() &&
                       source_.outputs[static_cast<size_t>(out)] != nullptr;
    const std::string name = named ? source_.outputs[static_cast<size_t>(out)]->name
                                   : source_.name + "_ce" + std::to_string(next_++);
    node->name = name;
    node->target = target;
    node->args = std::move(args);
    node->metadata = source_.metadata;
    const std::vector<ir::TensorType> types = node->schema->shape(*node);
    ANVIL_INTERNAL_ASSERT(types.size() == 1, "decompose_losses: " + target + " has no type");
    ir::Value* v = graph_.new_value(name);
    v->type = types[0];
    node->outputs.push_back(v);
    graph_.append(std::move(node));
    return v;
  }

  /// Shorthands for the ops the decomposition uses.
  ir::Value* unsqueeze(ir::Value* x, int64_t dim) {
    return op("aten.unsqueeze.default", {tensor_arg("self", x), int_arg("dim", dim)});
  }
  /// sum over `dim` (keepdim false), or over everything when `dim` < 0.
  ir::Value* sum(ir::Value* x, int64_t dim, bool last = false) {
    if (dim < 0) return op("aten.sum.default", {tensor_arg("self", x)}, last);
    return op("aten.sum.dim_IntList",
              {tensor_arg("self", x), ints_arg("dim", {dim}), bool_arg("keepdim", false)}, last);
  }
  ir::Value* neg(ir::Value* x, bool last = false) {
    return op("aten.neg.default", {tensor_arg("self", x)}, last);
  }
  ir::Value* mul(ir::Value* a, ir::Value* b) {
    return op("aten.mul.Tensor", {tensor_arg("self", a), tensor_arg("other", b)});
  }
  ir::Value* scale(ir::Value* a, double s) {
    return op("aten.mul.Scalar", {tensor_arg("self", a), float_arg("other", s)});
  }
  /// where(cond, x, 0.0).
  ir::Value* where_zero(ir::Value* cond, ir::Value* x, bool last = false) {
    return op("aten.where.ScalarOther",
              {tensor_arg("condition", cond), tensor_arg("self", x), float_arg("other", 0.0)},
              last);
  }

 private:
  ir::Graph& graph_;
  const ir::Node& source_;
  int next_ = 0;
};

/// Maps a value of the graph being rebuilt to the new graph's.
using ValueMap = std::function<ir::Value*(ir::Value*)>;

/// The decompositions of decompose_norm.cpp: each appends the nodes replacing `n` (whose
/// inputs `in` maps) to `g` and returns the value replacing its output.
ir::Value* decompose_vector_norm(ir::Graph& g, const ir::Node& n, const ValueMap& in);
ir::Value* decompose_group_norm(ir::Graph& g, const ir::Node& n, const ValueMap& in);
ir::Value* decompose_weight_norm(ir::Graph& g, const ir::Node& n, const ValueMap& in);

/// The decompositions of decompose_reduce.cpp (max.dim / min.dim, the variance family,
/// logsumexp, native_group_norm, native_dropout): appends the nodes replacing `n` and returns
/// one value per output of `n` (null for outputs nothing reads), or an empty vector when `n` is
/// not one of them.
std::vector<ir::Value*> decompose_reduction(ir::Graph& g, const ir::Node& n, const ValueMap& in);

/// The decompositions of decompose_backward.cpp (convolution_backward, the pooling gradients,
/// embedding_dense_backward) and decompose_norm_backward.cpp (the norm gradients and training
/// batch norm), with decompose_reduction's contract.
std::vector<ir::Value*> decompose_backward(ir::Graph& g, const ir::Node& n, const ValueMap& in);
std::vector<ir::Value*> decompose_norm_backward(ir::Graph& g, const ir::Node& n,
                                                const ValueMap& in);
/// True for batch_norm.default with training=True: its row lowers inference batch norm, so
/// the training form is decomposed (decompose_norm_backward.cpp) though its row says Reduction.
bool batch_norm_in_training(const ir::Node& n);

}  // namespace anvil::passes::detail
