// for_range: one loop that the computations core shares between the reference kernels and the
// runtime's extern kernels (core/pool_nd.h, core/sample.h, core/distance.h) run serially for the
// former and on the current thread pool for the latter.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

#include "core/thread_pool.h"

namespace anvil {

/// fn(b, e) over chunks of [0, n) on the current pool when `parallel` (chunks of ~32k units of
/// work when one item costs `cost`), else fn(0, n) on the calling thread. Items must be
/// independent (each writes its own outputs), so the results do not depend on the split.
inline void for_range(bool parallel, int64_t n, int64_t cost,
                      const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (!parallel) return fn(0, n);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(cost, 1));
  parallel_for(0, n, grain, fn);
}

}  // namespace anvil
