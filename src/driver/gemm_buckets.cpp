#include "driver/gemm_buckets.h"

#include <algorithm>

namespace anvil::driver {

std::vector<MBucket> m_buckets(const SymRange& range) {
  constexpr int64_t kEnds[] = {1, 8, 32, 128, 512, 2048, SymRange::kSymMax};
  constexpr int64_t kOpenAt = 4096;  // where the open bucket is timed (clipped to its range)
  std::vector<MBucket> out;
  const int64_t lo = std::max<int64_t>(1, range.min), hi = range.max;
  int64_t start = 1;  // the bucket's own lower end before clipping
  for (const int64_t end : kEnds) {
    MBucket b;
    b.min = std::max(start, lo);
    b.max = std::min(end, hi);
    if (b.min <= b.max) {
      b.at = end == SymRange::kSymMax ? std::clamp(kOpenAt, b.min, b.max) : b.max;
      out.push_back(b);
    }
    if (end == SymRange::kSymMax || end >= hi) break;
    start = end + 1;
  }
  return out;
}

}  // namespace anvil::driver
