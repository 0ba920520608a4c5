// Pooling over 1 to 3 spatial dims on concrete tensors, with PyTorch's semantics: max pooling
// with the flat index of each maximum, average pooling (ceil_mode, count_include_pad,
// divisor_override) and adaptive average pooling. Shared by the reference kernels
// (src/ops/pool_nd.cpp) and the runtime externs (src/runtime/kernels/pool_nd.cpp), as
// core/sort_order.h is by the sorts; both are checked against PyTorch's values
// (tests/ops/test_pool_nd.cpp, the ops_pool_sample fixture).
//
// An input is [N, C, *spatial] or [C, *spatial]; every leading (N, C) plane is pooled alone.
// Outputs are contiguous tensors of the sizes output_sizes() / adaptive_sizes() give; the
// functions write every element, splitting the planes over the current thread pool when
// `parallel` (the runtime's externs; the reference kernels run serially).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace anvil::pool {

/// A pooling window over `rank` spatial dims (rank 1..3; entries past rank are unused).
struct Window {
  int rank = 0;
  std::array<int64_t, 3> kernel{1, 1, 1};
  std::array<int64_t, 3> stride{1, 1, 1};
  std::array<int64_t, 3> pad{0, 0, 0};
  std::array<int64_t, 3> dilation{1, 1, 1};
};

/// PyTorch's pooling_output_shape along one dim: floor (or ceil) division of the padded extent;
/// in ceil mode the last window must start inside the input or its left padding.
int64_t output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                    bool ceil_mode);

/// The window of kernel_size / stride / padding / dilation arguments, each with 1 or `rank`
/// values (an empty stride means stride = kernel_size, as ATen's); refuses non-positive sizes
/// and a padding over half the kernel with an Error naming `where`.
Window make_window(int rank, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                   const std::vector<int64_t>& pad, const std::vector<int64_t>& dilation,
                   const std::string& where);

/// Checks that `x` is [N, C, *spatial] or [C, *spatial] for the window's rank and returns the
/// pooled sizes; refuses an output smaller than 1 along a dim.
Shape output_sizes(const Tensor& x, const Window& w, bool ceil_mode, const std::string& where);

/// Max pooling into `values` (x's dtype) and, when given, `indices` (int64: the flat index of
/// each maximum within its input plane, e.g. h * W + w). NaN wins (the last NaN of a window, as
/// PyTorch's CPU kernel), otherwise the first of equal maxima. Refuses bool.
void max_pool(const Tensor& x, const Window& w, bool ceil_mode, const Tensor& values,
              const Tensor* indices, const std::string& where, bool parallel = false);

/// Average pooling into `out`: sums in fp32 (f64 for double, int64 with truncating division for
/// integers); the divisor is `divisor_override` when non-zero, else the window size clipped to
/// the padded input (count_include_pad) or to the input. Refuses bool.
void avg_pool(const Tensor& x, const Window& w, bool ceil_mode, bool count_include_pad,
              int64_t divisor_override, const Tensor& out, const std::string& where,
              bool parallel = false);

/// Checks an adaptive pooling input (rank+1 or rank+2 dims, floating, a non-empty plane unless
/// the output is empty) and returns its output sizes; `output_size` has 1 or `rank` values.
Shape adaptive_sizes(const Tensor& x, int rank, const std::vector<int64_t>& output_size,
                     const std::string& where);

/// Adaptive average pooling into `out` (sizes from adaptive_sizes): output cell o of a dim of
/// size `in` averages input [floor(o * in / out), ceil((o + 1) * in / out)).
void adaptive_avg_pool(const Tensor& x, int rank, const Tensor& out, const std::string& where,
                       bool parallel = false);

}  // namespace anvil::pool
