// `anvil bench MODEL [-i IN.npy ...] [--iters N] [--warmup W] [--threads T]`: times
// runtime::Model::run on a package (or a .pt2 compiled into the package cache) and prints the
// latency percentiles, then, as the last line, one JSON object with the figures.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/model.h"

namespace anvil::cli {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// The value at quantile `q` of sorted `v` (linear interpolation between neighbours).
double quantile(const std::vector<double>& v, double q) {
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

/// `ms` rounded to 0.1 microsecond (JSON without float noise).
double round_ms(double ms) { return std::round(ms * 1e4) / 1e4; }



}  // namespace

ArgParser bench_parser() {
  ArgParser p("bench", "bench MODEL [-i IN.npy ...] [--iters N] [--warmup W] [--threads T]",
              "Time a model's runs; print p50/p90/min latency and a JSON line last.");
  p.positional("MODEL", "a .anvil package, or a .pt2 (compiled into the package cache first)")
      .option("--input", "-i", "FILE", "a .npy input (default: random inputs of the spec)", true)
      .option("--iters", "-n", "N", "timed runs (default 100)")
      .option("--warmup", "", "W", "untimed runs first (default 10)")
      .option("--device", "", "DEV",
              "where a package runs: cpu, cuda or cuda:N (default: the device it was compiled "
              "for)")
      .option("--threads", "", "T",
              "threads of the model's pool (default: ANVIL_NUM_THREADS or the hardware threads)")
      .option("--dim", "", "SYM=N",
              "size of a symbolic dim for random inputs (default: its lower bound)", true)
      .option("--target", "", "T", "target when compiling a .pt2 (default native)")
      .option("--cache-dir", "", "D", "package and object cache when compiling a .pt2")
      .option("--backend", "", "NAME",
              "distributed backend of a package with collectives, gloo, mpi or nccl (sets "
              "ANVIL_BACKEND; run every rank under `anvil launch`)")
      .flag("--no-cuda-graphs", "", "device packages: run every step as launched, without "
                                    "capturing the run as a CUDA graph")
      .flag("--profile", "", "after the timed runs, run as many again with per-step timing and "
                             "print each step's time and bandwidth")
      .flag("--quiet", "-q", "print only the JSON line")
      .notes(
          "Latency is the wall time of one Model::run call (input checks included) on the\n"
          "calling thread. The last line is one JSON object with the keys model, package,\n"
          "iters, warmup, threads, p50_ms, p90_ms, min_ms, max_ms, mean_ms, load_ms, inputs\n"
          "(and, with --profile, \"profile\": per step name, kind, ms per call, bytes, GB/s).\n"
          "Device packages add single_ms (p50 of one call followed by a synchronize: the\n"
          "latency above), b2b_ms (the wall time of `iters` calls queued back to back with\n"
          "Model::enqueue and one synchronize at the end, per call) and cuda_graphs.\n"
          "--profile times each step of the generated run() (its own runs, after the timed\n"
          "ones; ANVIL_PROFILE=1 does the same for any program): bytes are what a step reads\n"
          "and writes if it touches each buffer once, so GB/s shows which kernels are\n"
          "memory-bound and how close they come to the machine's bandwidth.\n");
  return p;
}

int cmd_bench(const ParsedArgs& args) {
  const std::string model = args.positionals().at(0);
  const std::vector<std::string> in_paths = args.values("--input");
  const int64_t iters = args.int_value("--iters", 100, 1, 100000000);
  const int64_t warmup = args.int_value("--warmup", 10, 0, 100000000);
  const int64_t threads = args.int_value("--threads", 0, 1, 4096);
  const bool quiet = args.has("--quiet");
  const auto dims = dim_overrides(args);
  if (!in_paths.empty() && !dims.empty())
    throw UsageError("--dim shapes random inputs; it does not go with -i");
  require_file(model, "model");
  for (const auto& p : in_paths) require_file(p, "input");
  apply_backend_option(args);
  const std::string pkg = package_for(model, args, quiet);

  runtime::ModelOptions mo = model_options(args, pkg);
  mo.num_threads = static_cast<int>(threads);
  if (args.has("--no-cuda-graphs")) mo.cuda_graphs = false;
  const auto t_load = Clock::now();
  const runtime::Model m = runtime::Model::load(pkg, mo);
  const double load_ms = ms_since(t_load);
  std::vector<std::string> notes;
  const std::vector<Tensor> inputs =
      in_paths.empty() ? random_inputs(m, dims, notes) : read_inputs(in_paths, m);
  const int num_threads = m.thread_pool().num_threads();

  for (int64_t i = 0; i < warmup; ++i) m.run(inputs);
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(iters));
  for (int64_t i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    m.run(inputs);
    ms.push_back(ms_since(t0));
  }
  double sum = 0;
  for (double v : ms) sum += v;
  std::sort(ms.begin(), ms.end());
  const double p50 = quantile(ms, 0.5), p90 = quantile(ms, 0.9), mean = sum / ms.size();

  if (!quiet) {
    std::cout << "model: " << model;
    if (pkg != model) std::cout << " (package " << pkg << ")";
    std::cout << "\ntarget: " << m.manifest().target << ", threads: " << num_threads
              << ", load: " << std::fixed << std::setprecision(2) << load_ms << " ms\n";
    std::cout << "inputs: " << (in_paths.empty() ? "random" : "from .npy files");
    for (size_t k = 0; k < inputs.size(); ++k)
      std::cout << (k ? ", " : " ") << inputs[k].type_str();
    std::cout << "\n";
    for (const auto& n : notes) std::cout << "  " << n << "\n";
    std::cout << std::setprecision(4) << iters << " iters (" << warmup << " warmup): p50 " << p50
              << " ms, p90 " << p90 << " ms, min " << ms.front() << " ms, mean " << mean << " ms\n";
  }
  // Back to back (device packages): the calls queue on the stream, the host never waits.
  double b2b = -1;
  if (!m.device().is_cpu()) {
    std::vector<std::vector<Tensor>> keep;  // outputs stay alive until the synchronize
    keep.reserve(static_cast<size_t>(iters));
    m.synchronize();
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < iters; ++i) keep.push_back(m.enqueue(inputs));
    m.synchronize();
    b2b = ms_since(t0) / static_cast<double>(iters);
    if (!quiet)
      std::cout << "device: single " << std::setprecision(4) << p50 << " ms, back-to-back " << b2b
                << " ms per call (CUDA graphs " << (m.uses_cuda_graphs() ? "on" : "off") << ")\n";
  }
  nlohmann::json prof = nlohmann::json::array();
  if (args.has("--profile")) {
    m.set_profiling(true);
    m.reset_profile();
    for (int64_t i = 0; i < iters; ++i) m.run(inputs);
    m.set_profiling(false);
    const auto steps = m.profile();
    double total = 0;
    for (const auto& s : steps) total += s.total_ms;
    if (!quiet) {
      std::cout << "profile (" << iters << " runs, " << steps.size() << " steps):\n";
      std::cout << "  step      kind    ms/call    share        bytes     GB/s  nodes\n";
    }
    for (const auto& s : steps) {
      const double per = s.calls > 0 ? s.total_ms / static_cast<double>(s.calls) : 0.0;
      if (!quiet)
        std::cout << "  " << std::left << std::setw(9) << s.name << " " << std::setw(6) << s.kind
                  << std::right << std::fixed << std::setprecision(4) << std::setw(10) << per
                  << std::setprecision(1) << std::setw(8)
                  << (total > 0 ? 100.0 * s.total_ms / total : 0.0) << "% " << std::setw(12)
                  << s.bytes << std::setprecision(2) << std::setw(9) << s.gb_per_s() << "  "
                  << s.nodes.substr(0, 60) << "\n";
      prof.push_back({{"name", s.name},
                      {"kind", s.kind},
                      {"ms_per_call", round_ms(per)},
                      {"bytes", s.bytes},
                      {"gb_per_s", std::round(s.gb_per_s() * 100) / 100}});
    }
  }
  nlohmann::json j = {{"model", model},
                      {"package", pkg},
                      {"iters", iters},
                      {"warmup", warmup},
                      {"threads", num_threads},
                      {"p50_ms", round_ms(p50)},
                      {"p90_ms", round_ms(p90)},
                      {"min_ms", round_ms(ms.front())},
                      {"max_ms", round_ms(ms.back())},
                      {"mean_ms", round_ms(mean)},
                      {"load_ms", round_ms(load_ms)},
                      {"inputs", in_paths.empty() ? "random" : "files"}};
  if (b2b >= 0) {
    j["single_ms"] = round_ms(p50);
    j["b2b_ms"] = round_ms(b2b);
    j["cuda_graphs"] = m.uses_cuda_graphs();
  }
  if (args.has("--profile")) j["profile"] = prof;
  std::cout << j.dump() << std::endl;
  return kExitOk;
}

}  // namespace anvil::cli
