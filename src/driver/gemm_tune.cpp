#include "driver/gemm_tune.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "codegen/gemm/cuda_epilogue_standin.h"
#include "codegen/gemm/cuda_skinny.h"
#include "codegen/gemm/cutlass_candidates.h"
#include "codegen/gemm/gemm_epilogue.h"
#include "codegen/gemm/gemm_filter.h"
#include "codegen/gemm/gemm_problem.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "driver/gemm_buckets.h"
#include "runtime/device_backend.h"

extern char** environ;

namespace anvil::driver {

namespace fs = std::filesystem;
using codegen::gemm::GemmActivation;
using codegen::gemm::GemmCandidate;
using codegen::gemm::GemmBias;
using codegen::gemm::GemmOptions;
using codegen::gemm::GemmProblem;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// How many of a problem's fastest candidates are timed again, and how many more times each.
constexpr size_t kFinalists = 3;
constexpr int kRetimeRounds = 2;

struct Timing {
  double ns = kInf;
  std::string error;  // why it is +inf
};

/// Runs `argv` with stdout + stderr captured, killed after `timeout_s`.
Timing run_child(const std::vector<std::string>& argv, int timeout_s) {
  Timing t;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    t.error = std::string("pipe: ") + std::strerror(errno);
    return t;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    t.error = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return t;
  }
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool timed_out = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int pr = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    t.error = "killed after " + std::to_string(timeout_s) + " s (a hang)";
    return t;
  }
  if (WIFSIGNALED(status)) {
    t.error = std::string("crashed (") + strsignal(WTERMSIG(status)) + ")";
    return t;
  }
  const size_t at = out.find("time_ns=");
  if (WEXITSTATUS(status) != 0 || at == std::string::npos) {
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    t.error = out.empty() ? "exit " + std::to_string(WEXITSTATUS(status)) : out;
    return t;
  }
  t.ns = std::strtod(out.c_str() + at + 8, nullptr);
  return t;
}

/// Whether `c` is cuBLASLt and `act` is not one of its epilogues (erf GELU, SiLU): the package
/// would then run the bias and activation in a kernel of its own after a plain GEMM. Such a
/// candidate is timed as that: the plain GEMM, then the epilogue stand-in kernel
/// (codegen/gemm/cuda_epilogue_standin.h: bias and activation over C as the package's kernel
/// computes them; anvil-gemm-time unfused_epilogue=1 epilogue_so=...), or a device copy of C
/// when the stand-in could not be built, so a CUTLASS kernel that fuses the epilogue competes
/// with what the package would really run instead.
bool cublaslt_lacks(const GemmCandidate& c, GemmActivation act) {
  return c.backend == codegen::gemm::GemmBackend::kCublasLt && act != GemmActivation::kNone &&
         act != GemmActivation::kRelu && act != GemmActivation::kGeluTanh;
}

std::vector<std::string> child_args(const std::string& tool, const GemmProblem& p,
                                    const GemmCandidate& c, const std::string& so,
                                    const std::string& epilogue_so) {
  auto kv = [](const char* k, const auto& v) {
    std::ostringstream os;
    os << k << "=" << v;
    return os.str();
  };
  const int64_t m = *p.m, n = *p.n, k = *p.k;
  std::vector<std::string> a = {
      tool, kv("m", m), kv("n", n), kv("k", k), kv("ta", p.trans_a ? 1 : 0),
      kv("tb", p.trans_b ? 1 : 0),
      kv("lda", p.lda.value_or(p.trans_a ? m : k)), kv("ldb", p.ldb.value_or(p.trans_b ? k : n)),
      kv("ldc", p.ldc.value_or(n)), kv("a_dtype", static_cast<int>(p.a_dtype)),
      kv("b_dtype", static_cast<int>(p.b_dtype)), kv("c_dtype", static_cast<int>(p.out_dtype)),
      kv("alpha", p.alpha), kv("beta", p.beta),
      kv("b_constant", p.b_constant ? 1 : 0)};
  // A full [M, N] x (addmm's C matrix) is no bias vector: it is C itself, scaled by beta, and
  // the child's random initial C stands in for it.
  const GemmBias bias = p.bias == GemmBias::kFull ? GemmBias::kNone : p.bias;
  if (cublaslt_lacks(c, p.activation)) {  // plain GEMM + the epilogue kernel's stand-in
    a.push_back(kv("bias", 0));
    a.push_back(kv("act", 0));
    a.push_back(kv("unfused_epilogue", 1));
    if (!epilogue_so.empty()) {
      a.push_back(kv("epilogue_so", epilogue_so));
      a.push_back(kv("epilogue_entry", codegen::gemm::kEpilogueStandinEntry));
      a.push_back(kv("epi_bias", static_cast<int>(bias)));
      a.push_back(kv("epi_act", static_cast<int>(p.activation)));
    }
  } else {
    a.push_back(kv("bias", static_cast<int>(bias)));
    a.push_back(kv("act", static_cast<int>(p.activation)));
  }
  if (c.source.empty()) {
    a.push_back(kv("library", c.library));
    a.push_back(kv("variant", c.variant));
  } else {
    a.push_back(kv("so", so));
    a.push_back(kv("entry", c.entry));
  }
  return a;
}

/// What identifies this machine for the cache: the CPU model, its hardware threads and the
/// thread count the timing children run with (ANVIL_NUM_THREADS, else every hardware thread:
/// they inherit this process's environment), since the fastest CPU kernel depends on it.
std::string machine_id() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown cpu";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 1);
      break;
    }
  return model + " x" + std::to_string(std::thread::hardware_concurrency()) + " timed with " +
         std::to_string(ThreadPool::default_num_threads()) + " threads";
}

std::string cache_file(const std::string& root, const std::string& key) {
  return (fs::path(root) / "autotune" / (codegen::sha256_hex(key).substr(0, 40) + ".json"))
      .string();
}

/// The cached choice's name for `key` ("" when none).
std::string read_cached(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  try {
    const auto j = nlohmann::json::parse(in);
    return j.value("choice", "");
  } catch (const std::exception&) {
    return "";  // a torn or foreign file: tune again
  }
}

void write_cached(const std::string& path, const std::string& key, const std::string& choice,
                  const std::map<std::string, double>& times) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  nlohmann::json j;
  j["key"] = key;
  j["choice"] = choice;
  for (const auto& [name, ns] : times) j["times_ns"][name] = std::isinf(ns) ? -1.0 : ns;
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << j.dump(1);
  }
  fs::rename(tmp, path, ec);
}

/// Builds every template candidate into its own library in parallel; the path per candidate
/// ("" when it has no source or failed to compile, with the compiler's message in `errors`).
std::vector<std::string> build_templates(const std::vector<GemmCandidate>& cands,
                                         const codegen::Target& backend,
                                         const codegen::ToolchainOptions& toolchain,
                                         const std::string& dir, int jobs,
                                         std::vector<std::string>& errors) {
  std::vector<std::string> so(cands.size());
  errors.assign(cands.size(), "");
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < cands.size(); i = next++) {
      if (cands[i].source.empty()) continue;
      codegen::ToolchainOptions to = toolchain;
      const bool cutlass = cands[i].backend == codegen::gemm::GemmBackend::kCutlass;
      const bool skinny = codegen::gemm::is_skinny_candidate(cands[i]);  // nvcc, no CUTLASS
      const std::string path = (fs::path(dir) / ("cand" + std::to_string(i) + ".so")).string();
      try {
        if (cutlass) {  // nvcc with CUTLASS's include dirs (codegen/gemm/cutlass_candidates.h)
          std::string why;
          const auto headers = codegen::gemm::find_cutlass_headers(&why);
          if (!headers) throw Error("CUTLASS headers not found", cands[i].name, "", why);
          to = codegen::gemm::cutlass_toolchain_options(*headers);
          to.cache_dir = toolchain.cache_dir;
          to.include_dir = toolchain.include_dir;
        } else if (skinny) {
          to = codegen::gemm::skinny_toolchain_options();
          to.cache_dir = toolchain.cache_dir;
          to.include_dir = toolchain.include_dir;
        }
        to.jobs = 1;
        to.progress = codegen::ProgressMode::kQuiet;
        to.build_dir.clear();
        if (cutlass || skinny)
          codegen::build_shared_library({{"candidate.cu", cands[i].source}}, path, to);
        else
          backend.build({{"candidate.cpp", cands[i].source}}, path, to);
        so[i] = path;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  const int n = std::max(1, std::min<int>(jobs, static_cast<int>(cands.size())));
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  return so;
}

/// " (m in [lo, hi])" for bucket `bucket` of step `g`, "" for -1.
std::string bucket_text(const passes::GemmStep& g, int bucket) {
  if (bucket < 0) return "";
  const passes::GemmBucket& b = g.buckets[static_cast<size_t>(bucket)];
  return " (m in " + SymRange{b.m_min, b.m_max}.str() + ")";
}

/// The buckets of step `g`'s symbolic M (gemm_buckets.h) when it can be tuned per bucket: M
/// symbolic with bounds from the program's symbol ranges, N, K and the batch static (on CUDA,
/// sm > 0: no batch dims, as for any chosen kernel there). Empty otherwise.
std::vector<MBucket> symbolic_m_buckets(const passes::Program& program,
                                        const passes::GemmStep& g, int sm) {
  if (g.m.is_constant() || !g.n.is_constant() || !g.k.is_constant()) return {};
  if (sm > 0 && !g.batch.empty()) return {};
  for (const SymInt& b : g.batch)
    if (!b.is_constant()) return {};
  return m_buckets(g.m.bounds(program.symbol_ranges));
}

std::string shape_text(const GemmProblem& p) {
  return std::to_string(*p.m) + "x" + std::to_string(*p.n) + "x" + std::to_string(*p.k) + " " +
         dtype_name(p.a_dtype);
}

}  // namespace

namespace {

/// A scratch folder for candidate libraries, removed with the object.
struct Scratch {
  fs::path path;
  Scratch() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() /
           ("anvil_tune_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

int build_jobs(const GemmOptions& options) {
  return options.jobs > 0 ? options.jobs
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

/// Whether some candidate of `cands` would be timed with the epilogue stand-in on `device`.
bool wants_standin(const GemmProblem& p, const std::vector<GemmCandidate>& cands, size_t from,
                   size_t n, const std::string& device) {
  if (device == "cpu") return false;
  for (size_t i = from; i < from + n; ++i)
    if (cublaslt_lacks(cands[i], p.activation)) return true;
  return false;
}

/// Builds the epilogue stand-in (codegen/gemm/cuda_epilogue_standin.h) into `dir`; its path, or
/// "" with the reason in `why` (the children then copy C in its place).
std::string build_standin(const codegen::ToolchainOptions& toolchain, const std::string& dir,
                          std::string& why) {
  codegen::ToolchainOptions to = codegen::gemm::epilogue_standin_toolchain_options();
  to.cache_dir = toolchain.cache_dir;
  to.include_dir = toolchain.include_dir;
  to.jobs = 1;
  to.progress = codegen::ProgressMode::kQuiet;
  to.build_dir.clear();
  const std::string path = (fs::path(dir) / "epilogue_standin.so").string();
  try {
    codegen::build_shared_library(
        {{"epilogue_standin.cu", codegen::gemm::epilogue_standin_source()}}, path, to);
    return path;
  } catch (const std::exception& e) {
    why = e.what();
    return "";
  }
}

/// Times candidates [from, from + n) of `cands` whose libraries `so` built (errors beside), in
/// order, one child process at a time; the index (relative to `from`) of the fastest, or -1.
int time_built(const GemmProblem& p, const std::vector<GemmCandidate>& cands, size_t from,
               size_t n, const std::vector<std::string>& so,
               const std::vector<std::string>& build_errors, const GemmOptions& options,
               const std::string& tool, std::vector<CandidateTiming>& timings,
               const std::string& device, const std::string& epilogue_so) {
  timings.assign(n, {});
  auto time_one = [&](size_t j) {
    const size_t i = from + j;
    Timing t;
    if (!cands[i].source.empty() && so[i].empty()) {
      t.error = "did not compile: " + build_errors[i].substr(0, 300);
    } else {
      std::vector<std::string> args = child_args(tool, p, cands[i], so[i], epilogue_so);
      if (device != "cpu") args.push_back("device=" + device);
      t = run_child(args, options.child_timeout_s);
    }
    return t;
  };
  std::vector<size_t> timed;  // the candidates with a time
  for (size_t j = 0; j < n; ++j) {
    CandidateTiming& ct = timings[j];
    ct.name = cands[from + j].name;
    const Timing t = time_one(j);
    ct.ns = t.ns;
    ct.error = t.error;
    if (!std::isinf(t.ns)) timed.push_back(j);
  }
  // The finalists timed again, kRetimeRounds more times in alternating order, and ranked by the
  // median of their rounds: one slow or lucky round (another process, a clock change) cannot
  // decide the choice alone.
  std::stable_sort(timed.begin(), timed.end(),
                   [&](size_t a, size_t b) { return timings[a].ns < timings[b].ns; });
  if (timed.size() > 1) {
    timed.resize(std::min(timed.size(), kFinalists));
    std::vector<std::vector<double>> rounds(timed.size());
    for (size_t f = 0; f < timed.size(); ++f) rounds[f].push_back(timings[timed[f]].ns);
    for (int r = 0; r < kRetimeRounds; ++r)
      for (size_t q = 0; q < timed.size(); ++q) {
        const size_t f = r % 2 == 0 ? timed.size() - 1 - q : q;
        rounds[f].push_back(time_one(timed[f]).ns);  // a failure counts as infinitely slow
      }
    for (size_t f = 0; f < timed.size(); ++f) {
      std::sort(rounds[f].begin(), rounds[f].end());
      timings[timed[f]].ns = rounds[f][rounds[f].size() / 2];
    }
  }
  int best = -1;
  for (size_t j : timed)
    if (!std::isinf(timings[j].ns) && (best < 0 || timings[j].ns < timings[size_t(best)].ns))
      best = static_cast<int>(j);
  return best;
}

}  // namespace

int time_candidates(const GemmProblem& p, const std::vector<GemmCandidate>& cands,
                    const codegen::Target& backend, const codegen::ToolchainOptions& toolchain,
                    const GemmOptions& options, const std::string& tool,
                    std::vector<CandidateTiming>& timings, const std::string& device) {
  Scratch scratch;
  std::vector<std::string> build_errors;
  const std::vector<std::string> so = build_templates(cands, backend, toolchain,
                                                      scratch.path.string(), build_jobs(options),
                                                      build_errors);
  std::string why;
  const std::string standin = wants_standin(p, cands, 0, cands.size(), device)
                                  ? build_standin(toolchain, scratch.path.string(), why)
                                  : "";
  return time_built(p, cands, 0, cands.size(), so, build_errors, options, tool, timings, device,
                    standin);
}

passes::GemmKernelChoice kernel_choice(const codegen::gemm::GemmCandidate& c, double us,
                                       int timed) {
  return passes::GemmKernelChoice{c.name,       c.library,
                                  c.variant,    c.entry,
                                  c.source,     us,
                                  timed,        c.fuses_bias,
                                  c.fuses_activation, c.fuses_residual};
}

std::string gemm_time_tool() {
  if (const char* e = std::getenv("ANVIL_GEMM_TIME"); e && *e) return e;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = self.parent_path() / "anvil-gemm-time";
    if (fs::exists(beside, ec)) return beside.string();
  }
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':'))
      if (!dir.empty() && fs::exists(fs::path(dir) / "anvil-gemm-time", ec))
        return (fs::path(dir) / "anvil-gemm-time").string();
  }
  return "";
}

GemmTuneReport tune_gemms(passes::Program& program, const GemmOptions& options,
                          const codegen::Target& backend, const codegen::TargetInfo& target,
                          const codegen::ToolchainOptions& toolchain) {
  GemmTuneReport r;
  if (options.mode == codegen::gemm::AutotuneMode::kOff) return r;
  const auto t0 = std::chrono::steady_clock::now();
  std::string machine = machine_id();
  int sm = 0;
  std::string device = "cpu";
  if (backend.device_type() == Device::Type::kCUDA) {
    // CUDA candidates are timed on this machine's first GPU; without one the package keeps
    // cuBLASLt's heuristic choice.
    std::string why;
    try {
      const AnvilDeviceApi& api = runtime::device_backend(Device::Type::kCUDA);
      if (api.device_count() <= 0) {
        why = std::string("no GPU here (") + api.last_error() + ")";
      } else {
        sm = api.capability(0);
        char buf[256] = {};
        api.describe(0, buf, sizeof buf);
        machine = buf;
        device = "cuda:0";
      }
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!why.empty()) {
      r.warnings.push_back("GEMM autotuning of CUDA packages needs a GPU where anvil compiles: " +
                           why + "; the GEMMs keep cuBLASLt's heuristic choice");
      return r;
    }
  } else if (backend.device_type() != Device::Type::kCPU) {
    r.warnings.push_back("GEMM autotuning of " + backend.name() +
                         " packages is not available: the default GEMM path is kept");
    return r;
  }
  const std::string tool = gemm_time_tool();
  const std::string cache_root =
      !options.cache_dir.empty() ? options.cache_dir
      : toolchain.cache_dir.empty() ? codegen::default_cache_dir() : toolchain.cache_dir;
  const bool show = toolchain.progress != codegen::ProgressMode::kQuiet;
  std::map<std::string, passes::GemmKernelChoice> decided;  // problem key -> choice
  // On CUDA a chosen kernel replaces cuBLASLt together with the epilogue cuBLASLt would fuse, so
  // its candidates are posed the GEMM with that epilogue (bias, activation): the forms the
  // epilogue matcher proves (codegen/gemm/gemm_epilogue.h), erf GELU and SiLU included, which
  // only a CUTLASS kernel fuses. GEMMs whose epilogue adds a residual keep cuBLASLt, but for an
  // fp32 residual alone, posed as beta * C (the 3xTF32 kernels' C source).
  const codegen::gemm::EpiloguePlan epilogues =
      sm > 0 ? codegen::gemm::match_gemm_epilogues(program) : codegen::gemm::EpiloguePlan{};

  // 1. Each GEMM step's problem and candidates (a step with a symbolic M: one problem per
  // bucket of M's range, gemm_buckets.h); a choice from the on-disk cache or an earlier problem
  // with the same key ends there; the others are pending.
  struct Pending {
    size_t step;
    int bucket = -1;  // the step's bucket, or -1 for its only problem
    GemmProblem problem;
    std::string key, cache_key, cache_path;
    std::vector<GemmCandidate> cands;
    size_t first = 0;  // index of its first candidate in `all`
    int same_as = -1;  // a pending problem with the same key, timed once
  };
  std::vector<Pending> pending;
  std::map<std::string, size_t> pending_by_key;
  std::vector<std::string> dynamic;  // GEMM steps left untuned by symbolic sizes (case 5)
  std::vector<GemmCandidate> all;  // every pending problem's candidates, built together
  // Where problem (step si, bucket) records its choice.
  auto slot = [&](size_t si, int bucket) -> passes::GemmKernelChoice& {
    auto& g = std::get<passes::GemmStep>(program.steps[si]);
    return bucket < 0 ? g.choice : g.buckets[static_cast<size_t>(bucket)].choice;
  };
  // Poses problem `p` of step si (bucket `bucket`); `key_extra` tells the bucket apart.
  auto pose = [&](size_t si, int bucket, GemmProblem p, const std::string& key_extra) {
    const std::string key = codegen::gemm::problem_key(p) + key_extra;
    if (auto it = decided.find(key); it != decided.end()) {  // the same problem seen before
      slot(si, bucket) = it->second;
      return;
    }
    if (auto it = pending_by_key.find(key); it != pending_by_key.end()) {
      Pending same;
      same.step = si;
      same.bucket = bucket;
      same.same_as = static_cast<int>(it->second);
      pending.push_back(std::move(same));
      return;
    }
    std::vector<std::string> notes;
    std::vector<GemmCandidate> cands =
        codegen::gemm::gemm_candidates(p, options, target.cpu_features, sm, &notes);
    for (const auto& n : notes)  // e.g. CUTLASS's headers missing (spec case 28): once
      if (n.rfind("CUTLASS", 0) == 0 &&
          std::find(r.warnings.begin(), r.warnings.end(), n) == r.warnings.end())
        r.warnings.push_back(n);
    if (cands.empty()) {
      ++r.kept_default;
      return;
    }
    std::string cache_key = "anvil gemm tune v1\n" + key + "\n" + machine + "\n";
    for (const auto& c : cands) cache_key += c.name + "\n";
    const std::string cpath = cache_file(cache_root, cache_key);
    if (const std::string cached = read_cached(cpath); !cached.empty()) {
      for (const auto& c : cands)
        if (c.name == cached) {
          slot(si, bucket) = kernel_choice(c, 0, 0);
          decided[key] = slot(si, bucket);
          ++r.from_cache;
          return;
        }
    }
    if (tool.empty()) {
      r.warnings.push_back("anvil-gemm-time not found (beside the executable, on PATH or "
                           "$ANVIL_GEMM_TIME): GEMMs keep the default path");
      ++r.kept_default;
      return;
    }
    Pending pd{si, bucket, p, key, cache_key, cpath, std::move(cands), all.size(), -1};
    all.insert(all.end(), pd.cands.begin(), pd.cands.end());
    pending_by_key[key] = pending.size();
    pending.push_back(std::move(pd));
  };
  for (size_t si = 0; si < program.steps.size(); ++si) {
    auto* g = std::get_if<passes::GemmStep>(&program.steps[si]);
    if (!g) continue;
    ++r.steps;
    GemmProblem p = codegen::gemm::problem_of(program, *g, target.name);
    if (!p.is_static()) {
      const std::vector<MBucket> buckets = symbolic_m_buckets(program, *g, sm);
      GemmProblem probe = p;
      if (buckets.empty() || !codegen::gemm::pose_cuda_epilogue(epilogues, si, *g, probe)) {
        ++r.kept_default;  // symbolic N, K or batch (or cuBLASLt's residual): the default path
        dynamic.push_back(g->name);
        continue;
      }
      ++r.bucketed;
      for (const MBucket& b : buckets) g->buckets.push_back({b.min, b.max, {}});
      for (size_t bi = 0; bi < buckets.size(); ++bi) {
        const MBucket& b = buckets[bi];
        GemmProblem bp = codegen::gemm::problem_of(program, *g, target.name, b.at);
        codegen::gemm::pose_cuda_epilogue(epilogues, si, *g, bp);
        pose(si, static_cast<int>(bi), bp, " bucket " + SymRange{b.min, b.max}.str());
      }
      continue;
    }
    if (*p.m <= 0 || *p.n <= 0 || *p.k <= 0) {
      ++r.kept_default;  // empty: the default path
      continue;
    }
    if (!codegen::gemm::pose_cuda_epilogue(epilogues, si, *g, p)) {
      ++r.kept_default;  // cuBLASLt's residual (or batched) epilogue
      continue;
    }
    pose(si, -1, p, "");
  }

  if (!dynamic.empty()) {
    std::string names;
    for (const auto& n : dynamic) names += (names.empty() ? "" : ", ") + n;
    r.warnings.push_back(std::to_string(dynamic.size()) + " GEMM(s) with dynamic sizes (" + names +
                         ") have no autotuning candidates: they keep the default path (" +
                         (sm > 0 ? "cuBLASLt" : "the runtime's GEMM") + ")");
  }

  // 2. Every pending problem's templates compiled together, in parallel (a model's GEMMs share
  // the compiler's jobs instead of compiling one problem's few candidates at a time).
  Scratch scratch;
  std::vector<std::string> build_errors, so;
  bool any_source = false;
  for (const auto& c : all) any_source |= !c.source.empty();
  if (any_source) {
    if (show)
      std::fprintf(stderr, "autotune: compiling the template candidates of %zu GEMM problem(s)\n",
                   pending_by_key.size());
    so = build_templates(all, backend, toolchain, scratch.path.string(), build_jobs(options),
                         build_errors);
  } else {
    so.assign(all.size(), "");
    build_errors.assign(all.size(), "");
  }
  std::string standin;  // the epilogue stand-in, when some problem's candidates need it
  for (const Pending& pd : pending) {
    if (pd.same_as >= 0 || !wants_standin(pd.problem, all, pd.first, pd.cands.size(), device))
      continue;
    std::string why;
    standin = build_standin(toolchain, scratch.path.string(), why);
    if (standin.empty())
      r.warnings.push_back("the GEMM epilogue stand-in kernel did not build (" +
                           why.substr(0, 300) +
                           "): cuBLASLt candidates whose bias / activation runs as a kernel of "
                           "its own were timed with a copy of C in that kernel's place");
    break;
  }

  // 3. Each pending problem timed, one child at a time.
  std::vector<passes::GemmKernelChoice> chosen(pending.size());
  std::vector<bool> ok(pending.size(), false);
  for (size_t pi = 0; pi < pending.size(); ++pi) {
    Pending& pd = pending[pi];
    auto* g = std::get_if<passes::GemmStep>(&program.steps[pd.step]);
    if (pd.same_as >= 0) {
      if (ok[static_cast<size_t>(pd.same_as)])
        slot(pd.step, pd.bucket) = chosen[static_cast<size_t>(pd.same_as)];
      else ++r.kept_default;
      continue;
    }
    const GemmProblem& p = pd.problem;
    const std::string where = bucket_text(*g, pd.bucket);  // "" or " (m in [9, 32])"
    if (show)
      std::fprintf(stderr, "autotune: GEMM %s%s (%s): %zu candidates\n", g->name.c_str(),
                   where.c_str(), shape_text(p).c_str(), pd.cands.size());
    std::vector<CandidateTiming> timings;
    const int best = time_built(p, all, pd.first, pd.cands.size(), so, build_errors, options,
                                tool, timings, device, standin);
    r.candidates_timed += static_cast<int>(pd.cands.size());
    std::map<std::string, double> times;
    for (size_t j = 0; j < timings.size(); ++j) {
      const CandidateTiming& t = timings[j];
      times[t.name] = t.ns;
      std::ostringstream line;
      line << "  " << g->name << where << " " << shape_text(p) << " " << t.name << ": ";
      if (std::isinf(t.ns)) line << "inf (" << t.error << ")";
      else line << t.ns / 1000.0 << " us";
      if (device != "cpu" && cublaslt_lacks(all[pd.first + j], p.activation))
        line << (standin.empty() ? " (+ a copy of C for its epilogue kernel)"
                                 : " (+ its epilogue kernel)");
      r.lines.push_back(line.str());
      if (options.verbose) std::fprintf(stderr, "%s\n", line.str().c_str());
    }
    if (best < 0) {
      const std::string msg = "every GEMM candidate failed for " + g->name + where + " (" +
                              shape_text(p) + ")";
      if (!options.fallback)
        throw Error(msg, "autotune " + g->name, "at least one working candidate",
                    "none of " + std::to_string(pd.cands.size()) + " (--no-gemm-fallback)");
      r.warnings.push_back(msg + ": using the default GEMM path");
      ++r.kept_default;
      continue;
    }
    const double best_ns = timings[static_cast<size_t>(best)].ns;
    const GemmCandidate& c = pd.cands[static_cast<size_t>(best)];
    slot(pd.step, pd.bucket) =
        kernel_choice(c, best_ns / 1000.0, static_cast<int>(pd.cands.size()));
    chosen[pi] = slot(pd.step, pd.bucket);
    ok[pi] = true;
    ++r.tuned;
    write_cached(pd.cache_path, pd.cache_key, c.name, times);
    if (options.verbose)
      std::fprintf(stderr, "  %s%s: chose %s (%.1f us)\n", g->name.c_str(), where.c_str(),
                   c.name.c_str(), best_ns / 1000.0);
  }
  if (sm > 0) {
    // The CUDA emitter calls a chosen kernel for a GEMM without batch dims whose epilogue, if
    // any, the kernel applies exactly (codegen/gemm/gemm_epilogue.h chosen_kernel_fuses); the
    // others keep cuBLASLt, and say so.
    int kept = 0;
    for (size_t i = 0; i < program.steps.size(); ++i) {
      auto* g = std::get_if<passes::GemmStep>(&program.steps[i]);
      if (!g) continue;
      const auto f = epilogues.by_gemm.find(i);
      auto fits = [&](const passes::GemmKernelChoice& c) {
        passes::GemmStep one = *g;
        one.choice = c;
        const bool plain = g->batch.empty() && !c.fuses_bias && !c.fuses_activation;
        return f == epilogues.by_gemm.end() || g->b_dtype
                   ? plain
                   : codegen::gemm::chosen_kernel_fuses(one, f->second);
      };
      if (!g->choice.source.empty() && !fits(g->choice)) {
        g->choice = {};
        ++kept;
      }
      // A symbolic M's buckets: each CUTLASS choice must fit; and an epilogue cuBLASLt cannot
      // fuse is fused only if no bucket is left on cuBLASLt (the statement leaves its loop
      // kernel for all M or for none), else every bucket keeps cuBLASLt.
      bool library = false, cutlass = false;
      for (passes::GemmBucket& bk : g->buckets) {
        if (!bk.choice.source.empty() && !fits(bk.choice)) {
          bk.choice = {};
          ++kept;
        }
        (bk.choice.source.empty() ? library : cutlass) = true;
      }
      if (library && cutlass && f != epilogues.by_gemm.end() && !g->b_dtype &&
          !codegen::gemm::cublaslt_fuses(f->second.kind))
        for (passes::GemmBucket& bk : g->buckets)
          if (!bk.choice.source.empty()) {
            bk.choice = {};
            ++kept;
          }
    }
    if (kept > 0)
      r.warnings.push_back(std::to_string(kept) +
                           " GEMM(s) timed faster in a CUTLASS kernel keep cuBLASLt: their batch "
                           "dims or epilogue are not what the kernel was timed with");
  }
  // Buckets that all keep the default path (on CUDA: cuBLASLt) need no dispatch.
  for (auto& step : program.steps)
    if (auto* g = std::get_if<passes::GemmStep>(&step);
        g && std::all_of(g->buckets.begin(), g->buckets.end(), [sm](const passes::GemmBucket& b) {
          return sm > 0 ? b.choice.source.empty() : b.choice.name.empty();
        }))
      g->buckets.clear();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace anvil::driver
