// gemm_bench --suite (issue 16's CPU library comparison): square 256..2048 and 64x1024x4096
// (M K N), on anvil's thread pool of 1 and 2 threads, through AnvilRtApi::gemm:
//   fp32: OpenBLAS (single-threaded OpenBLAS per pool chunk), oneDNN (pool chunks, and the OpenMP
//         mode for comparison), anvil's packed kernel (B constant: packed once, then reused);
//   bf16 -> bf16: oneDNN (its bf16 kernels; operands widened to fp32) against the old extern path (widen both operands to fp32, OpenBLAS,
//         round once: what aten.mm.default did before oneDNN).
// GFLOP/s are 2*M*N*K / the fastest call's time; % peak is against the fp32 FMA peak of the same number of
// cores, measured first with a tight loop of independent FMAs (AVX-512 when the CPU has it, else
// AVX2) on 1 and on 2 concurrent threads. bf16 dot-product instructions (avx512_bf16) can exceed
// that fp32 peak by up to 2x.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "runtime/gemm_call.h"
#include "runtime/gemm_onednn.h"
#include "runtime/packed_weights.h"
#include "runtime/rt_api.h"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// Seconds per call: one warm-up, then calls until 0.4 s and at least 3 have run; the fastest
/// (this box is shared by several engineers: the median measures their load as much as the code).
double best_time(const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  const auto start = clock_type::now();
  while (t.size() < 3 || (seconds_since(start) < 0.4 && t.size() < 200)) {
    const auto t0 = clock_type::now();
    fn();
    t.push_back(seconds_since(t0));
  }
  return *std::min_element(t.begin(), t.end());
}

__attribute__((target("avx512f"))) double fma_loop_avx512(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  }
  float out[16];
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  _mm512_storeu_ps(out, s);
  return out[0];
}

__attribute__((target("avx2,fma"))) double fma_loop_avx2(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  }
  float out[8];
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_storeu_ps(out, s);
  return out[0];
}

/// fp32 GFLOP/s of `threads` threads each running the FMA loop (best of 25 short runs, so that a
/// busy machine still gives some uncontended ones).
double fma_peak(int threads, bool avx512) {
  const int64_t iters = 2'000'000;
  const double flops = double(iters) * 12 * (avx512 ? 16 : 8) * 2 * threads;
  double best = 0.0;
  for (int rep = 0; rep < 25; ++rep) {
    std::vector<std::thread> ts;
    std::vector<double> sink(threads);
    const auto t0 = clock_type::now();
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] { sink[t] = avx512 ? fma_loop_avx512(iters) : fma_loop_avx2(iters); });
    for (auto& t : ts) t.join();
    best = std::max(best, flops / seconds_since(t0) * 1e-9);
  }
  return best;
}

struct MKN {
  int64_t m, k, n;
};

AnvilGemmCall make_call(int32_t lib, anvil::DType dt, const MKN& s, const void* a, const void* b,
                        void* c) {
  AnvilGemmCall g{};
  g.library = lib;
  g.a_dtype = g.b_dtype = g.c_dtype = static_cast<int32_t>(dt);
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = a;
  g.lda = s.k;
  g.b = b;
  g.ldb = s.n;
  g.c = c;
  g.ldc = s.n;
  g.alpha = 1.0f;
  return g;
}

}  // namespace

/// fma_peak for bench/gemm_linear.cpp.
double gemm_bench_fma_peak(int threads) {
  return fma_peak(threads, __builtin_cpu_supports("avx512f"));
}

int gemm_suite_main(int argc, char** argv) {
  using namespace anvil;
  using namespace anvil::runtime;
  std::vector<int> thread_counts = {1, 2};
  std::vector<MKN> shapes;
  std::vector<int64_t> nums;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--suite") continue;
    if (arg == "--threads" && i + 1 < argc) {
      thread_counts.clear();
      for (const char* p = argv[++i]; *p;) {
        thread_counts.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p) ++p;
      }
    } else {
      nums.push_back(std::atoll(arg.c_str()));
    }
  }
  for (size_t i = 0; i + 2 < nums.size(); i += 3) shapes.push_back({nums[i], nums[i + 1], nums[i + 2]});
  if (shapes.empty())
    shapes = {{256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048},
              {64, 1024, 4096}};
  const bool avx512 = __builtin_cpu_supports("avx512f");
  std::printf("# FMA peak (fp32, tight loop of 12 independent %s FMAs per thread):",
              avx512 ? "AVX-512" : "AVX2");
  std::vector<double> peak(9, 0.0);
  for (int t : thread_counts) {
    peak[t] = fma_peak(t, avx512);
    std::printf(" %d thread%s %.1f GFLOP/s;", t, t > 1 ? "s" : "", peak[t]);
  }
  std::printf("\n# oneDNN in this runtime: %s\n", onednn_available() ? "yes" : "no");
  std::printf("%-5s %5s %5s %5s %3s | %-22s %9s %7s %s\n", "dtype", "M", "K", "N", "thr",
              "library", "GFLOP/s", "%peak", "check");
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const MKN& s : shapes) {
    std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n), ref(s.m * s.n);
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    std::vector<BFloat16> ab(a.begin(), a.end()), bb(b.begin(), b.end()), cb(s.m * s.n);
    std::vector<float> aw(a.size()), bw(b.size()), cw(c.size());
    const double flops = 2.0 * s.m * s.n * s.k;
    for (int t : thread_counts) {
      ThreadPool pool(t);
      ScopedThreadPool scope(&pool);
      PackedWeightCache cache;
      // Called as report(..., time, [&] { return diff(...); }): the check runs after the timing.
      auto report = [&](const char* dt, const char* lib, double sec, const auto& check) {
        const double err = check();
        const double gf = flops / sec * 1e-9;
        std::printf("%-5s %5lld %5lld %5lld %3d | %-22s %9.1f %6.1f%% max|diff| %.1e\n", dt,
                    (long long)s.m, (long long)s.k, (long long)s.n, t, lib, gf,
                    100.0 * gf / peak[t], err);
        std::fflush(stdout);
      };
      auto diff = [&](auto get) {
        double e = 0.0;
        for (int64_t i = 0; i < s.m * s.n; ++i) e = std::max(e, double(std::fabs(get(i) - ref[i])));
        return e;
      };
      // fp32
      AnvilGemmCall g = make_call(ANVIL_GEMM_LIB_OPENBLAS, DType::kFloat32, s, a.data(), b.data(),
                                  ref.data());
      report("fp32", "openblas", best_time([&] { gemm_call(&cache, g); }), [] { return 0.0; });
      g.c = c.data();
      if (onednn_available()) {
        g.library = ANVIL_GEMM_LIB_ONEDNN;
        report("fp32", "onednn (pool chunks)", best_time([&] { gemm_call(&cache, g); }),
               [&] { return diff([&](int64_t i) { return c[i]; }); });
        if (t > 1) {
          set_onednn_threading(OneDnnThreading::kOmp);
          report("fp32", "onednn (openmp)", best_time([&] { gemm_call(&cache, g); }),
                 [&] { return diff([&](int64_t i) { return c[i]; }); });
          set_onednn_threading(OneDnnThreading::kPoolChunks);
        }
      }
      g.library = ANVIL_GEMM_LIB_PACKED;
      g.b_constant = 1;
      report("fp32", "packed (B constant)", best_time([&] { gemm_call(&cache, g); }),
             [&] { return diff([&](int64_t i) { return c[i]; }); });
      // bf16: the reference is the fp32 product of the bf16-rounded operands.
      for (size_t i = 0; i < a.size(); ++i) aw[i] = float(ab[i]);
      for (size_t i = 0; i < b.size(); ++i) bw[i] = float(bb[i]);
      gemm(false, false, s.m, s.n, s.k, 1.0f, aw.data(), s.k, bw.data(), s.n, 0.0f, ref.data(), s.n);
      report("bf16", "old extern (widen)", best_time([&] {
               for (size_t i = 0; i < a.size(); ++i) aw[i] = float(ab[i]);
               for (size_t i = 0; i < b.size(); ++i) bw[i] = float(bb[i]);
               gemm(false, false, s.m, s.n, s.k, 1.0f, aw.data(), s.k, bw.data(), s.n, 0.0f,
                    cw.data(), s.n);
               for (size_t i = 0; i < cw.size(); ++i) cb[i] = BFloat16(cw[i]);
             }),
             [&] { return diff([&](int64_t i) { return float(cb[i]); }); });
      if (onednn_available()) {
        AnvilGemmCall h = make_call(ANVIL_GEMM_LIB_ONEDNN, DType::kBFloat16, s, ab.data(),
                                    bb.data(), cb.data());
        h.variant = kOneDnnVariantWiden;
        report("bf16", "onednn widened to fp32", best_time([&] { gemm_call(&cache, h); }),
               [&] { return diff([&](int64_t i) { return float(cb[i]); }); });
        h.variant = kOneDnnVariantNative;
        report("bf16", "onednn (pool chunks)", best_time([&] { gemm_call(&cache, h); }),
               [&] { return diff([&](int64_t i) { return float(cb[i]); }); });
        if (t > 1) {
          set_onednn_threading(OneDnnThreading::kOmp);
          report("bf16", "onednn (openmp)", best_time([&] { gemm_call(&cache, h); }),
                 [&] { return diff([&](int64_t i) { return float(cb[i]); }); });
          set_onednn_threading(OneDnnThreading::kPoolChunks);
        }
      }
    }
  }
  return 0;
}
