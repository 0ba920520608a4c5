// `anvil ops`: the op table — every export target anvil supports, with how the compiler lowers
// it (src/ops/ops.def). In-place forms aten.X_.O are supported wherever aten.X.O is (imported
// as the functional op plus a write, ir/inplace.h); docs/ops.md lists what is not supported
// and why.
#include <iostream>
#include <map>

#include "commands.h"
#include "core/error.h"
#include "ir/inplace.h"
#include "ir/op_schema.h"

namespace anvil::cli {

ArgParser ops_parser() {
  ArgParser p("ops", "ops [--filter TEXT] [--json]",
               "List the export targets anvil supports and how the compiler lowers each.");
  p.option("--filter", "", "TEXT", "only targets containing TEXT (e.g. pad, norm)")
      .flag("--json", "", "print one JSON object: {target: lowering}")
      .notes(
          "Lowering `None` means the interpreter runs the op but `anvil compile` refuses it,\n"
          "listing every such node at once. An in-place form aten.X_.O (silu_, fill_.Tensor,\n"
          "add_.Tensor, ...) is supported wherever aten.X.O is listed.\n");
  return p;
}

int cmd_ops(const ParsedArgs& args) {
  const std::string filter = args.value("--filter").value_or("");
  std::map<std::string, const ir::OpSchema*> rows;
  for (const auto& op : ir::all_ops())
    if (std::string(op.name).find(filter) != std::string::npos) rows[op.name] = &op;
  if (args.has("--json")) {
    std::cout << "{";
    bool first = true;
    for (const auto& [name, op] : rows) {
      std::cout << (first ? "" : ",") << "\n  \"" << name << "\": \"" << ir::lowering_name(op->lowering)
                << "\"";
      first = false;
    }
    std::cout << "\n}\n";
    return kExitOk;
  }
  std::map<std::string, int> per_lowering;
  for (const auto& [name, op] : rows) {
    std::cout << "  " << name;
    for (size_t k = name.size(); k < 52; ++k) std::cout << ' ';
    std::cout << ir::lowering_name(op->lowering) << "\n";
    ++per_lowering[ir::lowering_name(op->lowering)];
  }
  std::cout << rows.size() << " targets";
  for (const auto& [l, n] : per_lowering) std::cout << ", " << n << " " << l;
  std::cout << "; in-place forms aten.X_.O follow their functional op (ir/inplace.h)\n";
  return kExitOk;
}

}  // namespace anvil::cli
