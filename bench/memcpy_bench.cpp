// memcpy bandwidth of N bytes (default 64 MiB), the yardstick for bench/aot_bench.py's fused chain:
// prints {"bytes": N, "p50_ms": ..., "gbps": ...} where gbps counts bytes read + bytes written,
// the same accounting the chain uses (64 MiB in + 64 MiB out).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (size_t{64} << 20);
  int iters = argc > 2 ? std::atoi(argv[2]) : 30;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> ms;
  for (int i = 0; i < iters + 3; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    auto t1 = std::chrono::steady_clock::now();
    src[i % bytes] = dst[(i * 7) % bytes];  // keep the copies observable
    if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  double p50 = ms[ms.size() / 2];
  std::printf("{\"bytes\": %zu, \"p50_ms\": %.4f, \"gbps\": %.3f}\n", bytes, p50, 2.0 * bytes / p50 / 1e6);
  return 0;
}
