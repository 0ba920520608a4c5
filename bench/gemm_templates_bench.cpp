// anvil's own CPU GEMM templates (codegen/gemm/cpu_templates.h) against OpenBLAS: generates every
// fp32 and bf16 (bf16 out) candidate the native target has, compiles them through the codegen
// toolchain (object cache: a second run compiles nothing), and times each on the shapes, with 1
// and 2 threads (the runtime's thread pool, as in a model run), beside OpenBLAS fp32 and anvil's
// packed kernel through the runtime's AnvilRtApi::gemm in the same run. Prints the best template
// per shape and dtype with its ratio to OpenBLAS (GFLOP/s, best of the timed reps: the box this
// was written on is shared, and the minimum is the least disturbed figure).
//
// Usage: gemm_templates_bench [--all] [--cpu-time] [--threads 1,2] [--filter SUBSTR] [M K N ...]
//   default shapes: 256^3, 512^3, 1024^3, 2048^3 and M=64 K=1024 N=4096; --all prints every
//   candidate's figure; --cpu-time times with the process CPU clock (flops / CPU seconds: with
//   1 thread the single-core rate net of preemption, the figure that survives a shared machine).
// Debian's OpenBLAS 0.3.21 takes its generic Prescott kernels on a CPU it does not know (Zen 5):
// run with OPENBLAS_CORETYPE=SkylakeX (or Haswell) to compare against its AVX-512 (AVX2) kernels.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "codegen/gemm/cpu_templates.h"
#include "codegen/toolchain.h"
#include "core/thread_pool.h"
#include "runtime/rt_api.h"

namespace {

using namespace anvil;
using namespace anvil::codegen;
using namespace anvil::codegen::gemm;

using EntryFn = int (*)(const AnvilRtApi*, void*, const AnvilGemmCall*);
struct Kernel {
  std::string name;
  bool bf16;
  EntryFn fn;
};

bool g_cpu_time = false;
double now() {
  if (g_cpu_time) {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Best seconds of `fn` over reps (at least 2 timed, until ~0.3 s spent), after one warm-up.
template <class F>
double best_time(F&& fn) {
  fn();
  double best = 1e30, spent = 0;
  for (int r = 0; r < 20 && (r < 2 || spent < 0.3); ++r) {
    const double t0 = now();
    fn();
    const double t = now() - t0;
    best = std::min(best, t);
    spent += t;
  }
  return best;
}

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace

int main(int argc, char** argv) {
  bool all = false;
  std::string filter;
  std::vector<int> threads = {1, 2};
  std::vector<std::array<int64_t, 3>> shapes;
  std::vector<int64_t> dims;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--all") {
      all = true;
    } else if (a == "--cpu-time") {
      g_cpu_time = true;
    } else if (a == "--filter" && i + 1 < argc) {
      filter = argv[++i];
    } else if (a == "--threads" && i + 1 < argc) {
      threads.clear();
      for (const char* p = argv[++i]; *p;) {
        threads.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p == ',') ++p;
      }
    } else {
      dims.push_back(std::atoll(a.c_str()));
    }
  }
  for (size_t i = 0; i + 2 < dims.size(); i += 3)
    shapes.push_back({dims[i], dims[i + 1], dims[i + 2]});
  if (shapes.empty())
    shapes = {
        {256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}, {64, 1024, 4096}};

  try {
    const TargetInfo target = resolve_target("native");
    std::vector<GemmCandidate> cands;
    for (bool bf : {false, true}) {
      GemmProblem p;
      p.a_dtype = p.b_dtype = p.out_dtype = bf ? DType::kBFloat16 : DType::kFloat32;
      for (auto& c : cpu_template_candidates(p, target.cpu_features))
        if (filter.empty() || c.name.find(filter) != std::string::npos)
          cands.push_back(std::move(c));
    }
    if (cands.empty()) {
      std::fprintf(stderr, "no template candidates for this CPU / filter\n");
      return 1;
    }
    std::vector<SourceFile> files;
    for (const auto& c : cands) files.push_back({c.entry + ".cpp", c.source});
    const std::string dir = (std::filesystem::temp_directory_path() /
                             ("anvil_gemm_templates_bench_" + std::to_string(::getpid())))
                                .string();
    std::filesystem::create_directories(dir);
    ToolchainOptions opt;
    opt.target = "native";
    opt.progress = ProgressMode::kQuiet;
    const BuildResult built = build_shared_library(files, dir + "/templates.so", opt);
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    std::printf(
        "# %zu candidates, compiled %d, from cache %d, %.1f s; clock %s; "
        "OPENBLAS_CORETYPE=%s\n",
        cands.size(), built.compiled, built.cached, built.seconds,
        g_cpu_time ? "process CPU" : "wall", coretype ? coretype : "(unset)");
    void* handle = dlopen(built.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::filesystem::remove_all(dir);
    if (!handle) {
      std::fprintf(stderr, "dlopen: %s\n", dlerror());
      return 1;
    }
    std::vector<Kernel> kernels;
    for (const auto& c : cands)
      kernels.push_back({c.name, c.name.rfind("own_bf16", 0) == 0,
                         reinterpret_cast<EntryFn>(dlsym(handle, c.entry.c_str()))});

    const AnvilRtApi* api = runtime::rt_api();
    std::printf("%-16s %3s %9s %9s %9s %9s %6s  %s\n", "M K N", "thr", "openblas", "packed",
                "own f32", "own bf16", "f32/ob", "best f32 | best bf16");
    for (const auto& s : shapes) {
      const int64_t m = s[0], k = s[1], n = s[2];
      std::mt19937 rng(1);
      std::uniform_real_distribution<float> u(-1, 1);
      std::vector<float> a(m * k), b(k * n), c(m * n);
      for (auto& x : a) x = u(rng);
      for (auto& x : b) x = u(rng);
      std::vector<uint16_t> ah(a.size()), bh(b.size()), ch(c.size());
      for (size_t i = 0; i < a.size(); ++i) ah[i] = to_bf16(a[i]);
      for (size_t i = 0; i < b.size(); ++i) bh[i] = to_bf16(b[i]);
      const double flops = 2.0 * m * n * k;
      for (int t : threads) {
        ThreadPool pool(t);
        ScopedThreadPool scope(&pool);
        AnvilGemmCall g{};
        g.a_dtype = g.b_dtype = g.c_dtype = 7;
        g.m = m, g.n = n, g.k = k;
        g.a = a.data(), g.lda = k, g.b = b.data(), g.ldb = n, g.c = c.data(), g.ldc = n;
        g.alpha = 1.0f;
        auto lib_gf = [&](int lib) {
          g.library = lib;
          if (api->gemm(nullptr, &g) != 0) return 0.0;
          return flops / best_time([&] { api->gemm(nullptr, &g); }) / 1e9;
        };
        const double ob = lib_gf(ANVIL_GEMM_LIB_OPENBLAS), packed = lib_gf(ANVIL_GEMM_LIB_PACKED);
        double best[2] = {0, 0};
        std::string best_name[2];
        for (const Kernel& kn : kernels) {
          AnvilGemmCall h = g;
          if (kn.bf16) {
            h.a_dtype = h.b_dtype = h.c_dtype = 13;
            h.a = ah.data(), h.b = bh.data(), h.c = ch.data();
          }
          if (kn.fn(api, nullptr, &h) != 0) {
            std::printf("  %s failed\n", kn.name.c_str());
            continue;
          }
          const double gf = flops / best_time([&] { kn.fn(api, nullptr, &h); }) / 1e9;
          if (all)
            std::printf("  %-58s %5ld %5ld %5ld %d thr %8.1f\n", kn.name.c_str(), long(m), long(k),
                        long(n), t, gf);
          if (gf > best[kn.bf16]) {
            best[kn.bf16] = gf;
            best_name[kn.bf16] = kn.name;
          }
        }
        char shape[64];
        std::snprintf(shape, sizeof shape, "%ld %ld %ld", long(m), long(k), long(n));
        std::printf("%-16s %3d %9.1f %9.1f %9.1f %9.1f %6.2f  %s | %s\n", shape, t, ob, packed,
                    best[0], best[1], ob > 0 ? best[0] / ob : 0.0, best_name[0].c_str(),
                    best_name[1].c_str());
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_templates_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
