// Which convolutions of few input channels (a vision network's stem: the 3 channels of an image)
// the CUDA target runs on anvil's own kernels instead of cuDNN's, shared by the layout plan
// (passes/conv_layout.cpp: such a convolution reads its NCHW image as it is, with no
// channels-last copy) and the emitter (codegen/cuda/emit_cuda_conv_direct.cpp, which writes
// the kernels). Both kernels read and write any strides and apply the bias, a fused residual
// and the activation in their store.
//  * The tensor-core kernel (stem_mma): 16-bit operands, fp32 accumulation. A block stages the
//    weights once, as [K][taps x 4 channels] padded to 16, then per tile of 8 x 16 output
//    positions of one image the tile's input patch (channels padded to 4 with zeros); four
//    warps compute 32 positions x K channels each with mma.sync m16n8k16, reading both
//    operands from shared memory (the patch through a table of per-k offsets: an implicit
//    im2col). At bf16 batch 32 on an H200 ResNet's 7x7 stride-2 stem (64 channels, 9408
//    products per position) took cuDNN 0.22 ms, the scalar kernel about 0.44.
//  * The scalar kernel (stem_scalar): one thread per output position and 8 channels at a time,
//    the weights staged as floats; for few products per position (MobileNetV3-Small's 3x3
//    stem, 432: cuDNN's 0.099 ms -> about 0.01).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/env_switch.h"

namespace anvil::passes {

struct StemConv {
  DType dtype = DType::kFloat32;  // input, weight and output (the emitter requires one dtype)
  int64_t k = 0, c = 0, kh = 0, kw = 0;  // weight [K, C, KH, KW]
  int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t batch = -1;  // the output's constant batch, -1 when symbolic
};

/// The tensor-core kernel's tile of output positions: rows x columns of one image.
constexpr int64_t kStemTileRows = 8, kStemTileCols = 16;

/// The tensor-core kernel's K dim (taps x 4 channels) rounded up to the MMA's 16.
inline int64_t stem_mma_kdim(const StemConv& s) { return (s.kh * s.kw * 4 + 15) / 16 * 16; }

/// The tensor-core kernel's static shared memory: the weights as [K][kdim / 2 + 4] 32-bit pairs
/// (the padding keeps a warp's B-fragment reads on distinct banks), the input patch as
/// [rows][cols][2] pairs (4 channels), the per-pair offset table.
inline int64_t stem_mma_shared_bytes(const StemConv& s) {
  const int64_t pairs = stem_mma_kdim(s) / 2;
  const int64_t rows = (kStemTileRows - 1) * s.stride_h + s.kh;
  const int64_t cols = (kStemTileCols - 1) * s.stride_w + s.kw;
  return (s.k * (pairs + 4) + rows * cols * 2 + pairs) * 4;
}

/// Whether the tensor-core kernel takes the stem (ANVIL_CUDA_STEM_MMA=0 at compile time: never):
/// a constant batch of at least 1 (its grid counts tiles), bf16 or fp16, at most 4 input
/// channels, K a multiple of 8 up to 128, no dilation, at least 2048 products per output
/// position (below that the scalar kernel is as fast) and its shared memory within 48 KiB.
inline bool stem_mma(const StemConv& s) {
  if (!env_switch("ANVIL_CUDA_STEM_MMA", true)) return false;
  if (s.batch < 1) return false;
  if (s.dtype != DType::kBFloat16 && s.dtype != DType::kFloat16) return false;
  if (s.c < 1 || s.c > 4 || s.k < 8 || s.k > 128 || s.k % 8 != 0) return false;
  if (s.dil_h != 1 || s.dil_w != 1 || s.stride_h < 1 || s.stride_w < 1) return false;
  if (s.kh < 1 || s.kw < 1 || s.k * s.c * s.kh * s.kw < 2048) return false;
  return stem_mma_shared_bytes(s) <= 48 * 1024;
}

/// Whether the scalar kernel takes it: at most 4 input channels, at most 6144 products per
/// output position and the weights, padded to 8 output channels, within 48 KiB as floats.
inline bool stem_scalar(const StemConv& s) {
  const int64_t taps = s.c * s.kh * s.kw;
  return s.c >= 1 && s.c <= 4 && s.k >= 1 && s.k * taps <= 6144 &&
         (s.k + 7) / 8 * 8 * taps * 4 <= 48 * 1024;
}

}  // namespace anvil::passes
