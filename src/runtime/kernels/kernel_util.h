// Private helpers of the runtime's extern kernel families (src/runtime/kernels/*.cpp): optional
// inputs and output checks, dim wrapping, strided multi-offset loops, a parallel dtype-converting
// copy, GEMM on the runtime thread pool and f32/f64 matrix operands packed only when needed.
// Nothing here is part of a public contract; the families include it, nobody else does.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "runtime/externs.h"

namespace anvil::runtime::kern {

/// Input `i` as a Tensor, or nullopt when the call has no input `i` or passes a "none"
/// descriptor (data == NULL, ndim == -1) there.
std::optional<Tensor> opt_input(const ExternCall& call, int32_t i);

/// Output `i` as a Tensor after checking that its sizes are `sizes` (and its dtype `dtype` when
/// given): a mismatch means the generated code allocated it from a different shape rule.
Tensor checked_output(const ExternCall& call, int32_t i, const Shape& sizes,
                      std::optional<DType> dtype = std::nullopt);

/// A contiguous Tensor viewing caller-owned memory (no ownership).
Tensor wrap_buffer(void* data, DType dtype, const Shape& sizes);

/// Threads a parallel_for started here would use (1 inside another parallel_for).
int available_threads();

/// Loop grain so that a chunk does at least ~32k units of work when each item costs `per_item`.
inline int64_t grain_for(int64_t per_item) {
  return std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(per_item, 1));
}

/// Drops size-1 dims and merges dims that are contiguous with their inner neighbour in every one
/// of the N stride sets (the iteration order and the offsets stay the same).
template <size_t N>
void coalesce(Shape& sizes, std::array<Shape, N>& strides) {
  Shape s;
  std::array<Shape, N> st;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool merge = !s.empty();
    for (size_t k = 0; merge && k < N; ++k) merge = st[k].back() == strides[k][d] * sizes[d];
    if (merge) {
      s.back() *= sizes[d];
      for (size_t k = 0; k < N; ++k) st[k].back() = strides[k][d];
    } else {
      s.push_back(sizes[d]);
      for (size_t k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
    }
  }
  sizes = std::move(s);
  strides = std::move(st);
}

/// Calls f(offsets) for the row-major positions [begin, end) of `sizes`, where offsets[k] is the
/// position's offset (in elements) under stride set k. A 0-d shape has one position.
template <size_t N, typename F>
void for_each_offsets(const Shape& sizes, const std::array<Shape, N>& strides, int64_t begin,
                      int64_t end, F&& f) {
  if (begin >= end) return;
  std::array<int64_t, N> off{};
  const size_t nd = sizes.size();
  if (nd == 0) {
    f(off);
    return;
  }
  Shape idx(nd, 0);
  int64_t rem = begin;
  for (size_t d = nd; d-- > 0;) {
    idx[d] = rem % sizes[d];
    rem /= sizes[d];
    for (size_t k = 0; k < N; ++k) off[k] += idx[d] * strides[k][d];
  }
  const int64_t inner = sizes[nd - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][nd - 1];
  int64_t left = end - begin;
  while (true) {
    const int64_t run = std::min(inner - idx[nd - 1], left);
    for (int64_t i = 0; i < run; ++i) {
      f(off);
      for (size_t k = 0; k < N; ++k) off[k] += inner_stride[k];
    }
    left -= run;
    if (left <= 0) return;
    for (size_t k = 0; k < N; ++k) off[k] -= inner_stride[k] * inner;
    idx[nd - 1] = 0;
    for (size_t d = nd - 1; d-- > 0;) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
      if (idx[d] < sizes[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * sizes[d];
      idx[d] = 0;
    }
  }
}

/// Copies `src` into `dst` (same sizes; any dtypes and strides), converting each element like a
/// cast; splits large copies over the thread pool.
void copy_cast(const Tensor& dst, const Tensor& src);

/// Copies one element of `es` bytes.
inline void copy_element(char* dst, const char* src, size_t es) {
  switch (es) {
    case 1:
      *dst = *src;
      break;
    case 2:
      std::memcpy(dst, src, 2);
      break;
    case 4:
      std::memcpy(dst, src, 4);
      break;
    case 8:
      std::memcpy(dst, src, 8);
      break;
    default:
      std::memcpy(dst, src, es);
      break;
  }
}

/// The integer values of an index tensor (int64 or int32; any strides), in row-major order.
/// `what` names the argument in the error raised for another dtype.
std::vector<int64_t> read_indices(const Tensor& index, const std::string& where,
                                  const std::string& what);

/// A matrix operand for runtime::gemm() (runtime/rt_api.h): `data` with leading dimension `ld`, transposed when `trans`.
template <typename F>
struct MatArg {
  const F* data = nullptr;
  int64_t ld = 1;
  bool trans = false;
};

/// The [rows, cols] matrix at element offset `off` of `t` with row / column strides `rs` / `cs`,
/// as a gemm operand of type F (float or double): used in place when it already is F with a
/// BLAS-compatible layout (row- or column-major), else converted into `scratch`.
template <typename F>
MatArg<F> matrix_arg(const Tensor& t, int64_t off, int64_t rows, int64_t cols, int64_t rs,
                     int64_t cs, std::vector<F>& scratch) {
  MatArg<F> m;
  if (t.dtype() == dtype_of<F>()) {
    const F* base = static_cast<const F*>(t.data_ptr()) + off;
    if ((cs == 1 || cols <= 1) && (rs >= std::max<int64_t>(cols, 1) || rows <= 1)) {
      m.data = base;
      m.ld = rows <= 1 ? std::max<int64_t>(cols, 1) : rs;
      return m;
    }
    if ((rs == 1 || rows <= 1) && (cs >= std::max<int64_t>(rows, 1) || cols <= 1)) {
      m.data = base;
      m.ld = cols <= 1 ? std::max<int64_t>(rows, 1) : cs;
      m.trans = true;
      return m;
    }
  }
  scratch.resize(static_cast<size_t>(std::max<int64_t>(rows * cols, 1)));
  ANVIL_DISPATCH_REAL(t.dtype(), "runtime::matrix_arg", T, {
    const T* p = static_cast<const T*>(t.data_ptr()) + off;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        scratch[r * cols + c] = cast_value<F, T>(p[r * rs + c * cs]);
  });
  m.data = scratch.data();
  m.ld = std::max<int64_t>(cols, 1);
  return m;
}

/// Comparison / accumulation type for element type T: float for the 16-bit floats, T otherwise.
template <typename T>
using CmpType = typename AccType<T>::type;

/// True for NaN (always false for integer types).
template <typename T>
inline bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v);
  else
    return false;
}

}  // namespace anvil::runtime::kern
