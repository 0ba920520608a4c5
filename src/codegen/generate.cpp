// generate: passes -> Program -> the target's sources, and the target-neutral manifest.json
// and constants.
#include "codegen/generate.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "anvil/anvil_rt.h"
#include "codegen/target.h"
#include "core/error.h"
#include "passes/collectives.h"

namespace anvil::codegen {

namespace {

using json = nlohmann::json;

json sym_json(const SymInt& s) {
  if (auto c = s.maybe_constant()) return *c;
  return s.str();
}

json sizes_json(const std::vector<SymInt>& sizes) {
  json a = json::array();
  for (const auto& s : sizes) a.push_back(sym_json(s));
  return a;
}

/// The buffers the NaN / Inf check scans after a step (docs/package_format.md, "checks"): each
/// with where its memory is (input / output / constant slot, or a byte offset in the arena),
/// its element count, logical sizes and dtype.
json check_json(const passes::Program& p, const std::vector<int>& buffers) {
  json a = json::array();
  for (int b : buffers) {
    const passes::Buffer& buf = p.buffers[static_cast<size_t>(b)];
    int r = b;
    for (int guard = 0; p.buffers[static_cast<size_t>(r)].alias_of >= 0 && guard < 64; ++guard)
      r = p.buffers[static_cast<size_t>(r)].alias_of;
    const passes::Buffer& mem = p.buffers[static_cast<size_t>(r)];
    std::vector<std::string> nodes = buf.nodes;
    if (nodes.empty())  // a user output's own buffer: the output's name
      for (const auto& o : p.outputs)
        if (o.buffer == b || o.buffer == r) nodes.push_back(o.name);
    json c = {{"buffer", buf.name},
              {"nodes", nodes},
              {"memory", passes::buffer_kind_name(mem.kind)},
              {"dtype", dtype_name(buf.dtype)},
              {"numel", sym_json(buf.numel)},
              {"sizes", sizes_json(buf.sizes)}};
    if (mem.kind == passes::BufferKind::kArena)
      c["offset"] = sym_json(mem.offset);
    else
      c["index"] = mem.index;
    a.push_back(c);
  }
  return a;
}

std::string manifest(const passes::Program& p, const TargetSources& ts, const CodegenOptions& o) {
  json m;
  m["format_version"] = 1;
  m["abi_version"] = ANVIL_MODEL_ABI_VERSION;  // include/anvil/anvil_rt.h
  m["anvil_version"] = o.anvil_version;
  m["target"] = ts.manifest_target;
  m["cpu_features"] = ts.cpu_features;
  for (const auto& [key, value] : ts.manifest_fields.items()) m[key] = value;
  m["symbols"] = json::array();
  for (const auto& s : p.symbols) {
    const SymRange& r = p.symbol_ranges.at(s);
    m["symbols"].push_back({{"name", s}, {"min", r.min}, {"max", r.max}});
  }
  // Run-time symbols (aten.item values, nonzero / mask counts) in AnvilRunArgs::run_symbols
  // order; "capacity" (over the symbols above) for counts that size buffers or outputs.
  m["run_time_symbols"] = json::array();
  for (const auto& u : p.unbacked_symbols) {
    json s = {{"name", u}};
    auto c = p.unbacked_capacity.find(u);
    s["capacity"] = c == p.unbacked_capacity.end() ? json(nullptr) : sym_json(c->second);
    m["run_time_symbols"].push_back(s);
  }
  m["inputs"] = json::array();
  for (const auto& i : p.inputs) {
    json in = {{"name", i.name}, {"dtype", dtype_name(i.dtype)}, {"sizes", sizes_json(i.sizes)}};
    if (i.mutated) in["mutated"] = true;  // the run writes it (the caller's tensor changes)
    m["inputs"].push_back(in);
  }
  m["outputs"] = json::array();
  for (const auto& i : p.outputs)
    m["outputs"].push_back(
        {{"name", i.name}, {"dtype", dtype_name(i.dtype)}, {"sizes", sizes_json(i.sizes)}});
  m["constants"] = json::array();
  for (const auto& c : p.constants) {
    json sizes = json::array(), strides = json::array();
    for (int64_t s : c.tensor.sizes()) sizes.push_back(s);
    for (int64_t s : Tensor::contiguous_strides(c.tensor.sizes())) strides.push_back(s);
    m["constants"].push_back({{"name", c.name},
                              {"original_name", c.original_name},
                              {"kind", c.kind},
                              {"dtype", dtype_name(c.tensor.dtype())},
                              {"sizes", sizes},
                              {"strides", strides},
                              {"offset", 0},
                              {"nbytes", c.tensor.nbytes()},
                              {"mutable", c.is_mutable}});
  }
  m["kernels"] = json::array();
  const std::vector<std::vector<int>> checks = passes::nan_check_buffers(p);
  for (size_t si = 0; si < p.steps.size(); ++si) {
    const passes::Step& s = p.steps[si];
    json k = {{"name", passes::step_name(s)},
              {"nodes", passes::step_nodes(s)},
              {"kind", passes::step_kind(s)}};
    if (const auto* e = std::get_if<passes::ExternStep>(&s)) k["target"] = e->target;
    k["bytes"] = sym_json(passes::step_bytes(p, s));  // profiling's GB/s (docs/usage.md)
    if (!checks[si].empty()) k["checks"] = check_json(p, checks[si]);  // the NaN / Inf check
    m["kernels"].push_back(k);
  }
  // step functions served by another step's implementation (kernel de-duplication)
  m["kernels_shared"] = ts.kernels_shared;
  m["kernel_bodies"] = ts.kernel_bodies;
  m["planned_peak_bytes"] = p.arena_bytes.str();
  // Steps where the host waits on the run's values (passes::host_syncs): none = the program can
  // be captured as one device graph.
  m["host_syncs"] = json::array();
  for (const auto& h : passes::host_syncs(p))
    m["host_syncs"].push_back(
        {{"step", h.step < p.steps.size() ? passes::step_name(p.steps[h.step]) : "end"},
         {"why", h.why}});
  m["graph_capturable"] = m["host_syncs"].empty();
  m["collectives"] = json::array();
  for (const auto& s : p.steps) {
    const auto* e = std::get_if<passes::ExternStep>(&s);
    if (!e || !passes::is_collective_issue(*e)) continue;
    m["collectives"].push_back(
        {{"name", e->name},
         {"op", e->target.substr(std::string(passes::kCollectivePrefix).size())},
         {"group", passes::collective_attr(*e, "group")},
         {"tensors", e->outputs.size()},
         {"nodes", e->nodes}});
  }
  return m.dump(2);
}

}  // namespace

std::string model_metadata_json(const passes::Program& p, const std::string& target) {
  json m;
  m["target"] = target;
  m["arena_bytes"] = p.arena_bytes.str();
  m["steps"] = p.steps.size();
  m["inputs"] = p.inputs.size();
  m["outputs"] = p.outputs.size();
  m["constants"] = p.constants.size();
  return m.dump();
}

CodegenResult generate_program(const passes::Program& p, const CodegenOptions& o) {
  const Target& target = find_target(o.target);
  const std::vector<std::string> missing = target.unsupported(p);
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) list += "\n  " + m;
    throw Error(str("the ", target.name(), " target cannot compile ", missing.size(),
                    missing.size() == 1 ? " step" : " steps", " of this model:", list),
                "codegen(" + o.target + ")", "steps the target supports",
                str(missing.size(), " unsupported"));
  }
  TargetSources ts = target.emit(p, o);
  CodegenResult r;
  r.target = ts.manifest_target;
  r.cpu_features = ts.cpu_features;
  r.compile_flags = ts.compile_flags;
  r.kernels_shared = ts.kernels_shared;
  r.kernel_bodies = ts.kernel_bodies;
  r.manifest_json = manifest(p, ts, o);
  r.sources = std::move(ts.sources);
  for (const auto& c : p.constants) r.constants.push_back({c.name, c.tensor});
  r.stats = p.stats;
  r.planned_peak_bytes = p.planned_peak_bytes;
  r.arena_bytes = p.arena_bytes.str();
  r.program_text = passes::print_program(p);
  return r;
}

passes::PipelineOptions pipeline_for(const CodegenOptions& o) {
  passes::PipelineOptions pipeline = o.pipeline;
  find_target(o.target).adjust_pipeline(pipeline);
  return pipeline;
}

CodegenResult generate(const ir::Graph& graph, const CodegenOptions& options) {
  const passes::Program p = passes::compile_to_program(graph, pipeline_for(options));
  return generate_program(p, options);
}

namespace {
void require_cpu_target(const CodegenOptions& o) {
  ANVIL_CHECK(find_target(o.target).device_type() == Device::Type::kCPU, "generate_cpu",
              "not a CPU target", "native, x86_64-*", o.target);
}
}  // namespace

CodegenResult generate_cpu_program(const passes::Program& p, const CodegenOptions& o) {
  require_cpu_target(o);
  return generate_program(p, o);
}

CodegenResult generate_cpu(const ir::Graph& graph, const CodegenOptions& options) {
  require_cpu_target(options);
  return generate(graph, options);
}

}  // namespace anvil::codegen
