// Convolution paths of the CPU conv extern (runtime/kernels/conv.h) side by side, through the
// aten.conv2d.default extern, at each thread count given (default 1 and 2):
//  - depthwise layers (ConvNeXt-T's 7x7, MobileNet / EfficientNet 3x3 and 5x5; batch 1): the
//    direct kernel, oneDNN (ANVIL_CONV=onednn) and im2col + packed GEMM (ANVIL_CONV=im2col);
//  - dense layers (ResNet-18 / 50 3x3 and 1x1, MobileNet pointwise, the 7x7 stride-2 stem; batch
//    1 and 8): oneDNN with the weight flagged constant (reordered once, as in a compiled model),
//    oneDNN with the weight reordered per call, and im2col + packed GEMM (ANVIL_CONV=direct).
// The paths take turns in blocks of 5 calls on the same inputs (median of at least ITERS calls
// each, the first call of a block untimed); their outputs are compared once.
//   [CONV_BENCH_DTYPE=bf16] build/bin/conv_bench [ITERS] [THREADS...]
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
#include "runtime/packed_weights.h"

using namespace anvil;

namespace {

/// One benchmarked layer: batch, input / output channels, square image and kernel, stride,
/// groups (groups == c: depthwise), padding k / 2.
struct Layer {
  const char* model;
  int64_t n, c, o, hw, k, stride, groups;
};

/// The element type of every table: fp32, or bf16 when CONV_BENCH_DTYPE=bf16.
DType bench_dtype() {
  const char* v = std::getenv("CONV_BENCH_DTYPE");
  return v && std::string(v) == "bf16" ? DType::kBFloat16 : DType::kFloat32;
}

/// A contiguous tensor of normal random values in bench_dtype().
Tensor randn(const Shape& sizes, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(shape_numel(sizes)));
  for (float& e : v) e = dist(gen);
  return Tensor::from_vector(v, sizes).to(bench_dtype(), /*copy=*/true);
}

/// One extern call, ready to run repeatedly.
struct Call {
  Tensor x, w, b, out;
  std::vector<AnvilRtTensor> in;
  AnvilRtTensor od{};
  std::vector<int64_t> stride, padding;
  std::vector<AnvilRtScalar> attrs;
  runtime::ExternFn fn = nullptr;
  runtime::PackedWeightCache constants;

  explicit Call(const Layer& s) {
    x = randn({s.n, s.c, s.hw, s.hw}, 1);
    w = randn({s.o, s.c / s.groups, s.k, s.k}, 2);
    b = randn({s.o}, 3);
    const int64_t pad = s.k / 2, oh = (s.hw + 2 * pad - s.k) / s.stride + 1;
    out = Tensor::empty({s.n, s.o, oh, oh}, bench_dtype());
    in = {runtime::rt_from_tensor(x), runtime::rt_from_tensor(w), runtime::rt_from_tensor(b)};
    od = runtime::rt_from_tensor(out);
    stride = {s.stride};
    padding = {pad};
    attrs.resize(4);
    attrs[0] = AnvilRtScalar{"stride", 3, 0, 0, nullptr, stride.data(), 1};
    attrs[1] = AnvilRtScalar{"padding", 3, 0, 0, nullptr, padding.data(), 1};
    attrs[2] = AnvilRtScalar{"groups", 0, s.groups, 0, nullptr, nullptr, 0};
    attrs[3] = AnvilRtScalar{"weight_constant", 0, 1, 0, nullptr, nullptr, 0};
    fn = runtime::find_extern("aten.conv2d.default");
  }
  /// One call; `constant`: the weight flagged constant, its reordered copy kept in `constants`.
  void run(bool constant) {
    runtime::ExternCall call("aten.conv2d.default", in.data(), static_cast<int32_t>(in.size()),
                             attrs.data(), constant ? 4 : 3, &od, 1);
    if (constant) call.set_packed_weights(&constants);
    if (fn(call) != 0) {
      std::fprintf(stderr, "conv failed: %s\n", call.error().c_str());
      std::exit(1);
    }
  }
};

/// A path: the ANVIL_CONV value ("" unset) and whether the weight is flagged constant.
struct Path {
  const char* env;
  bool constant;
};

void select(const Path& p) {
  if (*p.env)
    setenv("ANVIL_CONV", p.env, 1);
  else
    unsetenv("ANVIL_CONV");
}

/// Median milliseconds of one call on each path (taking turns in blocks, see the file comment).
std::vector<double> time_paths(Call& c, const std::vector<Path>& paths, int iters) {
  constexpr int kBlock = 5;
  std::vector<std::vector<double>> t(paths.size());
  while (static_cast<int>(t[0].size()) < iters)
    for (size_t p = 0; p < paths.size(); ++p) {
      select(paths[p]);
      for (int i = 0; i < kBlock; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        c.run(paths[p].constant);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (i > 0) t[p].push_back(ms);
      }
    }
  unsetenv("ANVIL_CONV");
  std::vector<double> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

/// Runs every path once and fails when an output differs from the first path's.
bool paths_agree(Call& c, const std::vector<Path>& paths) {
  std::vector<double> first;
  for (const Path& p : paths) {
    select(p);
    c.run(p.constant);
    const std::vector<double> v = c.out.to_doubles();
    if (first.empty()) {
      first = v;
      continue;
    }
    double diff = 0, mag = 1;
    for (size_t i = 0; i < v.size(); ++i) {
      diff = std::max(diff, std::abs(v[i] - first[i]));
      mag = std::max(mag, std::abs(first[i]));
    }
    if (diff > (bench_dtype() == DType::kFloat32 ? 1e-4 : 5e-2) * mag) {
      std::fprintf(stderr, "paths disagree (ANVIL_CONV=%s): max diff %g\n", p.env, diff);
      return false;
    }
  }
  unsetenv("ANVIL_CONV");
  return true;
}

/// One table: the layers on the paths, at `threads` threads; returns false on disagreement.
bool table(const char* title, const std::vector<Layer>& layers, const std::vector<Path>& paths,
           const std::vector<const char*>& names, int iters, int threads) {
  std::printf("\n%s, %d thread(s), %s, ms per call (median)\n", title, threads,
              dtype_name(bench_dtype()));
  std::printf("%-16s %3s %5s %5s %4s %2s %2s |", "model", "N", "C", "O", "HW", "k", "s");
  for (const char* n : names) std::printf(" %12s", n);
  std::printf(" | %7s %8s\n", "best", "GFLOP/s");
  std::vector<double> total(paths.size(), 0.0);
  ThreadPool pool(threads);
  ScopedThreadPool scope(&pool);
  for (const Layer& s : layers) {
    Call c(s);
    if (!paths_agree(c, paths)) return false;
    const std::vector<double> ms = time_paths(c, paths, iters);
    const size_t best = static_cast<size_t>(std::min_element(ms.begin(), ms.end()) - ms.begin());
    const double flops = 2.0 * static_cast<double>(c.out.numel()) * (s.c / s.groups) * s.k * s.k;
    std::printf("%-16s %3lld %5lld %5lld %4lld %2lld %2lld |", s.model, static_cast<long long>(s.n),
                static_cast<long long>(s.c), static_cast<long long>(s.o),
                static_cast<long long>(s.hw), static_cast<long long>(s.k),
                static_cast<long long>(s.stride));
    for (size_t p = 0; p < ms.size(); ++p) {
      std::printf(" %12.4f", ms[p]);
      total[p] += ms[p];
    }
    std::printf(" | %7s %8.1f\n", names[best], flops / ms[best] / 1e6);
  }
  std::printf("%-44s |", "sum");
  for (double t : total) std::printf(" %12.3f", t);
  std::printf("\n");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 30;
  std::vector<int> threads;
  for (int i = 2; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads = {1, 2};
  const std::vector<Layer> depthwise = {
      {"ConvNeXt-T", 1, 96, 96, 56, 7, 1, 96},
      {"ConvNeXt-T", 1, 192, 192, 28, 7, 1, 192},
      {"ConvNeXt-T", 1, 384, 384, 14, 7, 1, 384},
      {"ConvNeXt-T", 1, 768, 768, 7, 7, 1, 768},
      {"MobileNetV3", 1, 64, 64, 112, 3, 2, 64},
      {"EfficientNet-B0", 1, 96, 96, 112, 3, 2, 96},
      {"EfficientNet-B0", 1, 144, 144, 56, 5, 2, 144},
      {"EfficientNet-B0", 1, 480, 480, 14, 5, 1, 480},
  };
  std::vector<Layer> dense;
  for (int64_t n : {1, 8}) {
    const std::vector<Layer> per_batch = {
        {"stem 7x7 s2", n, 3, 64, 224, 7, 2, 1},      {"ResNet-18 3x3", n, 64, 64, 56, 3, 1, 1},
        {"ResNet-18 3x3", n, 128, 128, 28, 3, 1, 1},  {"ResNet-18 3x3", n, 256, 256, 14, 3, 1, 1},
        {"ResNet-18 3x3", n, 512, 512, 7, 3, 1, 1},   {"ResNet-18 3x3s2", n, 64, 128, 56, 3, 2, 1},
        {"ResNet-50 1x1", n, 256, 64, 56, 1, 1, 1},   {"ResNet-50 1x1", n, 64, 256, 56, 1, 1, 1},
        {"ResNet-50 1x1", n, 1024, 256, 14, 1, 1, 1}, {"ResNet-50 1x1", n, 512, 2048, 7, 1, 1, 1},
        {"MobileNet pw", n, 32, 64, 112, 1, 1, 1},    {"MobileNet pw", n, 256, 256, 28, 1, 1, 1},
    };
    dense.insert(dense.end(), per_batch.begin(), per_batch.end());
  }
  for (int t : threads) {
    if (!table("Depthwise layers", depthwise, {{"", false}, {"onednn", true}, {"im2col", false}},
               {"direct", "onednn", "im2col"}, iters, t) ||
        !table("Dense layers", dense, {{"", true}, {"", false}, {"direct", false}},
               {"onednn", "onednn-w/call", "im2col"}, iters, t))
      return 1;
  }
  return 0;
}
