#include "driver/compile.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "codegen/generate.h"
#include "codegen/gemm/gemm_filter.h"
#include "driver/gemm_default.h"
#include "driver/gemm_tune.h"
#include "codegen/target.h"
#include "core/env_switch.h"
#include "core/error.h"
#include "codegen/cache.h"
#include "frontend/pt2_reader.h"
#include "passes/pipeline.h"
#include "runtime/package.h"

namespace anvil::driver {

namespace fs = std::filesystem;

namespace {

constexpr const char* kAnvilVersion = "0.1.0";

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string read_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Error(what + " file not found", path, "an existing file", "no such file");
  if (!fs::is_regular_file(path, ec))
    throw Error(what + " is not a regular file", path, "a file", "a directory or device");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open " + what, path, "a readable file", "open failed");
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw Error("cannot read " + what, path, "a readable file", "read failed");
  return ss.str();
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) throw Error("cannot write file", path.string(), "a writable file", "write failed");
}

/// A name next to `target` that no other process or thread uses ("<target>.tmp-<pid>-<n>").
std::string temp_sibling(const std::string& target) {
  static std::atomic<int64_t> counter{0};
  return target + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

void ensure_parent_dir(const std::string& path) {
  const fs::path parent = fs::absolute(path).parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (!fs::is_directory(parent, ec))
    throw Error("cannot create the output directory", parent.string(), "a writable directory",
                ec ? ec.message() : "not a directory");
}

/// Removes a folder when it goes out of scope.
struct ScopedDir {
  fs::path path;
  ~ScopedDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

/// size and mtime of the running executable: changes whenever anvil is rebuilt.
std::string executable_identity() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "unknown";
  const auto size = fs::file_size(exe, ec);
  if (ec) return "unknown";
  const auto mtime = fs::last_write_time(exe, ec).time_since_epoch().count();
  return exe.string() + ":" + std::to_string(size) + ":" + std::to_string(mtime);
}

std::string cache_root(const CompileOptions& o) {
  return o.cache_dir.empty() ? codegen::default_cache_dir() : o.cache_dir;
}

/// Writes the generated sources, the manifest and the loop IR into `dir`.
std::vector<std::string> emit_sources(const std::string& dir, const codegen::CpuCodegenResult& gen,
                                      const std::string& manifest_json) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec))
    throw Error("cannot create the source directory", dir, "a writable directory",
                ec ? ec.message() : "not a directory");
  std::vector<std::string> written;
  auto put = [&](const std::string& name, const std::string& text) {
    const fs::path p = fs::path(dir) / name;
    write_text(p, text);
    written.push_back(p.string());
  };
  for (const auto& s : gen.sources) put(s.filename, s.text);
  put("manifest.json", manifest_json);
  put("program.txt", gen.program_text);
  return written;
}

/// The manifest's "gemm" record: the autotune mode; per GEMM step, the kernel it runs
/// ("default": the target's fixed path), its measured time and how many candidates were timed
/// (a symbolic M tuned per bucket: kernel "per bucket" and "buckets", the same per M range);
/// and how many epilogues the GEMMs apply in their store (the target's own record of them:
/// the CPU's "gemm_fused_epilogues" count, the CUDA target's "gemm_epilogues" list).
nlohmann::json gemm_manifest(const passes::Program& program,
                             const codegen::gemm::GemmOptions& o, const nlohmann::json& manifest) {
  nlohmann::json steps = nlohmann::json::array();
  auto record = [](const passes::GemmKernelChoice& c) {
    return nlohmann::json{{"kernel", c.name.empty() ? "default" : c.name},
                          {"time_us", c.time_us},
                          {"candidates", c.candidates}};
  };
  for (const auto& step : program.steps)
    if (const auto* g = std::get_if<passes::GemmStep>(&step)) {
      nlohmann::json s = record(g->choice);
      s["step"] = g->name;
      if (!g->buckets.empty()) {
        s["kernel"] = "per bucket";
        s["buckets"] = nlohmann::json::array();
        for (const passes::GemmBucket& b : g->buckets) {
          nlohmann::json j = record(b.choice);
          j["m_min"] = b.m_min;
          j["m_max"] = b.m_max == SymRange::kSymMax ? nlohmann::json(nullptr)  // unbounded
                                                    : nlohmann::json(b.m_max);
          s["buckets"].push_back(j);
        }
      }
      steps.push_back(s);
    }
  int fused = 0;
  if (manifest.contains("gemm_fused_epilogues") && manifest["gemm_fused_epilogues"].is_number())
    fused = manifest["gemm_fused_epilogues"].get<int>();
  else if (manifest.contains("gemm_epilogues") && manifest["gemm_epilogues"].is_array())
    fused = static_cast<int>(manifest["gemm_epilogues"].size());
  return {{"autotune", codegen::gemm::autotune_mode_name(o.mode)},
          {"steps", steps},
          {"fused_epilogues", fused}};
}

/// How many mixed GEMM steps (GemmStep::b_dtype) of `program` lack a chosen kernel for some M
/// (a symbolic M: every bucket needs one).
int mixed_steps_without_kernel(const passes::Program& program) {
  int n = 0;
  for (const auto& step : program.steps) {
    const auto* g = std::get_if<passes::GemmStep>(&step);
    if (!g || !g->b_dtype || !g->choice.source.empty()) continue;
    const bool every_bucket =
        !g->buckets.empty() &&
        std::all_of(g->buckets.begin(), g->buckets.end(),
                    [](const passes::GemmBucket& b) { return !b.choice.source.empty(); });
    if (!every_bucket) ++n;
  }
  return n;
}

}  // namespace

const char* anvil_version() { return kAnvilVersion; }

CompileReport compile_graph(const ir::Graph& graph, const std::string& out_path,
                            const CompileOptions& options) {
  const auto t_start = Clock::now();
  CompileReport r;
  r.graph_nodes = static_cast<int64_t>(graph.num_nodes());
  const std::string cache_dir = cache_root(options);
  ANVIL_CHECK(!options.emit_only || !options.emit_source_dir.empty(), "compile",
              "emit-only needs a folder for the sources", "--emit-source DIR", "none");

  codegen::CodegenOptions co;
  co.target = options.target;
  co.num_translation_units = options.num_translation_units;
  co.anvil_version = kAnvilVersion;
  if (!env_switch("ANVIL_SPLIT_REDUCTIONS", true)) co.split_reductions = false;
  // Resolve first: an unknown target fails before any work.
  const codegen::Target& backend = codegen::find_target(options.target);
  const codegen::TargetInfo target = backend.describe(options.target, options.compiler, cache_dir);

  auto t = Clock::now();
  passes::PipelineOptions pipeline = codegen::pipeline_for(co);
  // Mixed GEMMs (an int8 matrix converted to a float16 / bfloat16 A's dtype, spec B.4.1
  // "mixed_mm") as one step only where the autotuner can give it a mixed-input kernel: a CUDA
  // package tuned with CUTLASS candidates. Others keep the conversion kernel and the GEMM.
  pipeline.mixed_gemm = backend.device_type() == Device::Type::kCUDA &&
                        options.gemm.mode != codegen::gemm::AutotuneMode::kOff &&
                        codegen::gemm::backend_enabled(options.gemm,
                                                       codegen::gemm::GemmBackend::kCutlass);
  passes::Program program = passes::compile_to_program(graph, pipeline);
  r.passes_s = seconds_since(t);

  codegen::ToolchainOptions to;
  to.target = options.target;
  to.compiler = options.compiler;
  to.cache_dir = cache_dir;
  to.include_dir = options.include_dir;
  to.jobs = options.jobs;
  to.progress = options.progress;
  to.use_cache = options.use_object_cache;

  t = Clock::now();
  GemmTuneReport tuned = tune_gemms(program, options.gemm, backend, target, to);
  if (const int lacking = mixed_steps_without_kernel(program); lacking > 0) {
    // No mixed-input kernel (no GPU or CUTLASS here, every candidate failed): lowered again as
    // a conversion kernel and a GEMM; the other GEMMs' choices come from the tuning cache.
    pipeline.mixed_gemm = false;
    program = passes::compile_to_program(graph, pipeline);
    const GemmTuneReport first = tuned;
    tuned = tune_gemms(program, options.gemm, backend, target, to);
    // what the first pass timed counts as tuned (the second found it in the cache)
    const int moved = std::min(first.tuned, tuned.from_cache);
    tuned.tuned += moved;
    tuned.from_cache -= moved;
    tuned.candidates_timed += first.candidates_timed;
    tuned.lines.insert(tuned.lines.begin(), first.lines.begin(), first.lines.end());
    for (const auto& w : first.warnings)
      if (std::find(tuned.warnings.begin(), tuned.warnings.end(), w) == tuned.warnings.end())
        tuned.warnings.push_back(w);
    tuned.warnings.push_back(std::to_string(lacking) +
                             " mixed int8 GEMM(s) got no mixed-input kernel: each runs as a "
                             "conversion to the activation's dtype and a GEMM");
  }
  // anvil's own kernels where they are known to win, for the GEMMs the tuner left alone
  if (const int own = default_gemm_kernels(program, options.gemm, backend, target); own > 0)
    tuned.lines.push_back(std::to_string(own) +
                          (backend.device_type() == Device::Type::kCPU
                               ? " GEMM(s) on anvil's own CPU kernels (untimed rules: fp32 "
                                 "with a fused epilogue, bf16 on AVX-512)"
                               : " GEMM(s) on anvil's skinny kernel (untimed rule)"));
  r.tune_s = seconds_since(t);
  r.gemms_tuned = tuned.tuned;
  r.gemms_from_cache = tuned.from_cache;
  r.gemms_default = tuned.kept_default;
  r.gemms_bucketed = tuned.bucketed;
  r.gemm_candidates_timed = tuned.candidates_timed;
  r.tune_warnings = tuned.warnings;
  r.tune_lines = tuned.lines;
  if (options.progress != codegen::ProgressMode::kQuiet)
    for (const auto& w : tuned.warnings) std::fprintf(stderr, "anvil: warning: %s\n", w.c_str());

  t = Clock::now();
  const codegen::CodegenResult gen = codegen::generate_program(program, co);
  r.target = gen.target;
  r.cpu_features = gen.cpu_features;
  r.compile_flags = target.flags;
  r.compile_flags.push_back("-O3");
  r.compile_flags.insert(r.compile_flags.end(), gen.compile_flags.begin(), gen.compile_flags.end());
  r.num_loop_kernels = gen.stats.loop_kernels;
  r.num_gemms = gen.stats.gemms;
  r.num_externs = gen.stats.externs;
  r.num_kernels = static_cast<int64_t>(program.steps.size());
  r.planned_peak_bytes = gen.planned_peak_bytes;
  r.arena_formula = gen.arena_bytes;
  r.num_constants = static_cast<int64_t>(gen.constants.size());
  // Record how the package was built (the runtime ignores keys it does not know).
  nlohmann::json manifest = nlohmann::json::parse(gen.manifest_json);
  manifest["build"] = {
      {"compile_flags", r.compile_flags},
      {"compiler", options.compiler.empty() ? codegen::default_compiler() : options.compiler},
      {"target_name", options.target}};
  manifest["gemm"] = gemm_manifest(program, options.gemm, manifest);
  const std::string manifest_json = manifest.dump(2);
  r.codegen_s = seconds_since(t);

  if (!options.emit_source_dir.empty())
    r.emitted_files = emit_sources(options.emit_source_dir, gen, manifest_json);
  if (options.emit_only) {
    r.total_s = seconds_since(t_start);
    return r;
  }

  // Build model.so in a private scratch folder.
  t = Clock::now();
  static std::atomic<int64_t> build_counter{0};
  ScopedDir scratch{fs::temp_directory_path() / ("anvil_compile_" + std::to_string(::getpid()) +
                                                 "_" + std::to_string(build_counter++))};
  fs::remove_all(scratch.path);
  fs::create_directories(scratch.path);
  std::vector<codegen::SourceFile> sources;
  for (const auto& s : gen.sources) sources.push_back({s.filename, s.text, s.flags, s.cache_name});
  to.extra_flags = gen.compile_flags;
  const codegen::BuildResult built =
      backend.build(sources, (scratch.path / "model.so").string(), to);
  r.units_compiled = built.compiled;
  r.units_cached = built.cached;
  r.build_s = seconds_since(t);

  // The package, written under a temporary name and renamed into place.
  t = Clock::now();
  ensure_parent_dir(out_path);
  runtime::PackageContents pc;
  pc.manifest_json = manifest_json;
  pc.model_so_path = built.so_path;
  for (const auto& c : gen.constants) pc.constants.push_back(c.tensor);
  for (const auto& s : gen.sources) pc.sources.emplace_back(s.filename, s.text);
  const std::string tmp = temp_sibling(out_path);
  runtime::Manifest written;
  try {
    written = runtime::write_package(tmp, pc);
    fs::rename(tmp, out_path);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  for (const auto& c : written.constants)
    r.weights_bytes = std::max<int64_t>(r.weights_bytes, static_cast<int64_t>(c.offset + c.nbytes));
  r.package_bytes = static_cast<int64_t>(fs::file_size(out_path));
  r.package_path = out_path;
  r.package_s = seconds_since(t);
  r.total_s = seconds_since(t_start);
  return r;
}

CompileReport compile_pt2(const std::string& pt2_path, const std::string& out_path,
                          const CompileOptions& options) {
  const auto t0 = Clock::now();
  const std::string bytes = read_file(pt2_path, "model");
  const std::unique_ptr<ir::Graph> graph = frontend::load_pt2_bytes(bytes, pt2_path);
  const double import_s = seconds_since(t0);
  CompileReport r = compile_graph(*graph, out_path, options);
  r.import_s = import_s;
  r.total_s = seconds_since(t0);
  return r;
}

std::string package_cache_path(const std::string& pt2_path, const CompileOptions& options) {
  const std::string cache_dir = cache_root(options);
  const codegen::TargetInfo target =
      codegen::find_target(options.target).describe(options.target, options.compiler, cache_dir);
  std::ostringstream key;
  key << "anvil-package-cache-v1\n"
      << "pt2 " << codegen::sha256_hex(read_file(pt2_path, "model")) << "\n"
      << "target " << target.manifest_target << "\n";
  for (const auto& f : target.cpu_features) key << "feature " << f << "\n";
  for (const auto& f : target.flags) key << "flag " << f << "\n";
  key << "compiler " << (options.compiler.empty() ? codegen::default_compiler() : options.compiler)
      << "\n"
      << "translation_units " << options.num_translation_units << "\n"
      << "anvil " << kAnvilVersion << "\n"
      << "abi " << runtime::kPackageFormatVersion << "\n"
      << "exe " << executable_identity() << "\n";
  const auto& g = options.gemm;
  if (g.mode != codegen::gemm::AutotuneMode::kOff) {
    key << "autotune " << codegen::gemm::autotune_mode_name(g.mode) << " allow " << g.allow_regex
        << " deny " << g.deny_regex.value_or("<none>") << " cap " << g.max_profiled << " min "
        << g.min_gemm_size << " fallback " << g.fallback << " backends";
    for (auto b : g.backends) key << " " << codegen::gemm::gemm_backend_name(b);
    key << "\n";
  }
  const std::string stem = fs::path(pt2_path).stem().string();
  return (fs::path(cache_dir) / "packages" /
          (stem + "-" + codegen::sha256_hex(key.str()).substr(0, 32) + ".anvil"))
      .string();
}

std::string cached_package_for(const std::string& pt2_path, const CompileOptions& options,
                               CompileReport* report) {
  ANVIL_CHECK(!options.emit_only, "compile", "emit-only writes no package to cache",
              "a compile that builds", "emit_only");
  const std::string path = package_cache_path(pt2_path, options);
  std::error_code ec;
  if (codegen::touch_cache_entry(path)) {  // a hit: marked as recently used for pruning (codegen/cache.h)
    if (report) {
      *report = CompileReport{};
      report->package_path = path;
      report->package_bytes = static_cast<int64_t>(fs::file_size(path, ec));
      report->cache_hit = true;
    }
    return path;
  }
  CompileReport r = compile_pt2(pt2_path, path, options);
  codegen::prune_after_insert(cache_root(options), path);
  if (report) *report = std::move(r);
  return path;
}

}  // namespace anvil::driver
