/* anvil_fp8.h — conversions between float32 and the four float8 formats, bit for bit as
 * PyTorch 2.15 converts them (x.to(torch.float8_*) and back), for host and device code alike.
 *
 * One definition serves the reference interpreter (src/core/float8.h) and the generated CPU and
 * CUDA kernels (their preambles include this header), so the compiled code and the oracle it is
 * checked against cannot drift apart. Plain C99 and C++; under nvcc every function is also
 * __device__. Integer arithmetic only: no dependence on the floating-point rounding mode or on
 * flush-to-zero.
 *
 * Formats (sign, exponent bits, mantissa bits, exponent bias):
 *   e4m3fn   1.4.3 bias 7:  no infinities, NaN = S.1111.111, largest finite 448.
 *   e5m2     1.5.2 bias 15: IEEE-like, infinities and NaNs, largest finite 57344.
 *   e4m3fnuz 1.4.3 bias 8:  no infinities, no -0, the one NaN is 0x80, largest finite 240.
 *   e5m2fnuz 1.5.2 bias 16: no infinities, no -0, the one NaN is 0x80, largest finite 57344.
 * From float32, PyTorch rounds to nearest, ties to even, and:
 *   e4m3fn saturates: a finite value beyond +-448 and +-inf become +-448; NaN -> S.1111.111.
 *   e5m2 overflows to +-inf; +-inf stay; NaN -> S.11111.11.
 *   the fnuz formats turn NaN, +-inf and every overflow into NaN (0x80), and -0 into +0.
 * To float32, NaNs carry PyTorch's exact bit patterns (see anvil_fp8_to_f32).
 * Float64 and 16-bit values convert through float32 first, as PyTorch does. */
#ifndef ANVIL_ANVIL_FP8_H_
#define ANVIL_ANVIL_FP8_H_

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define ANVIL_FP8_FN static inline __host__ __device__
#else
#define ANVIL_FP8_FN static inline
#endif

/* The formats, numbered as anvil::DType codes (torch.export's ScalarType codes). */
#define ANVIL_FP8_E4M3FN 29
#define ANVIL_FP8_E5M2 30
#define ANVIL_FP8_E4M3FNUZ 31
#define ANVIL_FP8_E5M2FNUZ 32

ANVIL_FP8_FN uint32_t anvil_fp8_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

ANVIL_FP8_FN float anvil_fp8_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* float32 -> float8 with `mant` mantissa bits and exponent bias `bias`; `fnuz` selects the fnuz
 * rules, else `inf_code` (0: none) is the infinity of an IEEE-like format and `max_code` the
 * largest finite magnitude (saturating when there is no infinity). */
ANVIL_FP8_FN uint8_t anvil_fp8_encode(float f, int mant, int bias, int fnuz, uint32_t max_code,
                                      uint32_t inf_code) {
  const uint32_t bits = anvil_fp8_f32_bits(f);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t mag = bits & 0x7fffffffu;
  const int emin = 1 - bias; /* the exponent of the smallest normal value */
  uint32_t sig, code;
  int exp, shift;
  if (mag > 0x7f800000u) { /* NaN */
    if (fnuz) return 0x80u;
    return (uint8_t)(sign | 0x7fu);
  }
  if (mag == 0x7f800000u) { /* +-inf */
    if (fnuz) return 0x80u;
    return (uint8_t)(sign | (inf_code != 0 ? inf_code : max_code));
  }
  if (mag >= 0x00800000u) {
    exp = (int)(mag >> 23) - 127;
    sig = (mag & 0x7fffffu) | 0x800000u;
  } else {
    exp = -126;
    sig = mag;
  }
  /* drop 23 - mant bits (more below the smallest normal exponent), rounding to nearest even */
  shift = 23 - mant + (exp < emin ? emin - exp : 0);
  if (shift > 24) {
    code = 0; /* below half the smallest subnormal */
  } else {
    const uint32_t q = sig >> shift, rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
    const uint32_t up = (rem > half || (rem == half && (q & 1u))) ? 1u : 0u;
    /* q + up counts quanta: with the implicit bit for normal values, so that the exponent field
     * is (exp - emin) above 1 and a carry out of the mantissa bumps it */
    code = q + up;
    if (exp >= emin) {
      const int field = exp - emin;
      code = field > 64 ? 0xffffu : code + ((uint32_t)field << mant);
    }
  }
  if (code > max_code) {
    if (fnuz) return 0x80u;
    return (uint8_t)(sign | (inf_code != 0 ? inf_code : max_code));
  }
  if (fnuz && code == 0) return 0; /* no negative zero */
  return (uint8_t)(sign | code);
}

ANVIL_FP8_FN uint8_t anvil_f32_to_f8e4m3fn(float f) {
  return anvil_fp8_encode(f, 3, 7, 0, 0x7eu, 0);
}
ANVIL_FP8_FN uint8_t anvil_f32_to_f8e5m2(float f) {
  return anvil_fp8_encode(f, 2, 15, 0, 0x7bu, 0x7cu);
}
ANVIL_FP8_FN uint8_t anvil_f32_to_f8e4m3fnuz(float f) {
  return anvil_fp8_encode(f, 3, 8, 1, 0x7fu, 0);
}
ANVIL_FP8_FN uint8_t anvil_f32_to_f8e5m2fnuz(float f) {
  return anvil_fp8_encode(f, 2, 16, 1, 0x7fu, 0);
}

/* float8 -> float32, exact. NaNs come out as PyTorch makes them: e4m3fn S.1111.mmm ->
 * S | 0x7f800000 | m << 20; e5m2 S.11111.mm (m != 0) -> S | 0x7fc00000 | m << 21; the fnuz NaN
 * (0x80) -> 0x7f800001. */
ANVIL_FP8_FN float anvil_fp8_decode(uint8_t c, int mant, int bias, int fnuz) {
  const uint32_t sign = (uint32_t)(c & 0x80u) << 24;
  const uint32_t field = (uint32_t)(c & 0x7fu) >> mant;
  const uint32_t m = c & ((1u << mant) - 1u);
  const uint32_t top = (1u << (7 - mant)) - 1u;
  if (fnuz && c == 0x80u) return anvil_fp8_bits_f32(0x7f800001u);
  if (!fnuz && field == top) {
    if (mant == 3) { /* e4m3fn: only S.1111.111 is NaN; the rest are finite */
      if (m == 7u) return anvil_fp8_bits_f32(sign | 0x7f800000u | (m << 20));
    } else {
      if (m == 0u) return anvil_fp8_bits_f32(sign | 0x7f800000u);
      return anvil_fp8_bits_f32(sign | 0x7fc00000u | (m << 21));
    }
  }
  if (field == 0) {
    /* subnormal: m quanta of 2^(1 - bias - mant), a power of two built from its bits */
    const float quantum = anvil_fp8_bits_f32((uint32_t)(127 + 1 - bias - mant) << 23);
    const float v = (float)m * quantum;
    return anvil_fp8_bits_f32(anvil_fp8_f32_bits(v) | sign);
  }
  return anvil_fp8_bits_f32(sign | ((field + 127u - (uint32_t)bias) << 23) | (m << (23 - mant)));
}

ANVIL_FP8_FN float anvil_f8e4m3fn_to_f32(uint8_t c) { return anvil_fp8_decode(c, 3, 7, 0); }
ANVIL_FP8_FN float anvil_f8e5m2_to_f32(uint8_t c) { return anvil_fp8_decode(c, 2, 15, 0); }
ANVIL_FP8_FN float anvil_f8e4m3fnuz_to_f32(uint8_t c) { return anvil_fp8_decode(c, 3, 8, 1); }
ANVIL_FP8_FN float anvil_f8e5m2fnuz_to_f32(uint8_t c) { return anvil_fp8_decode(c, 2, 16, 1); }

/* By ANVIL_FP8_* code; 0 / NaN for another code. */
ANVIL_FP8_FN uint8_t anvil_f32_to_fp8(int32_t format, float f) {
  switch (format) {
    case ANVIL_FP8_E4M3FN:
      return anvil_f32_to_f8e4m3fn(f);
    case ANVIL_FP8_E5M2:
      return anvil_f32_to_f8e5m2(f);
    case ANVIL_FP8_E4M3FNUZ:
      return anvil_f32_to_f8e4m3fnuz(f);
    case ANVIL_FP8_E5M2FNUZ:
      return anvil_f32_to_f8e5m2fnuz(f);
    default:
      return 0;
  }
}

ANVIL_FP8_FN float anvil_fp8_to_f32(int32_t format, uint8_t c) {
  switch (format) {
    case ANVIL_FP8_E4M3FN:
      return anvil_f8e4m3fn_to_f32(c);
    case ANVIL_FP8_E5M2:
      return anvil_f8e5m2_to_f32(c);
    case ANVIL_FP8_E4M3FNUZ:
      return anvil_f8e4m3fnuz_to_f32(c);
    case ANVIL_FP8_E5M2FNUZ:
      return anvil_f8e5m2fnuz_to_f32(c);
    default:
      return anvil_fp8_bits_f32(0x7fc00000u);
  }
}

#endif /* ANVIL_ANVIL_FP8_H_ */
