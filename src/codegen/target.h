// Code generation targets (docs/architecture.md, "Targets"): what turns a lowered Program into
// sources, how those sources are compiled, and what the target records in the manifest. The
// CPU target (codegen/cpu) and the CUDA target (codegen/cuda) implement it; each registers
// itself from its own folder, so adding a target changes no file outside its folder.
//
// What stays target-neutral (codegen/generate.cpp): the manifest (symbols, inputs, outputs,
// constants, kernels, collectives), the constants' values, the stats and the program text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/generate.h"
#include "codegen/toolchain.h"
#include "core/device.h"
#include "passes/loop_ir.h"
#include "passes/pipeline.h"

namespace anvil::codegen {

/// What a target emits for one program.
struct TargetSources {
  std::vector<GeneratedSource> sources;
  std::string manifest_target;  // manifest "target": "cpu-x86_64-avx2", "cuda-sm90", ...
  /// Manifest keys the target adds (cpu_features; device, cuda_min_capability, ...).
  nlohmann::json manifest_fields = nlohmann::json::object();
  std::vector<std::string> cpu_features;
  /// Flags beyond the toolchain's own for this target (ToolchainOptions::extra_flags).
  std::vector<std::string> compile_flags;
  int kernels_shared = 0;
  int kernel_bodies = 0;
};

class Target {
 public:
  virtual ~Target() = default;
  /// Short name of the implementation ("cpu", "cuda").
  virtual std::string name() const = 0;
  /// The `--target` names it serves ("native", "x86_64-avx2", ... / "cuda-sm90", "cuda-sm80").
  virtual std::vector<std::string> target_names() const = 0;
  bool serves(const std::string& target_name) const;
  /// Where its packages run.
  virtual Device::Type device_type() const = 0;
  /// What `target_name` means before any code is generated: the manifest target, the ISA flags
  /// and the CPU features (the package cache key and the compile report use it). Default: the
  /// name itself, no flags, no features.
  virtual TargetInfo describe(const std::string& target_name, const std::string& compiler,
                              const std::string& cache_dir) const;
  /// Adjusts the compiler passes for this target (e.g. no CPU-only packed GEMM forms).
  virtual void adjust_pipeline(passes::PipelineOptions& pipeline) const {}
  /// Every step of `program` this target cannot compile, one line each naming the step, its
  /// graph nodes and why (empty: all supported). Checked before emit(), so that a model meeting
  /// several unsupported ops lists them all at once.
  virtual std::vector<std::string> unsupported(const passes::Program& program) const = 0;
  /// The sources and manifest facts for `program` (target name: options.target).
  virtual TargetSources emit(const passes::Program& program,
                             const CodegenOptions& options) const = 0;
  /// Compiles `sources` into the shared library `output_so` (toolchain.h; the target fills in
  /// its compiler, flags and link line).
  virtual BuildResult build(const std::vector<SourceFile>& sources, const std::string& output_so,
                            ToolchainOptions options) const = 0;
};

/// Adds a target (the registry keeps the pointer; targets are process-lifetime objects).
/// Throws Error when one of its target names is already served.
void register_target(const Target* target);
/// The target serving `target_name`; throws Error listing every known target name otherwise.
const Target& find_target(const std::string& target_name);
/// Every registered target name, sorted.
std::vector<std::string> target_names();

/// The compile-time facts a model.so returns from metadata_json() (target, arena formula,
/// step and io counts): the same for every target.
std::string model_metadata_json(const passes::Program& program, const std::string& target);

/// Registers a target at static initialisation: `static TargetRegistration reg{&my_target};`.
struct TargetRegistration {
  explicit TargetRegistration(const Target* target) { register_target(target); }
};

}  // namespace anvil::codegen
