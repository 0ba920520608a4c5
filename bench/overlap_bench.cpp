// Latency of one compiled package with collectives, run on every rank of an `anvil launch` job:
//   overlap_bench PACKAGE [ITERS] [WARMUP]
// Loads the package (joining the world from the launcher's environment), runs WARMUP untimed
// iterations, then ITERS timed ones on a fixed input, and prints on rank 0:
//   median_ms=<..> mean_ms=<..> min_ms=<..>
// (bench/overlap_bench.sh compares packages compiled with and without the collective passes).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "runtime/model.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: overlap_bench PACKAGE [ITERS] [WARMUP]\n");
    return 2;
  }
  const int iters = argc > 2 ? std::atoi(argv[2]) : 200;
  const int warmup = argc > 3 ? std::atoi(argv[3]) : 20;
  try {
    anvil::runtime::ModelOptions mo;
    if (const char* t = std::getenv("BENCH_THREADS")) mo.num_threads = std::atoi(t);
    auto model = anvil::runtime::Model::load(argv[1], mo);
    std::vector<anvil::Tensor> inputs;
    for (const auto& spec : model.input_specs()) {
      anvil::Shape sizes;
      for (const auto& r : spec.ranges) sizes.push_back(r.max < (1 << 20) ? r.max : r.min);
      inputs.push_back(anvil::Tensor::full(sizes, 0.5, spec.dtype));
    }
    std::vector<double> ms;
    for (int i = 0; i < warmup + iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      model.run(inputs);
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    double mean = 0;
    for (double v : ms) mean += v;
    mean /= static_cast<double>(ms.size());
    const char* rank = std::getenv("RANK");
    if (!rank || std::atoi(rank) == 0)
      std::printf("median_ms=%.4f mean_ms=%.4f min_ms=%.4f\n", ms[ms.size() / 2], mean, ms[0]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "overlap_bench: %s\n", e.what());
    return 1;
  }
}
