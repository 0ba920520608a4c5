// The generated code's branch-free float math (fast_math_text.h).
#include "codegen/fast_math_text.h"

namespace anvil::codegen {

const std::string& fast_math_text() {
  static const std::string text =
      "// Vectorisable float math (branch-free, so `#pragma omp simd` loops vectorise them). "
      "Accuracy:\n" R"(// exp ~2 ulp, tanh / sigmoid ~3 ulp, erf 1.5e-7 absolute; inf and NaN behave like std::.
static inline float pow2i(int32_t n) {
  const uint32_t u = static_cast<uint32_t>(n + 127) << 23;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
static inline float fast_exp(float x) {
  const float xc = x < -104.0f ? -104.0f : (x > 88.8f ? 88.8f : x);
  // round to nearest by the 1.5 * 2^23 trick (vectorises without -ffast-math)
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n), n1 = ni >> 1;
  float y = p * pow2i(n1) * pow2i(ni - n1);
  y = x > 88.72283905f ? INFINITY : y;
  y = x < -103.972f ? 0.0f : y;
  return x != x ? x : y;
}
static inline float fast_tanh(float x) {
  const float ax = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float e = fast_exp(2.0f * (ax > 9.0f ? 9.0f : ax));
  const float big = std::copysign(1.0f - 2.0f / (e + 1.0f), x);
  const float y = ax < 0.625f ? small : big;
  return x != x ? x : y;
}
static inline float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }
static inline float fast_erf(float x) {
  const float ax = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float y = 1.0f - p * t * fast_exp(-ax * ax);
  return x != x ? x : std::copysign(y, x);
}
static inline double fast_exp(double x) { return std::exp(x); }
static inline double fast_tanh(double x) { return std::tanh(x); }
static inline double fast_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
static inline double fast_erf(double x) { return std::erf(x); }
)";
  return text;
}

}  // namespace anvil::codegen
