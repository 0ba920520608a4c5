// Shared by the convolution extern (conv.cpp: checks, im2col + GEMM), the direct depthwise
// kernel (conv_depthwise.cpp) and oneDNN's convolution (conv_onednn.cpp): the geometry of one
// 2-D convolution, the routing between the paths and their entry points.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace anvil::runtime {
class PackedWeightCache;
}

namespace anvil::runtime::kern {

/// An activation fused into a convolution. The values are the codes of the extern attribute
/// fused_act (docs/externs.md); keep them in step with passes/lower_conv_fuse.cpp.
enum class ConvAct : int {
  kNone = 0,
  kRelu = 1,         // max(x, 0)
  kClamp = 2,        // min(max(x, lo), hi): relu6, hardtanh, clamp
  kHardswish = 3,    // x * relu6(x + 3) / 6
  kHardsigmoid = 4,  // relu6(x + 3) / 6
  kSilu = 5,         // x * sigmoid(x)
  kSigmoid = 6,      // 1 / (1 + exp(-x))
  kGelu = 7,         // x * (1 + erf(x / sqrt(2))) / 2
  kGeluTanh = 8,     // gelu's tanh approximation
};
/// The largest fused_act code.
constexpr int kConvActLast = static_cast<int>(ConvAct::kGeluTanh);

/// Applies `act` (bounds lo, hi for kClamp) to n floats in place (conv_act.cpp: vectorised
/// polynomial exp / erf, within 2e-7 relative of std::; NaN stays NaN).
void conv_activate(ConvAct act, float lo, float hi, float* p, int64_t n);
/// The same in double with std:: functions, for the dtypes other than fp32.
void conv_activate(ConvAct act, double lo, double hi, double* p, int64_t n);

/// Geometry of one 2-D convolution (1-D convolutions have h = kh = 1).
struct ConvGeom {
  int64_t n = 1, c = 0, h = 1, w = 0;  // input batch, channels, height, width
  int64_t o = 0, groups = 1;           // output channels, groups
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t oh = 1, ow = 0;
  bool unbatched = false;
  int spatial = 2;
  // The activation applied as the result is stored, after a fused residual (attributes
  // fused_relu, or fused_act with fused_act_min / fused_act_max; docs/externs.md).
  ConvAct act = ConvAct::kNone;
  float act_lo = 0, act_hi = 0;  // kClamp's bounds (-inf / inf: none)

  int64_t cg() const { return c / groups; }       // input channels per group
  int64_t og() const { return o / groups; }       // output channels per group
  int64_t ckk() const { return cg() * kh * kw; }  // GEMM inner size per group
  int64_t l() const { return oh * ow; }           // output pixels per plane
  /// A 1x1, stride-1, unpadded convolution reads the input planes as they are (no im2col).
  bool pointwise() const {
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pad_top == 0 && pad_left == 0 &&
           pad_bottom == 0 && pad_right == 0;
  }
  /// One group per input channel (groups == C > 1), each with O / C output channels (the
  /// channel multiplier): the direct depthwise kernel's case.
  bool depthwise() const { return groups > 1 && groups == c; }
};

/// Applies g's activation to `out` in place (fp32 contiguous directly, other dtypes and
/// strides through doubles). Nothing for kNone.
void conv_activate(const ConvGeom& g, const Tensor& out);

/// The paths of a non-transposed convolution.
enum class ConvPath {
  kDirect,  // conv_depthwise()
  kOneDnn,  // conv_onednn()
  kIm2col,  // im2col + GEMM (conv.cpp): every dtype
};

/// The path of a convolution of geometry `g` and element type `dtype` (docs/design_notes.md):
/// depthwise fp32 / bf16 / fp16 -> kDirect; else whatever oneDNN takes (onednn_conv_supports)
/// with at least 2^16 multiply-adds (ANVIL_CONV_ONEDNN_MIN_MACS overrides) -> kOneDnn; else
/// kIm2col. ANVIL_CONV overrides it: "im2col" sends everything to im2col;
/// "direct" keeps the paths before oneDNN (depthwise direct, the rest im2col); "onednn" sends
/// every convolution oneDNN takes there, depthwise ones included.
ConvPath conv_path(const ConvGeom& g, DType dtype);

/// Whether this runtime can run `g` in `dtype` through oneDNN: built with oneDNN and not turned
/// off (ANVIL_ONEDNN=0), fp32, or bf16 on a CPU with AVX512-BF16 or AMX-BF16.
bool onednn_conv_supports(const ConvGeom& g, DType dtype);

/// oneDNN's convolution (conv_onednn.cpp): out [N, O, OH, OW] (contiguous, x's dtype) from x
/// (NCHW or channels-last; other strides are copied), weight [O, C / groups, KH, KW] and an
/// optional bias [O], plus `residual` (out's sizes and dtype; null: none; it may be `out`
/// itself) before g.act, both fused (a sum and eltwise post-ops). `constants`: where the weight is an immutable model
/// constant, the cache that keeps its reordered copy (null: reordered per call). Returns false,
/// having written nothing, when oneDNN has no primitive or only a reference one for the
/// problem (the caller takes another path); throws Error when oneDNN fails to run it.
bool conv_onednn(const ConvGeom& g, const Tensor& x, const Tensor& weight,
                 const std::optional<Tensor>& bias, const Tensor& out, PackedWeightCache* constants,
                 const Tensor* residual = nullptr);

/// oneDNN convolution primitives held by the cache (tests: a repeated call creates none).
size_t onednn_conv_cached_primitives();
/// Convolutions conv_onednn() has run in this process (tests: the path was taken).
size_t onednn_conv_runs();

/// Whether conv_depthwise() takes a convolution of geometry `g` and element type `dtype`
/// (conv_path() says kDirect: depthwise, fp32 / bf16 / fp16, ANVIL_CONV not "im2col" or
/// "onednn").
bool use_conv_depthwise(const ConvGeom& g, DType dtype);

/// Direct depthwise convolution: out [N, O, OH, OW] (contiguous, x's dtype; unbatched / 1-D
/// shapes as the caller's) from x (any strides: NCHW, channels-last, broadcast), weight
/// [O, 1, KH, KW] and optional bias [O]. Accumulates in fp32 (one FMA chain per output,
/// starting from the bias), applies g.act, rounds once to the output dtype.
/// Work: the N x C input planes split over the current thread pool.
void conv_depthwise(const ConvGeom& g, const Tensor& x, const Tensor& weight,
                    const std::optional<Tensor>& bias, const Tensor& out);

}  // namespace anvil::runtime::kern
