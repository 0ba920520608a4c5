// Transposed convolution (aten.conv_transpose1d / conv_transpose2d / convolution with
// transposed=True) on Tensors, for the runtime extern kernels (conv_transpose.cpp, conv.cpp).
// Shapes and argument checks: core/conv_transpose_geometry.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/conv_transpose_geometry.h"
#include "core/tensor.h"

namespace anvil::runtime::kern {

/// The arguments and output sizes (argument checks included) are core's, shared with the
/// reference kernel; the computation below is the runtime's own.
using ::anvil::ConvTransposeArgs;
using ::anvil::conv_transpose_sizes;

/// Computes the transposed convolution into `out` (preallocated with conv_transpose_sizes, any
/// strides). Accumulates in fp32 (f64 for double, wrapping int64 for integers); bias is added
/// before the single rounding to the output dtype. Any input strides.
void conv_transpose(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                    const ConvTransposeArgs& a, const Tensor& out, const std::string& where);

}  // namespace anvil::runtime::kern
