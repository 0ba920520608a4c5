// The user-facing compile path: .pt2 -> import -> passes -> CPU codegen -> toolchain ->
// .anvil package (what `anvil compile` and `anvil run m.pt2` do, and what C++ programs call).
//
//   driver::CompileOptions o;                       // target "native", default cache
//   driver::CompileReport r = driver::compile_pt2("m.pt2", "m.anvil", o);
//   runtime::Model model = runtime::Model::load("m.anvil");
//
// cached_package_for() compiles into a package cache instead and reuses the package when the
// same .pt2 (by content), target, compiler and anvil build were compiled before.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/gemm/gemm_candidate.h"
#include "codegen/toolchain.h"
#include "ir/graph.h"

namespace anvil::driver {

/// Options of one compile.
struct CompileOptions {
  /// native (default) | x86_64-avx2 | x86_64-avx512 | x86_64: the ISA the code is built for,
  /// recorded in the manifest (a package refuses to load on a CPU without it).
  std::string target = "native";
  /// When non-empty, the generated sources (plus manifest.json and the loop IR as program.txt)
  /// are also written here, readable.
  std::string emit_source_dir;
  /// Write the sources into emit_source_dir (which must be set) and stop there: no compiler
  /// runs and no package is written (CompileReport::package_path stays empty). For reading the
  /// generated code, and for tests that check it without paying for the compiler (AOTInductor's
  /// package_cpp_only).
  bool emit_only = false;
  /// Object and package cache; empty: codegen::default_cache_dir().
  std::string cache_dir;
  /// Build progress on stderr.
  codegen::ProgressMode progress = codegen::ProgressMode::kAuto;
  /// Parallel compiler processes; 0: hardware threads.
  int jobs = 0;
  /// C++ compiler; empty: $ANVIL_CXX or c++.
  std::string compiler;
  /// The folder holding anvil/anvil_rt.h; empty: codegen::default_include_dir().
  std::string include_dir;
  /// Kernels are spread over this many translation units (compiled in parallel).
  int num_translation_units = 4;
  /// Use the toolchain's object cache.
  bool use_object_cache = true;
  /// GEMM autotuning (driver/gemm_tune.h); off by default.
  codegen::gemm::GemmOptions gemm;
};

/// What a compile did and produced.
struct CompileReport {
  std::string package_path;
  std::string target;  // manifest target, e.g. "cpu-x86_64-avx2"
  std::vector<std::string> cpu_features;
  std::vector<std::string> compile_flags;  // ISA flags + the flags the sources need
  // Seconds per phase (0 for phases that did not run, e.g. on a cache hit).
  double import_s = 0, passes_s = 0, codegen_s = 0, build_s = 0, package_s = 0, total_s = 0;
  int64_t num_kernels = 0;  // steps of the program: loop kernels + GEMMs + externs
  int64_t num_loop_kernels = 0, num_gemms = 0, num_externs = 0;
  int64_t graph_nodes = 0;         // graph nodes before the passes
  int64_t planned_peak_bytes = 0;  // scratch arena at the symbols' maxima; -1 when unbounded
  std::string arena_formula;       // the arena size as a formula over the symbols
  int64_t package_bytes = 0;       // size of the .anvil file
  int64_t weights_bytes = 0;       // size of weights.bin (deduplicated constants)
  int64_t num_constants = 0;
  int units_compiled = 0, units_cached = 0;  // translation units: compiled / from object cache
  std::vector<std::string> emitted_files;    // paths written under emit_source_dir
  bool cache_hit = false;                    // cached_package_for: served from the cache
  // GEMM autotuning: problems tuned, served from the tuning cache, left on the default path (a
  // GEMM with a symbolic M is one problem per bucket of M, gemms_bucketed counts such GEMMs);
  // candidates timed; seconds; warnings (fallbacks); per-candidate times (--verbose).
  int gemms_tuned = 0, gemms_from_cache = 0, gemms_default = 0, gemm_candidates_timed = 0;
  int gemms_bucketed = 0;
  double tune_s = 0;
  std::vector<std::string> tune_warnings, tune_lines;
};

/// Compiles the .pt2 at `pt2_path` into the package `out_path` (written atomically: a partial
/// file never appears under that name). Throws Error for unreadable archives, unsupported ops
/// (naming the node), compiler failures (with the compiler's message) and unknown targets.
CompileReport compile_pt2(const std::string& pt2_path, const std::string& out_path,
                          const CompileOptions& options = {});

/// Compiles an already imported graph; `report.import_s` is left 0.
CompileReport compile_graph(const ir::Graph& graph, const std::string& out_path,
                            const CompileOptions& options = {});

/// Where cached_package_for() keeps the package of `pt2_path`:
/// <cache_dir>/packages/<key>.anvil, the key a SHA-256 over the .pt2's bytes, the resolved
/// target (its manifest name and CPU features), the compiler command, the anvil version and
/// the identity (size, mtime) of the running executable, so a rebuilt anvil never serves
/// packages an older build compiled. Throws Error when the .pt2 cannot be read.
std::string package_cache_path(const std::string& pt2_path, const CompileOptions& options = {});

/// The cached package of `pt2_path`: compiled into package_cache_path() on a miss, reused on a
/// hit. `report` (optional) receives the compile report, with cache_hit set (on a hit only
/// package_path, package_bytes and cache_hit are filled).
std::string cached_package_for(const std::string& pt2_path, const CompileOptions& options = {},
                               CompileReport* report = nullptr);

/// anvil's version string ("0.1.0"), recorded in manifests.
const char* anvil_version();

}  // namespace anvil::driver
