// The model translation unit: declarations of the step functions (defined in the kernel
// translation units), run() calling them in order, arena_bytes / output_sizes from the symbol
// values, metadata, and the anvil_model_entry table.
#include <sstream>

#include "codegen/cpu/emit_cpu.h"
#include "core/error.h"

namespace anvil::codegen::cpu {

std::string emit_model(const passes::Program& p, const std::string& target,
                       const std::string& metadata_json, const CpuCodegenOptions& o) {
  std::ostringstream os;
  os << preamble(o.cpp_namespace);
  os << "\n#include <new>\n\nnamespace " << o.cpp_namespace << " {\n\n";
  for (const auto& step : p.steps) {
    if (std::holds_alternative<passes::LoopKernel>(step))
      os << "ANVIL_HIDDEN void " << passes::step_name(step) << "(const RunState& s);\n";
    else
      os << "ANVIL_HIDDEN int " << passes::step_name(step) << "(const RunState& s);\n";
  }
  os << "\nnamespace {\n\n";
  os << "/// The model object create() returns: the runtime services.\n";
  os << "struct Model {\n  const AnvilRtApi* api;\n};\n\n";
  // metadata
  std::string esc;
  for (char c : metadata_json) {
    if (c == '"' || c == '\\') esc += '\\';
    if (c == '\n') {
      esc += "\\n";
      continue;
    }
    esc += c;
  }
  os << "const char* metadata_json() { return \"" << esc << "\"; }\n\n";
  os << "void* create(const AnvilRtApi* api) {\n";
  os << "  if (!api || api->abi_version != ANVIL_MODEL_ABI_VERSION) return nullptr;\n";
  os << "  return new (std::nothrow) Model{api};\n}\n\n";
  os << "void destroy(void* model) { delete static_cast<Model*>(model); }\n\n";
  // arena
  const std::string arena = p.arena_bytes.str();
  os << "int64_t arena_bytes(const int64_t* symbols) {\n";
  os << symbol_decls(p, arena, "symbols", "  ");
  os << "  (void)symbols;\n  return " << arena << ";\n}\n\n";
  // output sizes
  std::string sizes_text;
  for (const auto& o : p.outputs)
    for (const auto& s : o.sizes) sizes_text += s.str() + " ";
  os << "void output_sizes(const int64_t* symbols, int32_t output_index, int64_t* sizes) {\n";
  os << symbol_decls(p, sizes_text, "symbols", "  ");
  os << "  (void)symbols;\n  switch (output_index) {\n";
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    os << "    case " << i << ":\n";
    for (size_t d = 0; d < p.outputs[i].sizes.size(); ++d)
      os << "      sizes[" << d << "] = " << p.outputs[i].sizes[d].str() << ";\n";
    os << "      break;\n";
  }
  os << "    default:\n      break;\n  }\n}\n\n";
  // run
  os << "int run(void* model, const AnvilRunArgs* args) {\n";
  os << "  const Model* m = static_cast<const Model*>(model);\n";
  os << "  if (!m || !args) return 1;\n";
  os << "  const RunState s{m->api, args->run_ctx, args->symbols, args->inputs, args->outputs,\n"
        "                   args->constants, static_cast<char*>(args->arena)};\n";
  os << "  int rc = 0;\n";
  for (const auto& step : p.steps) {
    const std::string name = passes::step_name(step);
    std::string nodes;
    const auto& ns = passes::step_nodes(step);
    for (size_t i = 0; i < ns.size() && i < 6; ++i) nodes += (i ? ", " : "") + ns[i];
    if (ns.size() > 6) nodes += ", ...";
    if (std::holds_alternative<passes::LoopKernel>(step))
      os << "  " << name << "(s);  // " << nodes << "\n";
    else
      os << "  if ((rc = " << name << "(s)) != 0) return rc;  // " << nodes << "\n";
  }
  os << "  (void)s;\n  return rc;\n}\n\n";
  os << "const AnvilModelEntry kEntry = {ANVIL_MODEL_ABI_VERSION, metadata_json, create, destroy,\n"
        "                              arena_bytes, output_sizes, run};\n\n";
  os << "}  // namespace\n}  // namespace " << o.cpp_namespace << "\n\n";
  os << "// target: " << target << "\n";
  os << "extern \"C\" __attribute__((visibility(\"default\"))) const AnvilModelEntry* "
     << o.entry_symbol << "(void) {\n  return &" << o.cpp_namespace << "::kEntry;\n}\n";
  return os.str();
}

}  // namespace anvil::codegen::cpu
