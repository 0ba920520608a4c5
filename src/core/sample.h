// Grid sampling and sliding blocks on concrete tensors, with PyTorch's semantics: grid_sampler_2d
// (F.grid_sample on 4-D inputs), im2col (F.unfold) and col2im (F.fold). Shared by the reference
// kernels (src/ops/sample.cpp) and the runtime externs (src/runtime/kernels/sample.cpp); both
// are checked against PyTorch's values (tests/ops/test_sample.cpp, the ops_pool_sample fixture).
// Outputs are contiguous tensors of the sizes the *_sizes functions give; the functions write
// every element (split over the current thread pool when `parallel`: the runtime's externs) and
// refuse bad arguments with an Error naming `where`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace anvil::sample {

/// grid_sampler's interpolation_mode and padding_mode codes (ATen's GridSamplerInterpolation /
/// GridSamplerPadding).
enum class Interp : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum class Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

/// Checks a 2-D grid sampling call (input [N, C, H, W], grid [N, Ho, Wo, 2] of the same floating
/// dtype, known mode codes) and returns the output sizes [N, C, Ho, Wo].
Shape grid_sample_sizes(const Tensor& input, const Tensor& grid, int64_t interpolation,
                        int64_t padding, const std::string& where);

/// Samples `input` at the grid's normalized (x, y) points into `out`: a point's coordinate
/// -1 / +1 is the centre of the first / last pixel with align_corners, else their outer edge;
/// padding decides what out-of-range points read (zeros, the border, or the input reflected).
/// Computed in fp32 (f64 for double).
void grid_sample_2d(const Tensor& input, const Tensor& grid, int64_t interpolation, int64_t padding,
                    bool align_corners, const Tensor& out, const std::string& where,
                    bool parallel = false);

/// A sliding-block geometry: kernel_size, dilation, padding, stride (2 values each).
struct Blocks {
  int64_t kernel[2] = {1, 1}, dilation[2] = {1, 1}, pad[2] = {0, 0}, stride[2] = {1, 1};
  /// Blocks along dim i of a plane of size `in` (may be < 1 for a too-small plane).
  int64_t count(int i, int64_t in) const {
    return (in + 2 * pad[i] - (dilation[i] * (kernel[i] - 1) + 1)) / stride[i] + 1;
  }
};

/// The geometry of im2col / col2im arguments: exactly 2 values each, kernel, dilation and
/// stride positive, padding non-negative.
Blocks make_blocks(const std::vector<int64_t>& kernel, const std::vector<int64_t>& dilation,
                   const std::vector<int64_t>& padding, const std::vector<int64_t>& stride,
                   const std::string& where);

/// im2col of [N, C, H, W] or [C, H, W] (floating): [N, C * kh * kw, L] (or without N), L the
/// number of blocks; refuses a plane with no block.
Shape im2col_sizes(const Tensor& input, const Blocks& b, const std::string& where);
/// Row c * kh * kw + ki * kw + kj, column by * bw + bx holds input[c, by * sh - ph + ki * dh,
/// bx * sw - pw + kj * dw] (0 in the padding).
void im2col(const Tensor& input, const Blocks& b, const Tensor& out, const std::string& where,
            bool parallel = false);

/// col2im of [N, C * kh * kw, L] or [C * kh * kw, L] (floating) into an [H, W] plane given by
/// `output_size`: [N, C, H, W] (or without N); refuses a row count not divisible by kh * kw and
/// an L other than the block count of the plane.
Shape col2im_sizes(const Tensor& input, const std::vector<int64_t>& output_size, const Blocks& b,
                   const std::string& where);
/// The adjoint of im2col: every column entry is added to the pixel it was read from
/// (overlapping blocks sum; padding entries are dropped). Sums in fp32 (f64 for double).
void col2im(const Tensor& input, const Blocks& b, const Tensor& out, const std::string& where,
            bool parallel = false);

}  // namespace anvil::sample
