// Text printer for ir::Graph and structural graph equality. The grammar of the text is
// documented at the top of ir/parser.h; parse_graph(print_graph(g)) gives a graph equal to g
// (graphs_equal), and printing that graph again gives the same text.
#pragma once

#include <string>
#include <vector>

#include "core/symint.h"
#include "ir/graph.h"

namespace anvil::ir {

/// What print_graph writes besides the signature, symbols and nodes.
struct PrintOptions {
  /// Print Graph::attributes (torch_version, archive path, ...) as an `attributes { }` block.
  bool attributes = true;
};

/// The whole graph as text (see parser.h for the grammar). Constants and node metadata are not
/// part of the text.
std::string print_graph(const Graph& graph, const PrintOptions& options = {});

/// One node as one line of text, without indentation or newline:
/// `%linear: f32[s77, 512] = aten.linear.default(input=%x, weight=%p_l1_weight)`.
std::string print_node(const Node& node);

/// A tensor type: `f32[s77, 256]`, with `{strides}` when they are not the contiguous ones and
/// `@device` when the device is not the default CPU.
std::string print_type(const TensorType& type);

/// The declared type of a value: a tensor type, `SymInt(expr)`, `SymFloat` or `SymBool`.
std::string print_value_type(const Value& value);

/// The value part of one argument (`%x`, `[1, 2]`, `SymInt[%s0, 4]`, `f32`, `1.0`, ...).
std::string print_arg_value(const Arg& arg);

/// Shortest decimal text that reads back as exactly `v`, always recognisable as a float
/// ("1.0", "1e-06", "0.10000000000000001" never; "0.1"), or "inf", "-inf", "nan".
std::string format_float(double v);

/// `"text"` with `"`, `\` and control bytes escaped (\" \\ \n \t \r \xHH).
std::string quote_string(const std::string& s);

/// Text name of a torch.export Layout code ("torch.strided" for 7), or null for other codes
/// (printed as `layout(N)`).
const char* layout_name(int64_t code);
/// Text name of a torch.export MemoryFormat code ("torch.contiguous_format" for 1), or null for
/// other codes (printed as `memory_format(N)`).
const char* memory_format_name(int64_t code);
/// Device text: "cpu", "cpu:0", "cuda", "cuda:1" (unlike Device::str, keeps a CPU index).
std::string device_text(const Device& device);

/// Strides of a contiguous (row-major) tensor with these sizes.
std::vector<SymInt> contiguous_strides(const std::vector<SymInt>& sizes);

/// Structural equality of two graphs: signature (input and output specs with values, types,
/// targets), symbol ranges, attributes, and every node (target, schema, name, outputs with their
/// types, arguments with their kinds and payloads, values compared by name). Empty strides equal
/// the contiguous strides. Constants and node metadata are not compared. On a difference,
/// returns false and, when `diff` is given, stores a description of the first one.
bool graphs_equal(const Graph& a, const Graph& b, std::string* diff = nullptr);

}  // namespace anvil::ir
