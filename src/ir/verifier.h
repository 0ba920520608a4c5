// Graph verifier: structural and type checks that can run after the frontend, the parser and
// every pass. Each failure throws one Error naming the node and its op.
#pragma once

#include "ir/graph.h"

namespace anvil::ir {

/// What verify checks beyond the structure.
struct VerifyOptions {
  /// Run every node's shape rule and compare the result with the recorded output types (dtype
  /// and symbolic sizes). Shape rules that throw "not implemented yet" are skipped.
  bool check_types = true;
};

/// Checks, in graph order, and throws Error at the first failure:
///  - signature: every input spec's value is a graph input, every graph input has a spec, no
///    value is defined twice (as two inputs, an input and a node output, or two node outputs);
///  - every node has a schema matching its target;
///  - arity: min_args <= number of arguments <= max_args (explicit None arguments count), no
///    argument name repeats;
///  - dominance: every value a node reads is a graph input or an output of an earlier node;
///  - value kinds: tensor and tensor-list arguments refer to tensor values, SymInt arguments to
///    SymInt values; an output value's producer and index point back at its node;
///  - every output spec's value is defined in the graph;
///  - types (options.check_types): the schema's shape rule gives one type per tensor output slot
///    (null slots included) with equal dtype and sizes. Sizes are equal when structurally equal
///    or equal at 64 sample points of the symbols' ranges (SymInt does not simplify every
///    identity, e.g. FloorDiv(s0*s1, s1) or Min(128, s0) with s0 <= 128). The Error names the
///    node, the op, the output and both types (expected = the shape rule's, actual = recorded).
void verify(const Graph& graph, const VerifyOptions& options = {});

}  // namespace anvil::ir
