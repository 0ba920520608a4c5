// float32 <-> float8 conversions (include/anvil/anvil_fp8.h) and float8 tensors' copies, checked
// bit for bit against PyTorch 2.15: tests/fixtures/aot/aot_88_fp8_casts.* holds a float32 table
// (NaN, -NaN, +-inf, values beyond each format's range, rounding ties, subnormals of each
// format, values below half the smallest subnormal, random values over ten decades) and what
// torch made of it: x.to(fmt) (the bytes) and x.to(fmt).to(float32) for the four formats.
// tests/fixtures/gen/export_fp8.py writes it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "anvil/anvil_fp8.h"
#include "common/fp8_fixture.h"
#include "core/npy.h"
#include "core/tensor.h"

namespace anvil {
namespace {

const DType kFormats[4] = {DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kFloat8E4M3FNUZ,
                           DType::kFloat8E5M2FNUZ};

std::string casts(const std::string& part) {
  return std::string(ANVIL_FIXTURES_DIR) + "/aot/aot_88_fp8_casts." + part + ".npy";
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TEST(Float8, EncodeAndDecodeMatchPyTorchBitForBit) {
  const Tensor x = read_npy(casts("in0"));
  ASSERT_EQ(x.dtype(), DType::kFloat32);
  const float* xv = static_cast<const float*>(x.data_ptr());
  ASSERT_GE(x.numel(), 100);
  for (int f = 0; f < 4; ++f) {
    const int32_t code = static_cast<int32_t>(kFormats[f]);
    const Tensor want8 = read_npy(casts("out" + std::to_string(2 * f)));
    const Tensor want32 = read_npy(casts("out" + std::to_string(2 * f + 1)));
    ASSERT_EQ(want8.dtype(), DType::kUInt8);
    const auto* w8 = static_cast<const uint8_t*>(want8.data_ptr());
    const auto* w32 = static_cast<const float*>(want32.data_ptr());
    int bad = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const uint8_t got = anvil_f32_to_fp8(code, xv[i]);
      EXPECT_EQ(int(got), int(w8[i])) << dtype_name(kFormats[f]) << " from " << xv[i] << " (0x"
                                      << std::hex << bits(xv[i]) << ")";
      // back to float32: PyTorch's exact bits, NaN payloads included
      EXPECT_EQ(bits(anvil_fp8_to_f32(code, w8[i])), bits(w32[i]))
          << dtype_name(kFormats[f]) << " code " << int(w8[i]);
      bad += got != w8[i];
      if (bad > 10) FAIL() << "too many mismatches";
    }
  }
}

TEST(Float8, EveryCodeSurvivesARoundTripThroughFloat32) {
  // decode then encode gives the code back, except NaN codes (one canonical NaN per sign)
  for (DType t : kFormats) {
    const int32_t code = static_cast<int32_t>(t);
    for (int c = 0; c < 256; ++c) {
      const float v = anvil_fp8_to_f32(code, static_cast<uint8_t>(c));
      const uint8_t back = anvil_f32_to_fp8(code, v);
      if (std::isnan(v))
        EXPECT_TRUE(std::isnan(anvil_fp8_to_f32(code, back))) << dtype_name(t) << " " << c;
      else
        EXPECT_EQ(int(back), c) << dtype_name(t) << " value " << v;
    }
  }
}

TEST(Float8, TensorCastsConvertLikePyTorch) {
  const Tensor x = read_npy(casts("in0"));
  for (int f = 0; f < 4; ++f) {
    const std::string label = dtype_name(kFormats[f]);
    const Tensor y = x.to(kFormats[f]);  // Tensor::copy_from through anvil_fp8.h
    test::expect_fixture_output(y, read_npy(casts("out" + std::to_string(2 * f))), label);
    test::expect_fixture_output(y.to(DType::kFloat32),
                                read_npy(casts("out" + std::to_string(2 * f + 1))),
                                label + " -> f32");
    // a strided copy keeps the bytes; clone of a float8 tensor too
    const Tensor z = y.clone();
    EXPECT_EQ(test::bytes_of(z), test::bytes_of(y)) << label;
  }
  // 16-bit floats convert through float32, fp8 -> fp8 too (outputs 8 to 12 of the fixture)
  // (anvil's bfloat16 makes every NaN c10::BFloat16's canonical +NaN, where torch's vectorized
  // CPU cast keeps -NaN's sign: NaN codes match as NaN here)
  test::expect_fixture_output(x.to(DType::kBFloat16).to(DType::kFloat8E4M3FN),
                              read_npy(casts("out8")), "bf16 -> e4m3fn", 0, false);
  test::expect_fixture_output(x.to(DType::kFloat16).to(DType::kFloat8E5M2),
                              read_npy(casts("out9")), "f16 -> e5m2");
  test::expect_fixture_output(x.to(DType::kFloat8E4M3FN).to(DType::kBFloat16),
                              read_npy(casts("out10")), "e4m3fn -> bf16");
  test::expect_fixture_output(x.to(DType::kFloat8E5M2).to(DType::kFloat16),
                              read_npy(casts("out11")), "e5m2 -> f16");
  test::expect_fixture_output(x.to(DType::kFloat8E4M3FN).to(DType::kFloat8E5M2),
                              read_npy(casts("out12")), "e4m3fn -> e5m2");
}

}  // namespace
}  // namespace anvil
