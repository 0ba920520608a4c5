// The CPU target: C++ for the host's ISA (native, x86_64-avx512, x86_64-avx2, x86_64), compiled
// by the system C++ compiler. Loop kernels go through api->parallel_for, GEMMs through the
// runtime's packed-B kernels, other ops through its extern kernels (docs/externs.md).
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "codegen/cpu/emit_cpu.h"
#include "codegen/gemm/gemm_epilogue.h"
#include "codegen/target.h"
#include "passes/collectives.h"

namespace anvil::codegen::cpu {

namespace {

class CpuTarget final : public Target {
 public:
  std::string name() const override { return "cpu"; }
  std::vector<std::string> target_names() const override {
    return {"native", "x86_64", "generic", "x86_64-avx2", "x86_64-avx512"};
  }
  Device::Type device_type() const override { return Device::Type::kCPU; }
  TargetInfo describe(const std::string& target_name, const std::string& compiler,
                      const std::string& cache_dir) const override {
    return resolve_target(target_name, compiler, cache_dir);
  }
  std::vector<std::string> unsupported(const passes::Program&) const override { return {}; }

  TargetSources emit(const passes::Program& p, const CodegenOptions& o) const override {
    TargetSources r;
    const TargetInfo info = resolve_target(o.target);
    r.manifest_target = info.manifest_target;
    r.cpu_features = info.cpu_features;
    r.compile_flags = {"-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math",
                       "-fvisibility=hidden"};
    // kernels, balanced over the translation units by text size
    const int ntu = std::max(1, o.num_translation_units);
    std::vector<std::string> tus(static_cast<size_t>(ntu));
    int next_shared = 0;
    std::set<std::string> externs;  // the runtime kernels the package calls (checked at load)
    int fused_epilogues = 0;
    auto add_kernels = [&](const passes::Program& q) {
      std::vector<StepFunctionText> fns;
      // bias / activation statements the chosen GEMM kernels apply in their store
      const gemm::EpiloguePlan fusions = gemm::cpu_store_epilogues(q);
      fused_epilogues += static_cast<int>(fusions.by_gemm.size());
      for (size_t si = 0; si < q.steps.size(); ++si) {
        const passes::Step& step = q.steps[si];
        if (const auto* e = std::get_if<passes::ExternStep>(&step);
            e && (passes::is_collective_issue(*e) || passes::is_collective_wait(*e)))
          continue;  // emitted inline in run() (emit_collective.cpp)
        if (is_control_step(step)) continue;  // in model.cpp (emit_control.cpp)
        if (const auto* e = std::get_if<passes::ExternStep>(&step);
            e && e->target != "anvil.item" && e->target != "anvil.assert")  // generated inline
          externs.insert(e->target);
        StepFunctionText f;
        f.name = passes::step_name(step);
        f.step = &step;
        if (const auto* k = std::get_if<passes::LoopKernel>(&step)) {
          f.kind = StepFunctionText::Kind::kLoop;
          if (fusions.fused_away(si, *k))
            f.text = "// " + k->name + ": computed in the store of a GEMM kernel\nANVIL_HIDDEN void " +
                     k->name + "(const RunState& s) { (void)s; }\n";
          else
            f.text = emit_loop_kernel(q, fusions.remaining(si, *k), o);
        } else if (const auto* g = std::get_if<passes::GemmStep>(&step)) {
          f.kind = StepFunctionText::Kind::kGemm;
          const auto fit = fusions.by_gemm.find(si);
          f.text = emit_gemm(q, *g, fit == fusions.by_gemm.end() ? nullptr : &fit->second);
        } else {
          f.text = emit_extern(q, std::get<passes::ExternStep>(step));
        }
        fns.push_back(std::move(f));
      }
      // identical computations on different buffers share one implementation (emit_dedup.cpp)
      const DedupResult d = dedup_step_functions(q, fns, next_shared);
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
    for_each_subprogram(p, [&](const passes::Program& sub, const std::string&) {
      add_kernels(sub);
    });
    r.manifest_fields["externs"] = std::vector<std::string>(externs.begin(), externs.end());
    r.manifest_fields["gemm_fused_epilogues"] = fused_epilogues;
    r.sources.push_back({"model.cpp", emit_model(p, r.manifest_target,
                                                 model_metadata_json(p, r.manifest_target), o)});
    // The generated GEMM templates the autotuner chose, once each (driver/gemm_tune.h).
    std::map<std::string, std::string> templates;  // entry -> source
    auto add_templates = [&](const passes::Program& q) {
      for (const auto& step : q.steps) {
        const auto* g = std::get_if<passes::GemmStep>(&step);
        if (!g) continue;
        if (!g->choice.source.empty()) templates.emplace(g->choice.entry, g->choice.source);
        for (const passes::GemmBucket& bk : g->buckets)  // symbolic M: a choice per bucket
          if (!bk.choice.source.empty()) templates.emplace(bk.choice.entry, bk.choice.source);
      }
    };
    add_templates(p);
    for_each_subprogram(p, [&](const passes::Program& sub, const std::string&) {
      add_templates(sub);
    });
    int t = 0;  // one translation unit each: templates may share helper names
    for (const auto& [entry, source] : templates)
      r.sources.push_back({"gemm_kernel_" + std::to_string(t++) + ".cpp",
                           "// GEMM kernel " + entry +
                               ", chosen by the autotuner or an untimed rule (codegen/gemm)\n" +
                               source});
    int k = 0;
    for (const auto& t : tus) {
      if (t.empty()) continue;
      r.sources.push_back({"kernels_" + std::to_string(k++) + ".cpp",
                           preamble(o.cpp_namespace, needs_complex(t)) + "\nnamespace " +
                               o.cpp_namespace + " {\n\n" + t + "}  // namespace " +
                               o.cpp_namespace + "\n"});
    }
    return r;
  }

  BuildResult build(const std::vector<SourceFile>& sources, const std::string& output_so,
                    ToolchainOptions options) const override {
    return build_shared_library(sources, output_so, options);
  }
};

const CpuTarget kCpuTarget;
const TargetRegistration kRegistration{&kCpuTarget};

}  // namespace

}  // namespace anvil::codegen::cpu
