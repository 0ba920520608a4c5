// The toolchain driver: compiles generated translation units in parallel with the system C++
// compiler, caches object files (and the linked library) by content hash, and links model.so.
//
// Cache: $ANVIL_CACHE_DIR, else $XDG_CACHE_HOME/anvil, else ~/.cache/anvil. An object's key is
// SHA-256 over the compiler's identity (resolved path + `--version`), every flag, the resolved
// target (for `native`: the macros -march=native defines), anvil_rt.h and the source text.
// Compiler: $ANVIL_CXX, else `c++`. Jobs: hardware threads unless ToolchainOptions::jobs is set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace anvil::codegen {

/// A compilation target: what `--target NAME` means.
struct TargetInfo {
  std::string name;                       // "native", "x86_64-avx2", "x86_64-avx512", "x86_64"
  std::string manifest_target;            // manifest "target": "cpu-x86_64-avx2", ...
  std::vector<std::string> flags;         // ISA flags: -march=... -m...
  std::vector<std::string> cpu_features;  // manifest "cpu_features" the runtime checks at load
};

/// Resolves a target name (native | x86_64-avx2 | x86_64-avx512 | x86_64). For `native` the
/// features are read from the compiler's -march=native macros (probe cached under `cache_dir`,
/// default_cache_dir() when empty). Throws Error for unknown names.
TargetInfo resolve_target(const std::string& name, const std::string& compiler = "",
                          const std::string& cache_dir = "");

/// How build progress is shown on stderr.
enum class ProgressMode {
  kAuto,   // a bar on a terminal, plain lines otherwise
  kBar,    // a one-line bar redrawn with \r
  kLines,  // one line per translation unit
  kQuiet,  // nothing
};

/// Options of one build.
struct ToolchainOptions {
  std::string target = "native";
  std::string compiler;     // empty: $ANVIL_CXX or "c++"
  std::string cache_dir;    // empty: default_cache_dir()
  std::string include_dir;  // the folder holding anvil/anvil_rt.h; empty: default_include_dir()
  std::string build_dir;    // where sources are written for the compiler; empty: a fresh folder
                            // under cache_dir/build, removed after a successful build
  int jobs = 0;             // parallel compiler processes; 0: hardware threads
  std::string opt_level = "-O3";
  std::vector<std::string> extra_flags;
  /// Set by a non-CPU target (codegen/target.h): its whole compile line's flags (then `target`
  /// is not resolved as a CPU target and no -fPIC / -std / ISA flags are added) and its link
  /// flags (default: -shared -fPIC -Wl,-z,defs -Wl,-O1).
  std::vector<std::string> compile_flags;
  std::vector<std::string> link_flags;
  ProgressMode progress = ProgressMode::kAuto;
  bool use_cache = true;
};

/// One generated translation unit.
struct SourceFile {
  std::string name;  // file name, e.g. "kernels_0.cpp" (no directories)
  std::string code;
  /// This unit's compile flags in place of the build's (ToolchainOptions::compile_flags or the
  /// target's), when set; extra_flags still follow.
  std::vector<std::string> flags;
  /// The name the object cache keys this unit by, when set (else `name`): a unit compiled
  /// elsewhere under another name with the same text and flags (the autotuner's candidate.cu)
  /// is then found in the cache.
  std::string cache_name;
};

/// What build_shared_library did.
struct BuildResult {
  std::string so_path;
  TargetInfo target;
  int compiled = 0;     // translation units the compiler ran on
  int cached = 0;       // translation units served from the object cache
  bool linked = false;  // false when the linked library came from the cache
  double seconds = 0;
};

/// Compiles `sources` (in parallel, through the object cache) and links them into the shared
/// library `output_so`. On a compiler failure throws Error carrying the compiler's message and
/// the path of the kept source file.
BuildResult build_shared_library(const std::vector<SourceFile>& sources,
                                 const std::string& output_so, const ToolchainOptions& options);

/// $ANVIL_CACHE_DIR, else $XDG_CACHE_HOME/anvil, else $HOME/.cache/anvil.
std::string default_cache_dir();
/// The first that holds anvil/anvil_rt.h of: $ANVIL_INCLUDE_DIR (taken as is), <exe>/../include
/// (an installed tree), the ANVIL_RT_INCLUDE_DIR compile definition (the source tree),
/// <exe>/../../include. Throws Error when none does.
std::string default_include_dir();
/// The compiler command used when none is given: $ANVIL_CXX or "c++".
std::string default_compiler();
/// Compiler processes started by this process so far for translation units (not link or probe).
int64_t compile_invocations();
/// Link processes started by this process so far.
int64_t link_invocations();
/// Lowercase hex SHA-256 of `data` (the cache key function).
std::string sha256_hex(const std::string& data);

}  // namespace anvil::codegen
