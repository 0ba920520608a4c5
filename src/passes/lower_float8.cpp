// float8 values in a graph being compiled (passes/lower_internal.h): they are stored, viewed,
// copied and cast, and aten._scaled_mm multiplies them; every other op that would compute with
// one is refused before code generation, as PyTorch implements no arithmetic on float8 either.
#include "passes/lower_internal.h"

#include <set>

#include "core/error.h"

namespace anvil::passes::detail {

namespace {

/// Ops that move or convert float8 values without computing with them (besides views).
bool takes_float8(const ir::Node& n) {
  static const std::set<std::string> kTargets = {
      "aten.to.dtype",          "aten.to.dtype_layout",         "aten.to.device",
      "aten._to_copy.default",  "aten.type_as.default",         "aten.clone.default",
      "aten.contiguous.default", "aten.lift_fresh_copy.default", "aten.cat.default",
      "aten.stack.default",     "aten._scaled_mm.default",      "prims.convert_element_type.default"};
  if (kTargets.count(n.target)) return true;
  if (!n.schema) return false;
  return n.schema->lowering == ir::Lowering::kView || n.schema->lowering == ir::Lowering::kMeta ||
         n.schema->category == ir::OpCategory::kMeta;
}

}  // namespace

void check_float8_uses(const ir::Graph& graph) {
  std::map<const ir::Value*, std::string> input_names;
  for (const auto& spec : graph.input_specs())
    if (spec.value)
      input_names[spec.value] = str(ir::input_kind_name(spec.kind), " '",
                                    spec.target.empty() ? spec.value->name : spec.target, "'");
  std::string uses, inputs;
  std::set<const ir::Value*> listed;
  for (const ir::Node* n : graph.nodes()) {
    if (takes_float8(*n)) continue;
    std::vector<const ir::Value*> vals;
    for (const ir::Value* v : n->input_values()) vals.push_back(v);
    for (const ir::Value* v : n->outputs) vals.push_back(v);
    std::string here;
    std::set<const ir::Value*> seen;
    for (const ir::Value* v : vals) {
      if (!v || v->kind != ir::ValueKind::kTensor || !is_float8(v->type.dtype) ||
          !seen.insert(v).second)
        continue;
      here += str(here.empty() ? "" : ", ", "'", v->name, "' ", dtype_name(v->type.dtype));
      auto in = input_names.find(v);
      if (in != input_names.end() && listed.insert(v).second)
        inputs += str(inputs.empty() ? "" : ", ", in->second, " ", dtype_name(v->type.dtype));
    }
    if (!here.empty()) uses += str(uses.empty() ? "" : "; ", n->target, " '", n->name, "' on ", here);
  }
  if (uses.empty()) return;
  throw Error(str("Unsupported input dtype: float8 values reach ops that do not compute with "
                  "float8",
                  inputs.empty() ? std::string() : " (" + inputs + ")",
                  "; cast them with .to(torch.float32) (or bfloat16 / float16) first"),
              "compile", "casts, copies, views and aten._scaled_mm on float8 values", uses);
}

}  // namespace anvil::passes::detail
