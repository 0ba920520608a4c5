// Depthwise convolutions: the direct kernel (runtime/kernels/conv_depthwise.cpp) beside the
// im2col + packed-GEMM path (ANVIL_CONV=im2col) on ConvNeXt-T's 7x7 depthwise layers (batch 1,
// padding 3) and a few MobileNet / EfficientNet ones (3x3 and 5x5, stride 1 and 2), through the
// aten.conv2d.default extern, at 1 and 2 threads. The two paths take turns on the same inputs
// (median of at least ITERS calls each); their outputs are compared once.
//   build/bin/conv_bench [ITERS] [THREADS...]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "runtime/externs.h"

using namespace anvil;

namespace {

struct Shape2 {
  const char* model;
  int64_t c, hw, k, stride;
};

/// One extern call, ready to run repeatedly.
/// A contiguous fp32 tensor of normal random values.
Tensor randn(const Shape& sizes, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(shape_numel(sizes)));
  for (float& e : v) e = dist(gen);
  return Tensor::from_vector(v, sizes);
}

struct Call {
  Tensor x, w, b, out;
  std::vector<AnvilRtTensor> in;
  AnvilRtTensor od{};
  std::vector<int64_t> stride, padding, groups_v;
  std::vector<AnvilRtScalar> attrs;
  runtime::ExternFn fn = nullptr;

  explicit Call(const Shape2& s) {
    x = randn({1, s.c, s.hw, s.hw}, 1);
    w = randn({s.c, 1, s.k, s.k}, 2);
    b = randn({s.c}, 3);
    const int64_t pad = s.k / 2, oh = (s.hw + 2 * pad - s.k) / s.stride + 1;
    out = Tensor::empty({1, s.c, oh, oh}, DType::kFloat32);
    in = {runtime::rt_from_tensor(x), runtime::rt_from_tensor(w), runtime::rt_from_tensor(b)};
    od = runtime::rt_from_tensor(out);
    stride = {s.stride};
    padding = {pad};
    attrs.resize(3);
    attrs[0] = AnvilRtScalar{"stride", 3, 0, 0, nullptr, stride.data(), 1};
    attrs[1] = AnvilRtScalar{"padding", 3, 0, 0, nullptr, padding.data(), 1};
    attrs[2] = AnvilRtScalar{"groups", 0, s.c, 0, nullptr, nullptr, 0};
    fn = runtime::find_extern("aten.conv2d.default");
  }
  void run() {
    runtime::ExternCall call("aten.conv2d.default", in.data(), static_cast<int32_t>(in.size()),
                             attrs.data(), static_cast<int32_t>(attrs.size()), &od, 1);
    if (fn(call) != 0) {
      std::fprintf(stderr, "conv failed: %s\n", call.error().c_str());
      std::exit(1);
    }
  }
};

/// Median milliseconds of one call with ANVIL_CONV unset (direct) or "im2col": the paths take
/// turns in blocks of 5 calls (the first of each block untimed), so that both see the same load
/// and each runs with its own data in cache, as a layer of a model would.
void time_both(Call& c, int iters, double* direct_ms, double* im2col_ms) {
  constexpr int kBlock = 5;
  std::vector<double> d, g;
  for (int round = 0; static_cast<int>(d.size()) < iters; ++round)
    for (int path = 0; path < 2; ++path) {
      if (path == 1)
        setenv("ANVIL_CONV", "im2col", 1);
      else
        unsetenv("ANVIL_CONV");
      for (int i = 0; i < kBlock; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        c.run();
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (i > 0) (path == 0 ? d : g).push_back(ms);
      }
    }
  unsetenv("ANVIL_CONV");
  std::sort(d.begin(), d.end());
  std::sort(g.begin(), g.end());
  *direct_ms = d[d.size() / 2];
  *im2col_ms = g[g.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 50;
  std::vector<int> threads;
  for (int i = 2; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads = {1, 2};
  const Shape2 shapes[] = {
      {"ConvNeXt-T", 96, 56, 7, 1},       {"ConvNeXt-T", 192, 28, 7, 1},
      {"ConvNeXt-T", 384, 14, 7, 1},      {"ConvNeXt-T", 768, 7, 7, 1},
      {"MobileNetV3", 64, 112, 3, 2},     {"EfficientNet-B0", 96, 112, 3, 2},
      {"EfficientNet-B0", 144, 56, 5, 2}, {"EfficientNet-B0", 480, 14, 5, 1},
  };
  std::printf("%-16s %5s %4s %3s %2s %3s | %10s %10s %7s | %7s\n", "model", "C", "HW", "k", "s",
              "thr", "direct ms", "im2col ms", "speedup", "GFLOP/s");
  for (int t : threads) {
    double total_direct = 0, total_im2col = 0;  // ConvNeXt-T's four shapes
    ThreadPool pool(t);
    ScopedThreadPool scope(&pool);
    for (const Shape2& s : shapes) {
      Call c(s);
      // Agreement check: both paths on the same inputs.
      c.run();
      const std::vector<double> a = c.out.to_doubles();
      setenv("ANVIL_CONV", "im2col", 1);
      c.run();
      unsetenv("ANVIL_CONV");
      const std::vector<double> g = c.out.to_doubles();
      double diff = 0, mag = 1;
      for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::abs(a[i] - g[i]));
        mag = std::max(mag, std::abs(g[i]));
      }
      if (diff > 1e-4 * mag) {
        std::fprintf(stderr, "paths disagree: max diff %g\n", diff);
        return 1;
      }
      double dm = 0, gm = 0;
      time_both(c, iters, &dm, &gm);
      const double flops = 2.0 * static_cast<double>(c.out.numel()) * s.k * s.k;
      std::printf("%-16s %5lld %4lld %3lld %2lld %3d | %10.4f %10.4f %6.2fx | %7.1f\n", s.model,
                  static_cast<long long>(s.c), static_cast<long long>(s.hw),
                  static_cast<long long>(s.k), static_cast<long long>(s.stride), t, dm, gm, gm / dm,
                  flops / dm / 1e6);
      if (std::string(s.model) == "ConvNeXt-T") {
        total_direct += dm;
        total_im2col += gm;
      }
    }
    std::printf(
        "ConvNeXt-T's four depthwise shapes, %d thread(s): direct %.3f ms, im2col %.3f ms\n", t,
        total_direct, total_im2col);
  }
  return 0;
}
