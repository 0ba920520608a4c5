// Single-threaded fp32 GEMM benchmark: anvil's sgemm_packed (B = a linear weight packed ahead of
// time) against OpenBLAS cblas_sgemm(RowMajor, NoTrans, Trans) on the weight stored [N, K], the
// way generated code calls it for linear layers. Prints GFLOP/s (median of many timed batches)
// and the speedup, and checks that both agree.
//
// Built as build/bin/gemm_bench (CMake target gemm_bench), or ad hoc from the repository root:
//   g++ -O2 -std=c++20 -Isrc bench/gemm_bench.cpp src/runtime/kernels/gemm_packed.cpp
//       src/core/error.cpp -lopenblas -o gemm_bench
// Usage: gemm_bench [--isa auto|generic|avx2|avx512] [--epilogue] [--cold] [M K N ...]
//        gemm_bench --suite [--threads 1,2] [M K N ...]
//        gemm_bench --linear [--threads 1,2,8] [--act gelu|gelu_tanh|none] [M K N ...]
//   --linear: ViT-B/16's and ConvNeXt-T's Linears on the pool as packages run them (packed
//             kernel, bias + GELU fused vs a second pass, oneDNN; bench/gemm_linear.cpp).
//   --suite: the library comparison of issue 16 (bench/gemm_suite.cpp): OpenBLAS vs oneDNN vs the
//            packed kernel in fp32 and oneDNN vs the old widening extern in bf16, through
//            AnvilRtApi::gemm on anvil's pool of 1 and 2 threads, in GFLOP/s and % of the FMA
//            peak measured by a tight FMA loop.
//   --epilogue: the packed side also adds a bias and applies ReLU;
//   --cold: each call uses the next of several weight copies (>= 64 MiB in all), so the weight
//           comes from DRAM / L3 as in a model too big for the caches.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernels/gemm_packed.h"

extern "C" void openblas_set_num_threads(int);

namespace {

using anvil::runtime::GemmIsa;

/// Median seconds per call of `fn`: batches of calls lasting ~2 ms, `samples` batches.
double time_call(const std::function<void()>& fn, int samples = 31) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i) fn();  // warm caches
  auto t0 = clock::now();
  int calls = 0;
  while (std::chrono::duration<double>(clock::now() - t0).count() < 2e-3) {
    fn();
    ++calls;
  }
  std::vector<double> times;
  for (int s = 0; s < samples; ++s) {
    auto start = clock::now();
    for (int i = 0; i < calls; ++i) fn();
    times.push_back(std::chrono::duration<double>(clock::now() - start).count() / calls);
  }
  std::nth_element(times.begin(), times.begin() + samples / 2, times.end());
  return times[samples / 2];
}

struct Shape {
  int64_t m, k, n;
};

}  // namespace

int gemm_suite_main(int argc, char** argv);   // bench/gemm_suite.cpp
int gemm_linear_main(int argc, char** argv);  // bench/gemm_linear.cpp

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--suite") return gemm_suite_main(argc, argv);
    if (std::string(argv[i]) == "--linear") return gemm_linear_main(argc, argv);
  }
  GemmIsa isa = GemmIsa::kAuto;
  bool epilogue = false, cold = false;
  std::vector<Shape> shapes;
  std::vector<int64_t> nums;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--isa" && i + 1 < argc) {
      std::string v = argv[++i];
      isa = v == "generic" ? GemmIsa::kGeneric
            : v == "avx2"  ? GemmIsa::kAvx2
            : v == "avx512" ? GemmIsa::kAvx512
                            : GemmIsa::kAuto;
    } else if (arg == "--epilogue") {
      epilogue = true;
    } else if (arg == "--cold") {
      cold = true;
    } else {
      nums.push_back(std::atoll(arg.c_str()));
    }
  }
  for (size_t i = 0; i + 2 < nums.size(); i += 3) shapes.push_back({nums[i], nums[i + 1], nums[i + 2]});
  if (shapes.empty()) {
    shapes = {{8, 256, 512},   {8, 512, 512},    {8, 512, 256},     {64, 256, 768},
              {64, 256, 688},  {64, 688, 256},   {64, 1024, 4096},  {64, 4096, 1024},
              {64, 4096, 4096}, {128, 27, 16},   {1, 512, 512},     {8, 768, 3072},
              {256, 64, 64},   {512, 147, 64},  {32, 512, 512},    {128, 256, 256}};
  }
  if (!anvil::runtime::gemm_isa_available(isa)) {
    std::fprintf(stderr, "ISA not available on this CPU\n");
    return 1;
  }
  openblas_set_num_threads(1);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::printf("%5s %5s %5s | %10s %10s | %7s %s\n", "M", "K", "N", "openblas", "packed",
              "ratio", epilogue ? "(packed: +bias+relu)" : "");
  for (const Shape& s : shapes) {
    const int64_t b_floats = s.n * s.k, p_floats = anvil::runtime::packed_b_floats(s.k, s.n);
    const int64_t copies =
        cold ? std::max<int64_t>(2, (int64_t{64} << 20) / (4 * b_floats) + 1) : 1;
    std::vector<float> a(s.m * s.k), b(b_floats * copies), bias(s.n), c_ref(s.m * s.n),
        c(s.m * s.n);
    for (float& v : a) v = dist(rng);
    for (int64_t i = 0; i < b_floats; ++i) b[i] = dist(rng);
    for (int64_t i = b_floats; i < b_floats * copies; ++i) b[i] = b[i % b_floats];
    for (float& v : bias) v = dist(rng);
    std::vector<float> packed(p_floats * copies);
    for (int64_t i = 0; i < copies; ++i)
      anvil::runtime::pack_b(true, s.k, s.n, b.data() + i * b_floats, s.k,
                             packed.data() + i * p_floats);
    const double flops = 2.0 * s.m * s.n * s.k;
    int64_t next = 0;
    const double t_blas = time_call([&] {
      next = (next + 1) % copies;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k,
                  b.data() + next * b_floats, s.k, 0.0f, c_ref.data(), s.n);
    });
    const double t_packed = time_call([&] {
      next = (next + 1) % copies;
      anvil::runtime::sgemm_packed(false, s.m, s.n, s.k, 1.0f, a.data(), s.k,
                                   packed.data() + next * p_floats,
                                   epilogue ? bias.data() : nullptr, epilogue, c.data(), s.n, 0,
                                   s.n, isa);
    });
    double max_err = 0.0;
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double ref = c_ref[i * s.n + j];
        if (epilogue) ref = std::max(ref + bias[j], 0.0);
        max_err = std::max(max_err, std::fabs(ref - c[i * s.n + j]));
      }
    }
    std::printf("%5lld %5lld %5lld | %10.1f %10.1f | %6.2fx  (GFLOP/s; max |diff| %.1e)\n",
                static_cast<long long>(s.m), static_cast<long long>(s.k),
                static_cast<long long>(s.n), flops / t_blas * 1e-9, flops / t_packed * 1e-9,
                t_blas / t_packed, max_err);
  }
  return 0;
}
