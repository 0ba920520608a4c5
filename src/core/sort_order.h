// The order PyTorch's sort gives a line of values, shared by the reference kernels
// (src/ops/sort.cpp) and the runtime's extern kernels (src/runtime/kernels/sort.cpp): ascending
// puts NaN last, descending puts NaN first, and equal values keep their index order (a stable
// sort, which is what PyTorch's CPU sort gives).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

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

}  // namespace anvil
