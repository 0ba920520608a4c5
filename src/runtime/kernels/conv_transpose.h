// Transposed convolution (aten.conv_transpose1d / conv_transpose2d / convolution with
// transposed=True) on Tensors: shared by the runtime extern kernels (conv_transpose.cpp, conv.cpp)
// and the compiler's reference kernels (src/ops/conv_transpose.cpp), so the interpreter and the
// compiled model compute the same thing. PyTorch semantics: weight [C_in, C_out / groups, (kH,)
// kW], output size (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace anvil::runtime::kern {

/// The non-tensor arguments of a transposed convolution (lists of 1 value apply to every dim).
struct ConvTransposeArgs {
  std::vector<int64_t> stride{1};
  std::vector<int64_t> padding{0};
  std::vector<int64_t> output_padding{0};
  std::vector<int64_t> dilation{1};
  int64_t groups = 1;
};

/// Output sizes for input sizes `x` ([N, C, (H,) W] or unbatched [C, (H,) W]) and weight sizes
/// `w` ([C, O / groups, (kH,) kW]); validates ranks, channel counts and the arguments (throws
/// Error at `where`).
Shape conv_transpose_sizes(const Shape& x, const Shape& w, const ConvTransposeArgs& a,
                           const std::string& where);

/// Computes the transposed convolution into `out` (preallocated with conv_transpose_sizes, any
/// strides). Accumulates in fp32 (f64 for double, wrapping int64 for integers); bias is added
/// before the single rounding to the output dtype. Any input strides.
void conv_transpose(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                    const ConvTransposeArgs& a, const Tensor& out, const std::string& where);

}  // namespace anvil::runtime::kern
