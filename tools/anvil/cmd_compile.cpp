// `anvil compile MODEL.pt2 -o MODEL.anvil`: compiles a torch.export archive into a .anvil
// package (driver::compile_pt2) and prints a short summary: kernels, planned peak memory,
// package and weights sizes, time per phase.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "core/error.h"

namespace anvil::cli {

namespace {

/// "0.42 s", or "3.1 ms" below a tenth of a second.
std::string secs(double s) {
  std::ostringstream os;
  if (s < 0.1)
    os << std::fixed << std::setprecision(1) << s * 1e3 << " ms";
  else
    os << std::fixed << std::setprecision(2) << s << " s";
  return os.str();
}

}  // namespace

ArgParser compile_parser() {
  ArgParser p("compile",
              "compile MODEL.pt2 [-o MODEL.anvil] [--target T] [--emit-source DIR [--emit-only]] "
              "[--cache-dir D] [-q]",
              "Compile a .pt2 into a .anvil package (native code + weights) for runtime::Model.");
  p.positional("MODEL.pt2", "archive written by torch.export.save")
      .option("--output", "-o", "FILE",
              "the package to write (default: MODEL.anvil in the current directory)")
      .option("--target", "", "T",
              "native (default: this machine's CPU), x86_64-avx2, x86_64-avx512 or x86_64")
      .option("--emit-source", "", "DIR",
              "also write the generated C++ (model.cpp, kernels_*.cpp), manifest.json and the "
              "loop IR (program.txt) into DIR")
      .flag("--emit-only", "",
            "with --emit-source: write the sources and stop (no compiler runs, no package)")
      .option("--cache-dir", "", "D",
              "object cache folder (default $ANVIL_CACHE_DIR, else ~/.cache/anvil)")
      .option("--jobs", "-j", "N", "parallel compiler processes (default: hardware threads)")
      .option("--autotune", "", "MODE",
              "GEMM autotuning: off (default), fast (libraries + the first 4 templates) or max "
              "(every candidate)")
      .option("--gemm-backends", "", "LIST",
              "candidate families, comma-separated: own, openblas, onednn, cublaslt, cutlass "
              "(aten = the libraries; default: all)")
      .option("--gemm-allow", "", "REGEX", "keep only candidates whose name contains a match")
      .option("--gemm-deny", "", "REGEX", "drop candidates whose name contains a match")
      .option("--gemm-max-candidates", "", "N", "time at most the first N templates per GEMM")
      .option("--gemm-min-size", "", "N",
              "offer templates only when M*N*K >= N (default 1; equality admits)")
      .option("--autotune-cache", "", "DIR",
              "where tuning choices are kept (default: <cache-dir>/autotune)")
      .flag("--no-gemm-fallback", "",
            "fail when every candidate of a GEMM fails instead of keeping the default path")
      .flag("--verbose", "-v", "print each GEMM candidate's time")
      .flag("--quiet", "-q", "no progress and no summary")
      .notes(
          "The target is recorded in the package: loading it on a CPU without that ISA is an\n"
          "error. Object files are cached by content hash, so recompiling an unchanged model is\n"
          "fast. The package holds manifest.json, model.so, weights.bin (mmapped at load) and\n"
          "the generated sources under src/.\n");
  return p;
}

int cmd_compile(const ParsedArgs& args) {
  const std::string model = args.positionals().at(0);
  const bool quiet = args.has("--quiet");
  require_file(model, "model");
  driver::CompileOptions o = compile_options(args, quiet);
  if (auto d = args.value("--emit-source")) {
    if (d->empty()) throw UsageError("--emit-source needs a directory");
    o.emit_source_dir = *d;
  }
  o.emit_only = args.has("--emit-only");
  if (o.emit_only && o.emit_source_dir.empty())
    throw UsageError("--emit-only needs --emit-source DIR (where the sources go)");
  std::string out = std::filesystem::path(model).stem().string() + ".anvil";
  if (auto v = args.value("--output")) {
    if (v->empty()) throw UsageError("--output needs a file name");
    out = *v;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(out, ec))
    throw Error("output is a directory", out, "a package file name (m.anvil)", "a directory");
  if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(out, model, ec))
    throw Error("output would overwrite the model", out, "a different file (m.anvil)", model);

  const driver::CompileReport r = driver::compile_pt2(model, out, o);
  if (quiet) return kExitOk;
  if (o.emit_only) {
    std::cout << "emitted " << model << " -> " << r.emitted_files.size() << " files in "
              << o.emit_source_dir << " (target " << r.target << "; not compiled, no package)\n";
    return kExitOk;
  }
  std::cout << "compiled " << model << " -> " << out << "\n"
            << "  target:       " << r.target;
  if (!r.cpu_features.empty()) {
    std::cout << " (needs";
    for (size_t i = 0; i < r.cpu_features.size() && i < 6; ++i)
      std::cout << " " << r.cpu_features[i];
    if (r.cpu_features.size() > 6) std::cout << " ... " << r.cpu_features.size() << " features";
    std::cout << ")";
  }
  std::cout << "\n  kernels:      " << r.num_kernels << " (" << r.num_loop_kernels << " loop, "
            << r.num_gemms << " gemm, " << r.num_externs << " extern) from " << r.graph_nodes
            << " graph nodes\n"
            << "  peak memory:  "
            << (r.planned_peak_bytes < 0 ? std::string("unbounded")
                                         : bytes_str(static_cast<size_t>(r.planned_peak_bytes)))
            << " planned scratch";
  if (r.arena_formula.find_first_not_of("0123456789") != std::string::npos)
    std::cout << " at the largest shapes (" << r.arena_formula << " bytes)";
  std::cout << "\n  package:      " << bytes_str(static_cast<size_t>(r.package_bytes)) << "\n"
            << "  weights:      " << bytes_str(static_cast<size_t>(r.weights_bytes)) << " ("
            << r.num_constants << " constants)\n"
            << "  time:         import " << secs(r.import_s) << ", passes " << secs(r.passes_s)
            << ", codegen " << secs(r.codegen_s) << ", build " << secs(r.build_s) << " ("
            << r.units_compiled << " compiled, " << r.units_cached << " cached), package "
            << secs(r.package_s) << "; total " << secs(r.total_s) << "\n";
  if (o.gemm.mode != codegen::gemm::AutotuneMode::kOff)
    std::cout << "  autotune:     " << r.gemms_tuned << " GEMMs tuned (" << r.gemm_candidates_timed
              << " candidates timed), " << r.gemms_from_cache << " from the tuning cache, "
              << r.gemms_default << " on the default path"
              << (r.gemms_bucketed > 0 ? " (" + std::to_string(r.gemms_bucketed) +
                                             " GEMM(s) with a symbolic M tuned per M bucket)"
                                       : std::string())
              << "; " << secs(r.tune_s) << "\n";
  if (!o.emit_source_dir.empty())
    std::cout << "  sources:      " << r.emitted_files.size() << " files in " << o.emit_source_dir
              << "\n";
  return kExitOk;
}

}  // namespace anvil::cli
