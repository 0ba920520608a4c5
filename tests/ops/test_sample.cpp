// Tests for grid sampling and sliding blocks (src/ops/sample.cpp, core/sample.h): grid_sampler_2d
// and grid_sampler in every interpolation x padding mode with align_corners both ways (points
// on the corners, inside and outside [-1, 1]), im2col and col2im with dilation, padding and
// stride, and the refused forms. Inputs come from gen() and the same formula in Python; expected
// values are PyTorch 2.11 CPU's, pasted in.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::expect_error;
using testing::gen;
using testing::matches;
using testing::OpRunner;

constexpr DType kF32 = DType::kFloat32;

/// PyTorch's grid_sampler_2d of gen({1, 2, 3, 4}, 7, 23, 11, 4) at the points (-1, -1),
/// (0.3, -0.6), (1.2, 0.9): [interpolation][padding][align_corners].
const std::vector<double> kGrid[3][3][2] = {
    {{{-0.6875, 0.9925, -0.04875, 0.25, -0.95, -0.17875},
      {-2.75, 1.1625, -0.6125, 1.0, -0.665, -1.61}},
     {{-2.75, 0.9925, -0.75, 1.0, -0.95, -2.75}, {-2.75, 1.1625, -0.875, 1.0, -0.665, -2.3}},
     {{-2.75, 0.9925, -0.75, 1.0, -0.95, -2.75}, {-2.75, 1.1625, -1.2275, 1.0, -0.665, -1.272499}}},
    {{{-2.75, 0.75, 0.0, 1.0, -1.25, 0.0}, {-2.75, 0.75, -0.75, 1.0, -1.25, -2.75}},
     {{-2.75, 0.75, -0.75, 1.0, -1.25, -2.75}, {-2.75, 0.75, -0.75, 1.0, -1.25, -2.75}},
     {{-2.75, 0.75, -0.75, 1.0, -1.25, -2.75}, {-2.75, 0.75, -0.75, 1.0, -1.25, -2.75}}},
    {{{-0.828125, 1.16929, -0.017472, 0.058838, -1.301116, -0.213662},
      {-2.75, 1.574847, -0.521007, 1.0, -0.984366, -2.246877}},
     {{-3.03125, 1.093199, -0.595251, 0.668213, -1.223611, -3.280383},
      {-2.75, 1.507337, -0.7462, 1.0, -0.860289, -2.76158}},
     {{-3.3125, 1.093199, -0.352371, 0.235352, -1.223611, -3.854035},
      {-2.75, 1.35132, -1.258308, 1.0, -0.96977, -1.907034}}}};

Tensor grid_points() { return testing::f32({1, 1, 3, 2}, {-1.0, -1.0, 0.3, -0.6, 1.2, 0.9}); }

TEST(GridSampler2d, EveryModePaddingAndAlignCorners) {
  const Tensor x = gen({1, 2, 3, 4}, 7, 23, 11, 4.0);
  for (const char* target : {"aten.grid_sampler_2d.default", "aten.grid_sampler.default"})
    for (int m = 0; m < 3; ++m)
      for (int p = 0; p < 3; ++p)
        for (int a = 0; a < 2; ++a) {
          SCOPED_TRACE(std::string(target) + " mode " + std::to_string(m) + " padding " +
                       std::to_string(p) + " align_corners " + std::to_string(a));
          EXPECT_TRUE(matches(OpRunner(target)
                                  .tensor("input", x)
                                  .tensor("grid", grid_points())
                                  .scalar("interpolation_mode", m)
                                  .scalar("padding_mode", p)
                                  .scalar("align_corners", a == 1)
                                  .run1(),
                              kF32, {1, 2, 1, 3}, kGrid[m][p][a]));
        }
}

// Nearest ties round half to even; a NaN point reads NaN through the bilinear and bicubic
// weights, 0 for nearest with zeros padding, and the border pixel 0 where border / reflection
// padding clips it; far-out points read 0, the border or the reflected pixel.
TEST(GridSampler2d, TiesNaNAndFarPoints) {
  std::vector<double> v(12);
  for (int i = 0; i < 12; ++i) v[static_cast<size_t>(i)] = i;
  const Tensor x = testing::f32({1, 1, 3, 4}, v);
  auto sample = [&](const Tensor& g, int m, int p, bool a) {
    return OpRunner("aten.grid_sampler_2d.default")
        .tensor("input", x)
        .tensor("grid", g)
        .scalar("interpolation_mode", m)
        .scalar("padding_mode", p)
        .scalar("align_corners", a)
        .run1();
  };
  const Tensor ties = testing::f32({1, 1, 3, 2}, {-0.5, -1.0 / 3, 0.0, 1.0 / 3, 0.5, 0.0});
  EXPECT_TRUE(matches(sample(ties, 1, 0, false), DType::kFloat32, {1, 1, 1, 3}, {0, 10, 6}));
  const double nan = std::nan("");
  const Tensor far = testing::f32({1, 1, 3, 2}, {nan, 0.0, 5.0, 0.2, -7.0, -3.0});
  // [interpolation][padding][align_corners], from PyTorch 2.11.
  const std::vector<double> want[3][3][2] = {
      {{{nan, 0, 0}, {nan, 0, 0}},
       {{4, 8.200001, 0}, {4, 7.8, 0}},
       {{4, 8.200001, 11}, {4, 7.8, 11}}},
      {{{0, 0, 0}, {0, 0, 0}}, {{4, 7, 0}, {4, 7, 0}}, {{4, 7, 11}, {4, 7, 11}}},
      {{{nan, 0, 0}, {nan, 0, 0}},
       {{nan, 8.556993, 0}, {nan, 8.088005, 0}},
       {{nan, 8.744493, 11.9375}, {nan, 8.184002, 11}}}};
  for (int m = 0; m < 3; ++m)
    for (int p = 0; p < 3; ++p)
      for (int a = 0; a < 2; ++a) {
        SCOPED_TRACE(std::to_string(m) + " " + std::to_string(p) + " " + std::to_string(a));
        EXPECT_TRUE(
            matches(sample(far, m, p, a == 1), DType::kFloat32, {1, 1, 1, 3}, want[m][p][a]));
      }
}

TEST(GridSampler2d, BadInputIsRefused) {
  auto run = [](const Tensor& x, const Tensor& g, int mode, int pad) {
    OpRunner("aten.grid_sampler_2d.default")
        .tensor("input", x)
        .tensor("grid", g)
        .scalar("interpolation_mode", mode)
        .scalar("padding_mode", pad)
        .scalar("align_corners", false)
        .run1();
  };
  const Tensor x = gen({1, 2, 3, 4});
  expect_error([&] { run(x, gen({1, 1, 3, 3}), 0, 0); }, {"grid must be [N, H_out, W_out, 2]"});
  expect_error([&] { run(x, grid_points(), 3, 0); }, {"unknown interpolation_mode", "3"});
  expect_error([&] { run(x, grid_points(), 0, 7); }, {"unknown padding_mode", "7"});
  expect_error([&] { run(x, grid_points().to(DType::kFloat64), 0, 0); }, {"f32", "f64"});
  expect_error([&] { run(gen({2, 3, 4}), grid_points(), 0, 0); }, {"4-D input"});
  expect_error(
      [&] {
        run(gen({1, 2, 3, 4, 2}), gen({1, 1, 1, 3, 3}), 0, 0);
      },
      {"3-D grid sampling", "not supported"});
}

TEST(Im2col, DilationPaddingStride) {
  EXPECT_TRUE(matches(OpRunner("aten.im2col.default")
                          .tensor("self", gen({1, 2, 3, 4}, 7, 23, 11, 4.0))
                          .ints("kernel_size", {2, 2})
                          .ints("dilation", {1, 2})
                          .ints("padding", {1, 0})
                          .ints("stride", {2, 1})
                          .run1(),
                      kF32, {1, 8, 4},
                      {0.0, 0.0,  -1.5, 0.25, 0.0,   0.0,  2.0,   -2.0, -2.75, -1.0, -0.25,
                       1.5, 0.75, 2.5,  -2.5, -0.75, 0.0,  0.0,   2.25, -1.75, 0.0,  0.0,
                       0.0, 1.75, 1.0,  2.75, -2.25, -0.5, -1.25, 0.5,  1.25,  -2.75}));
}

TEST(Col2im, OverlappingBlocksSum) {
  EXPECT_TRUE(matches(
      OpRunner("aten.col2im.default")
          .tensor("self", gen({1, 8, 6}, 3, 13, 6, 2.0))
          .ints("output_size", {3, 5})
          .ints("kernel_size", {2, 2})
          .ints("dilation", {1, 2})
          .ints("padding", {1, 0})
          .ints("stride", {2, 1})
          .run1(),
      kF32, {1, 2, 3, 5},
      {2.0,  -3.0, -3.5, -0.5, 1.0,  1.5,  3.0, -4.5, -1.0, 0.5,  0.0,  1.5,  5.5,  -2.5, -1.0,
       -1.0, 0.5,  3.5,  3.0,  -2.0, -1.5, 0.0, 2.5,  2.5,  -2.5, -3.0, -1.5, -0.5, 1.0,  2.5}));
}

TEST(Im2colCol2im, BadInputIsRefused) {
  auto blocks = [](OpRunner& r) -> OpRunner& {
    return r.ints("kernel_size", {2, 2}).ints("dilation", {1, 1}).ints("padding", {0, 0});
  };
  expect_error(
      [&] {
        blocks(OpRunner("aten.im2col.default")
                   .tensor("self", gen({1, 2, 3, 4}, 7, 11, 5, 1.0, DType::kInt64)))
            .ints("stride", {1, 1})
            .run1();
      },
      {"floating", "i64"});
  expect_error(
      [&] {
        blocks(OpRunner("aten.im2col.default").tensor("self", gen({1, 2, 3, 4})))
            .ints("stride", {0, 1})
            .run1();
      },
      {"stride must be positive"});
  expect_error(
      [&] {
        blocks(OpRunner("aten.im2col.default").tensor("self", gen({1, 2, 1, 4})))
            .ints("stride", {1, 1})
            .run1();
      },
      {"no block"});
  expect_error(
      [&] {
        blocks(OpRunner("aten.col2im.default")
                   .tensor("self", gen({1, 6, 6}))
                   .ints("output_size", {3, 4}))
            .ints("stride", {1, 1})
            .run1();
      },
      {"divisible by the product of kernel_size", "6"});
  expect_error(
      [&] {
        blocks(OpRunner("aten.col2im.default")
                   .tensor("self", gen({1, 8, 5}))
                   .ints("output_size", {3, 4}))
            .ints("stride", {1, 1})
            .run1();
      },
      {"number of sliding blocks", "expected 6", "got 5"});
}

}  // namespace
}  // namespace anvil
