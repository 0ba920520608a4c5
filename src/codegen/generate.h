// Code generation: runs the compiler passes on a graph, then has the target named by
// CodegenOptions::target (codegen/target.h: the CPU target's C++, the CUDA target's CUDA C++)
// emit sources implementing include/anvil/anvil_rt.h, and writes the target-neutral package
// manifest (docs/package_format.md) and the constants the package's weights.bin holds. The
// target's toolchain compiles the sources; the package writer assigns the constants' offsets.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "passes/loop_ir.h"
#include "passes/pipeline.h"

namespace anvil::codegen {

/// Options of code generation.
struct CodegenOptions {
  /// The target name: "native", "x86_64-avx512", "x86_64-avx2" or "x86_64" (generic) for the
  /// CPU (the toolchain's resolve_target gives the manifest target and CPU features), or
  /// "cuda-sm90" / "cuda-sm80" (codegen/cuda); build the sources with the same target.
  std::string target = "native";
  /// Kernels are split over at most this many translation units (plus model.cpp) so that the
  /// toolchain compiles them in parallel.
  int num_translation_units = 4;
  /// Elements a kernel must touch before its outer loop goes through api->parallel_for.
  int64_t parallel_min_work = 32768;
  /// Reductions over one long row (>= 128 Ki elements, at most 16 rows) run split over the
  /// pool, partial results combined in order (codegen/cpu/emit_kernel.cpp). Off with
  /// ANVIL_SPLIT_REDUCTIONS=0 at compile time (the driver reads it) for comparisons.
  bool split_reductions = true;
  /// Which compiler passes run.
  passes::PipelineOptions pipeline;
  std::string anvil_version = "0.1.0";
  /// C++ namespace of the generated code and the exported entry function. Tests that put
  /// several models in one library change them; packages keep the defaults (the ABI symbol).
  std::string cpp_namespace = "anvil_model";
  std::string entry_symbol = "anvil_model_entry";
};

/// One generated file.
struct GeneratedSource {
  std::string filename;  // "model.cpp", "kernels_0.cpp", ...
  std::string text;
  std::vector<std::string> flags;  // this unit's own compile flags (SourceFile::flags), if any
  std::string cache_name;          // SourceFile::cache_name
};

/// A constant of the package, in manifest order (= AnvilRunArgs::constants order).
struct NamedConstant {
  std::string name;
  Tensor tensor;  // contiguous
};

/// Everything the package writer and the toolchain need.
struct CodegenResult {
  std::vector<GeneratedSource> sources;
  std::string manifest_json;  // constants' "offset" fields are 0
  std::vector<NamedConstant> constants;
  std::string target;                     // manifest target: "cpu-x86_64-avx512", ...
  std::vector<std::string> cpu_features;  // manifest "cpu_features" (the runtime checks them)
  /// Flags the sources need beyond the toolchain's (-O3 -fPIC -std=c++17 + ISA flags): pass
  /// them as ToolchainOptions::extra_flags. `-fopenmp-simd` honours the `#pragma omp simd` of
  /// the inner loops.
  std::vector<std::string> compile_flags;
  passes::ProgramStats stats;
  int64_t planned_peak_bytes = 0;  // at the symbols' maxima; -1 when unbounded
  std::string arena_bytes;         // the arena size formula (SymInt text)
  std::string program_text;        // the loop-kernel IR (passes::print_program)
  /// Kernel de-duplication (docs/design_notes.md): step functions that call an implementation
  /// another step also uses (a group of n identical kernels counts n - 1), and the number of
  /// distinct step implementations emitted.
  int kernels_shared = 0;
  int kernel_bodies = 0;
};

using CpuCodegenOptions = CodegenOptions;
using CpuCodegenResult = CodegenResult;

/// Runs the passes (adjusted by the target) on `graph` and generates code for options.target.
/// Throws Error naming the node for unsupported ops / features; a target that cannot compile
/// some steps lists them all in one error.
CodegenResult generate(const ir::Graph& graph, const CodegenOptions& options = {});
/// Emits the sources and the manifest of an already lowered program for options.target.
CodegenResult generate_program(const passes::Program& program, const CodegenOptions& options = {});
/// The passes' options as the target of `options` wants them.
passes::PipelineOptions pipeline_for(const CodegenOptions& options);

/// generate() / generate_program() for a CPU target (the names most tests use).
CodegenResult generate_cpu(const ir::Graph& graph, const CodegenOptions& options = {});
CodegenResult generate_cpu_program(const passes::Program& program,
                                   const CodegenOptions& options = {});

}  // namespace anvil::codegen
