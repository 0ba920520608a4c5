// libFuzzer target: the text IR parser (lexer, grammar, value and type references, symbols,
// op lookup against the op table). Text that parses must print and parse back to an equal
// graph (the round trip the printer promises); anything else raises anvil::Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_util.h"
#include "ir/parser.h"
#include "ir/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  anvil::ir::ParseOptions options;
  options.source_name = "fuzz.ir";
  // Unknown ops kept (null schemas) for half the inputs, so that a typo in a target does not
  // stop the parse before the rest of the text.
  options.allow_unknown_ops = size % 2 == 1;
  std::unique_ptr<anvil::ir::Graph> graph;
  try {
    graph = anvil::ir::parse_graph(text, options);
  } catch (const anvil::Error&) {
    return 0;
  }
  const std::string printed = anvil::ir::print_graph(*graph);
  std::unique_ptr<anvil::ir::Graph> again;
  try {
    again = anvil::ir::parse_graph(printed, options);
  } catch (const anvil::Error& e) {
    anvil::fuzz::fail_property("printed graph does not parse: " + std::string(e.what()) +
                               "\n--- printed:\n" + printed);
  }
  std::string diff;
  if (!anvil::ir::graphs_equal(*graph, *again, &diff))
    anvil::fuzz::fail_property("printed graph parses to another graph: " + diff +
                               "\n--- printed:\n" + printed);
  return 0;
}
