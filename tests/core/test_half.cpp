// Tests for Half and BFloat16: exact bit patterns of conversions (values from PyTorch).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"

namespace anvil {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// float32 bits, and the bits torch's .half() and .bfloat16() give for it.
struct Case {
  uint32_t f32;
  uint16_t f16;
  uint16_t bf16;
};

// Computed with torch.tensor([x]).half() / .bfloat16() viewed as int16.
constexpr Case kCases[] = {
    {0x3f800000, 0x3c00, 0x3f80},  // 1.0
    {0xc0200000, 0xc100, 0xc020},  // -2.5
    {0x40490fd0, 0x4248, 0x4049},  // 3.14159
    {0x000116c2, 0x0000, 0x0001},  // 1e-40: f32 subnormal; bf16 keeps a subnormal
    {0x3f808000, 0x3c04, 0x3f80},  // 1 + 2^-8: bf16 tie, rounds to even (down)
    {0x3f818000, 0x3c0c, 0x3f82},  // 1 + 3*2^-8: bf16 tie, rounds to even (up)
    {0x3f808001, 0x3c04, 0x3f81},  // just above the tie: rounds up
    {0x3f801000, 0x3c00, 0x3f80},  // 1 + 2^-11: f16 tie, rounds to even (down)
    {0x3f803000, 0x3c02, 0x3f80},  // 1 + 3*2^-11: f16 tie, rounds to even (up)
    {0x477fe000, 0x7bff, 0x4780},  // 65504 = largest half
    {0x477feffd, 0x7bff, 0x4780},  // 65519.99 stays finite
    {0x477ff000, 0x7c00, 0x4780},  // 65520 rounds to inf in half
    {0x47c35000, 0x7c00, 0x47c3},  // 1e5 overflows half
    {0x33800000, 0x0001, 0x3380},  // 2^-24 = smallest half subnormal
    {0x33000000, 0x0000, 0x3300},  // 2^-25: tie between 0 and 2^-24, rounds to even (0)
    {0x33000347, 0x0001, 0x3300},  // just above 2^-25: rounds up to 2^-24
    {0x343ffc2b, 0x0003, 0x3440},  // 1.788e-7 ~ 3 * 2^-24
    {0x38800000, 0x0400, 0x3880},  // 2^-14 = smallest normal half
    {0x387fda40, 0x03ff, 0x3880},  // 6.1e-5 rounds to the largest half subnormal
    {0x3eaaaaab, 0x3555, 0x3eab},  // 1/3
    {0x3dcccccd, 0x2e66, 0x3dcd},  // 0.1
    {0x80000000, 0x8000, 0x8000},  // -0.0
    {0x7f800000, 0x7c00, 0x7f80},  // inf
    {0xff800000, 0xfc00, 0xff80},  // -inf
    {0x7f7fffff, 0x7c00, 0x7f80},  // FLT_MAX: inf in both
};

TEST(Half, FromFloatMatchesTorchBits) {
  for (const auto& c : kCases) {
    EXPECT_EQ(Half(from_bits(c.f32)).bits, c.f16) << std::hex << "f32 0x" << c.f32;
  }
}

TEST(BFloat16, FromFloatMatchesTorchBits) {
  for (const auto& c : kCases) {
    EXPECT_EQ(BFloat16(from_bits(c.f32)).bits, c.bf16) << std::hex << "f32 0x" << c.f32;
  }
}

TEST(Half, NaNStaysNaN) {
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffc12345u}) {
    Half h(from_bits(nan));
    EXPECT_EQ(h.bits & 0x7c00, 0x7c00);
    EXPECT_NE(h.bits & 0x03ff, 0);
    EXPECT_TRUE(std::isnan(static_cast<float>(h)));
  }
  EXPECT_EQ(Half(from_bits(0x7fc00000u)).bits, 0x7e00);
  EXPECT_EQ(Half(from_bits(0xffc00000u)).bits, 0xfe00);
}

TEST(BFloat16, NaNIsCanonicalQuietNaN) {
  // c10::BFloat16's round_to_nearest_even returns 0x7FC0 for every NaN.
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff812345u}) {
    BFloat16 b(from_bits(nan));
    EXPECT_EQ(b.bits, 0x7fc0) << std::hex << nan;
    EXPECT_TRUE(std::isnan(static_cast<float>(b)));
  }
}

TEST(Half, ToFloatIsExact) {
  EXPECT_EQ(to_bits(Half::to_float(0x3c00)), 0x3f800000u);
  EXPECT_EQ(Half::to_float(0x7bff), 65504.0f);
  EXPECT_EQ(Half::to_float(0x0001), std::ldexp(1.0f, -24));         // smallest subnormal
  EXPECT_EQ(Half::to_float(0x03ff), 1023 * std::ldexp(1.0f, -24));  // largest subnormal
  EXPECT_EQ(Half::to_float(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(Half::to_float(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(to_bits(Half::to_float(0x8000)), 0x80000000u);
  EXPECT_EQ(Half::to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Half::to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(Half::to_float(0x7e00)));
  EXPECT_EQ(Half::to_float(0x3555), 0.333251953125f);
}

TEST(Half, EveryFiniteHalfRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    uint16_t h = static_cast<uint16_t>(b);
    if ((h & 0x7c00) == 0x7c00) continue;  // inf / nan
    EXPECT_EQ(Half::from_float(Half::to_float(h)), h) << std::hex << h;
  }
}

TEST(BFloat16, ToFloatAndRoundTrip) {
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f)), 1.0f);
  BFloat16 b;
  b.bits = 0x4049;
  EXPECT_EQ(static_cast<float>(b), 3.140625f);
  b.bits = 0x0001;
  EXPECT_EQ(to_bits(static_cast<float>(b)), 0x00010000u);
  for (uint32_t v = 0; v < 0x10000; ++v) {
    if ((v & 0x7f80) == 0x7f80 && (v & 0x7f)) continue;  // nan
    b.bits = static_cast<uint16_t>(v);
    EXPECT_EQ(BFloat16(static_cast<float>(b)).bits, v);
  }
}

}  // namespace
}  // namespace anvil
