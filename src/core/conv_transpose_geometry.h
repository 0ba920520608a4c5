// Transposed convolution shapes (aten.conv_transpose1d / conv_transpose2d / convolution with
// transposed=True): argument checks, the geometry lifted to 2-D and the output sizes. Shared by
// the runtime kernel and the reference kernel of src/ops, which compute the values each their own
// way; only this shape arithmetic (and its error messages) is common. PyTorch semantics: weight
// [C_in, C_out / groups, (kH,) kW], output size
// (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace anvil {

/// The non-tensor arguments of a transposed convolution (lists of 1 value apply to every dim).
struct ConvTransposeArgs {
  std::vector<int64_t> stride{1};
  std::vector<int64_t> padding{0};
  std::vector<int64_t> output_padding{0};
  std::vector<int64_t> dilation{1};
  int64_t groups = 1;
};

/// Geometry of one transposed convolution lifted to 2-D (1-D has h = kh = 1).
struct ConvTransposeGeom {
  int64_t n = 1, c = 0, h = 1, w = 0, o = 0, groups = 1, kh = 1, kw = 1;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, oph = 0, opw = 0, oh = 1, ow = 0;
  bool unbatched = false;
  size_t spatial = 2;
};

/// Validates input sizes `x` ([N, C, (H,) W] or unbatched [C, (H,) W]), weight sizes `wt`
/// ([C, O / groups, (kH,) kW]) and the arguments, and computes the geometry (throws Error at
/// `where`).
ConvTransposeGeom conv_transpose_geometry(const Shape& x, const Shape& wt,
                                          const ConvTransposeArgs& a, const std::string& where);

/// Output sizes (validated as conv_transpose_geometry does).
Shape conv_transpose_sizes(const Shape& x, const Shape& wt, const ConvTransposeArgs& a,
                           const std::string& where);

}  // namespace anvil
