// The direct depthwise convolution kernel (runtime/kernels/conv_depthwise.cpp) through the
// convolution externs, compared with the op table's reference kernel (im2col + GEMM): a sweep
// over kernel size, stride, dilation, padding, batch and channel multiplier on odd sizes, in
// each tile ISA the machine has (ANVIL_CONV_ISA) and several pool sizes; channels-last, strided
// and broadcast inputs, 1-D and unbatched shapes, bf16 / fp16, fused ReLU, and the routing.
#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/check.h"
#include "runtime/kernels/conv.h"
#include "test_externs_util.h"
#include "common/scoped_env.h"

namespace anvil::runtime::test {
namespace {

using anvil::test::ScopedEnv;

/// One depthwise conv2d case: C channels, multiplier m, k x k kernel.
struct DwCase {
  int64_t n, c, h, w, mult, k, stride, dil;
  bool same;  // padding "same" (stride 1) or k / 2 * dil each side (stride 2); else 0
};

/// Runs `d` through aten.conv2d.default and checks it against the reference kernel.
void check_case(const DwCase& d, DType dt, const Tensor& x, uint32_t seed) {
  ExternCase c("aten.conv2d.default");
  c.tensor("input", x)
      .tensor("weight", rand_tensor(dt, {d.c * d.mult, 1, d.k, d.k}, seed))
      .tensor("bias", rand_tensor(dt, {d.c * d.mult}, seed + 1))
      .ints("stride", {d.stride});
  if (d.same && d.stride == 1)
    c.string("padding", "same");
  else
    c.ints("padding", {d.same ? d.k / 2 * d.dil : 0});
  c.ints("dilation", {d.dil}).scalar("groups", d.c).check();
}

/// Every combination the issue names: kernel 1, 3, 5, 7; stride 1, 2; dilation 1, 2; padding 0
/// or same; batch 1, 2; multiplier 1, 2; odd image sizes.
std::vector<DwCase> sweep_cases() {
  std::vector<DwCase> cs;
  for (int64_t k : {1, 3, 5, 7})
    for (int64_t stride : {1, 2})
      for (int64_t dil : {1, 2})
        for (bool same : {false, true})
          for (int64_t n : {1, 2})
            for (int64_t mult : {1, 2}) cs.push_back({n, 3, 15, 17, mult, k, stride, dil, same});
  return cs;
}

TEST(ExternConvDepthwise, SweepMatchesReferenceInEveryIsa) {
  for (const char* isa : {"", "avx2", "generic"}) {
    ScopedEnv env("ANVIL_CONV_ISA", isa);
    uint32_t seed = 1000;
    for (const DwCase& d : sweep_cases()) {
      SCOPED_TRACE(str("isa '", isa, "' n", d.n, " c", d.c, " m", d.mult, " k", d.k, " s", d.stride,
                       " d", d.dil, d.same ? " same" : " pad0"));
      check_case(d, DType::kFloat32, rand_tensor(DType::kFloat32, {d.n, d.c, d.h, d.w}, seed),
                 seed + 1);
      seed += 3;
    }
  }
}

TEST(ExternConvDepthwise, WideAndTallPlanesUseEveryTileShape) {
  // ow from 1 to 150: one to ten 16-lane vectors per row (4 + 4 + 2 tiles), partial last
  // vectors, row tails of every tile height; each pool size splits the planes differently.
  const DwCase cases[] = {
      {1, 5, 40, 150, 1, 3, 1, 1, true}, {2, 4, 21, 67, 2, 7, 1, 1, true},
      {1, 6, 57, 57, 1, 7, 2, 1, true},  {1, 8, 9, 1, 1, 1, 1, 1, false},
      {1, 3, 30, 35, 1, 5, 2, 2, true},  {1, 16, 7, 7, 1, 7, 1, 1, true},
  };
  for (const char* isa : {"", "avx2", "generic"})
    for (int threads : {1, 2, 3}) {
      ScopedEnv env("ANVIL_CONV_ISA", isa);
      ThreadPool pool(threads);
      ScopedThreadPool scope(&pool);
      uint32_t seed = 2000;
      for (const DwCase& d : cases) {
        SCOPED_TRACE(str("isa '", isa, "' threads ", threads, " ", d.h, "x", d.w, " k", d.k));
        check_case(d, DType::kFloat32, rand_tensor(DType::kFloat32, {d.n, d.c, d.h, d.w}, seed),
                   seed + 1);
        seed += 3;
      }
    }
}

TEST(ExternConvDepthwise, ChannelsLastStridedAndBroadcastInputs) {
  const DwCase d{2, 6, 13, 11, 2, 3, 2, 1, true};
  // Channels-last: [N, H, W, C] storage viewed as [N, C, H, W].
  check_case(d, DType::kFloat32,
             rand_tensor(DType::kFloat32, {2, 13, 11, 6}, 3000).permute({0, 3, 1, 2}), 3001);
  // Every other column of a wider tensor, batch and channel dims transposed in memory.
  check_case(d, DType::kFloat32, rand_strided(DType::kFloat32, {2, 6, 13, 11}, 3002), 3003);
  // One image broadcast over the batch (stride 0).
  check_case(d, DType::kFloat32,
             rand_tensor(DType::kFloat32, {1, 6, 13, 11}, 3004).expand({2, 6, 13, 11}), 3005);
}

TEST(ExternConvDepthwise, HalfPrecisionOneDimAndUnbatched) {
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    check_case({2, 4, 12, 19, 2, 5, 1, 1, true}, dt, rand_tensor(dt, {2, 4, 12, 19}, 4000), 4001);
    check_case({1, 4, 12, 19, 1, 3, 2, 2, true}, dt,
               rand_tensor(dt, {1, 12, 19, 4}, 4002).permute({0, 3, 1, 2}), 4003);
  }
  // conv1d with groups == C, stride 2, dilation 2.
  ExternCase("aten.conv1d.default")
      .tensor("input", rand_tensor(DType::kFloat32, {2, 4, 29}, 4004))
      .tensor("weight", rand_tensor(DType::kFloat32, {8, 1, 5}, 4005))
      .tensor("bias", rand_tensor(DType::kFloat32, {8}, 4006))
      .ints("stride", {2})
      .ints("padding", {3})
      .ints("dilation", {2})
      .scalar("groups", 4)
      .check();
  // Unbatched [C, H, W] input, no bias, aten.convolution.default.
  ExternCase("aten.convolution.default")
      .tensor("input", rand_tensor(DType::kFloat32, {5, 10, 9}, 4007))
      .tensor("weight", rand_tensor(DType::kFloat32, {5, 1, 3, 3}, 4008))
      .none("bias")
      .ints("stride", {1, 2})
      .ints("padding", {1, 0})
      .ints("dilation", {2, 1})
      .scalar("transposed", false)
      .ints("output_padding", {0, 0})
      .scalar("groups", 5)
      .check();
}

TEST(ExternConvDepthwise, AsymmetricPaddingRectangularKernelsAndWidePadding) {
  for (const char* isa : {"", "avx2", "generic"}) {
    ScopedEnv env("ANVIL_CONV_ISA", isa);
    SCOPED_TRACE(str("isa '", isa, "'"));
    // "same" with an even kernel width: padding left 1, right 2 (top 2, bottom 2 for k 5).
    ExternCase("aten.conv2d.default")
        .tensor("input", rand_tensor(DType::kFloat32, {1, 6, 11, 21}, 6000))
        .tensor("weight", rand_tensor(DType::kFloat32, {6, 1, 5, 4}, 6001))
        .tensor("bias", rand_tensor(DType::kFloat32, {6}, 6002))
        .string("padding", "same")
        .scalar("groups", 6)
        .check();
    // 3 x 5 kernel, strides 2 x 3, dilations 1 x 2, padding wider than the kernel reaches
    // (rows and columns of outputs that read only padding: bias alone).
    ExternCase("aten.conv2d.default")
        .tensor("input", rand_tensor(DType::kFloat32, {2, 4, 9, 16}, 6003))
        .tensor("weight", rand_tensor(DType::kFloat32, {8, 1, 3, 5}, 6004))
        .tensor("bias", rand_tensor(DType::kFloat32, {8}, 6005))
        .ints("stride", {2, 3})
        .ints("padding", {4, 9})
        .ints("dilation", {1, 2})
        .scalar("groups", 4)
        .check();
  }
}

TEST(ExternConvDepthwise, FusedReluKeepsNaN) {
  // x = [[1, NaN, -3, 4]] per channel; 1x1 depthwise with weights {1, -1}: channel 0 gives
  // relu(x) = {1, NaN, 0, 4}, channel 1 relu(-x) = {0, NaN, 3, 0}.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = anvil::testing::f32({1, 2, 1, 4}, {1, nan, -3, 4, 1, nan, -3, 4});
  for (const char* isa : {"", "avx2", "generic"}) {
    ScopedEnv env("ANVIL_CONV_ISA", isa);
    ExternCase c("aten.conv2d.default");
    c.tensor("input", x).tensor("weight", anvil::testing::f32({2, 1, 1, 1}, {1, -1})).absent();
    c.scalar("groups", 2).extern_int("fused_relu", 1);
    const Tensor got = c.run_extern({1, 2, 1, 4}, DType::kFloat32);
    const std::vector<double> v = got.to_doubles();
    const double want[] = {1, nan, 0, 4, 0, nan, 3, 0};
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::isnan(want[i]))
        EXPECT_TRUE(std::isnan(v[i])) << isa << " " << i;
      else
        EXPECT_EQ(v[i], want[i]) << isa << " " << i;
    }
  }
}

TEST(ExternConvDepthwise, RoutesOnlyDepthwiseFloatConvolutions) {
  kern::ConvGeom g;
  g.c = 8;
  g.groups = 8;
  g.o = 16;
  EXPECT_TRUE(kern::use_conv_depthwise(g, DType::kFloat32));
  EXPECT_TRUE(kern::use_conv_depthwise(g, DType::kBFloat16));
  EXPECT_TRUE(kern::use_conv_depthwise(g, DType::kFloat16));
  EXPECT_FALSE(kern::use_conv_depthwise(g, DType::kFloat64));
  EXPECT_FALSE(kern::use_conv_depthwise(g, DType::kInt64));
  {
    ScopedEnv env("ANVIL_CONV", "im2col");
    EXPECT_FALSE(kern::use_conv_depthwise(g, DType::kFloat32));
  }
  g.groups = 4;  // grouped, two channels per group
  EXPECT_FALSE(kern::use_conv_depthwise(g, DType::kFloat32));
  g.groups = 1;
  g.c = 1;  // a single channel is a plain convolution
  EXPECT_FALSE(kern::use_conv_depthwise(g, DType::kFloat32));
}

TEST(ExternConvDepthwise, DirectAndIm2colPathsAgree) {
  // The same depthwise call through both paths (ANVIL_CONV=im2col forces the GEMM path).
  const Tensor x = rand_tensor(DType::kFloat32, {1, 24, 28, 28}, 5000);
  const Tensor w = rand_tensor(DType::kFloat32, {24, 1, 7, 7}, 5001);
  const Tensor b = rand_tensor(DType::kFloat32, {24}, 5002);
  auto run = [&] {
    ExternCase c("aten.conv2d.default");
    c.tensor("input", x).tensor("weight", w).tensor("bias", b).string("padding", "same");
    c.scalar("groups", 24);
    return c.run_extern({1, 24, 28, 28}, DType::kFloat32);
  };
  const Tensor direct = run();
  Tensor im2col;
  {
    ScopedEnv env("ANVIL_CONV", "im2col");
    im2col = run();
  }
  EXPECT_TRUE(matches(direct, im2col));
}

TEST(ExternConvDepthwise, Errors) {
  // A depthwise weight whose channel count does not match the input is still refused by the
  // shared checks before any kernel runs.
  ExternCase bad("aten.conv2d.default");
  bad.tensor("input", rand_tensor(DType::kFloat32, {1, 4, 5, 5}, 1))
      .tensor("weight", rand_tensor(DType::kFloat32, {6, 1, 3, 3}, 2))
      .absent()
      .scalar("groups", 4);
  ANVIL_EXPECT_ERROR(bad.run_extern({1, 6, 3, 3}, DType::kFloat32),
                     "weight does not fit the input with groups=4");
}

}  // namespace
}  // namespace anvil::runtime::test
