// Tests for DType: schema codes, names, support checks and torch.promote_types.
#include <gtest/gtest.h>

#include "common/check.h"
#include "core/dtype.h"
#include "core/error.h"

namespace anvil {
namespace {

using D = DType;

TEST(DType, CodesMatchTorchExportSchema) {
  // torch/_export/serde/schema.py ScalarType.
  EXPECT_EQ(static_cast<int>(D::kUInt8), 1);
  EXPECT_EQ(static_cast<int>(D::kInt8), 2);
  EXPECT_EQ(static_cast<int>(D::kInt16), 3);
  EXPECT_EQ(static_cast<int>(D::kInt32), 4);
  EXPECT_EQ(static_cast<int>(D::kInt64), 5);
  EXPECT_EQ(static_cast<int>(D::kFloat16), 6);
  EXPECT_EQ(static_cast<int>(D::kFloat32), 7);
  EXPECT_EQ(static_cast<int>(D::kFloat64), 8);
  EXPECT_EQ(static_cast<int>(D::kComplex32), 9);
  EXPECT_EQ(static_cast<int>(D::kComplex64), 10);
  EXPECT_EQ(static_cast<int>(D::kComplex128), 11);
  EXPECT_EQ(static_cast<int>(D::kBool), 12);
  EXPECT_EQ(static_cast<int>(D::kBFloat16), 13);
  EXPECT_EQ(static_cast<int>(D::kFloat8E4M3FN), 29);
  EXPECT_EQ(static_cast<int>(D::kFloat8E5M2), 30);
  EXPECT_EQ(static_cast<int>(D::kFloat8E4M3FNUZ), 31);
  EXPECT_EQ(static_cast<int>(D::kFloat8E5M2FNUZ), 32);
  for (int64_t code : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 28, 29, 30, 31, 32})
    EXPECT_EQ(static_cast<int64_t>(dtype_from_code(code)), code);
}

TEST(DType, UnknownCodeNamesTheCode) {
  for (int64_t code : {0, 14, 27, 33, -1, 1000}) {
    try {
      dtype_from_code(code);
      FAIL() << "code " << code << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.actual(), std::to_string(code));
      EXPECT_NE(std::string(e.what()).find("unknown dtype code"), std::string::npos);
    }
  }
}

TEST(DType, NamesAndSizes) {
  EXPECT_STREQ(dtype_name(D::kFloat32), "f32");
  EXPECT_STREQ(dtype_name(D::kBFloat16), "bf16");
  EXPECT_STREQ(dtype_name(D::kInt64), "i64");
  EXPECT_STREQ(dtype_name(D::kBool), "bool");
  EXPECT_EQ(dtype_from_name("f32"), D::kFloat32);
  EXPECT_EQ(dtype_from_name("float32"), D::kFloat32);
  EXPECT_EQ(dtype_from_name("torch.bfloat16"), D::kBFloat16);
  EXPECT_EQ(dtype_from_name("torch.long"), D::kInt64);
  EXPECT_EQ(dtype_from_name("float"), D::kFloat32);
  EXPECT_EQ(dtype_from_name("half"), D::kFloat16);
  EXPECT_EQ(dtype_from_name("c128"), D::kComplex128);
  EXPECT_EQ(dtype_from_name("float8_e4m3fn"), D::kFloat8E4M3FN);
  ANVIL_EXPECT_ERROR(dtype_from_name("f33"), "unknown dtype name");
  ANVIL_EXPECT_ERROR(dtype_from_name(""), "unknown dtype name");
  // Every dtype's short and torch names parse back to it.
  for (int64_t code : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 28, 29, 30, 31, 32}) {
    DType t = dtype_from_code(code);
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t) << code;
  }
  const std::pair<D, size_t> sizes[] = {
      {D::kUInt8, 1},     {D::kInt8, 1},      {D::kInt16, 2},        {D::kInt32, 4},
      {D::kInt64, 8},     {D::kFloat16, 2},   {D::kFloat32, 4},      {D::kFloat64, 8},
      {D::kComplex32, 4}, {D::kComplex64, 8}, {D::kComplex128, 16},  {D::kBool, 1},
      {D::kBFloat16, 2},  {D::kUInt16, 2},    {D::kFloat8E4M3FN, 1}, {D::kFloat8E5M2FNUZ, 1}};
  for (auto [t, n] : sizes) EXPECT_EQ(dtype_size(t), n) << dtype_name(t);
}

TEST(DType, Categories) {
  EXPECT_TRUE(is_floating(D::kBFloat16));
  EXPECT_TRUE(is_floating(D::kFloat8E5M2));
  EXPECT_FALSE(is_floating(D::kInt32));
  EXPECT_FALSE(is_floating(D::kComplex64));
  EXPECT_TRUE(is_complex(D::kComplex64));
  EXPECT_TRUE(is_complex(D::kComplex32));
  EXPECT_TRUE(is_integral(D::kUInt8));
  EXPECT_FALSE(is_integral(D::kBool));
  EXPECT_TRUE(is_integral(D::kBool, /*include_bool=*/true));
  EXPECT_TRUE(is_float8(D::kFloat8E4M3FNUZ));
  EXPECT_FALSE(is_float8(D::kFloat16));
}

TEST(DType, Float8IsRejectedClearly) {
  for (D t : {D::kFloat8E4M3FN, D::kFloat8E5M2, D::kFloat8E4M3FNUZ, D::kFloat8E5M2FNUZ}) {
    EXPECT_FALSE(is_supported(t));
    try {
      check_supported(t, "my_node");
      FAIL() << dtype_name(t) << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.where(), "my_node");
      EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos) << e.what();
      EXPECT_FALSE(e.actual().empty());
    }
  }
  try {
    check_supported(D::kFloat8E4M3FNUZ, "n");
    FAIL() << "float8_e4m3fnuz accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.actual(), "float8_e4m3fnuz");
  }
  for (D t : {D::kUInt8, D::kInt8, D::kInt16, D::kInt32, D::kInt64, D::kFloat16, D::kFloat32,
              D::kFloat64, D::kComplex32, D::kComplex64, D::kComplex128, D::kBool,
              D::kBFloat16}) {
    EXPECT_TRUE(is_supported(t));
    EXPECT_NO_THROW(check_supported(t, "x"));
  }
}

// torch.promote_types(a, b) for every pair of the 12 supported dtypes (PyTorch 1.13).
struct Promotion {
  D a, b, want;
};
constexpr Promotion kTorchPromotions[] = {{D::kUInt8, D::kUInt8, D::kUInt8},
                                          {D::kInt8, D::kUInt8, D::kInt16},
                                          {D::kInt8, D::kInt8, D::kInt8},
                                          {D::kInt16, D::kUInt8, D::kInt16},
                                          {D::kInt16, D::kInt8, D::kInt16},
                                          {D::kInt16, D::kInt16, D::kInt16},
                                          {D::kInt16, D::kInt32, D::kInt32},
                                          {D::kInt16, D::kInt64, D::kInt64},
                                          {D::kInt32, D::kUInt8, D::kInt32},
                                          {D::kInt32, D::kInt8, D::kInt32},
                                          {D::kInt32, D::kInt32, D::kInt32},
                                          {D::kInt32, D::kInt64, D::kInt64},
                                          {D::kInt64, D::kUInt8, D::kInt64},
                                          {D::kInt64, D::kInt8, D::kInt64},
                                          {D::kInt64, D::kInt64, D::kInt64},
                                          {D::kFloat16, D::kUInt8, D::kFloat16},
                                          {D::kFloat16, D::kInt8, D::kFloat16},
                                          {D::kFloat16, D::kInt16, D::kFloat16},
                                          {D::kFloat16, D::kInt32, D::kFloat16},
                                          {D::kFloat16, D::kInt64, D::kFloat16},
                                          {D::kFloat16, D::kFloat16, D::kFloat16},
                                          {D::kFloat16, D::kFloat32, D::kFloat32},
                                          {D::kFloat16, D::kFloat64, D::kFloat64},
                                          {D::kFloat32, D::kUInt8, D::kFloat32},
                                          {D::kFloat32, D::kInt8, D::kFloat32},
                                          {D::kFloat32, D::kInt16, D::kFloat32},
                                          {D::kFloat32, D::kInt32, D::kFloat32},
                                          {D::kFloat32, D::kInt64, D::kFloat32},
                                          {D::kFloat32, D::kFloat32, D::kFloat32},
                                          {D::kFloat32, D::kFloat64, D::kFloat64},
                                          {D::kFloat64, D::kUInt8, D::kFloat64},
                                          {D::kFloat64, D::kInt8, D::kFloat64},
                                          {D::kFloat64, D::kInt16, D::kFloat64},
                                          {D::kFloat64, D::kInt32, D::kFloat64},
                                          {D::kFloat64, D::kInt64, D::kFloat64},
                                          {D::kFloat64, D::kFloat64, D::kFloat64},
                                          {D::kComplex64, D::kUInt8, D::kComplex64},
                                          {D::kComplex64, D::kInt8, D::kComplex64},
                                          {D::kComplex64, D::kInt16, D::kComplex64},
                                          {D::kComplex64, D::kInt32, D::kComplex64},
                                          {D::kComplex64, D::kInt64, D::kComplex64},
                                          {D::kComplex64, D::kFloat16, D::kComplex64},
                                          {D::kComplex64, D::kFloat32, D::kComplex64},
                                          {D::kComplex64, D::kFloat64, D::kComplex128},
                                          {D::kComplex64, D::kComplex64, D::kComplex64},
                                          {D::kComplex128, D::kUInt8, D::kComplex128},
                                          {D::kComplex128, D::kInt8, D::kComplex128},
                                          {D::kComplex128, D::kInt16, D::kComplex128},
                                          {D::kComplex128, D::kInt32, D::kComplex128},
                                          {D::kComplex128, D::kInt64, D::kComplex128},
                                          {D::kComplex128, D::kFloat16, D::kComplex128},
                                          {D::kComplex128, D::kFloat32, D::kComplex128},
                                          {D::kComplex128, D::kFloat64, D::kComplex128},
                                          {D::kComplex128, D::kComplex64, D::kComplex128},
                                          {D::kComplex128, D::kComplex128, D::kComplex128},
                                          {D::kBool, D::kUInt8, D::kUInt8},
                                          {D::kBool, D::kInt8, D::kInt8},
                                          {D::kBool, D::kInt16, D::kInt16},
                                          {D::kBool, D::kInt32, D::kInt32},
                                          {D::kBool, D::kInt64, D::kInt64},
                                          {D::kBool, D::kFloat16, D::kFloat16},
                                          {D::kBool, D::kFloat32, D::kFloat32},
                                          {D::kBool, D::kFloat64, D::kFloat64},
                                          {D::kBool, D::kComplex64, D::kComplex64},
                                          {D::kBool, D::kComplex128, D::kComplex128},
                                          {D::kBool, D::kBool, D::kBool},
                                          {D::kBFloat16, D::kUInt8, D::kBFloat16},
                                          {D::kBFloat16, D::kInt8, D::kBFloat16},
                                          {D::kBFloat16, D::kInt16, D::kBFloat16},
                                          {D::kBFloat16, D::kInt32, D::kBFloat16},
                                          {D::kBFloat16, D::kInt64, D::kBFloat16},
                                          {D::kBFloat16, D::kFloat16, D::kFloat32},
                                          {D::kBFloat16, D::kFloat32, D::kFloat32},
                                          {D::kBFloat16, D::kFloat64, D::kFloat64},
                                          {D::kBFloat16, D::kComplex64, D::kComplex64},
                                          {D::kBFloat16, D::kComplex128, D::kComplex128},
                                          {D::kBFloat16, D::kBool, D::kBFloat16},
                                          {D::kBFloat16, D::kBFloat16, D::kBFloat16}};

TEST(DType, PromoteTypesMatchesTorchForEveryPair) {
  for (const auto& p : kTorchPromotions) {
    EXPECT_EQ(promote_types(p.a, p.b), p.want)
        << dtype_name(p.a) << " + " << dtype_name(p.b) << " gave "
        << dtype_name(promote_types(p.a, p.b)) << ", torch gives " << dtype_name(p.want);
    EXPECT_EQ(promote_types(p.b, p.a), p.want) << dtype_name(p.b) << " + " << dtype_name(p.a);
  }
}

TEST(DType, CppTypeMapping) {
  static_assert(dtype_of<float>() == D::kFloat32);
  static_assert(dtype_of<BFloat16>() == D::kBFloat16);
  static_assert(dtype_of<Half>() == D::kFloat16);
  static_assert(dtype_of<int64_t>() == D::kInt64);
  static_assert(dtype_of<bool>() == D::kBool);
  static_assert(dtype_of<std::complex<double>>() == D::kComplex128);
  static_assert(std::is_same_v<AccType<BFloat16>::type, float>);
  static_assert(std::is_same_v<AccType<int32_t>::type, int32_t>);
  SUCCEED();
}

TEST(DType, DispatchMacrosBindTheRightType) {
  size_t got = 0;
  ANVIL_DISPATCH_ALL(D::kComplex128, "test", T, { got = sizeof(T); });
  EXPECT_EQ(got, 16u);
  ANVIL_DISPATCH_REAL(D::kBFloat16, "test", T,
                      { got = sizeof(T) + (std::is_same_v<T, BFloat16> ? 100 : 0); });
  EXPECT_EQ(got, 102u);
  ANVIL_DISPATCH_FLOAT(D::kFloat64, "test", T, { got = sizeof(T); });
  EXPECT_EQ(got, 8u);
  try {
    ANVIL_DISPATCH_FLOAT(D::kInt32, "my_kernel", T, { got = sizeof(T); });
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "my_kernel");
    EXPECT_EQ(e.actual(), "i32");
  }
  ANVIL_EXPECT_ERROR(ANVIL_DISPATCH_REAL(D::kComplex64, "k", T, { got = sizeof(T); }),
                     "k: unsupported dtype");
  ANVIL_EXPECT_ERROR(ANVIL_DISPATCH_ALL(D::kFloat8E5M2, "k", T, { got = sizeof(T); }),
                     "k: unsupported dtype");
}

}  // namespace
}  // namespace anvil
