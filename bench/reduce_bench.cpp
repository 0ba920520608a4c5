// Split reductions (issue "backends and devices", loop IR): a sum, a max and a mean of squares
// over one 64 MiB row (16 Mi float32), compiled twice in one process — reductions split over the
// thread pool (the default) and serial (split_reductions off, the code before the split) — and
// timed alternately, same inputs, same pool. Prints both medians and the results beside a
// float64 reference.
//   build/bin/reduce_bench [ELEMENTS] [ITERS]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "driver/compile.h"
#include "ir/parser.h"
#include "runtime/model.h"

using namespace anvil;

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : int64_t{16} << 20;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 30;
  const std::string text = "graph {\n  inputs {\n    %x: f32[" + std::to_string(n) +
                           "] = user_input\n  }\n"
                           "  %s: f32[] = aten.sum.default(self=%x)\n"
                           "  %m: f32[] = aten.amax.default(self=%x, dim=[0])\n"
                           "  %w: f32[" + std::to_string(n) + "] = aten.mul.Tensor(self=%x, other=%x)\n"
                           "  %q: f32[] = aten.mean.default(self=%w)\n"
                           "  outputs {\n    user_output %s\n    user_output %m\n    user_output %q\n  }\n}\n";
  const auto graph = ir::parse_graph(text);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "anvil_reduce_bench";
  std::filesystem::create_directories(dir);
  driver::CompileOptions o;
  o.progress = codegen::ProgressMode::kQuiet;
  setenv("ANVIL_SPLIT_REDUCTIONS", "0", 1);
  driver::compile_graph(*graph, (dir / "serial.anvil").string(), o);
  unsetenv("ANVIL_SPLIT_REDUCTIONS");
  driver::compile_graph(*graph, (dir / "split.anvil").string(), o);
  const runtime::Model serial = runtime::Model::load((dir / "serial.anvil").string());
  const runtime::Model split = runtime::Model::load((dir / "split.anvil").string());

  std::vector<float> x(static_cast<size_t>(n));
  std::mt19937 rng(0);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (float& v : x) v = dist(rng);
  double s = 0, q = 0, m = -INFINITY;
  for (float v : x) {
    s += v;
    q += double(v) * v;
    m = std::max<double>(m, v);
  }
  const Tensor in = Tensor::from_vector(x, {n});
  auto time = [&](const runtime::Model& model) {
    const auto t0 = std::chrono::steady_clock::now();
    model.run({in});
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < 3; ++i) time(serial), time(split);
  std::vector<double> ts, tp;
  for (int i = 0; i < iters; ++i) {
    ts.push_back(time(serial));
    tp.push_back(time(split));
  }
  std::sort(ts.begin(), ts.end());
  std::sort(tp.begin(), tp.end());
  std::printf("reduce_bench: %lld float32 (%.0f MiB), %d threads, %d iters alternating\n",
              static_cast<long long>(n), n * 4.0 / (1 << 20), split.thread_pool().num_threads(),
              iters);
  std::printf("  serial (before)  p50 %8.3f ms\n  split  (after)   p50 %8.3f ms   (%.1fx)\n",
              ts[ts.size() / 2], tp[tp.size() / 2], ts[ts.size() / 2] / tp[tp.size() / 2]);
  const auto a = serial.run({in}), b = split.run({in});
  std::printf("  sum:  float64 %.6f  serial %.6f  split %.6f\n", s, a[0].item(), b[0].item());
  std::printf("  max:  float64 %.6f  serial %.6f  split %.6f\n", m, a[1].item(), b[1].item());
  std::printf("  mean(x*x): float64 %.6f  serial %.6f  split %.6f\n", q / n, a[2].item(),
              b[2].item());
  return 0;
}
