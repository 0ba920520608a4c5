// Scatter-style writes on Tensors: aten.scatter (src / value), aten.scatter_reduce.two and
// aten.index_put (integer and boolean indices, None entries, broadcast values, accumulate).
// Shared by the runtime extern kernels (scatter.cpp) and the compiler's reference kernels
// (src/ops/scatter.cpp), so the interpreter and the compiled model compute the same thing.
// Every function writes into `out`, which the caller has filled with a copy of `self`.
// Duplicate indices are applied in row-major order of the index tensor (deterministic: the
// last write wins for plain scatter / index_put, accumulation order is fixed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace anvil::runtime::kern {

/// The reduction of scatter / scatter_reduce.
enum class ScatterReduce { kNone, kSum, kProd, kMean, kAmax, kAmin };

/// Parses scatter_reduce.two's `reduce` ("sum", "prod", "mean", "amax", "amin") or scatter's
/// ("add", "multiply"); throws Error at `where` for other strings.
ScatterReduce parse_scatter_reduce(const std::string& reduce, const std::string& where);

/// Checks scatter's index against self / src sizes (same rank; index.size(d) <= src.size(d) for
/// every d and <= self.size(d) for d != dim) and its dtype (int64); throws Error at `where`.
/// `src` may be null for a scalar source.
void check_scatter_args(const Shape& self, int64_t dim, const Tensor& index, const Shape* src,
                        const std::string& where);

/// out[... index[i][j][k] ...] (reduce)= src[i][j][k] along `dim` (already wrapped). `src` is a
/// tensor (same rank as index) or, when it is 0-dim and `scalar_src`, one value for every
/// position. include_self = false makes scattered positions start from the scattered values.
/// mean divides by the number of contributions (floor division for integers). Throws Error at
/// `where` for out-of-range indices.
void scatter_into(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                  bool scalar_src, ScatterReduce reduce, bool include_self,
                  const std::string& where);

/// out[indices] = values (or += when `accumulate`). Boolean / uint8 masks are expanded to the
/// coordinates of their true elements; None entries take the whole dim; integer indices may be
/// negative; values broadcast to the indexed result. Throws Error at `where`.
void index_put_into(const Tensor& out, const std::vector<std::optional<Tensor>>& indices,
                    const Tensor& values, bool accumulate, const std::string& where);

}  // namespace anvil::runtime::kern
