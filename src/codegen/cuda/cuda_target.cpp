// The CUDA target: CUDA C++ compiled by nvcc into model.so (sm_90a machine code plus compute_80
// PTX for `cuda-sm90`; compute_80 PTX and sm_80 code for `cuda-sm80`). Loop kernels become
// __global__ functions launched on the run's stream, GEMMs go to the device backend's cuBLASLt
// (include/anvil/anvil_device.h), the extern ops transformers carry (embedding, indexing, cumsum,
// diff, attention) get generated kernels, 1-D / 2-D convolutions go to the device backend's cuDNN
// (device ABI 5, emit_cuda_conv.cpp); other extern ops run as host steps (their CPU
// kernel on host copies, runtime/host_staging.h). Control flow and run-time sizes (aten.item,
// nonzero) are generated host code reading the values they need from the device. Complex values
// compute in libcu++'s cuda::std::complex (codegen/c_expr.h's CUDA dialect). Collectives are
// issued and waited in run() on the run's stream (a GPU group: NCCL), as on the CPU.
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/cpu/emit_cpu.h"  // emit_model: the entry table and run() are target-neutral text
#include "codegen/cuda/emit_cuda.h"
#include "codegen/cuda/extern_kernel.h"
#include "codegen/gemm/cuda_skinny.h"
#include "codegen/gemm/cutlass_candidates.h"
#include "codegen/gemm/gemm_epilogue.h"
#include "codegen/target.h"
#include "core/error.h"
#include "passes/collectives.h"

namespace anvil::codegen::cuda {

namespace {

std::string join_nodes(const std::vector<std::string>& nodes) {
  std::string s;
  for (size_t i = 0; i < nodes.size() && i < 4; ++i) s += (i ? ", " : "") + nodes[i];
  if (nodes.size() > 4) s += ", ...";
  return s;
}

/// The source bytes per kernels unit: ANVIL_CUDA_UNIT_KB (a positive integer) KB, default 384.
size_t unit_bytes() {
  const char* v = std::getenv("ANVIL_CUDA_UNIT_KB");
  if (v == nullptr || *v == 0) return 384 * 1024;
  char* end = nullptr;
  const long kb = std::strtol(v, &end, 10);
  if (*end != 0 || kb <= 0 || kb > (1L << 20))
    throw Error("ANVIL_CUDA_UNIT_KB is not a size in KB", "codegen/cuda",
                "a positive integer (KB of generated source per kernels unit)", v);
  return static_cast<size_t>(kb) * 1024;
}

/// `text` (the steps' code, step i ending at ends[i]) cut between steps into pieces of about
/// `unit` bytes: a step is never split, and one larger than `unit` is a piece of its own.
std::vector<std::string> split_units(const std::string& text, const std::vector<size_t>& ends,
                                     size_t unit) {
  std::vector<std::string> out;
  size_t start = 0, prev = 0;
  for (size_t end : ends) {
    if (end - start > unit && prev > start) {
      out.push_back(text.substr(start, prev - start));
      start = prev;
    }
    prev = end;
  }
  if (text.size() > start) out.push_back(text.substr(start));
  return out;
}

/// True for a convolution step the CUDA target gives to cuDNN (its gap checked by the caller).
bool is_cudnn_conv(const passes::ExternStep& e) {
  return e.target == "aten.convolution.default" || e.target == "aten.conv2d.default" ||
         e.target == "aten.conv1d.default";
}

/// The nvcc binary: $ANVIL_NVCC, else nvcc beside $CUDA_HOME / /usr/local/cuda, else "nvcc".
std::string default_nvcc() {
  if (const char* e = std::getenv("ANVIL_NVCC"); e && *e) return e;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* h = std::getenv(var); h && *h) return std::string(h) + "/bin/nvcc";
  return "/usr/local/cuda/bin/nvcc";
}

class CudaTarget final : public Target {
 public:
  std::string name() const override { return "cuda"; }
  std::vector<std::string> target_names() const override { return {"cuda-sm90", "cuda-sm80"}; }
  Device::Type device_type() const override { return Device::Type::kCUDA; }
  void adjust_pipeline(passes::PipelineOptions& pipeline) const override {
    pipeline.target_device = Device::Type::kCUDA;  // graphs recorded on the GPU compile too
    // residual sums read twice are stored by the GEMM's epilogue (gemm_epilogue.h)
    pipeline.materialize_gemm_sums = true;
    // DenseNet-121 at bf16 batch 32 on an H200: 3.715 -> 4.085 ms with the norms per part (a
    // kernel storing 30 parts' slices of 32 channels at 7x7 runs 30 statements per thread on
    // 6 272 threads: 230 GB/s); the copy, then one norm kernel over all channels, is faster
    pipeline.norm_through_cat = false;
    // attention's kernels (own and cuDNN's) write any output strides: the transpose of its
    // result into the output projection's input goes
    pipeline.extern_writes_strided_output = [](const passes::Program& p,
                                               const passes::ExternStep& e) {
      return e.target == "aten.scaled_dot_product_attention.default" &&
             cuda_kernel_gap(p, e).empty();
    };
  }

  std::vector<std::string> unsupported(const passes::Program& p) const override {
    std::vector<std::string> out;
    auto check = [&](const passes::Program& q, const std::string& where) {
      for (const auto& step : q.steps) {
        const std::string why = unsupported_reason(q, step);
        if (!why.empty())
          out.push_back(where + passes::step_name(step) + " (" +
                        join_nodes(passes::step_nodes(step)) + "): " + why);
      }
    };
    check(p, "");
    cpu::for_each_subprogram(
        p, [&](const passes::Program& sub, const std::string& name) { check(sub, name + ": "); });
    for (const auto& in : p.inputs)
      if (in.mutated)
        out.push_back("input '" + in.name +
                      "' is written by the model (in-place on an input): "
                      "not supported on CUDA yet");
    return out;
  }

  TargetSources emit(const passes::Program& p, const CodegenOptions& o) const override {
    TargetSources r;
    r.manifest_target = o.target;
    r.manifest_fields["device"] = "cuda";
    // both targets carry compute_80 PTX, which the driver compiles for any newer GPU
    r.manifest_fields["cuda_min_capability"] = 80;
    r.manifest_fields["cuda_arch"] = o.target == "cuda-sm90"
                                         ? nlohmann::json::array({"sm_90a", "compute_80"})
                                         : nlohmann::json::array({"sm_80", "compute_80"});
    std::string kernels;
    std::vector<size_t> step_ends;  // where each step's text ends in `kernels`
    int bodies = 0;
    // Extern steps with no CUDA kernel run their CPU kernel on host copies (`anvil inspect`
    // lists them; a model with none runs wholly on the GPU).
    nlohmann::json host_steps = nlohmann::json::array();
    nlohmann::json fused = nlohmann::json::array();
    nlohmann::json cudnn_convs = nlohmann::json::array();
    nlohmann::json direct_convs = nlohmann::json::array();  // anvil's depthwise kernel
    auto add_kernels = [&](const passes::Program& q) {
      // GEMM epilogues cuBLASLt computes (gemm_epilogue.h): the GEMM step calls gemm_ex and the
      // epilogue's statement leaves its loop kernel
      const EpiloguePlan plan = plan_gemm_epilogues(q);
      for (size_t si = 0; si < q.steps.size(); ++si) {
        const auto& step = q.steps[si];
        if (cpu::is_control_step(step)) continue;  // in model.cu (emit_control.cpp)
        if (const auto* c = std::get_if<passes::ExternStep>(&step);
            c && (passes::is_collective_issue(*c) || passes::is_collective_wait(*c)))
          continue;  // inline in run() (emit_collective.cpp)
        if (const auto* k = std::get_if<passes::LoopKernel>(&step)) {
          if (plan.fused_away(si, *k)) {
            std::string gemms;
            for (const auto& [gi, f] : plan.by_gemm)
              if (f.kernel_step == si)
                gemms += (gemms.empty() ? "" : ", ") + passes::step_name(q.steps[gi]);
            kernels += emit_fused_away(*k, gemms) + "\n";
          } else {
            kernels += emit_loop_kernel(q, plan.remaining(si, *k)) + "\n";
          }
        } else if (const auto* g = std::get_if<passes::GemmStep>(&step)) {
          const auto f = plan.by_gemm.find(si);
          if (f == plan.by_gemm.end()) {
            kernels += emit_gemm(q, *g) + "\n";
          } else {
            // cuBLASLt may refuse an epilogue at run time (ANVIL_GEMM_NOT_FUSED): its GEMM step
            // then launches the statement's own kernel; a chosen CUTLASS kernel has it built in.
            // anvil's own kernels and the 3xTF32 ones fall back to cuBLASLt and this kernel where
            // they refuse a call; with buckets of a symbolic M, the buckets on cuBLASLt need the
            // statement's kernel.
            const bool chosen = !g->choice.source.empty();
            bool library =
                g->buckets.empty() && (!chosen || gemm::has_library_fallback(g->choice.name));
            nlohmann::json by_bucket = nlohmann::json::array();
            for (const passes::GemmBucket& bk : g->buckets) {
              library |= bk.choice.source.empty();
              by_bucket.push_back(bk.choice.source.empty() && bk.choice.variant == 0
                                      ? std::string("cublaslt")
                                      : bk.choice.name);
            }
            if (library) kernels += emit_loop_kernel(q, f->second.fallback) + "\n";
            kernels += emit_gemm(q, *g, &f->second) + "\n";
            fused.push_back({{"gemm", g->name},
                             {"kernel", passes::step_name(q.steps[f->second.kernel_step])},
                             {"epilogue", epilogue_macro(f->second.kind)},
                             {"residual", f->second.residual >= 0},
                             {"by", chosen || g->choice.variant > 0 ? g->choice.name
                                    : g->buckets.empty() ? std::string("cublaslt")
                                                         : std::string("per bucket")}});
            if (!g->buckets.empty()) fused.back()["by_bucket"] = by_bucket;
          }
        } else {
          const auto& e = std::get<passes::ExternStep>(step);
          if (const std::string gap = cuda_kernel_gap(q, e); !gap.empty())
            host_steps.push_back({{"name", e.name},
                                  {"target", e.target},
                                  {"nodes", passes::step_nodes(step)},
                                  {"why", gap}});
          else if (is_cudnn_conv(e))  // cuDNN's (with the host path behind it) or anvil's
            (ext::conv_is_direct(e) ? direct_convs : cudnn_convs)
                .push_back(
                    {{"name", e.name}, {"target", e.target}, {"nodes", passes::step_nodes(step)}});
          kernels += emit_extern(q, e) + "\n";
        }
        step_ends.push_back(kernels.size());
        ++bodies;
      }
    };
    add_kernels(p);
    cpu::for_each_subprogram(
        p, [&](const passes::Program& sub, const std::string&) { add_kernels(sub); });
    r.manifest_fields["host_steps"] = host_steps;
    r.manifest_fields["gemm_epilogues"] = fused;
    r.manifest_fields["cudnn_convs"] = cudnn_convs;
    r.manifest_fields["direct_convs"] = direct_convs;
    // the runtime kernels host steps call, and those cuDNN convolutions fall back to (checked
    // at load)
    std::set<std::string> externs;
    for (const auto& h : host_steps) externs.insert(h["target"].get<std::string>());
    for (const auto& c : cudnn_convs) externs.insert(c["target"].get<std::string>());
    r.manifest_fields["externs"] = std::vector<std::string>(externs.begin(), externs.end());
    r.kernel_bodies = bodies;
    auto pre = [&](bool with_complex) {
      std::string t = preamble(with_complex);
      for (size_t pos = t.find("anvil_model"); pos != std::string::npos;
           pos = t.find("anvil_model", pos + o.cpp_namespace.size()))
        t.replace(pos, 11, o.cpp_namespace);
      return t;
    };
    // Each unit includes the complex headers only when its text uses complex values (host code
    // of model.cu rarely does: the kernels and host steps are in kernels_<i>.cu).
    const std::string plain = pre(false);
    const std::string model_body = cpu::emit_model(p, r.manifest_target,
                                                   model_metadata_json(p, r.manifest_target), o,
                                                   plain)
                                       .substr(plain.size());
    r.sources.push_back(
        {"model.cu", (cpu::needs_complex(model_body) ? pre(true) : plain) + model_body});
    // The CUTLASS kernels the autotuner chose for plain GEMMs (driver/gemm_tune.cpp), one unit
    // each, built with CUTLASS's include dirs.
    std::map<std::string, std::string> chosen, own;  // own: anvil's skinny kernels
    auto own_kernel = [](const passes::GemmKernelChoice& c) { return gemm::is_skinny_name(c.name); };
    // A step whose kernel runs on sm_90 alone and has no cuBLASLt fallback: the package then
    // needs compute capability 9.0. The skinny and fast_f32 kernels refuse another GPU and the
    // step runs cuBLASLt (emit_gemm), except in a bucket of a symbolic M.
    bool needs_sm90 = false;
    auto add_chosen = [&](const passes::Program& q) {
      for (const auto& step : q.steps) {
        const auto* g = std::get_if<passes::GemmStep>(&step);
        if (!g || !g->batch.empty()) continue;
        if (!g->choice.source.empty()) {
          (own_kernel(g->choice) ? own : chosen).emplace(g->choice.entry, g->choice.source);
          needs_sm90 = needs_sm90 || !gemm::has_library_fallback(g->choice.name);
        }
        for (const passes::GemmBucket& bk : g->buckets) {  // symbolic M: a choice per bucket
          if (bk.choice.source.empty()) continue;
          needs_sm90 = true;
          (own_kernel(bk.choice) ? own : chosen).emplace(bk.choice.entry, bk.choice.source);
        }
      }
    };
    add_chosen(p);
    cpu::for_each_subprogram(
        p, [&](const passes::Program& sub, const std::string&) { add_chosen(sub); });
    int t = 0;
    if (!chosen.empty()) {
      std::string why;
      const auto h = gemm::find_cutlass_headers(&why);
      if (!h) throw Error("CUTLASS headers not found", "codegen/cuda", "the headers the tuner used", why);
      // Each unit compiled exactly as the tuner compiled it (sm_90a only: CUTLASS's sm90
      // kernels are empty for other archs), so the object cache already holds it.
      for (const auto& [entry, source] : chosen) {
        GeneratedSource f{"gemm_kernel_" + std::to_string(t++) + ".cu", source, {}, {}};
        f.flags = gemm::cutlass_nvcc_flags(*h);
        f.cache_name = "candidate.cu";
        r.sources.push_back(std::move(f));
      }
    }
    // anvil's skinny kernels: sm_90a units without CUTLASS; on an older GPU their entry refuses
    // the call and the step runs cuBLASLt (emit_gemm), so the package keeps running there.
    if (needs_sm90) r.manifest_fields["cuda_min_capability"] = 90;  // checked at load
    for (const auto& [entry, source] : own) {
      GeneratedSource f{"gemm_kernel_" + std::to_string(t++) + ".cu", source, {}, {}};
      f.flags = gemm::skinny_nvcc_flags();
      f.cache_name = "candidate.cu";
      r.sources.push_back(std::move(f));
    }
    // The steps' code in units of about ANVIL_CUDA_UNIT_KB KB (cut between steps), which nvcc
    // compiles in parallel: one unit of DenseNet-121's 2.4 MB took a minute on one core.
    int u = 0;
    for (const std::string& text : split_units(kernels, step_ends, unit_bytes()))
      r.sources.push_back({"kernels_" + std::to_string(u++) + ".cu",
                           pre(cpu::needs_complex(text)) + "\nnamespace " + o.cpp_namespace +
                               " {\n\n" + text + "}  // namespace " + o.cpp_namespace + "\n"});
    return r;
  }

  BuildResult build(const std::vector<SourceFile>& sources, const std::string& output_so,
                    ToolchainOptions options) const override {
    if (options.compiler.empty()) options.compiler = default_nvcc();
    options.compile_flags = {"-O3",     "-std=c++17", "-Xcompiler",
                             "-fPIC",   "-Xcompiler", "-fvisibility=hidden",
                             "-cudart", "shared",     "-w"};
    if (options.target == "cuda-sm90")
      for (const char* f : {"-gencode", "arch=compute_90a,code=sm_90a", "-gencode",
                            "arch=compute_80,code=compute_80"})
        options.compile_flags.push_back(f);
    else
      for (const char* f : {"-gencode", "arch=compute_80,code=sm_80", "-gencode",
                            "arch=compute_80,code=compute_80"})
        options.compile_flags.push_back(f);
    options.link_flags = {"-shared", "-Xcompiler", "-fPIC", "-cudart", "shared"};
    return build_shared_library(sources, output_so, options);
  }
};

const CudaTarget kCudaTarget;
const TargetRegistration kRegistration{&kCudaTarget};

}  // namespace

}  // namespace anvil::codegen::cuda
