// Branch-free float math for the runtime's kernels (conv_act.cpp's fused activations, the
// attention kernel's softmax): written so that loops over arrays vectorise, for whatever ISA the
// including function is compiled for (the kernels compile their loops for AVX-512, AVX2 + FMA
// and the baseline, chosen at run time). exp is a degree-6 polynomial after the usual reduction
// x = n ln2 + r (|r| <= ln2 / 2), ~2 ulp; erf is 1 - t p(t) exp(-x^2) with
// t = 1 / (1 + 0.3275911 |x|) (Abramowitz & Stegun 7.1.26, 1.5e-7 absolute). NaN inputs are
// the callers' to handle (they give unspecified finite values here).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace anvil::runtime::kern {

#define ANVIL_VEC_INLINE inline __attribute__((always_inline))

/// 2^n for an integer-valued float n in [-126, 127], built from its exponent bits.
ANVIL_VEC_INLINE float exp2_int(float n) {
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// exp(x) for finite or infinite x (NaN handled by the callers): 0 below -87.3, inf above 88.7.
ANVIL_VEC_INLINE float exp_approx(float x) {
  const float xc = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
  const float kShift = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to integer
  const float n = (xc * 1.44269504088896341f + kShift) - kShift;
  const float r = (xc - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.98756915e-4f;
  p = p * r + 1.39819995e-3f;
  p = p * r + 8.33345190e-3f;
  p = p * r + 4.16657959e-2f;
  p = p * r + 1.66666655e-1f;
  p = p * r + 5.00000012e-1f;
  p = p * r * r + r + 1.0f;
  // n may be 128 near the top: scale in two steps so 2^n never overflows the exponent field
  const float half = n > 0.0f ? 1.0f : 0.0f;
  float y = p * exp2_int(n - half) * exp2_int(half);
  y = x > 88.72283f ? std::numeric_limits<float>::infinity() : y;
  return x < -87.33f ? 0.0f : y;
}

ANVIL_VEC_INLINE float sigmoid_approx(float x) { return 1.0f / (1.0f + exp_approx(-x)); }

ANVIL_VEC_INLINE float erf_approx(float x) {
  const float ax = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  return std::copysign(1.0f - p * t * exp_approx(-ax * ax), x);
}

}  // namespace anvil::runtime::kern
