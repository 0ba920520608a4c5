// Internal to the CUDA target's convolutions: the geometry emit_cuda_conv.cpp reads from a
// step (read_geometry) and the direct kernels of emit_cuda_conv_direct.cpp (depthwise
// convolutions, convolutions of few input channels) that conv() emits instead of cuDNN's call.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "codegen/cuda/extern_kernel.h"

namespace anvil::codegen::cuda::ext {

/// A convolution step's geometry as the emitter passes it to AnvilConvArgs: spatial attributes
/// as (h, w) pairs (h of a 1-D convolution is the unit dim), padding resolved.
struct ConvGeom {
  const TensorView *x = nullptr, *w = nullptr, *bias = nullptr, *y = nullptr;
  const TensorView* residual = nullptr;  // fused_add: y = act(conv + bias + residual)
  size_t spatial = 2;
  bool unbatched = false, relu = false;
  // fused_act (a runtime::kern::ConvAct code other than relu, with clamp bounds): applied by
  // the step's epilogue kernel after cuDNN's plain convolution (never fused into cuDNN's graph)
  int act = 0;
  double act_lo = -HUGE_VAL, act_hi = HUGE_VAL;
  int64_t groups = 1;
  int64_t stride[2] = {1, 1}, dilation[2] = {1, 1};
  int64_t pad_begin[2] = {0, 0}, pad_end[2] = {0, 0};
};

/// CUDA statements applying `g`'s relu or fused_act to float variable `v` (PyTorch's formulas;
/// NaN stays NaN through relu and the clamps).
std::string activation(const ConvGeom& g, const std::string& v);

/// Whether the depthwise convolution of `g` runs on anvil's direct kernel (the default;
/// ANVIL_CUDA_DEPTHWISE=0 at compile time keeps cuDNN).
bool direct_depthwise(const ConvGeom& g);
std::string depthwise_kernel(const Program& p, const ExternStep& e, const ConvGeom& g);
/// Whether the convolution of `g` (at most 4 input channels: a stem) runs on anvil's direct
/// kernel (the default; ANVIL_CUDA_STEM=0 at compile time keeps cuDNN).
bool direct_stem(const ConvGeom& g);
std::string stem_kernel(const Program& p, const ExternStep& e, const ConvGeom& g);

}  // namespace anvil::codegen::cuda::ext
