// Tests for convolution and pooling (src/ops/conv.cpp): conv2d (int and string padding,
// unbatched input), convolution (2-D, 1-D, transposed rejected), max_pool2d, avg_pool2d and
// adaptive_avg_pool2d. Inputs come from gen() below and the same formula in Python; expected
// values were computed with PyTorch 1.13 CPU and pasted in. bf16 inputs are exact (multiples of
// 1/4), so bf16 tests reuse the float32 expectations with the bf16 tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::matches;
using testing::OpRunner;

using testing::expect_error;
using testing::gen;

SymInt s0() { return SymInt::symbol("s0"); }
SymInt s1() { return SymInt::symbol("s1"); }

constexpr DType kF32 = DType::kFloat32;
constexpr DType kBF16 = DType::kBFloat16;
constexpr DType kI64 = DType::kInt64;

// Expected values (PyTorch), named after the tests that use them.
// ConvBasic [1, 3, 5, 5]
const std::vector<double> kConvBasic = {
    -2.625, -0.125,  3.1875,  -1.75,  -1.875,  6.5,     -2.0625, -0.5625, 3.0,     -3.1875, -1.75,
    -0.75,  -2.0,    2.25,    0.625,  -3.8125, 6.75,    -2.0625, -0.5625, 3.0625,  -1.375,  -3.5,
    0.0,    -1.3125, -1.1875, 2.0,    1.625,   1.25,    2.25,    -1.5,    4.0,     -2.75,   0.875,
    -2.375, 2.625,   -2.0625, 1.625,  3.1875,  0.625,   2.0,     -2.625,  3.25,    -2.75,   0.875,
    -1.375, 1.25,    -3.75,   2.4375, 3.8125,  -2.125,  5.8125,  2.5625,  -1.5,    5.4375,  -1.125,
    0.6875, -0.1875, -0.125,  2.0,    2.75,    -3.1875, 5.625,   4.3125,  -1.8125, 3.375,   -2.25,
    -0.25,  -0.1875, -0.125,  -0.125, 2.25,    -3.1875, 3.25,    4.875,   -0.625};
// ConvGroups [2, 4, 3, 3]
const std::vector<double> kConvGroups = {
    1.625,   -5.0,    0.75,  3.4375, -5.1875, -2.125,  4.25,   1.125,   -9.5625, 2.375,   1.875,
    -4.125,  2.0,     4.625, 1.0625, -0.9375, 3.75,    4.3125, 2.6875,  2.8125,  -2.5625, 1.9375,
    5.125,   -2.6875, 2.25,  5.4375, 0.375,   -4.875,  1.375,  2.125,   -2.1875, -2.1875, 4.6875,
    -2.1875, -2.1875, 4.0,   1.3125, -1.1875, -4.375,  4.25,   1.125,   -9.5625, 3.6875,  3.3125,
    -9.4375, 2.3125,  2.5,   2.0,    -0.9375, 3.75,    4.3125, -8.6875, 2.1875,  4.125,   2.875,
    3.0,     -2.375,  2.25,  5.4375, 0.375,   -0.1875, 5.0625, 4.125,   -4.4375, 1.8125,  2.5625,
    -2.1875, -2.1875, 4.0,   0.5625, -9.75,   0.5625};
// ConvUnbatched [3, 2, 3]
const std::vector<double> kConvUnbatched = {-1.5625, -0.0625, 3.5,    7.25,  -1.5625, -0.0625,
                                            -3.0,    0.625,   -2.625, 3.0,   -3.0,    0.625,
                                            -1.1875, -1.125,  1.0,    -1.25, -1.1875, -1.125};
// ConvSame [1, 3, 5, 5]
const std::vector<double> kConvSame = {
    -4.375,  -0.375,  3.0625,  -0.625,  -0.875, 2.5625,  0.25,    -6.625,  2.4375,  -2.0,
    1.25,    -3.9375, -1.1875, 4.125,   -0.375, -1.4375, 2.875,   -0.5625, -6.5625, 1.9375,
    -2.0625, 0.6875,  0.375,   -3.375,  0.375,  -3.1875, 4.375,   -1.4375, -0.75,   4.375,
    0.0,     3.375,   1.375,   0.6875,  -0.5,   -3.6875, -3.8125, 2.8125,  -0.625,  -1.25,
    1.5625,  -1.375,  0.8125,  2.1875,  0.0625, 0.3125,  -2.625,  0.3125,  -0.1875, 1.125,
    4.5,     1.8125,  -3.5,    -1.6875, 6.375,  0.6875,  -2.4375, 4.5,     -0.25,   -0.625,
    0.3125,  3.625,   3.5625,  -2.9375, -2.125, 1.3125,  0.0625,  0.5625,  6.0625,  -0.1875,
    1.875,   2.1875,  -0.5625, 2.1875,  1.875};
// ConvValid [1, 3, 4, 2]
const std::vector<double> kConvValid = {-6.0,   3.6875,  -2.25,   -3.5625, 2.1875, -6.0,
                                        3.1875, -2.25,   -6.4375, 2.4375,  1.5,    0.75,
                                        3.9375, -6.4375, 2.9375,  1.5,     2.875,  -3.6875,
                                        4.4375, -1.4375, 3.25,    2.875,   -1.375, 4.4375};
// ConvT [1, 3, 5, 5]
const std::vector<double> kConvT = {
    -4.5,    4.3125,  -0.4375, 3.0625, -1.625, 2.75,    -3.8125, -4.5625, 5.0,     -1.4375, 2.0625,
    -0.25,   0.375,   -3.8125, -2.875, -4.125, -0.8125, 2.5625,  -0.25,   -0.875,  1.4375,  -2.8125,
    -2.5,    0.5625,  1.0625,  0.125,  1.8125, -0.75,   4.25,    1.0,     4.5,     -4.5,    -2.1875,
    1.5,     -1.6875, 0.125,   1.1875, 5.5625, -4.5,    -0.4375, -0.125,  -6.1875, 0.9375,  1.1875,
    4.25,    1.8125,  3.0,     -1.125, -3.875, 0.125,   3.9375,  -1.5,    -1.875,  4.625,   2.0,
    5.4375,  -1.9375, 1.8125,  -2.0,   -1.125, -2.625,  0.1875,  6.6875,  -1.9375, 0.375,   3.0625,
    -1.8125, -1.5,    0.1875,  5.3125, 2.1875, 3.125,   0.25,    -2.625,  1.625};
// Conv1d [2, 4, 4]
const std::vector<double> kConv1d = {
    -0.5625, -1.0,    -1.75,   0.8125, -2.625, -1.625, 3.5,   0.75,   1.0,     1.8125, 3.875,
    -0.125,  -2.8125, 0.25,    -0.75,  -1.125, -3.375, 2.125, -1.375, -0.0625, 0.1875, 3.375,
    0.9375,  -1.0625, -1.9375, -0.25,  -1.625, 2.8125, 3.125, 0.0625, -0.25,   0.875};
// ConvInt [1, 2, 5, 5]
const std::vector<double> kConvInt = {
    4.0,  0.0,   13.0,  -23.0, 3.0,   12.0, -22.0, 20.0,  -22.0, 12.0, -1.0, -8.0, -8.0,
    13.0, -3.0,  -21.0, 20.0,  -22.0, 13.0, -11.0, -13.0, 13.0,  0.0,  1.0,  0.0,  7.0,
    8.0,  -13.0, 15.0,  -6.0,  0.0,   23.0, -31.0, 20.0,  3.0,   -8.0, 3.0,  5.0,  -7.0,
    12.0, 12.0,  -31.0, 20.0,  -6.0,  0.0,  15.0,  -9.0,  7.0,   9.0,  -1.0};
// MaxPool [1, 2, 3, 4]
const std::vector<double> kMaxPool = {-0.25, 2.5,  2.5,  2.75, 1.25, 2.25, 2.5,  2.75,
                                      2.75,  2.75, 2.5,  2.5,  2.5,  2.0,  2.0,  1.5,
                                      2.5,   2.75, 2.75, 2.25, 1.5,  2.5,  2.75, 2.75};
// MaxPoolCeil [1, 2, 4, 4]
const std::vector<double> kMaxPoolCeil = {
    -1.0, 2.5,  2.5,  2.0,  0.5, 2.25, 1.75, 2.75, 2.0,  2.0, 2.5, 2.5, 2.75, 2.75, 2.25, 0.0,
    1.75, 1.25, 1.25, 0.75, 2.5, 2.75, 2.75, 2.25, 0.75, 2.5, 2.0, 2.0, 1.5,  1.5,  2.75, 2.75};
// MaxPoolDil [1, 2, 4, 5]
const std::vector<double> kMaxPoolDil = {2.25, 2.5,  2.25, 2.5,  2.0,  1.5,  1.25, 1.5,  2.5,  2.75,
                                         2.25, 2.0,  2.25, 1.75, 1.5,  1.0,  2.75, 2.25, 2.5,  2.25,
                                         1.75, 2.75, 1.0,  2.75, 2.25, 2.5,  2.0,  1.75, 2.0,  1.5,
                                         2.5,  2.75, 2.5,  2.75, 2.25, 1.75, 1.5,  1.75, 2.75, 1.0};
// AvgPool [1, 2, 3, 4]
const std::vector<double> kAvgPool = {
    -0.6666667, 0.1111111,  -0.1111111, 0.6666667,  -0.25,      -0.3055556, 0.0,        0.4722222,
    0.75,       -0.0833333, 0.2222222,  -0.4444444, 0.0555556,  -0.0833333, -0.3055556, 0.1111111,
    -0.4444444, 0.3611111,  0.0277778,  0.2777778,  -0.0833333, -0.0555556, 0.25,       0.0};
// AvgPoolNoPad [1, 2, 3, 4]
const std::vector<double> kAvgPoolNoPad = {
    -1.5,       0.1666667,  -0.1666667, 1.5,        -0.375, -0.3055556, 0.0,        0.7083333,
    1.125,      -0.0833333, 0.2222222,  -0.6666667, 0.125,  -0.125,     -0.4583333, 0.25,
    -0.6666667, 0.3611111,  0.0277778,  0.4166667,  -0.125, -0.0555556, 0.25,       0.0};
// AvgPoolCeil [1, 2, 4, 4]
const std::vector<double> kAvgPoolCeil = {
    -2.75,   -0.125, 0.5,    1.125, -1.625, 1.0,    -1.25,  0.8125, -0.125, -0.375, 0.25,
    -0.5625, 1.0,    0.75,   1.375, -0.875, 1.75,   -1.375, -0.75,  -0.125, 0.0,    -0.25,
    0.375,   1.0,    -1.375, 1.25,  -1.0,   -0.375, -0.25,  -0.5,   0.125,  0.75};
// AvgPoolDiv [1, 2, 5, 3]
const std::vector<double> kAvgPoolDiv = {-0.75, 0.0,   0.75,  0.15, -0.25, 0.5,   -0.1,  -0.5,
                                         0.25,  -0.35, -0.75, 0.0,  0.55,  0.15,  -0.25, 0.05,
                                         -0.35, -0.75, -0.2,  0.55, 0.15,  -0.45, 0.3,   -0.1,
                                         0.45,  0.05,  -0.35, 0.2,  -0.2,  0.55};
// AvgPoolInt [1, 1, 2, 2]
const std::vector<double> kAvgPoolInt = {-1.0, 1.0, 0.0, 2.0};
// Adaptive [2, 1, 3, 2]
const std::vector<double> kAdaptive = {-0.46875,  0.46875,  -0.5416667, -0.0833333,
                                       -0.375,    -0.15625, 0.40625,    -0.09375,
                                       0.3333333, 0.3125,   -0.21875,   0.0};
// Adaptive1 [1, 2, 1, 1]
const std::vector<double> kAdaptive1 = {-0.0059524, -0.0238095};
// AdaptiveUp [1, 4, 5]
const std::vector<double> kAdaptiveUp = {-2.75, -1.875, -1.0, -0.125, 0.75,   -0.125, -0.6875,
                                         -1.25, -0.375, 0.5,  2.25,   0.25,   -1.75,  -0.875,
                                         0.0,   2.0,    0.0,  -2.0,   -1.125, -0.25};

/// x [1,2,5,5], w [3,2,3,3], b [3] of the basic conv tests, as `dtype`.
OpRunner conv_basic(DType dtype = kF32) {
  OpRunner r("aten.conv2d.default");
  r.tensor("input", gen({1, 2, 5, 5}, 7, 11, 5, 4.0, dtype))
      .tensor("weight", gen({3, 2, 3, 3}, 5, 13, 6, 4.0, dtype))
      .tensor("bias", gen({3}, 3, 7, 2, 4.0, dtype));
  return r;
}

// ---- conv2d

TEST(Conv2d, PaddingOne) {
  EXPECT_TRUE(matches(conv_basic().ints("stride", {1, 1}).ints("padding", {1, 1}).run1(), kF32,
                      {1, 3, 5, 5}, kConvBasic));
  // A single value applies to both spatial dims.
  EXPECT_TRUE(matches(conv_basic().ints("stride", {1}).ints("padding", {1}).run1(), kF32,
                      {1, 3, 5, 5}, kConvBasic));
  EXPECT_TRUE(matches(conv_basic(kBF16).ints("stride", {1, 1}).ints("padding", {1, 1}).run1(),
                      kBF16, {1, 3, 5, 5}, kConvBasic));
}

TEST(Conv2d, StridePaddingDilationGroups) {
  Tensor y = OpRunner("aten.conv2d.default")
                 .tensor("input", gen({2, 4, 6, 7}))
                 .tensor("weight", gen({4, 2, 2, 3}, 5, 13, 6))
                 .tensor("bias", gen({4}, 3, 7, 2))
                 .ints("stride", {2, 2})
                 .ints("padding", {1, 0})
                 .ints("dilation", {2, 1})
                 .scalar("groups", 2)
                 .run1();
  EXPECT_TRUE(matches(y, kF32, {2, 4, 3, 3}, kConvGroups));
}

TEST(Conv2d, UnbatchedNoBias) {
  Tensor y = OpRunner("aten.conv2d.default")
                 .tensor("input", gen({2, 5, 5}))
                 .tensor("weight", gen({3, 2, 3, 3}, 5, 13, 6))
                 .none("bias")
                 .ints("stride", {2, 1})
                 .run1();
  EXPECT_TRUE(matches(y, kF32, {3, 2, 3}, kConvUnbatched));
}

TEST(Conv2d, StringPadding) {
  // torch exports the string form as aten.conv2d.padding; conv2d.default accepts it too.
  auto conv = [](const std::string& pad, std::vector<int64_t> dil) {
    return OpRunner("aten.conv2d.default")
        .tensor("input", gen({1, 2, 5, 5}))
        .tensor("weight", gen({3, 2, 2, 4}, 5, 13, 6))
        .tensor("bias", gen({3}, 3, 7, 2))
        .ints("stride", {1, 1})
        .string("padding", pad)
        .ints("dilation", dil)
        .run1();
  };
  EXPECT_TRUE(matches(conv("same", {1, 2}), kF32, {1, 3, 5, 5}, kConvSame));
  EXPECT_TRUE(matches(conv("valid", {1, 1}), kF32, {1, 3, 4, 2}, kConvValid));
  expect_error([&] { conv("full", {1, 1}); }, {"padding", "full"});
}

TEST(Conv2d, NonContiguousInput) {
  Tensor xt = gen({1, 2, 5, 5}).transpose(2, 3);
  ASSERT_FALSE(xt.is_contiguous());
  Tensor y = OpRunner("aten.conv2d.default")
                 .tensor("input", xt)
                 .tensor("weight", gen({3, 2, 3, 3}, 5, 13, 6))
                 .tensor("bias", gen({3}, 3, 7, 2))
                 .ints("padding", {1, 1})
                 .run1();
  EXPECT_TRUE(matches(y, kF32, {1, 3, 5, 5}, kConvT));
}

TEST(Conv2d, Int64) {
  Tensor y = OpRunner("aten.conv2d.default")
                 .tensor("input", gen({1, 2, 4, 4}, 3, 7, 3, 1.0, kI64))
                 .tensor("weight", gen({2, 2, 2, 2}, 5, 9, 4, 1.0, kI64))
                 .tensor("bias", gen({2}, 3, 7, 2, 1.0, kI64))
                 .ints("padding", {1, 1})
                 .run1();
  EXPECT_TRUE(matches(y, kI64, {1, 2, 5, 5}, kConvInt));
}

TEST(Conv2d, Errors) {
  expect_error(
      [] {
        OpRunner("aten.conv2d.default")
            .tensor("input", gen({1, 3, 5, 5}))
            .tensor("weight", gen({4, 2, 3, 3}))
            .scalar("groups", 2)
            .run1();
      },
      {"groups=2"});
  expect_error(
      [] {
        OpRunner("aten.conv2d.default")
            .tensor("input", gen({1, 2, 5, 5}))
            .tensor("weight", gen({3, 2, 3, 3}, 5, 13, 6, 4.0, kBF16))
            .run1();
      },
      {"f32", "bf16"});
  expect_error(
      [] {
        OpRunner("aten.conv2d.default")
            .tensor("input", gen({1, 2, 2, 2}))
            .tensor("weight", gen({3, 2, 3, 3}))
            .run1();
      },
      {"kernel size"});
}

TEST(Conv2d, SymbolicShapes) {
  auto t = OpRunner("aten.conv2d.default")
               .sym_tensor("input", kF32, {s0(), 2, 5, 5})
               .sym_tensor("weight", kF32, {3, 2, 3, 3})
               .sym_tensor("bias", kF32, {3})
               .ints("stride", {1, 1})
               .ints("padding", {1, 1})
               .shape();
  EXPECT_EQ(sym_shape_str(t[0].sizes), "[s0, 3, 5, 5]");
  t = OpRunner("aten.conv2d.default")
          .sym_tensor("input", kF32, {s0(), 2, s1(), 9})
          .sym_tensor("weight", kF32, {3, 2, 3, 3})
          .ints("stride", {2, 2})
          .ints("padding", {1, 1})
          .shape();
  ASSERT_EQ(t[0].sizes.size(), 4u);
  EXPECT_EQ(t[0].sizes[3], SymInt(5));
  for (int64_t h : {1, 2, 7, 8})
    EXPECT_EQ(t[0].sizes[2].evaluate({{"s0", 1}, {"s1", h}}), (h + 2 - 3) / 2 + 1) << h;
}

// ---- convolution

TEST(Convolution, TwoDAndOneD) {
  Tensor y = OpRunner("aten.convolution.default")
                 .tensor("input", gen({2, 4, 6, 7}))
                 .tensor("weight", gen({4, 2, 2, 3}, 5, 13, 6))
                 .tensor("bias", gen({4}, 3, 7, 2))
                 .ints("stride", {2, 2})
                 .ints("padding", {1, 0})
                 .ints("dilation", {2, 1})
                 .scalar("transposed", false)
                 .ints("output_padding", {0, 0})
                 .scalar("groups", 2)
                 .run1();
  EXPECT_TRUE(matches(y, kF32, {2, 4, 3, 3}, kConvGroups));
  Tensor y1 = OpRunner("aten.convolution.default")
                  .tensor("input", gen({2, 3, 7}))
                  .tensor("weight", gen({4, 3, 3}, 5, 13, 6))
                  .tensor("bias", gen({4}, 3, 7, 2))
                  .ints("stride", {2})
                  .ints("padding", {1})
                  .ints("dilation", {1})
                  .scalar("transposed", false)
                  .ints("output_padding", {0})
                  .scalar("groups", 1)
                  .run1();
  EXPECT_TRUE(matches(y1, kF32, {2, 4, 4}, kConv1d));
  Tensor y1b = OpRunner("aten.convolution.default")
                   .tensor("input", gen({2, 3, 7}, 7, 11, 5, 4.0, kBF16))
                   .tensor("weight", gen({4, 3, 3}, 5, 13, 6, 4.0, kBF16))
                   .tensor("bias", gen({4}, 3, 7, 2, 4.0, kBF16))
                   .ints("stride", {2})
                   .ints("padding", {1})
                   .ints("dilation", {1})
                   .scalar("transposed", false)
                   .ints("output_padding", {0})
                   .scalar("groups", 1)
                   .run1();
  EXPECT_TRUE(matches(y1b, kBF16, {2, 4, 4}, kConv1d));
}

TEST(Convolution, TransposedGoesToConvTranspose) {
  // convolution(transposed=True) computes conv_transpose2d (values: tests/ops/test_aot_ops.cpp).
  const Tensor x = gen({1, 2, 5, 5}), w = gen({2, 3, 3, 3});
  Tensor y = OpRunner("aten.convolution.default")
                 .tensor("input", x)
                 .tensor("weight", w)
                 .none("bias")
                 .ints("stride", {1, 1})
                 .ints("padding", {0, 0})
                 .ints("dilation", {1, 1})
                 .scalar("transposed", true)
                 .ints("output_padding", {0, 0})
                 .scalar("groups", 1)
                 .run1();
  Tensor want =
      OpRunner("aten.conv_transpose2d.input").tensor("input", x).tensor("weight", w).run1();
  EXPECT_TRUE(matches(y, want));
  EXPECT_EQ(y.sizes(), (Shape{1, 3, 7, 7}));
}

// ---- pooling

/// The [1, 2, 6, 7] pooling input, as `dtype`.
Tensor pool_input(DType dtype = kF32) { return gen({1, 2, 6, 7}, 7, 23, 11, 4.0, dtype); }

TEST(MaxPool2d, PaddingCeilDilation) {
  EXPECT_TRUE(matches(OpRunner("aten.max_pool2d.default")
                          .tensor("self", pool_input())
                          .ints("kernel_size", {3, 3})
                          .ints("stride", {2, 2})
                          .ints("padding", {1, 1})
                          .run1(),
                      kF32, {1, 2, 3, 4}, kMaxPool));
  EXPECT_TRUE(matches(OpRunner("aten.max_pool2d.default")
                          .tensor("self", pool_input(kBF16))
                          .ints("kernel_size", {3})
                          .ints("stride", {2})
                          .ints("padding", {1})
                          .run1(),
                      kBF16, {1, 2, 3, 4}, kMaxPool));
  EXPECT_TRUE(matches(OpRunner("aten.max_pool2d.default")
                          .tensor("self", pool_input())
                          .ints("kernel_size", {2, 3})
                          .ints("stride", {2, 2})
                          .ints("padding", {1, 1})
                          .ints("dilation", {1, 1})
                          .scalar("ceil_mode", true)
                          .run1(),
                      kF32, {1, 2, 4, 4}, kMaxPoolCeil));
  EXPECT_TRUE(matches(OpRunner("aten.max_pool2d.default")
                          .tensor("self", pool_input())
                          .ints("kernel_size", {2, 2})
                          .ints("stride", {1, 1})
                          .ints("padding", {0, 0})
                          .ints("dilation", {2, 2})
                          .run1(),
                      kF32, {1, 2, 4, 5}, kMaxPoolDil));
}

TEST(MaxPool2d, EmptyStrideNaNAndErrors) {
  // stride [] means stride = kernel_size; NaN wins like torch.
  Tensor x = testing::f32({1, 4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  EXPECT_TRUE(matches(OpRunner("aten.max_pool2d.default")
                          .tensor("self", x)
                          .ints("kernel_size", {2, 2})
                          .ints("stride", {})
                          .run1(),
                      kF32, {1, 2, 2}, {6, 8, 14, 16}));
  Tensor xn = testing::f32({1, 1, 2, 2}, {1, std::nan(""), 3, 4});
  EXPECT_TRUE(matches(
      OpRunner("aten.max_pool2d.default").tensor("self", xn).ints("kernel_size", {2, 2}).run1(),
      kF32, {1, 1, 1, 1}, {std::nan("")}));
  expect_error(
      [] {
        OpRunner("aten.max_pool2d.default")
            .tensor("self", gen({1, 1, 4, 4}))
            .ints("kernel_size", {2, 2})
            .ints("stride", {1, 1})
            .ints("padding", {2, 2})
            .run1();
      },
      {"pad"});
}

TEST(AvgPool2d, IncludePadCeilDivisor) {
  auto base = [](bool include_pad) {
    return OpRunner("aten.avg_pool2d.default")
        .tensor("self", pool_input())
        .ints("kernel_size", {3, 3})
        .ints("stride", {2, 2})
        .ints("padding", {1, 1})
        .scalar("ceil_mode", false)
        .scalar("count_include_pad", include_pad)
        .run1();
  };
  EXPECT_TRUE(matches(base(true), kF32, {1, 2, 3, 4}, kAvgPool));
  EXPECT_TRUE(matches(base(false), kF32, {1, 2, 3, 4}, kAvgPoolNoPad));
  EXPECT_TRUE(matches(OpRunner("aten.avg_pool2d.default")
                          .tensor("self", pool_input())
                          .ints("kernel_size", {2, 2})
                          .ints("stride", {2, 2})
                          .ints("padding", {1, 1})
                          .scalar("ceil_mode", true)
                          .scalar("count_include_pad", false)
                          .run1(),
                      kF32, {1, 2, 4, 4}, kAvgPoolCeil));
  EXPECT_TRUE(matches(OpRunner("aten.avg_pool2d.default")
                          .tensor("self", pool_input(kBF16))
                          .ints("kernel_size", {2, 3})
                          .ints("stride", {1, 2})
                          .ints("padding", {0, 0})
                          .scalar("ceil_mode", false)
                          .scalar("count_include_pad", true)
                          .scalar("divisor_override", 5)
                          .run1(),
                      kBF16, {1, 2, 5, 3}, kAvgPoolDiv));
  EXPECT_TRUE(matches(OpRunner("aten.avg_pool2d.default")
                          .tensor("self", gen({1, 1, 4, 5}, 7, 23, 11, 1.0, kI64))
                          .ints("kernel_size", {2, 2})
                          .run1(),
                      kI64, {1, 1, 2, 2}, kAvgPoolInt));
}

TEST(AdaptiveAvgPool2d, Windows) {
  EXPECT_TRUE(matches(OpRunner("aten.adaptive_avg_pool2d.default")
                          .tensor("self", gen({2, 1, 5, 7}, 7, 23, 11, 4.0))
                          .ints("output_size", {3, 2})
                          .run1(),
                      kF32, {2, 1, 3, 2}, kAdaptive));
  EXPECT_TRUE(matches(OpRunner("aten.adaptive_avg_pool2d.default")
                          .tensor("self", pool_input(kBF16))
                          .ints("output_size", {1, 1})
                          .run1(),
                      kBF16, {1, 2, 1, 1}, kAdaptive1));
  EXPECT_TRUE(matches(OpRunner("aten.adaptive_avg_pool2d.default")
                          .tensor("self", gen({1, 3, 3}, 7, 23, 11, 4.0))
                          .ints("output_size", {4, 5})
                          .run1(),
                      kF32, {1, 4, 5}, kAdaptiveUp));
  // Non-contiguous input: the transpose of a [.., 7, 5] tensor holding the same values.
  Tensor xt = gen({2, 1, 5, 7}, 7, 23, 11, 4.0).transpose(2, 3).contiguous().transpose(2, 3);
  EXPECT_TRUE(matches(OpRunner("aten.adaptive_avg_pool2d.default")
                          .tensor("self", xt)
                          .ints("output_size", {3, 2})
                          .run1(),
                      kF32, {2, 1, 3, 2}, kAdaptive));
  expect_error(
      [] {
        OpRunner("aten.adaptive_avg_pool2d.default")
            .tensor("self", gen({1, 1, 4, 4}, 7, 11, 5, 1.0, kI64))
            .ints("output_size", {2, 2})
            .run1();
      },
      {"floating"});
}

TEST(Pooling, SymbolicShapes) {
  auto t = OpRunner("aten.max_pool2d.default")
               .sym_tensor("self", kF32, {s0(), 16, s1(), 32})
               .ints("kernel_size", {3, 3})
               .ints("stride", {2, 2})
               .ints("padding", {1, 1})
               .shape();
  EXPECT_EQ(t[0].sizes[0], s0());
  EXPECT_EQ(t[0].sizes[3], SymInt(16));
  for (int64_t h : {1, 2, 5, 6, 31})
    EXPECT_EQ(t[0].sizes[2].evaluate({{"s0", 1}, {"s1", h}}), (h + 2 - 3) / 2 + 1) << h;
  // ceil mode: the symbolic rule matches the integer rule for every height.
  auto tc = OpRunner("aten.avg_pool2d.default")
                .sym_tensor("self", kF32, {s0(), 3, s1(), 7})
                .ints("kernel_size", {2, 3})
                .ints("stride", {2, 2})
                .ints("padding", {1, 1})
                .scalar("ceil_mode", true)
                .shape();
  EXPECT_EQ(tc[0].sizes[3], SymInt(4));
  for (int64_t h = 1; h < 20; ++h) {
    Tensor x = Tensor::zeros({1, 1, h, 7}, kF32);
    Tensor y = OpRunner("aten.avg_pool2d.default")
                   .tensor("self", x)
                   .ints("kernel_size", {2, 3})
                   .ints("stride", {2, 2})
                   .ints("padding", {1, 1})
                   .scalar("ceil_mode", true)
                   .run1();
    EXPECT_EQ(tc[0].sizes[2].evaluate({{"s0", 1}, {"s1", h}}), y.size(2)) << h;
  }
  auto ta = OpRunner("aten.adaptive_avg_pool2d.default")
                .sym_tensor("self", kBF16, {s0(), 8, s1(), s1()})
                .ints("output_size", {1, 1})
                .shape();
  EXPECT_EQ(sym_shape_str(ta[0].sizes), "[s0, 8, 1, 1]");
  EXPECT_EQ(ta[0].dtype, kBF16);
}

}  // namespace
}  // namespace anvil
