// `gemm_bench --linear`: the batch-1 Linear layers of ViT-B/16 and ConvNeXt-T (y = x W^T + b,
// W a constant [N, K]) on anvil's pool of each thread count, the way a package runs them with
// --autotune off: the packed kernel split over the pool (sgemm_const_b, the split printed as
// runtime::packed_gemm_split describes it), with bias + GELU in its store (the default path
// since issue 19's CPU work), against the same product followed by a separate bias + GELU pass
// over C (what the loop kernel after the GEMM did before) and oneDNN with the same post-ops.
//
//   gemm_bench --linear [--threads 1,2,8] [--act gelu|gelu_tanh|none] [M K N ...]
//
// ANVIL_GEMM_KC=<kc> (read once per process) sets the packed kernel's largest K block, so a
// sweep over it is one process per value (bench/vit_host.sh runs 512, 256 and 128).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "runtime/gemm_call.h"
#include "runtime/gemm_onednn.h"
#include "runtime/kernels/gemm_packed.h"
#include "runtime/rt_api.h"

namespace {

using namespace anvil;
using namespace anvil::runtime;

/// Median seconds of `fn` over 15 samples of >= 20 ms each (after 3 warm-up calls).
template <typename F>
double median_time(F&& fn) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i) fn();
  int calls = 1;
  for (auto t0 = clock::now(); std::chrono::duration<double>(clock::now() - t0).count() < 0.02;)
    fn(), ++calls;
  std::vector<double> ts;
  for (int s = 0; s < 15; ++s) {
    const auto t0 = clock::now();
    for (int i = 0; i < calls; ++i) fn();
    ts.push_back(std::chrono::duration<double>(clock::now() - t0).count() / calls);
  }
  std::nth_element(ts.begin(), ts.begin() + 7, ts.end());
  return ts[7];
}

std::string split_str(int64_t m, int64_t n, int64_t k, int threads) {
  const PackedGemmSplit s = packed_gemm_split(m, n, k, threads);
  char buf[96];
  if (s.kind == PackedGemmSplit::kSerial)
    std::snprintf(buf, sizeof buf, "serial");
  else if (s.kind == PackedGemmSplit::kColumnPanels)
    std::snprintf(buf, sizeof buf, "%lld chunks of %lld cols x %lld rows",
                  static_cast<long long>(s.chunks), static_cast<long long>(s.block * 16),
                  static_cast<long long>(m));
  else
    std::snprintf(buf, sizeof buf, "%lld chunks of %lld rows x %lld cols",
                  static_cast<long long>(s.chunks), static_cast<long long>(s.block),
                  static_cast<long long>(n));
  return buf;
}

}  // namespace

double gemm_bench_fma_peak(int threads);  // bench/gemm_suite.cpp

int gemm_linear_main(int argc, char** argv) {
  std::vector<int> threads = {1, 2};
  GemmAct act = GemmAct::kGeluErf;
  std::vector<int64_t> nums;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--linear") continue;
    if (arg == "--threads" && i + 1 < argc) {
      threads.clear();
      for (const char* p = argv[++i]; *p;) {
        threads.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p) ++p;
      }
    } else if (arg == "--act" && i + 1 < argc) {
      const std::string v = argv[++i];
      act = v == "gelu_tanh" ? GemmAct::kGeluTanh
            : v == "none"    ? GemmAct::kNone
                             : GemmAct::kGeluErf;
    } else {
      nums.push_back(std::atoll(arg.c_str()));
    }
  }
  struct Shape {
    int64_t m, k, n;
    const char* what;
  };
  std::vector<Shape> shapes;
  for (size_t i = 0; i + 2 < nums.size(); i += 3)
    shapes.push_back({nums[i], nums[i + 1], nums[i + 2], ""});
  if (shapes.empty())
    shapes = {{197, 768, 2304, "vit qkv"},         {197, 768, 768, "vit proj"},
              {197, 768, 3072, "vit fc1"},         {197, 3072, 768, "vit fc2"},
              {3136, 96, 384, "convnext s1 fc1"},  {3136, 384, 96, "convnext s1 fc2"},
              {784, 192, 768, "convnext s2 fc1"},  {196, 384, 1536, "convnext s3 fc1"},
              {196, 1536, 384, "convnext s3 fc2"}, {49, 768, 3072, "convnext s4 fc1"}};
  std::printf(
      "# packed kernel: largest K block %lld (ANVIL_GEMM_KC); activation %d; GFLOP/s "
      "(2 M N K / time), median of 15\n",
      static_cast<long long>(gemm_packed_max_kc()), static_cast<int>(act));
  std::printf("# FMA peak (a tight loop of independent FMAs per thread), GFLOP/s:");
  for (int t : threads)
    std::printf(" %d thread%s %.1f;", t, t > 1 ? "s" : "", gemm_bench_fma_peak(t));
  std::printf("\n");
  std::printf("%-16s %5s %5s %5s %3s | %9s %9s %9s %9s | %s\n", "layer", "M", "K", "N", "thr",
              "packed", "fused", "2-pass", "onednn", "split over the pool");
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (const Shape& s : shapes) {
    std::vector<float> x(s.m * s.k), w(s.n * s.k), bias(s.n), c(s.m * s.n);
    for (float& v : x) v = d(rng);
    for (float& v : w) v = d(rng) * 0.05f;
    for (float& v : bias) v = d(rng);
    const double flops = 2.0 * s.m * s.n * s.k;
    for (int t : threads) {
      ThreadPool pool(t);
      ScopedThreadPool scope(&pool);
      PackedWeightCache cache;
      auto gemm = [&](const float* b, GemmAct a) {
        sgemm_const_b(&cache, false, true, s.m, s.n, s.k, 1.0f, x.data(), s.k, w.data(), s.k,
                      c.data(), s.n, b, false, a);
      };
      const double plain = median_time([&] { gemm(nullptr, GemmAct::kNone); });
      const double fused = median_time([&] { gemm(bias.data(), act); });
      const double two_pass = median_time([&] {
        gemm(nullptr, GemmAct::kNone);
        parallel_for(0, s.m, std::max<int64_t>(1, 4096 / s.n), [&](int64_t r0, int64_t r1) {
          for (int64_t i = r0; i < r1; ++i) {
            float* row = c.data() + i * s.n;
            for (int64_t j = 0; j < s.n; ++j) row[j] += bias[j];
            gemm_activate(act, row, s.n);
          }
        });
      });
      double dnn = 0;
      if (onednn_available()) {
        AnvilGemmCall g{};
        g.library = ANVIL_GEMM_LIB_ONEDNN;
        g.a_dtype = g.b_dtype = g.c_dtype = static_cast<int32_t>(DType::kFloat32);
        g.m = s.m, g.n = s.n, g.k = s.k;
        g.a = x.data(), g.lda = s.k, g.b = w.data(), g.ldb = s.k, g.trans_b = 1, g.b_constant = 1;
        g.c = c.data(), g.ldc = s.n, g.alpha = 1.0f;
        g.bias = bias.data(), g.bias_kind = ANVIL_GEMM_BIAS_COL;
        g.activation = act == GemmAct::kGeluErf    ? ANVIL_GEMM_ACT_GELU_ERF
                       : act == GemmAct::kGeluTanh ? ANVIL_GEMM_ACT_GELU_TANH
                                                   : ANVIL_GEMM_ACT_NONE;
        dnn = median_time([&] { gemm_call(&cache, g); });
      }
      auto gf = [&](double sec) { return sec > 0 ? flops / sec * 1e-9 : 0.0; };
      std::printf("%-16s %5lld %5lld %5lld %3d | %9.1f %9.1f %9.1f %9.1f | %s\n", s.what,
                  static_cast<long long>(s.m), static_cast<long long>(s.k),
                  static_cast<long long>(s.n), t, gf(plain), gf(fused), gf(two_pass), gf(dnn),
                  split_str(s.m, s.n, s.k, t).c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
