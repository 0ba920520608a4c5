// generate_cpu: passes -> Program -> C++ sources split into translation units, manifest.json,
// constants.
#include "codegen/generate.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "anvil/anvil_rt.h"
#include "codegen/cpu/emit_cpu.h"
#include "codegen/toolchain.h"
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

std::string manifest(const passes::Program& p, const std::string& target,
                     const std::vector<std::string>& cpu_features, const CpuCodegenOptions& o,
                     int kernels_shared, int kernel_bodies) {
  json m;
  m["format_version"] = 1;
  m["abi_version"] = ANVIL_MODEL_ABI_VERSION;  // include/anvil/anvil_rt.h
  m["anvil_version"] = o.anvil_version;
  m["target"] = target;
  m["cpu_features"] = cpu_features;
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
  for (const auto& s : p.steps) {
    json k = {{"name", passes::step_name(s)},
              {"nodes", passes::step_nodes(s)},
              {"kind", passes::step_kind(s)}};
    if (const auto* e = std::get_if<passes::ExternStep>(&s)) k["target"] = e->target;
    k["bytes"] = sym_json(passes::step_bytes(p, s));  // profiling's GB/s (docs/usage.md)
    m["kernels"].push_back(k);
  }
  // step functions served by another step's implementation (kernel de-duplication)
  m["kernels_shared"] = kernels_shared;
  m["kernel_bodies"] = kernel_bodies;
  m["planned_peak_bytes"] = p.arena_bytes.str();
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

std::string metadata(const passes::Program& p, const std::string& target) {
  json m;
  m["target"] = target;
  m["arena_bytes"] = p.arena_bytes.str();
  m["steps"] = p.steps.size();
  m["inputs"] = p.inputs.size();
  m["outputs"] = p.outputs.size();
  m["constants"] = p.constants.size();
  return m.dump();
}

}  // namespace

CpuCodegenResult generate_cpu_program(const passes::Program& p, const CpuCodegenOptions& o) {
  CpuCodegenResult r;
  const TargetInfo info = resolve_target(o.target);
  const std::string target = info.manifest_target;
  r.target = target;
  r.cpu_features = info.cpu_features;
  r.compile_flags = {"-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math",
                     "-fvisibility=hidden"};
  // kernels, balanced over the translation units by text size
  const int ntu = std::max(1, o.num_translation_units);
  std::vector<std::string> tus(static_cast<size_t>(ntu));
  int next_shared = 0;
  auto add_kernels = [&](const passes::Program& q) {
    std::vector<cpu::StepFunctionText> fns;
    for (const auto& step : q.steps) {
      if (const auto* e = std::get_if<passes::ExternStep>(&step);
          e && (passes::is_collective_issue(*e) || passes::is_collective_wait(*e)))
        continue;  // emitted inline in run() (emit_collective.cpp)
      if (cpu::is_control_step(step)) continue;  // in model.cpp (emit_control.cpp)
      cpu::StepFunctionText f;
      f.name = passes::step_name(step);
      if (const auto* k = std::get_if<passes::LoopKernel>(&step)) {
        f.kind = cpu::StepFunctionText::Kind::kLoop;
        f.text = cpu::emit_loop_kernel(q, *k, o);
      } else if (const auto* g = std::get_if<passes::GemmStep>(&step)) {
        f.kind = cpu::StepFunctionText::Kind::kGemm;
        f.text = cpu::emit_gemm(q, *g);
      } else {
        f.text = cpu::emit_extern(q, std::get<passes::ExternStep>(step));
      }
      fns.push_back(std::move(f));
    }
    // identical computations on different buffers share one implementation (emit_dedup.cpp)
    const cpu::DedupResult d = cpu::dedup_step_functions(q, fns, next_shared);
    r.kernels_shared += d.kernels_shared;
    r.kernel_bodies += d.kernel_bodies;
    for (const auto& text : d.units) {
      auto smallest = std::min_element(
          tus.begin(), tus.end(),
          [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
      *smallest += text + "\n";
    }
  };
  add_kernels(p);
  cpu::for_each_subprogram(p, [&](const passes::Program& sub, const std::string&) {
    add_kernels(sub);
  });
  r.sources.push_back({"model.cpp", cpu::emit_model(p, target, metadata(p, target), o)});
  int k = 0;
  for (const auto& t : tus) {
    if (t.empty()) continue;
    r.sources.push_back({"kernels_" + std::to_string(k++) + ".cpp",
                         cpu::preamble(o.cpp_namespace, cpu::needs_complex(t)) +
                             "\nnamespace " + o.cpp_namespace +
                             " {\n\n" + t + "}  // namespace " + o.cpp_namespace + "\n"});
  }
  r.manifest_json = manifest(p, target, info.cpu_features, o, r.kernels_shared, r.kernel_bodies);
  for (const auto& c : p.constants) r.constants.push_back({c.name, c.tensor});
  r.stats = p.stats;
  r.planned_peak_bytes = p.planned_peak_bytes;
  r.arena_bytes = p.arena_bytes.str();
  r.program_text = passes::print_program(p);
  return r;
}

CpuCodegenResult generate_cpu(const ir::Graph& graph, const CpuCodegenOptions& options) {
  const passes::Program p = passes::compile_to_program(graph, options.pipeline);
  return generate_cpu_program(p, options);
}

}  // namespace anvil::codegen
