// The static form of a pad / roll node for the compiler (passes/lower_pad.cpp), validated by
// the same rules as the shape rule and reference kernel (ops/pad.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace anvil::ops {

/// A pad node: its mode ("constant", "reflect", "replicate", "circular"), the (left, right) pads
/// per padded dimension, innermost first (pairs[k] pads dimension rank-1-k), and the constant
/// mode's fill value. Throws Error at the node for pads PyTorch refuses.
struct PadInfo {
  std::string mode;
  std::vector<std::pair<SymInt, SymInt>> pairs;
  double value = 0;
};
PadInfo pad_info(const ir::Node& node);

/// A roll node: shifts per rolled dimension (dims normalised to >= 0); empty dims roll the
/// flattened tensor by shifts[0].
struct RollInfo {
  std::vector<int64_t> shifts, dims;
};
RollInfo roll_info(const ir::Node& node);

/// An upsample_bilinear2d / upsample_nearest2d node (.vec or .default) on an (N, C, H, W)
/// input: input and output sizes of H and W, and the scale factor the user gave per dim (0:
/// none, the kernel uses in / out). Throws Error at the node for bad arguments.
struct UpsampleInfo {
  bool bilinear = false, align_corners = false;
  std::vector<SymInt> in, out;
  std::vector<double> scale;
};
UpsampleInfo upsample_info(const ir::Node& node);

/// A flip node's dims, normalised to >= 0. Throws Error at the node for repeated dims.
std::vector<int64_t> flip_dims(const ir::Node& node);

}  // namespace anvil::ops
