// Symbolic M in GEMM autotuning (issue 16, deliver 4: "tune for the range's buckets, dispatch at
// run time"). A GEMM step whose M is symbolic (N, K and the batch static) is tuned once per
// bucket of M's range, each bucket timed at one representative M; the generated code compares
// M's run-time value with the buckets' upper ends and calls the bucket's choice (the default
// path where no candidate ran, or nothing beat it).
//
// The rule: the buckets' upper ends are 1, 8, 32, 128, 512, 2048 (powers of four times two past
// 1), then one open bucket; each is clipped to M's range [lo, hi] (lo raised to 1: M = 0 returns
// before any GEMM) and the empty ones dropped. A bucket is timed at its upper end (clipped to hi);
// the open bucket at 4096 clipped to [its lower end, hi]. So M in [1, 64] gives {1}, [2, 8],
// [9, 32], [33, 64] timed at 1, 8, 32 and 64; M in [2, inf] gives six buckets, the last
// [2049, inf] timed at 4096.
#pragma once

#include <cstdint>
#include <vector>

#include "core/symint.h"

namespace anvil::driver {

/// One bucket of a symbolic M: [min, max] (max SymRange::kSymMax when open) and the M its
/// candidates are timed at.
struct MBucket {
  int64_t min = 1, max = 1;
  int64_t at = 1;
};

/// The buckets of M's range `range` by the rule above, ascending and contiguous; empty when the
/// range holds no M >= 1.
std::vector<MBucket> m_buckets(const SymRange& range);

}  // namespace anvil::driver
