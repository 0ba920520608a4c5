// In-place ops by the general rule: PyTorch names the in-place form of op `aten.X.O` as
// `aten.X_.O` (silu_, hardswish_, dropout_, fill_.Tensor, add_.Tensor, ...). An export keeps
// them when no decomposition runs. Rather than one table row per in-place op, the importers
// (the .pt2 frontend and the text IR parser) write such a node as the functional op plus a
// write into the mutated tensor:
//     %y = aten.X_.O(self=%x, ...)   ->   %y_value = aten.X.O(self=%x, ...)
//                                          %y = aten.copy_.default(self=%x, src=%y_value)
// which is what PyTorch's functionalization does. Only ops the table lacks take this path;
// copy_, transpose_ (a metadata change) and detach_ keep rows of their own.
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"
#include "ir/op_schema.h"

namespace anvil::ir {

/// For "aten.X_.O" with no row of its own, the schema of "aten.X.O" when the table has it as a
/// functional op; otherwise null.
const OpSchema* inplace_functional(const std::string& target);

/// Appends in-place `node` (target "aten.X_.O", outputs: the one tensor it returns, its first
/// argument the tensor it writes) to `g` as `functional` plus aten.copy_.default. The
/// functional result is a new value named after the node's output ("<out>_value", made unique);
/// its type comes from the functional op's shape rule. Throws Error at the node when its first
/// argument is not a tensor, it does not return one tensor, or the functional result's dtype
/// cannot be written into the tensor (a float result into an integer tensor, as PyTorch
/// refuses).
Node* append_inplace(Graph& g, std::unique_ptr<Node> node, const OpSchema& functional);

/// out= forms by the same rule: `aten.X.O` with no row of its own that writes its result into an
/// `out` argument (atan2.out, add.out, sum.IntList_out, ...) is imported as its functional
/// overload plus a write into `out`:
///     %y = aten.X.out(a, b, out=%o)   ->   %y_value = aten.X.F(a, b)
///                                           %y = aten.copy_.default(self=%o, src=%y_value)
/// For "aten.X.O", the functional row whose arguments are the out form's minus `out`, by
/// PyTorch's naming (O_out -> O; out -> default, else Tensor; the few irregular names of
/// PyTorch 2.11's schemas: sum.IntList_out -> sum.dim_IntList, mean.out -> mean.dim, ...);
/// null when there is none or the table has a row for the target.
const OpSchema* out_functional(const std::string& target);

/// Appends out-form `node` (its `out` argument the tensor written, one tensor output) to `g` as
/// `functional` plus aten.copy_.default into `out`, as append_inplace. Where the result has other
/// sizes than `out`, PyTorch resizes `out` to them: the result (cast to out's dtype) becomes the
/// node's value, refused when `out` is a graph input (anvil does not resize a caller's tensor).
/// Throws Error at the node when there is no tensor `out`, or the result's dtype cannot be cast
/// to out's (a float result into an integer tensor, as PyTorch refuses).
Node* append_out_form(Graph& g, std::unique_ptr<Node> node, const OpSchema& functional);

}  // namespace anvil::ir
