// Runtime extern kernels for convolution and pooling, compared with the op table's reference
// kernels on random contiguous / non-contiguous / broadcast inputs (f32, bf16, int64), plus
// hand-computed values and error cases.
#include <cmath>
#include <limits>

#include "common/check.h"
#include "test_externs_util.h"

namespace anvil::runtime::test {
namespace {

using anvil::testing::f32;
using anvil::testing::i64;

/// A [N, C, H, W] tensor stored channels-last (non-contiguous in NCHW order).
Tensor channels_last(DType dt, int64_t n, int64_t c, int64_t h, int64_t w, uint32_t seed) {
  return rand_tensor(dt, {n, h, w, c}, seed).permute({0, 3, 1, 2});
}

TEST(ExternConv, Conv2dStridePaddingDilationGroupsBias) {
  const Tensor x = channels_last(DType::kFloat32, 2, 4, 9, 7, 1);
  const Tensor w = rand_tensor(DType::kFloat32, {6, 2, 3, 3}, 2);
  const Tensor b = rand_tensor(DType::kFloat32, {6}, 3);
  const Tensor got = ExternCase("aten.conv2d.default")
                         .tensor("input", x)
                         .tensor("weight", w)
                         .tensor("bias", b)
                         .ints("stride", {2, 1})
                         .ints("padding", {1, 0})
                         .ints("dilation", {1, 2})
                         .scalar("groups", 2)
                         .check();
  EXPECT_EQ(got.sizes(), (Shape{2, 6, 5, 3}));
}

TEST(ExternConv, Conv2dPaddingStrings) {
  // "same" with an even kernel width and dilation: asymmetric padding (left 1, right 2).
  const Tensor x = rand_tensor(DType::kFloat32, {1, 3, 6, 8}, 4);
  const Tensor w = rand_tensor(DType::kFloat32, {5, 3, 3, 4}, 5);
  Tensor got = ExternCase("aten.conv2d.default")
                   .tensor("input", x)
                   .tensor("weight", w)
                   .absent()
                   .string("padding", "same")
                   .ints("dilation", {1, 1})
                   .check();
  EXPECT_EQ(got.sizes(), (Shape{1, 5, 6, 8}));
  got = ExternCase("aten.conv2d.default")
            .tensor("input", x)
            .tensor("weight", w)
            .none("bias")
            .ints("stride", {1})
            .string("padding", "valid")
            .check();
  EXPECT_EQ(got.sizes(), (Shape{1, 5, 4, 5}));
}

TEST(ExternConv, ConvolutionPointwiseOneDimAndUnbatched) {
  // 1x1 convolution: read the input planes directly (contiguous) or through im2col (strided).
  for (bool strided : {false, true}) {
    const Tensor x = strided ? channels_last(DType::kFloat32, 3, 5, 4, 6, 6)
                             : rand_tensor(DType::kFloat32, {3, 5, 4, 6}, 6);
    ExternCase("aten.convolution.default")
        .tensor("input", x)
        .tensor("weight", rand_tensor(DType::kFloat32, {7, 5, 1, 1}, 7))
        .tensor("bias", rand_tensor(DType::kFloat32, {7}, 8))
        .ints("stride", {1, 1})
        .ints("padding", {0, 0})
        .ints("dilation", {1, 1})
        .scalar("transposed", false)
        .ints("output_padding", {0, 0})
        .scalar("groups", 1)
        .check();
  }
  // 1-D convolution (3-D weight) with stride and padding.
  ExternCase("aten.convolution.default")
      .tensor("input", rand_strided(DType::kFloat32, {2, 3, 11}, 9))
      .tensor("weight", rand_tensor(DType::kFloat32, {4, 3, 3}, 10))
      .none("bias")
      .ints("stride", {2})
      .ints("padding", {1})
      .ints("dilation", {1})
      .scalar("transposed", false)
      .ints("output_padding", {0})
      .scalar("groups", 1)
      .check();
  // Unbatched [C, H, W] input; a single int for stride arrives as kind 0.
  ExternCase("aten.conv2d.default")
      .tensor("input", rand_tensor(DType::kFloat32, {2, 5, 5}, 11))
      .tensor("weight", rand_tensor(DType::kFloat32, {3, 2, 2, 2}, 12))
      .tensor("bias", rand_tensor(DType::kFloat32, {3}, 13))
      .scalar("stride", 2)
      .check();
}

TEST(ExternConv, BatchParallelAndBroadcastInput) {
  // A batch larger than the thread count takes the batch-parallel path; the input is one image
  // broadcast over the batch (stride 0) and the bias a broadcast scalar.
  const Tensor img = rand_tensor(DType::kFloat32, {1, 3, 10, 10}, 14);
  ExternCase("aten.conv2d.default")
      .tensor("input", img.expand({9, 3, 10, 10}))
      .tensor("weight", rand_tensor(DType::kFloat32, {4, 3, 3, 3}, 15))
      .tensor("bias", rand_tensor(DType::kFloat32, {1}, 16).expand({4}))
      .ints("padding", {1, 1})
      .check();
}

TEST(ExternConv, Bf16DepthwiseAndInt64) {
  ExternCase("aten.conv2d.default")
      .tensor("input", channels_last(DType::kBFloat16, 2, 6, 7, 7, 17))
      .tensor("weight", rand_tensor(DType::kBFloat16, {6, 1, 3, 3}, 18))
      .tensor("bias", rand_tensor(DType::kBFloat16, {6}, 19))
      .ints("padding", {1, 1})
      .scalar("groups", 6)
      .check();
  const Tensor got = ExternCase("aten.conv2d.default")
                         .tensor("input", rand_tensor(DType::kInt64, {1, 2, 4, 4}, 20, -5, 5))
                         .tensor("weight", rand_tensor(DType::kInt64, {3, 2, 2, 2}, 21, -3, 3))
                         .tensor("bias", i64({3}, {100, -100, 7}))
                         .check();
  EXPECT_EQ(got.dtype(), DType::kInt64);
}

TEST(ExternConv, HandComputed) {
  // x = 1..9 as [1, 1, 3, 3], w = [[1, 0], [0, -1]]: out[i][j] = x[i][j] - x[i+1][j+1] = -4.
  const Tensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor w = f32({1, 1, 2, 2}, {1, 0, 0, -1});
  ExternCase c("aten.conv2d.default");
  c.tensor("input", x).tensor("weight", w).tensor("bias", f32({1}, {0.5}));
  EXPECT_TRUE(matches(c.run_extern({1, 1, 2, 2}, DType::kFloat32), DType::kFloat32, {1, 1, 2, 2},
                      {-3.5, -3.5, -3.5, -3.5}));
}

/// Transposed 2-D convolution computed directly from its definition, in gather form (each output
/// pixel sums the input pixels whose scattered kernel window covers it): x [N, C, H, W], w [C,
/// O/groups, KH, KW], bias [O] or empty; stride, padding, output_padding, dilation as {h, w}.
std::vector<double> naive_conv_transpose2d(const Tensor& x, const Tensor& w,
                                           const std::vector<double>& bias, int64_t groups,
                                           const int64_t s[2], const int64_t p[2],
                                           const int64_t op[2], const int64_t d[2], Shape* sizes) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t og = w.size(1), kh = w.size(2), kw = w.size(3), o = og * groups, cg = c / groups;
  const int64_t oh = (h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1;
  const int64_t ow = (wd - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1;
  *sizes = {n, o, oh, ow};
  const std::vector<double> xv = x.contiguous().to_doubles(), wv = w.contiguous().to_doubles();
  std::vector<double> out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = bias.empty() ? 0.0 : bias[oc];
          const int64_t g = oc / og, ocl = oc % og;
          for (int64_t ic = g * cg; ic < (g + 1) * cg; ++ic)
            for (int64_t ki = 0; ki < kh; ++ki)
              for (int64_t kj = 0; kj < kw; ++kj) {
                const int64_t ty = y + p[0] - ki * d[0], tx = xo + p[1] - kj * d[1];
                if (ty < 0 || tx < 0 || ty % s[0] != 0 || tx % s[1] != 0) continue;
                const int64_t ih = ty / s[0], iw = tx / s[1];
                if (ih >= h || iw >= wd) continue;
                acc += xv[((b * c + ic) * h + ih) * wd + iw] *
                       wv[((ic * og + ocl) * kh + ki) * kw + kj];
              }
          out.push_back(acc);
        }
  return out;
}

TEST(ExternConv, TransposedConvolutionMatchesDefinition) {
  // aten.convolution.default with transposed=True: weight [C_in, C_out / groups, KH, KW], with
  // stride, padding, output_padding, dilation and groups all away from their defaults.
  const Tensor x = channels_last(DType::kFloat32, 2, 4, 4, 5, 24);
  const Tensor w = rand_tensor(DType::kFloat32, {4, 3, 3, 2}, 25);
  const Tensor b = rand_tensor(DType::kFloat32, {6}, 26);
  const int64_t s[2] = {2, 1}, p[2] = {1, 0}, op[2] = {1, 0}, d[2] = {1, 2};
  Shape sizes;
  const std::vector<double> want =
      naive_conv_transpose2d(x, w, b.to_doubles(), /*groups=*/2, s, p, op, d, &sizes);
  ASSERT_EQ(sizes, (Shape{2, 6, 8, 7}));
  ExternCase c("aten.convolution.default");
  c.tensor("input", x)
      .tensor("weight", w)
      .tensor("bias", b)
      .ints("stride", {s[0], s[1]})
      .ints("padding", {p[0], p[1]})
      .ints("dilation", {d[0], d[1]})
      .scalar("transposed", true)
      .ints("output_padding", {op[0], op[1]})
      .scalar("groups", 2);
  const Tensor got = c.run_extern(sizes, DType::kFloat32);
  EXPECT_TRUE(anvil::test::close(got.to_doubles(), want, 1e-4));
  // Hand-computed: stride 2 places a copy of the kernel [[1, 2], [3, 4]] scaled by each input
  // value in its own 2x2 block; no bias.
  ExternCase hand("aten.convolution.default");
  hand.tensor("input", f32({1, 1, 2, 2}, {1, 10, 100, 1000}))
      .tensor("weight", f32({1, 1, 2, 2}, {1, 2, 3, 4}))
      .none("bias")
      .ints("stride", {2, 2})
      .ints("padding", {0, 0})
      .ints("dilation", {1, 1})
      .scalar("transposed", true)
      .ints("output_padding", {0, 0})
      .scalar("groups", 1);
  EXPECT_TRUE(anvil::test::close(hand.run_extern({1, 1, 4, 4}, DType::kFloat32).to_doubles(),
                                 {1, 2, 10, 20, 3, 4, 30, 40,  //
                                  100, 200, 1000, 2000, 300, 400, 3000, 4000},
                                 0));
}

TEST(ExternConv, Errors) {
  const Tensor x = rand_tensor(DType::kFloat32, {1, 2, 5, 5}, 22);
  const Tensor w = rand_tensor(DType::kFloat32, {3, 2, 3, 3}, 23);
  // A transposed convolution reads the weight as [C_in, C_out / groups, ...]: [3, 2, 3, 3] does
  // not fit a 2-channel input.
  ExternCase transposed("aten.convolution.default");
  transposed.tensor("input", x).tensor("weight", w).none("bias").scalar("transposed", true);
  ANVIL_EXPECT_ERROR(transposed.run_extern({1, 2, 7, 7}, DType::kFloat32),
                     "weight does not fit the input with groups=1");
  // The same for a plain convolution: [3, 3, 3, 3] needs 3 input channels.
  ExternCase mismatched("aten.conv2d.default");
  mismatched.tensor("input", x).tensor("weight", rand_tensor(DType::kFloat32, {3, 3, 3, 3}, 27));
  ANVIL_EXPECT_ERROR(mismatched.run_extern({1, 3, 3, 3}, DType::kFloat32),
                     "weight does not fit the input with groups=1");
  // An output allocated with the wrong sizes is reported, naming the sizes.
  ExternCase c("aten.conv2d.default");
  c.tensor("input", x).tensor("weight", w);
  try {
    c.run_extern({1, 3, 4, 4}, DType::kFloat32);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[1, 3, 3, 3]"), std::string::npos) << e.what();
  }
  // Through the API: non-zero status and a message naming the target.
  ExternCase g("aten.conv2d.default");
  g.tensor("input", x).tensor("weight", w).scalar("groups", 4);
  auto [rc, msg] = g.run_api({1, 3, 3, 3}, DType::kFloat32);
  EXPECT_NE(rc, 0);
  EXPECT_NE(msg.find("aten.conv2d.default"), std::string::npos) << msg;
  EXPECT_NE(msg.find("groups"), std::string::npos) << msg;
}

TEST(ExternPool, MaxPool2d) {
  ExternCase("aten.max_pool2d.default")
      .tensor("self", channels_last(DType::kFloat32, 2, 3, 9, 8, 30))
      .ints("kernel_size", {3, 3})
      .ints("stride", {2, 2})
      .ints("padding", {1, 1})
      .ints("dilation", {1, 2})
      .scalar("ceil_mode", true)
      .check();
  // bf16, 3-D strided input, stride given as an empty list (= kernel_size).
  ExternCase("aten.max_pool2d.default")
      .tensor("self", rand_strided(DType::kBFloat16, {4, 6, 6}, 31))
      .ints("kernel_size", {2})
      .ints("stride", {})
      .check();
  ExternCase("aten.max_pool2d.default")
      .tensor("self", rand_tensor(DType::kInt64, {1, 2, 5, 5}, 32, -50, 50))
      .ints("kernel_size", {2, 3})
      .ints("stride", {1, 2})
      .check();
  // fp32 with contiguous rows (ResNet's 3x3 stride-2 stem pool; the column-max fast path),
  // padded, ceil_mode, odd sizes,
  // NaNs inside the planes (first column, middle, last row) and windows hanging over the edge;
  // against the reference kernel.
  for (bool ceil_mode : {false, true}) {
    Tensor x = rand_tensor(DType::kFloat32, {2, 3, 11, 13}, 34);
    float* xp = x.data<float>();
    for (int64_t i : {int64_t{0}, int64_t{13 * 5 + 6}, int64_t{143 + 13 * 10 + 12}, int64_t{700}})
      xp[i] = std::numeric_limits<float>::quiet_NaN();
    ExternCase("aten.max_pool2d.default")
        .tensor("self", x)
        .ints("kernel_size", {3, 3})
        .ints("stride", {2, 2})
        .ints("padding", {1, 1})
        .scalar("ceil_mode", ceil_mode)
        .check();
    ExternCase("aten.max_pool2d.default")
        .tensor("self", x)
        .ints("kernel_size", {2, 4})
        .ints("stride", {3, 1})
        .ints("padding", {0, 2})
        .scalar("ceil_mode", ceil_mode)
        .check();
    // a column stride other than 1 and 2, and dilation both ways (fp32 fast path)
    ExternCase("aten.max_pool2d.default")
        .tensor("self", x)
        .ints("kernel_size", {3, 3})
        .ints("stride", {1, 3})
        .ints("padding", {1, 1})
        .ints("dilation", {2, 2})
        .scalar("ceil_mode", ceil_mode)
        .check();
  }
  // Hand-computed: 2x2 windows of 0..15 pick 5, 7, 13, 15; NaN propagates; -inf stays -inf.
  std::vector<double> v(16);
  for (int i = 0; i < 16; ++i) v[i] = i;
  v[0] = std::numeric_limits<double>::quiet_NaN();
  ExternCase c("aten.max_pool2d.default");
  c.tensor("self", f32({1, 1, 4, 4}, v)).ints("kernel_size", {2, 2});
  const Tensor got = c.run_extern({1, 1, 2, 2}, DType::kFloat32);
  EXPECT_TRUE(std::isnan(got.item_at(0)));
  EXPECT_EQ(got.item_at(1), 7);
  EXPECT_EQ(got.item_at(2), 13);
  EXPECT_EQ(got.item_at(3), 15);
  const double inf = std::numeric_limits<double>::infinity();
  ExternCase ninf("aten.max_pool2d.default");
  ninf.tensor("self", f32({1, 1, 2, 2}, {-inf, -inf, -inf, -inf})).ints("kernel_size", {2, 2});
  EXPECT_EQ(ninf.run_extern({1, 1, 1, 1}, DType::kFloat32).item(), -inf);
}

TEST(ExternPool, AvgPool2d) {
  for (bool include_pad : {true, false})
    ExternCase("aten.avg_pool2d.default")
        .tensor("self", channels_last(DType::kFloat32, 2, 3, 7, 9, 33))
        .ints("kernel_size", {3, 2})
        .ints("stride", {2, 2})
        .ints("padding", {1, 1})
        .scalar("ceil_mode", true)
        .scalar("count_include_pad", include_pad)
        .check();
  ExternCase("aten.avg_pool2d.default")
      .tensor("self", rand_strided(DType::kBFloat16, {3, 8, 8}, 34))
      .ints("kernel_size", {2, 2})
      .ints("stride", {2, 2})
      .ints("padding", {0, 0})
      .scalar("ceil_mode", false)
      .scalar("count_include_pad", true)
      .scalar("divisor_override", 3)
      .check();
  ExternCase("aten.avg_pool2d.default")
      .tensor("self", rand_tensor(DType::kInt64, {1, 1, 4, 4}, 35, 0, 100))
      .ints("kernel_size", {2, 2})
      .check();
  // Hand-computed: 2x2 mean of [[1, 2], [3, 4]] = 2.5.
  ExternCase c("aten.avg_pool2d.default");
  c.tensor("self", f32({1, 2, 2}, {1, 2, 3, 4})).ints("kernel_size", {2, 2});
  EXPECT_TRUE(matches(c.run_extern({1, 1, 1}, DType::kFloat32), DType::kFloat32, {1, 1, 1}, {2.5}));
}

TEST(ExternPool, AdaptiveAvgPool2d) {
  ExternCase("aten.adaptive_avg_pool2d.default")
      .tensor("self", channels_last(DType::kFloat32, 2, 4, 7, 5, 36))
      .ints("output_size", {3, 2})
      .check();
  ExternCase("aten.adaptive_avg_pool2d.default")
      .tensor("self", rand_strided(DType::kBFloat16, {3, 6, 6}, 37))
      .ints("output_size", {1, 1})
      .check();
  // Global average of 1..4 = 2.5, of a broadcast constant = the constant.
  ExternCase c("aten.adaptive_avg_pool2d.default");
  c.tensor("self", f32({1, 1, 1, 1}, {3}).expand({2, 1, 4, 4})).ints("output_size", {1});
  EXPECT_TRUE(
      matches(c.run_extern({2, 1, 1, 1}, DType::kFloat32), DType::kFloat32, {2, 1, 1, 1}, {3, 3}));
  // Rows of 16+ contiguous elements take the eight-partial-sums path.
  for (const std::vector<int64_t>& os : {std::vector<int64_t>{1, 1}, {3, 2}, {2, 1}})
    ExternCase("aten.adaptive_avg_pool2d.default")
        .tensor("self", rand_tensor(DType::kFloat32, {2, 3, 9, 41}, 38))
        .ints("output_size", os)
        .check();
  ExternCase bad("aten.adaptive_avg_pool2d.default");
  bad.tensor("self", i64({1, 2, 2}, {1, 2, 3, 4})).ints("output_size", {1, 1});
  ANVIL_EXPECT_ERROR(bad.run_extern({1, 1, 1}, DType::kInt64),
                     "adaptive_avg_pool2d needs a floating input");
}

// Wide images: panels of 16 output pixels that lie in one output row take the copy paths of the
// packed im2col (stride 1 whole-panel copies, stride 2 paired loads, left/right padding inside a
// panel, rows above/below the input); panels spanning two rows take the per-pixel path.
TEST(ExternConv, PackedIm2colGeometriesMatchReference) {
  struct Geo {
    int64_t c, h, w, o, k, stride, pad, dil, groups;
  };
  const Geo geos[] = {
      {3, 32, 32, 16, 3, 1, 1, 1, 1}, {16, 32, 32, 32, 3, 2, 1, 1, 1}, {4, 20, 37, 6, 3, 2, 2, 1, 2},
      {2, 9, 50, 5, 5, 1, 2, 2, 1},   {6, 18, 33, 6, 3, 3, 0, 1, 3},  {3, 17, 64, 4, 1, 2, 0, 1, 1},
      {2, 12, 19, 3, 4, 1, 3, 1, 1},  {1, 40, 16, 2, 7, 2, 3, 2, 1},
  };
  uint32_t seed = 100;
  for (const Geo& g : geos) {
    SCOPED_TRACE(str("c", g.c, " ", g.h, "x", g.w, " o", g.o, " k", g.k, " s", g.stride, " p",
                     g.pad, " d", g.dil, " g", g.groups));
    const Tensor x = rand_tensor(DType::kFloat32, {2, g.c, g.h, g.w}, seed++);
    const Tensor w = rand_tensor(DType::kFloat32, {g.o, g.c / g.groups, g.k, g.k}, seed++);
    const Tensor b = rand_tensor(DType::kFloat32, {g.o}, seed++);
    ExternCase("aten.conv2d.default")
        .tensor("input", x)
        .tensor("weight", w)
        .tensor("bias", b)
        .ints("stride", {g.stride})
        .ints("padding", {g.pad})
        .ints("dilation", {g.dil})
        .scalar("groups", g.groups)
        .check();
  }
}

}  // namespace
}  // namespace anvil::runtime::test
