// The order PyTorch's sort gives a line of values, shared by the reference kernels
// (src/ops/sort.cpp) and the runtime's extern kernels (src/runtime/kernels/sort.cpp): ascending
// puts NaN last, descending puts NaN first, and equal values keep their index order (a stable
// sort, which is what PyTorch's CPU sort gives).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/tensor.h"

namespace anvil {

/// Fills `idx` with the positions 0..n-1 of a line in sorted order; `at(j)` reads value j in a
/// comparable type C (float / double / int64_t).
template <typename C, typename Get>
void sort_order(int64_t n, Get&& at, bool descending, std::vector<int64_t>& idx) {
  idx.resize(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  std::vector<C> v(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(j)] = at(j);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    const C x = v[static_cast<size_t>(a)], y = v[static_cast<size_t>(b)];
    const bool xn = x != x, yn = y != y;  // NaN (never for integers)
    if (xn || yn) return descending ? (xn && !yn) : (!xn && yn);
    return descending ? x > y : x < y;
  });
}

/// Element offsets of the input and of the values and indices outputs of a sort-like op along
/// `dim`, line by line: every dim but `dim` in order, then `dim` (a 0-d tensor is one line).
struct SortLines {
  std::vector<int64_t> in, values, indices;
};
inline SortLines sort_line_offsets(const Tensor& self, const Tensor& values,
                                   const Tensor& indices, int64_t dim) {
  Tensor in = self, vo = values, io = indices;
  if (self.dim() > 0) {
    Shape perm;
    for (int64_t d = 0; d < self.dim(); ++d)
      if (d != dim) perm.push_back(d);
    perm.push_back(dim);
    in = self.permute(perm);
    vo = values.permute(perm);
    io = indices.permute(perm);
  }
  SortLines l;
  for_each_offset(in.sizes(), in.strides(), [&](int64_t o) { l.in.push_back(o); });
  for_each_offset(vo.sizes(), vo.strides(), [&](int64_t o) { l.values.push_back(o); });
  for_each_offset(io.sizes(), io.strides(), [&](int64_t o) { l.indices.push_back(o); });
  return l;
}

}  // namespace anvil
