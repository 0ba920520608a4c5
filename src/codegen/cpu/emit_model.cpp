// The model translation unit: declarations of the step functions (defined in the kernel
// translation units), run() calling them in order, arena_bytes / output_sizes from the symbol
// values, metadata, and the anvil_model_entry table.
#include <algorithm>
#include <sstream>

#include "codegen/cpu/emit_cpu.h"
#include "core/error.h"
#include "passes/collectives.h"

namespace anvil::codegen::cpu {

namespace {

/// True when output `o` is stored in a buffer allocated during the run (layout base_kind 3).
bool allocated_in_run(const passes::Program& p, const passes::IoSpec& o) {
  return o.base == passes::OutputBase::kOwn && o.buffer >= 0 &&
         p.buffers[static_cast<size_t>(o.buffer)].run_time_sized;
}

/// Code that allocates run-time-sized buffer `b` (Program::run_allocs) once its size is known.
std::string emit_run_alloc(const passes::Program& p, int b) {
  const passes::Buffer& buf = p.buffers[static_cast<size_t>(b)];
  const std::string bytes =
      "(" + buf.numel.str() + ") * " + std::to_string(dtype_size(buf.dtype));
  std::ostringstream inner;
  if (buf.kind == passes::BufferKind::kOutput)
    inner << "    if (!s.api->output_alloc(s.run_ctx, " << buf.index << ", " << bytes
          << ")) return 1;\n";
  else
    inner << "    if (!(dyn[" << buf.dyn_slot << "] = s.api->run_alloc(s.run_ctx, " << bytes
          << "))) return 1;\n";
  std::ostringstream os;
  os << "  {  // allocate " << buf.name << " (sized by run-time values)\n";
  os << symbol_decls(p, inner.str(), "s.sym", "    ") << inner.str() << "  }\n";
  return os.str();
}

/// output_layout(): for each output, whose storage it is returned in and its view of it
/// (include/anvil/anvil_rt.h, AnvilRtOutputLayout).
void emit_output_layout(const passes::Program& p, std::ostringstream& os) {
  std::ostringstream body;
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const passes::IoSpec& o = p.outputs[i];
    if (allocated_in_run(p, o)) {
      body << "    case " << i << ":\n      layout->base_kind = 3;\n      break;\n";
      continue;
    }
    // outputs sized by run-time counts are allocated at their capacity (shaped after the run)
    const std::map<std::string, SymInt> before = passes::sizes_before_run(p);
    std::vector<SymInt> sizes;
    for (const auto& s : o.sizes) sizes.push_back(s.substitute(before));
    std::vector<SymInt> strides;
    for (const auto& s : o.strides) strides.push_back(s.substitute(before));
    if (strides.empty()) {  // contiguous
      strides.assign(sizes.size(), SymInt(1));
      for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
    }
    SymInt numel(0);
    if (o.base == passes::OutputBase::kOwn) {
      ANVIL_CHECK(o.buffer >= 0 && o.buffer < static_cast<int>(p.buffers.size()), "emit_model",
                  "an output without a buffer", "a buffer index", std::to_string(o.buffer));
      numel = p.buffers[static_cast<size_t>(o.buffer)].numel.substitute(before);
    }
    body << "    case " << i << ":\n";
    body << "      layout->base_kind = " << static_cast<int>(o.base) << ";\n";
    body << "      layout->base_index = "
         << (o.base == passes::OutputBase::kOwn ? static_cast<int>(i) : o.base_index) << ";\n";
    body << "      layout->storage_numel = " << numel.str() << ";\n";
    body << "      layout->offset = " << o.offset.str() << ";\n";
    for (size_t d = 0; d < strides.size(); ++d)
      body << "      layout->strides[" << d << "] = " << strides[d].str() << ";\n";
    body << "      break;\n";
  }
  const std::string text = body.str();
  os << "void output_layout(const int64_t* symbols, int32_t output_index,\n"
        "                   AnvilRtOutputLayout* layout) {\n";
  os << symbol_decls(p, text, "symbols", "  ");
  os << "  (void)symbols;\n";
  os << "  layout->base_kind = 0;\n  layout->base_index = output_index;\n"
        "  layout->storage_numel = 0;\n  layout->offset = 0;\n";
  os << "  switch (output_index) {\n" << text << "    default:\n      break;\n  }\n}\n\n";
}

}  // namespace

std::string emit_model(const passes::Program& p, const std::string& target,
                       const std::string& metadata_json, const CpuCodegenOptions& o,
                       const std::string& preamble_text) {
  std::ostringstream os;  // everything after the preamble
  os << "\n#include <ctime>\n#include <new>\n\nnamespace " << o.cpp_namespace << " {\n\n";
  auto is_coll = [](const passes::Step& st) {
    const auto* e = std::get_if<passes::ExternStep>(&st);
    return e && (passes::is_collective_issue(*e) || passes::is_collective_wait(*e));
  };
  const int n_coll = max_collective_id(p) + 1;
  for (const auto& step : p.steps) {
    if (is_coll(step)) continue;  // inline in run()
    if (std::holds_alternative<passes::LoopKernel>(step))
      os << "ANVIL_HIDDEN void " << passes::step_name(step) << "(const RunState& s);\n";
    else
      os << "ANVIL_HIDDEN int " << passes::step_name(step) << "(const RunState& s);\n";
  }
  if (const std::string cf = emit_control_functions(p); !cf.empty()) os << "\n" << cf;
  os << "\nnamespace {\n\n";
  os << "/// The model object create() returns: the runtime services.\n";
  os << "struct Model {\n  const AnvilRtApi* api;\n};\n\n";
  os << "const char* metadata_json() { return " << quoted(metadata_json) << "; }\n\n";
  os << "void* create(const AnvilRtApi* api) {\n";
  os << "  if (!api || api->abi_version != ANVIL_MODEL_ABI_VERSION) return nullptr;\n";
  if (n_coll > 0)  // collectives need the runtime's ABI minor 1 services
    os << "  if (api->abi_minor_version < 1 || !api->coll_issue || !api->coll_wait) return "
          "nullptr;\n";
  const bool const_b = std::any_of(p.steps.begin(), p.steps.end(), [&p](const passes::Step& st) {
    const auto* g = std::get_if<passes::GemmStep>(&st);
    return g && gemm_b_is_constant(p, *g);
  });
  if (const_b)  // GEMMs with a constant B need the runtime's ABI minor 2 services
    os << "  if (api->abi_minor_version < 2 || !api->sgemm_const_b) return nullptr;\n";
  if (!p.run_allocs.empty())  // api->run_alloc / output_alloc (minor 4)
    os << "  if (api->abi_minor_version < 4 || !api->run_alloc || !api->output_alloc) return "
          "nullptr;\n";
  else if (!p.unbacked_symbols.empty())  // AnvilRunArgs::run_symbols (minor 3)
    os << "  if (api->abi_minor_version < 3) return nullptr;\n";
  // Convolutions with an activation or a residual add fused (attributes fused_act / fused_add):
  // a runtime before ABI minor 9 ignores unknown attributes and would skip them silently.
  const bool fused_conv = std::any_of(p.steps.begin(), p.steps.end(), [](const passes::Step& st) {
    const auto* e = std::get_if<passes::ExternStep>(&st);
    return e && (passes::find_attr(*e, "fused_act") || passes::find_attr(*e, "fused_add"));
  });
  if (fused_conv) os << "  if (api->abi_minor_version < 9) return nullptr;\n";
  os << "  return new (std::nothrow) Model{api};\n}\n\n";
  os << "void destroy(void* model) { delete static_cast<Model*>(model); }\n\n";
  os << "/// Monotonic clock for AnvilRunArgs::step_ns (profiling).\n";
  os << "int64_t now_ns() {\n  timespec ts;\n  clock_gettime(CLOCK_MONOTONIC, &ts);\n"
        "  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;\n}\n\n";
  // arena
  const std::string arena = p.arena_bytes.str();
  os << "int64_t arena_bytes(const int64_t* symbols) {\n";
  os << symbol_decls(p, arena, "symbols", "  ");
  os << "  (void)symbols;\n  return " << arena << ";\n}\n\n";
  // output sizes
  // capacities stand for the run-time counts (the runtime shapes such outputs after the run)
  // (outputs allocated during the run get their sizes after it, from run_symbols)
  const std::map<std::string, SymInt> before = passes::sizes_before_run(p);
  std::vector<std::vector<SymInt>> out_sizes;
  for (const auto& o : p.outputs) {
    out_sizes.emplace_back();
    for (const auto& s : o.sizes) out_sizes.back().push_back(s.substitute(before));
  }
  std::string sizes_text;
  for (const auto& o : out_sizes)
    for (const auto& s : o) sizes_text += s.str() + " ";
  os << "void output_sizes(const int64_t* symbols, int32_t output_index, int64_t* sizes) {\n";
  os << symbol_decls(p, sizes_text, "symbols", "  ");
  os << "  (void)symbols;\n  switch (output_index) {\n";
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    os << "    case " << i << ":\n";
    for (size_t d = 0; d < out_sizes[i].size(); ++d)
      os << "      sizes[" << d << "] = " << out_sizes[i][d].str() << ";\n";
    os << "      break;\n";
  }
  os << "    default:\n      break;\n  }\n}\n\n";
  emit_output_layout(p, os);
  // run
  os << "int run(void* model, const AnvilRunArgs* args) {\n";
  os << "  const Model* m = static_cast<const Model*>(model);\n";
  os << "  if (!m || !args) return 1;\n";
  const size_t n_usym = p.unbacked_symbols.size();
  if (n_usym > 0) os << "  int64_t usym[" << n_usym << "] = {};  // run-time symbols\n";
  int n_dyn = 0;
  for (const auto& b : p.buffers)
    if (b.run_time_sized && b.dyn_slot >= 0) n_dyn = std::max(n_dyn, b.dyn_slot + 1);
  if (n_dyn > 0) os << "  void* dyn[" << n_dyn << "] = {};  // buffers allocated during the run\n";
  os << "  const RunState s{m->api, args->run_ctx, args->symbols, args->inputs, args->outputs,\n"
        "                   args->constants, static_cast<char*>(args->arena), "
     << (n_usym > 0 ? "usym" : "nullptr") << ", " << (n_dyn > 0 ? "dyn" : "nullptr")
     << ", args->stream};\n";
  os << "  int rc = 0;\n";
  // per-step wall time when the runtime asks for it (minor 5; older runtimes lack the field)
  os << "  int64_t* const prof = m->api->abi_minor_version >= 5 ? args->step_ns : nullptr;\n";
  os << "  int64_t t0 = 0;\n";
  // the NaN / Inf check (minor 9): the runtime scans what a step wrote, after the step
  const std::vector<std::vector<int>> checks = passes::nan_check_buffers(p);
  const bool any_check = std::any_of(checks.begin(), checks.end(),
                                     [](const std::vector<int>& c) { return !c.empty(); });
  if (any_check)
    os << "  int (*const chk)(void*, int32_t) =\n"
          "      m->api->abi_minor_version >= 9 ? args->after_step : nullptr;\n";
  if (n_coll > 0) os << "  int64_t coll_h[" << n_coll << "] = {};  // collective handles\n";
  size_t next_alloc = 0;
  for (size_t si = 0; si < p.steps.size(); ++si) {
    const passes::Step& step = p.steps[si];
    for (; next_alloc < p.run_allocs.size() && p.run_allocs[next_alloc].first <= si; ++next_alloc)
      os << emit_run_alloc(p, p.run_allocs[next_alloc].second);
    // anvil_prof_sync (each preamble's): nothing on the CPU; a device target waits for its
    // stream, so that a step's time is the device's, not the time to queue it
    os << "  if (prof) {\n    anvil_prof_sync(s);\n    t0 = now_ns();\n  }\n";
    const std::string timed = "  if (prof) {\n    anvil_prof_sync(s);\n    prof[" +
                              std::to_string(si) + "] += now_ns() - t0;\n  }\n";
    const std::string checked =
        checks[si].empty() ? ""
                           : "  if (chk && (rc = chk(args->run_ctx, " + std::to_string(si) +
                                 ")) != 0) return rc;\n";
    if (is_coll(step)) {
      os << emit_collective_step(p, std::get<passes::ExternStep>(step)) << timed << checked;
      continue;
    }
    const std::string name = passes::step_name(step);
    std::string nodes;
    const auto& ns = passes::step_nodes(step);
    for (size_t i = 0; i < ns.size() && i < 6; ++i) nodes += (i ? ", " : "") + ns[i];
    if (ns.size() > 6) nodes += ", ...";
    if (std::holds_alternative<passes::LoopKernel>(step))
      os << "  " << name << "(s);  // " << nodes << "\n";
    else
      os << "  if ((rc = " << name << "(s)) != 0) return rc;  // " << nodes << "\n";
    os << timed << checked;
  }
  for (; next_alloc < p.run_allocs.size(); ++next_alloc)  // outputs no step writes
    os << emit_run_alloc(p, p.run_allocs[next_alloc].second);
  if (!p.unbacked_symbols.empty()) {  // run-time values shape the data-dependent outputs
    os << "  if (args->run_symbols)\n";
    os << "    for (int i = 0; i < " << n_usym << "; ++i) args->run_symbols[i] = usym[i];\n";
  }
  os << "  (void)s;\n  return rc;\n}\n\n";
  os << "const AnvilModelEntry kEntry = {ANVIL_MODEL_ABI_VERSION, metadata_json, create, destroy,\n"
        "                              arena_bytes, output_sizes, run, output_layout};\n\n";
  os << "}  // namespace\n}  // namespace " << o.cpp_namespace << "\n\n";
  os << "// target: " << target << "\n";
  os << "extern \"C\" __attribute__((visibility(\"default\"))) const AnvilModelEntry* "
     << o.entry_symbol << "(void) {\n  return &" << o.cpp_namespace << "::kEntry;\n}\n";
  const std::string body = os.str();
  if (!preamble_text.empty()) return preamble_text + body;
  return preamble(o.cpp_namespace, needs_complex(body)) + body;
}

}  // namespace anvil::codegen::cpu
