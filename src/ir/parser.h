// Parser for the text form of ir::Graph that print_graph (ir/printer.h) writes.
//
// Example:
//
//   graph {
//     attributes {
//       torch_version = "2.11.0+cu130"
//     }
//     symbols {
//       s77 in [1, 64]
//     }
//     inputs {
//       %p_l1_weight: f32[512, 256] = parameter "l1.weight"
//       %b_running: f32[512] = buffer "running" persistent
//       %c_scale: f32[] = tensor_constant "scale"
//       %x: f32[s77, 256] = user_input
//     }
//     %sym_size_int_1: SymInt(s77) = aten.sym_size.int(self=%x, dim=0)
//     %linear: f32[s77, 512] = aten.linear.default(input=%x, weight=%p_l1_weight)
//     %view: f32[s77, 2, 256] = aten.view.default(self=%linear,
//                                                 size=SymInt[%sym_size_int_1, 2, 256])
//     ^unbind: [%getitem: f32[s77, 256], %getitem_1: f32[s77, 256]] =
//         aten.unbind.int(self=%view, dim=1)
//     %arange: i64[8] = aten.arange.default(end=8, *dtype=i64, *device=device(cpu),
//                                           *pin_memory=False)
//     %add: f32[s77, 512] = aten.add.Tensor(self=%linear, other=1.0)
//     outputs {
//       buffer_mutation "running" %new_running
//       user_output %add
//     }
//   }
//
// Grammar (free-form: whitespace and newlines separate tokens; `#` starts a comment to the end
// of the line):
//
//   graph      := 'graph' '{' [attributes] [symbols] [inputs] node* [outputs] '}'
//   attributes := 'attributes' '{' (name '=' string)* '}'           -- Graph::attributes
//   symbols    := 'symbols' '{' (name 'in' '[' bound ',' bound ']')* '}'
//   bound      := int | 'inf' | '-inf'                               -- inf = SymRange::kSymMax
//   inputs     := 'inputs' '{' input* '}'                            -- input specs, in order
//   input      := result '=' input_kind [string] ['persistent' | 'non_persistent'] ['constant' int]
//   input_kind := 'user_input' | 'parameter' | 'buffer' | 'tensor_constant' | 'custom_obj'
//               | 'token'                                            -- string = InputSpec::target
//   outputs    := 'outputs' '{' (output_kind [string] (ref | 'None'))* '}'
//   output_kind:= 'user_output' | 'buffer_mutation' | 'user_input_mutation' | 'loss_output'
//               | 'gradient_to_parameter' | 'token' | 'parameter_mutation'
//   node       := ['^' name ':'] [results '='] target '(' [arg (',' arg)*] ')'
//   results    := result                       -- one output (Node::outputs_as_list false)
//               | '(' [result (',' result)*] ')'  -- a tuple of outputs
//               | '[' [result (',' result)*] ']'  -- a list of outputs (outputs_as_list true)
//   result     := '%' name ':' vtype | '_'     -- '_': an output slot with no value (null)
//   vtype      := ttype | 'SymInt' '(' symexpr ')' | 'SymFloat' | 'SymBool'
//   ttype      := dtype '[' [symexpr (',' symexpr)*] ']' ['{' strides '}'] ['@' device]
//   arg        := ['*'] name '=' value        -- '*': keyword-only argument (Arg::kwarg)
//   value      := 'None'                                        -- kNone
//               | ref                                           -- kTensor
//               | int | float | 'True' | 'False' | string       -- kInt kFloat kBool kString
//               | '[' [int (',' int)*] ']'                      -- kInts (also 'int[' ... ']')
//               | '[' float (',' float)* ']' | 'float[' ']'     -- kFloats
//               | '[' bool (',' bool)* ']' | 'bool[' ']'        -- kBools
//               | '[' ref (',' ref)* ']' | 'Tensor[' ']'        -- kTensors
//               | 'Tensor?[' [(ref | 'None') (',' ...)*] ']'    -- kOptTensors
//               | 'SymInt(' (ref | int) ')'                     -- kSymInt
//               | 'SymInt[' [(ref | int) (',' ...)*] ']'        -- kSymInts
//               | dtype                                         -- kScalarType: f32, bf16, i64,
//               bool | 'device(' device ')'                          -- kDevice: cpu, cpu:0, cuda,
//               cuda:1 | 'torch.strided' | 'torch.sparse_coo' | ... | 'layout(' int ')'        --
//               kLayout | 'torch.contiguous_format' | 'torch.channels_last' |
//               'torch.channels_last_3d' | 'torch.preserve_format' | 'memory_format(' int ')' --
//               kMemoryFormat
//               (the parser also reads tags on non-empty lists, an untagged list holding None as
//               kOptTensors, ints mixed with floats as kFloats, and torch dtype names: float32)
//   ref        := '%' name
//   name       := [A-Za-z0-9_]+ | string       -- value, node, argument and symbol names
//   target     := [A-Za-z0-9_.]+ | string      -- "aten.add.Tensor"
//   int        := ['-'] digits                 -- 64-bit
//   float      := a decimal with '.' or an exponent ("1.0", "1e-06", "-2.5"), 'inf', '-inf',
//                 'nan'; printed with the fewest digits that read back exactly
//   string     := '"' chars '"'                -- escapes \" \\ \n \t \r \xHH
//   symexpr    := SymInt::str() text: s77, 2*s77 + 1, (s0//2), Max(s0, 4)
//   dtype      := dtype_name() short names: f32, f16, bf16, f64, i64, i32, i16, i8, u8, bool, ...
//
// The node's name (Node::name) defaults to its first output's name ("" without outputs); `^name:`
// is written only when it differs. Strides are written only when they differ from the
// contiguous ones (graphs_equal treats empty strides as contiguous); `@device` only when the
// device is not the default CPU. Constants and node metadata are not part of the text.
//
// Values may be used before the node that defines them (the verifier reports that); a name that
// is never defined, or defined twice, is an error.
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"

namespace anvil::ir {

/// How parse_graph reads its text.
struct ParseOptions {
  /// Used in error locations: "<source>:LINE:COL".
  std::string source_name = "<ir>";
  /// Keep nodes whose target is not in the op table (with a null schema) instead of raising the
  /// unknown-ops Error. Meant for tests of the verifier.
  bool allow_unknown_ops = false;
};

/// Parses the text form (grammar above) into a Graph with schemas resolved by find_op and empty
/// constants. Throws Error: syntax errors at "<source>:LINE:COL" with what was expected and what
/// was found; one Error listing every unknown op target (with counts and first position).
std::unique_ptr<Graph> parse_graph(const std::string& text, const ParseOptions& options = {});

}  // namespace anvil::ir
