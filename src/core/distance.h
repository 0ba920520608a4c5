// Pairwise p-norm distances on concrete tensors, with PyTorch's semantics: cdist (between the
// rows of two batched matrices) and pdist (between the rows of one matrix, upper triangle).
// Shared by the reference kernels (src/ops/dist.cpp) and the runtime externs
// (src/runtime/kernels/dist.cpp); both are checked against PyTorch's values
// (tests/ops/test_dist.cpp, the ops_dist fixture).
//
// The distance of rows a and b is (sum |a_k - b_k|^p)^(1/p); p = 0 counts the differing
// entries, p = inf takes the largest |a_k - b_k|. Computed in f64 and rounded once, so the
// results are the exact ones PyTorch's direct path approximates; its matrix-product path for
// p = 2 (compute_mode, or more than 25 rows) loses precision near 0 that this one does not.
// With `parallel` (the runtime's externs) the rows are split over the current thread pool.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"

namespace anvil::distance {

/// Checks a cdist call (x1 [.., P, M], x2 [.., R, M] of the same f32 / f64 dtype, batch dims
/// broadcastable, p >= 0, compute_mode absent or 0, 1, 2) and returns the output sizes
/// [broadcast batch.., P, R].
Shape cdist_sizes(const Tensor& x1, const Tensor& x2, double p, std::optional<int64_t> compute_mode,
                  const std::string& where);

/// cdist into `out` (contiguous, sizes from cdist_sizes).
void cdist(const Tensor& x1, const Tensor& x2, double p, const Tensor& out,
           const std::string& where, bool parallel = false);

/// Checks a pdist call (a 2-D [N, M] f32 / f64 input, p >= 0) and returns [N * (N - 1) / 2].
Shape pdist_sizes(const Tensor& x, double p, const std::string& where);

/// pdist into `out`: the distances of rows (i, j), i < j, in row-major order of the pairs.
void pdist(const Tensor& x, double p, const Tensor& out, const std::string& where,
           bool parallel = false);

}  // namespace anvil::distance
