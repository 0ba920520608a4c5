// Tests for pooling with indices and 3-D pooling (src/ops/pool_nd.cpp, core/pool_nd.h):
// max_pool2d_with_indices (values, flat indices, NaN and equal maxima), max_pool3d(_with_indices)
// with padding, dilation and ceil_mode, avg_pool3d (ceil_mode, count_include_pad,
// divisor_override, integers), adaptive_avg_pool3d, and the refused forms. Inputs come from gen()
// and the same formula in Python; expected values are PyTorch 2.11 CPU's, pasted in.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::expect_error;
using testing::gen;
using testing::matches;
using testing::OpRunner;

constexpr DType kF32 = DType::kFloat32;
constexpr DType kI64 = DType::kInt64;

/// Both outputs of a max pooling with indices.
std::pair<Tensor, Tensor> two(const std::vector<ir::RValue>& r) {
  EXPECT_EQ(r.size(), 2u);
  return {std::get<Tensor>(r.at(0)), std::get<Tensor>(r.at(1))};
}

TEST(MaxPool2dWithIndices, ValuesAndFlatIndicesWithCeilMode) {
  auto [v, i] = two(OpRunner("aten.max_pool2d_with_indices.default")
                        .tensor("self", gen({1, 2, 5, 6}, 7, 23, 11, 4.0))
                        .ints("kernel_size", {3, 3})
                        .ints("stride", {2, 2})
                        .ints("padding", {1, 1})
                        .ints("dilation", {1, 1})
                        .scalar("ceil_mode", true)
                        .run());
  EXPECT_TRUE(matches(v, kF32, {1, 2, 3, 4},
                      {2.0,  2.5,  2.5,  0.25, 2.75, 2.75, 2.25, -0.75, 1.75, 2.5, 2.0,  2.0,
                       2.75, 2.25, 2.25, 1.0,  2.75, 2.5,  2.25, 0.0,   2.5,  2.5, 2.75, 2.75}));
  EXPECT_TRUE(matches(i, kI64, {1, 2, 3, 4}, {6, 3, 3, 5, 13, 13, 16, 11, 19, 26, 29, 29,
                                              6, 9, 9, 5, 6,  19, 9,  11, 19, 19, 29, 29}));
}

TEST(MaxPool2dWithIndices, NaNWinsAndEqualMaximaKeepTheFirst) {
  const double nan = std::nan("");
  auto [v, i] = two(OpRunner("aten.max_pool2d_with_indices.default")
                        .tensor("self", testing::f32({1, 1, 3, 3}, {1, nan, 3, nan, 2, 5, 5, 0, 5}))
                        .ints("kernel_size", {2, 2})
                        .ints("stride", {1, 1})
                        .run());
  EXPECT_TRUE(matches(v, kF32, {1, 1, 2, 2}, {nan, nan, nan, 5}));
  EXPECT_TRUE(matches(i, kI64, {1, 1, 2, 2}, {3, 1, 3, 5}));  // the last NaN of a window
  auto [v2, i2] = two(OpRunner("aten.max_pool2d_with_indices.default")
                          .tensor("self", testing::f32({1, 2, 2}, {5, 5, 5, 5}))
                          .ints("kernel_size", {2, 2})
                          .ints("stride", {1, 1})
                          .ints("padding", {1, 1})
                          .run());
  EXPECT_TRUE(matches(v2, kF32, {1, 3, 3}, std::vector<double>(9, 5.0)));
  EXPECT_TRUE(matches(i2, kI64, {1, 3, 3}, {0, 0, 1, 0, 0, 1, 2, 2, 3}));
}

TEST(MaxPool3dWithIndices, PaddingStrideDilationCeilMode) {
  const Tensor x = gen({1, 1, 3, 4, 4}, 5, 17, 8, 3.0);
  auto [v, i] = two(OpRunner("aten.max_pool3d_with_indices.default")
                        .tensor("self", x)
                        .ints("kernel_size", {2, 2, 2})
                        .ints("stride", {1, 2, 2})
                        .ints("padding", {1, 1, 1})
                        .run());
  EXPECT_TRUE(matches(i, kI64, {1, 1, 4, 3, 3},
                      {0,  2,  3,  8,  10, 11, 12, 13, 15, 16, 2,  3,  20, 10, 27, 12, 13, 15,
                       16, 33, 19, 20, 37, 27, 44, 30, 47, 32, 33, 35, 40, 37, 43, 44, 46, 47}));
  EXPECT_NEAR(v.item_at(0), -2.666667, 1e-5);
  EXPECT_NEAR(v.item_at(35), 2.0, 1e-5);
  auto [vb, ib] = two(OpRunner("aten.max_pool3d_with_indices.default")
                          .tensor("self", x)
                          .ints("kernel_size", {2, 3, 2})
                          .ints("stride", {2, 2, 2})
                          .ints("padding", {0, 1, 0})
                          .ints("dilation", {1, 1, 2})
                          .scalar("ceil_mode", true)
                          .run());
  EXPECT_TRUE(matches(vb, kF32, {1, 1, 2, 3, 2},
                      {2.333333, 1.666667, 2.666667, 2.666667, 2.0, 2.0, 0.666667, -1.666667,
                       2.666667, 0.333333, 2.666667, 0.333333}));
  EXPECT_TRUE(matches(ib, kI64, {1, 1, 2, 3, 2}, {20, 6, 10, 10, 30, 30, 36, 38, 44, 46, 44, 46}));
}

TEST(MaxPool3d, IntegersUnbatched) {
  EXPECT_TRUE(matches(OpRunner("aten.max_pool3d.default")
                          .tensor("self", gen({2, 3, 4, 4}, 5, 17, 8, 1.0, kI64))
                          .ints("kernel_size", {2, 2, 2})
                          .run1(),
                      kI64, {2, 1, 2, 2}, {7, 7, 6, 8, 6, 7, 8, 8}));
}

TEST(AvgPool3d, CeilModeIncludePadDivisorAndIntegers) {
  const Tensor x = gen({1, 1, 3, 4, 5}, 7, 23, 11, 4.0);
  EXPECT_TRUE(matches(OpRunner("aten.avg_pool3d.default")
                          .tensor("self", x)
                          .ints("kernel_size", {3, 3, 3})
                          .ints("stride", {2, 2, 2})
                          .ints("padding", {1, 1, 1})
                          .scalar("ceil_mode", true)
                          .run1(),
                      kF32, {1, 1, 2, 3, 3},
                      {-0.037037, 0.046296, 0.027778, 0.240741, 0.194444, 0.231481, 0.361111,
                       0.138889, 0.25, -0.101852, -0.157407, -0.037037, 0.037037, -0.111111,
                       0.240741, 0.152778, -0.013889, 0.361111}));
  EXPECT_TRUE(matches(
      OpRunner("aten.avg_pool3d.default")
          .tensor("self", x)
          .ints("kernel_size", {2, 3, 3})
          .ints("stride", {1, 2, 1})
          .ints("padding", {1, 1, 0})
          .scalar("ceil_mode", false)
          .scalar("count_include_pad", false)
          .run1(),
      kF32, {1, 1, 4, 2, 3},
      {-0.458333, 0.333333, 0.166667,  -0.111111, 0.361111, 0.194444,  -0.208333, 0.104167,
       -0.0625,   0.138889, 0.291667,  0.125,     -0.1875,  -0.354167, -0.041667, 0.0,
       -0.166667, 0.305556, -0.416667, -0.583333, 0.208333, -0.388889, -0.555556, 0.555556}));
  EXPECT_TRUE(matches(OpRunner("aten.avg_pool3d.default")
                          .tensor("self", x)
                          .ints("kernel_size", {2, 2, 2})
                          .ints("stride", {})
                          .ints("padding", {0})
                          .scalar("ceil_mode", false)
                          .scalar("count_include_pad", true)
                          .scalar("divisor_override", 3)
                          .run1(),
                      kF32, {1, 1, 1, 2, 2}, {-0.333333, -0.583333, 0.333333, 0.083333}));
  // Integers: an int64 sum, truncating division.
  EXPECT_TRUE(matches(OpRunner("aten.avg_pool3d.default")
                          .tensor("self", gen({1, 2, 2, 3}, 5, 17, 8, 1.0, kI64))
                          .ints("kernel_size", {2, 2, 2})
                          .ints("stride", {1, 1, 1})
                          .run1(),
                      kI64, {1, 1, 1, 2}, {0, -1}));
}

TEST(AdaptiveAvgPool3d, BothNames) {
  for (const char* target :
       {"aten.adaptive_avg_pool3d.default", "aten._adaptive_avg_pool3d.default"}) {
    SCOPED_TRACE(target);
    EXPECT_TRUE(matches(OpRunner(target)
                            .tensor("self", gen({1, 1, 3, 4, 5}, 7, 23, 11, 4.0))
                            .ints("output_size", {2, 3, 2})
                            .run1(),
                        kF32, {1, 1, 2, 3, 2},
                        {-0.208333, -0.0625, -0.083333, 0.0625, 0.041667, 0.1875, -0.1875,
                         -0.041667, -0.0625, 0.083333, 0.0625, 0.208333}));
  }
}

// As PyTorch's CPU kernels: max pooling keeps a channels_last_3d input's layout, average
// pooling returns contiguous results.
TEST(Pool3d, ChannelsLast3dInputLayouts) {
  const Tensor x =
      gen({1, 2, 3, 4, 4}).permute({0, 2, 3, 4, 1}).contiguous().permute({0, 4, 1, 2, 3});
  const Tensor v =
      OpRunner("aten.max_pool3d.default").tensor("self", x).ints("kernel_size", {2, 2, 2}).run1();
  EXPECT_EQ(v.strides(), Shape({8, 1, 8, 4, 2}));
  EXPECT_TRUE(matches(v, OpRunner("aten.max_pool3d.default")
                             .tensor("self", x.contiguous())
                             .ints("kernel_size", {2, 2, 2})
                             .run1()));
  EXPECT_EQ(OpRunner("aten.avg_pool3d.default")
                .tensor("self", x)
                .ints("kernel_size", {2, 2, 2})
                .run1()
                .strides(),
            Shape({8, 4, 4, 2, 1}));
  EXPECT_EQ(OpRunner("aten._adaptive_avg_pool3d.default")
                .tensor("self", x)
                .ints("output_size", {1, 2, 2})
                .run1()
                .strides(),
            Shape({8, 4, 4, 2, 1}));
}

TEST(PoolNd, BadInputIsRefused) {
  expect_error(
      [] {
        OpRunner("aten.max_pool3d_with_indices.default")
            .tensor("self", gen({2, 4, 4}))
            .ints("kernel_size", {2, 2, 2})
            .run();
      },
      {"3-D pooling needs a 4-D or 5-D input", "[2, 4, 4]"});
  expect_error(
      [] {
        OpRunner("aten.max_pool2d_with_indices.default")
            .tensor("self", gen({1, 1, 4, 4}))
            .ints("kernel_size", {2, 2})
            .ints("padding", {2, 2})
            .run();
      },
      {"pad should be at most half of kernel size", "0 <= pad <= 1", "2"});
  expect_error(
      [] {
        OpRunner("aten.max_pool3d.default")
            .tensor("self", gen({1, 1, 4, 4, 4}))
            .ints("kernel_size", {2, 2})
            .run1();
      },
      {"'kernel_size' must have 1 or 3 values", "2"});
  expect_error(
      [] {
        OpRunner("aten.max_pool3d.default")
            .tensor("self", testing::boolean({1, 2, 2, 2}, {1, 0, 1, 0, 1, 0, 1, 0}))
            .ints("kernel_size", {2, 2, 2})
            .run1();
      },
      {"bool"});
  expect_error(
      [] {
        OpRunner("aten.avg_pool3d.default")
            .tensor("self", gen({1, 1, 2, 2, 2}))
            .ints("kernel_size", {3, 3, 3})
            .run1();
      },
      {"output size is too small"});
  expect_error(
      [] {
        OpRunner("aten.avg_pool3d.default")
            .tensor("self", gen({1, 1, 2, 2, 2}))
            .ints("kernel_size", {2, 2, 2})
            .scalar("divisor_override", 0)
            .run1();
      },
      {"divisor must be non-zero"});
  expect_error(
      [] {
        OpRunner("aten._adaptive_avg_pool3d.default")
            .tensor("self", gen({1, 2, 2, 2}, 7, 11, 5, 1.0, kI64))
            .ints("output_size", {1, 1, 1})
            .run1();
      },
      {"floating", "i64"});
}

}  // namespace
}  // namespace anvil
