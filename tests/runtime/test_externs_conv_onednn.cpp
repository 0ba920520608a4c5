// oneDNN's convolution (runtime/kernels/conv_onednn.cpp) through the convolution externs,
// compared with the op table's reference kernel: a sweep over kernel size, stride, dilation,
// padding (none, symmetric, "same" with asymmetric sides), groups, batch, channels-last and
// not, bias or not, fused ReLU or not, fp32 and bf16; 1-D, unbatched, strided and broadcast
// inputs; the pool's image chunks; the primitive cache, the constant weights' cache and the
// routing (ANVIL_CONV).
#include <algorithm>
#include <cstdlib>

#include "common/check.h"
#include "runtime/kernels/conv.h"
#include "runtime/packed_weights.h"
#include "test_externs_util.h"
#include "common/scoped_env.h"

namespace anvil::runtime::test {
namespace {

using anvil::test::ScopedEnv;

/// A geometry of `c` channels, `groups` groups, 3x3 kernel, 16x16 output (routing tests).
kern::ConvGeom geom(int64_t c, int64_t groups, int64_t o) {
  kern::ConvGeom g;
  g.c = c;
  g.groups = groups;
  g.o = o;
  g.kh = g.kw = 3;
  g.h = g.w = g.oh = g.ow = 16;
  return g;
}

/// Sends every convolution oneDNN takes there, however small (the sweep's cases are small).
class ExternConvOneDnnAnySize : public ::testing::Test {
 protected:
  ScopedEnv any_size_{"ANVIL_CONV_ONEDNN_MIN_MACS", "0"};
};

bool onednn_f32() { return kern::onednn_conv_supports(geom(4, 1, 4), DType::kFloat32); }

/// max(v, 0) of every element (a reference for the fused ReLU), in t's dtype.
Tensor relu_of(const Tensor& t) {
  std::vector<double> v = t.to_doubles();
  for (double& e : v) e = std::max(e, 0.0);
  return Tensor::from_vector(v, t.sizes()).to(t.dtype(), /*copy=*/true);
}

/// One conv2d case of the sweep.
struct Case {
  int64_t n, c, o, h, w, kh, kw, stride, dil, groups;
  int pad;  // 0: none; 1: kh / 2 * dil each side; 2: "same" (stride 1) or {kh / 2 * dil, 0}
  bool channels_last, bias, relu;
};

/// Runs `k` in `dt` through aten.conv2d.default and compares it with the reference kernel
/// (ReLU applied to the reference when fused); checks that oneDNN ran it when it takes it.
void check_case(const Case& k, DType dt, uint32_t seed) {
  const Tensor x = k.channels_last
                       ? rand_tensor(dt, {k.n, k.h, k.w, k.c}, seed).permute({0, 3, 1, 2})
                       : rand_tensor(dt, {k.n, k.c, k.h, k.w}, seed);
  ExternCase c("aten.conv2d.default");
  c.tensor("input", x)
      .tensor("weight", rand_tensor(dt, {k.o, k.c / k.groups, k.kh, k.kw}, seed + 1));
  if (k.bias)
    c.tensor("bias", rand_tensor(dt, {k.o}, seed + 2));
  else
    c.none("bias");
  c.ints("stride", {k.stride});
  if (k.pad == 2 && k.stride == 1)
    c.string("padding", "same");
  else if (k.pad == 2)
    c.ints("padding", {k.kh / 2 * k.dil, 0});
  else
    c.ints("padding", {k.pad == 1 ? k.kh / 2 * k.dil : 0});
  c.ints("dilation", {k.dil}).scalar("groups", k.groups);
  if (k.relu) c.extern_int("fused_relu", 1);
  const Tensor ref = c.reference();
  const Tensor want = k.relu ? relu_of(ref) : ref;
  const size_t runs = kern::onednn_conv_runs();
  const Tensor got = c.run_extern(want.sizes(), want.dtype());
  EXPECT_TRUE(matches(got, want));
  if (onednn_f32() && kern::onednn_conv_supports(geom(k.c, k.groups, k.o), dt))
    EXPECT_EQ(kern::onednn_conv_runs(), runs + 1) << "oneDNN did not run it";
}

TEST_F(ExternConvOneDnnAnySize, SweepMatchesReference) {
  if (!onednn_f32()) GTEST_SKIP() << "runtime built without oneDNN";
  // Every case split over the pool (bands of rows at batch 1, images at batch 2), however small.
  ScopedEnv split("ANVIL_CONV_PARALLEL_MACS", "0");
  uint32_t seed = 100;
  int variant = 0;  // cycles channels-last x bias x relu over the cases
  for (DType dt : {DType::kFloat32, DType::kBFloat16})
    for (int64_t k : {1, 3, 5, 7})
      for (int64_t stride : {1, 2})
        for (int64_t dil : {1, 2})
          for (int pad : {0, 1, 2})
            for (int64_t groups : {1, 2})
              for (int64_t n : {1, 2}) {
                const int v = variant++;
                // pad 2 at stride 1: an even kernel width, so "same" pads left and right
                // differently.
                const bool cl = (v & 1) != 0, bias = (v & 2) != 0, relu = (v & 4) != 0;
                const int64_t kw = pad == 2 ? k + 1 : k;
                const Case cs{n, 4, 6, 16, 17, k, kw, stride, dil, groups, pad, cl, bias, relu};
                SCOPED_TRACE(str(dtype_name(dt), " n", n, " k", cs.kh, "x", cs.kw, " s", stride,
                                 " d", dil, " pad", pad, " g", groups,
                                 cs.channels_last ? " nhwc" : "", cs.bias ? " bias" : "",
                                 cs.relu ? " relu" : ""));
                check_case(cs, dt, seed);
                seed += 3;
              }
}

TEST_F(ExternConvOneDnnAnySize, PoolChunksAndThreadCounts) {
  if (!onednn_f32()) GTEST_SKIP() << "runtime built without oneDNN";
  // Batch 1 (bands of output rows), 3 (bands on three threads, images on two), 8 (images);
  // small enough to run as one call unless the split threshold is lowered.
  for (const char* macs : {"0", "100000000"})
    for (int threads : {1, 2, 3})
      for (int64_t n : {1, 3, 8}) {
        SCOPED_TRACE(str(threads, " threads, batch ", n, ", split above ", macs, " MACs"));
        ScopedEnv split("ANVIL_CONV_PARALLEL_MACS", macs);
        ThreadPool pool(threads);
        ScopedThreadPool scope(&pool);
        check_case({n, 16, 24, 14, 14, 3, 3, 1, 1, 1, 1, n == 3, true, true}, DType::kFloat32,
                   700 + static_cast<uint32_t>(n));
        check_case({n, 8, 16, 9, 9, 1, 1, 2, 1, 1, 0, false, n != 3, false}, DType::kBFloat16,
                   800 + static_cast<uint32_t>(n));
      }
}

TEST_F(ExternConvOneDnnAnySize, OneDimUnbatchedStridedAndBroadcastInputs) {
  if (!onednn_f32()) GTEST_SKIP() << "runtime built without oneDNN";
  const size_t runs = kern::onednn_conv_runs();
  // conv1d, stride 2, dilation 2, groups 2.
  ExternCase("aten.conv1d.default")
      .tensor("input", rand_tensor(DType::kFloat32, {2, 6, 29}, 900))
      .tensor("weight", rand_tensor(DType::kFloat32, {8, 3, 5}, 901))
      .tensor("bias", rand_tensor(DType::kFloat32, {8}, 902))
      .ints("stride", {2})
      .ints("padding", {3})
      .ints("dilation", {2})
      .scalar("groups", 2)
      .check();
  // conv1d on a channels-last [N, W, C] view.
  ExternCase("aten.conv1d.default")
      .tensor("input", rand_tensor(DType::kFloat32, {2, 17, 5}, 903).permute({0, 2, 1}))
      .tensor("weight", rand_tensor(DType::kFloat32, {7, 5, 3}, 904))
      .none("bias")
      .string("padding", "same")
      .check();
  // Unbatched [C, H, W], aten.convolution.default with per-dim stride / padding / dilation.
  ExternCase("aten.convolution.default")
      .tensor("input", rand_tensor(DType::kFloat32, {5, 10, 9}, 905))
      .tensor("weight", rand_tensor(DType::kFloat32, {4, 5, 3, 2}, 906))
      .none("bias")
      .ints("stride", {1, 2})
      .ints("padding", {2, 0})
      .ints("dilation", {2, 1})
      .scalar("transposed", false)
      .ints("output_padding", {0, 0})
      .scalar("groups", 1)
      .check();
  // Every other column of a wider tensor (copied to NCHW first) and a broadcast image.
  ExternCase("aten.conv2d.default")
      .tensor("input", rand_strided(DType::kFloat32, {2, 6, 9, 11}, 907))
      .tensor("weight", rand_tensor(DType::kFloat32, {4, 6, 3, 3}, 908))
      .tensor("bias", rand_tensor(DType::kFloat32, {4}, 909))
      .ints("padding", {1})
      .check();
  ExternCase("aten.conv2d.default")
      .tensor("input", rand_tensor(DType::kFloat32, {1, 6, 9, 11}, 910).expand({3, 6, 9, 11}))
      .tensor("weight", rand_tensor(DType::kFloat32, {4, 6, 3, 3}, 911))
      .tensor("bias", rand_tensor(DType::kFloat32, {4}, 912))
      .check();
  // A transposed weight view (copied) and a 7x7 stride-2 stem on a 3-channel image.
  ExternCase("aten.conv2d.default")
      .tensor("input", rand_tensor(DType::kFloat32, {1, 3, 40, 38}, 913))
      .tensor("weight", rand_tensor(DType::kFloat32, {3, 8, 7, 7}, 914).transpose(0, 1))
      .tensor("bias", rand_tensor(DType::kFloat32, {8}, 915))
      .ints("stride", {2})
      .ints("padding", {3})
      .check();
  EXPECT_EQ(kern::onednn_conv_runs(), runs + 6);
}

/// A 3x3 conv2d case with a fixed weight, optionally flagged as a constant (weight_constant).
Tensor run_with_cache(const Tensor& x, const Tensor& w, const Tensor& b, bool constant,
                      PackedWeightCache* cache, Tensor* want) {
  ExternCase c("aten.conv2d.default");
  c.tensor("input", x).tensor("weight", w).tensor("bias", b).ints("padding", {1});
  if (constant) c.extern_int("weight_constant", 1);
  *want = c.reference();
  Tensor out = Tensor::full(want->sizes(), -777.0, want->dtype());
  AnvilRtTensor od = rt_from_tensor(out);
  std::vector<AnvilRtTensor> in{rt_from_tensor(x), rt_from_tensor(w), rt_from_tensor(b)};
  std::vector<int64_t> pad{1};
  std::vector<AnvilRtScalar> at(constant ? 2 : 1);
  at[0] = AnvilRtScalar{"padding", 3, 0, 0, nullptr, pad.data(), 1};
  if (constant) at[1] = AnvilRtScalar{"weight_constant", 0, 1, 0, nullptr, nullptr, 0};
  ExternCall call("aten.conv2d.default", in.data(), 3, at.data(), static_cast<int32_t>(at.size()),
                  &od, 1);
  call.set_packed_weights(cache);
  EXPECT_EQ(find_extern("aten.conv2d.default")(call), 0) << call.error();
  return out;
}

TEST_F(ExternConvOneDnnAnySize, ConstantWeightsReorderedOnceAndPrimitivesCached) {
  if (!onednn_f32()) GTEST_SKIP() << "runtime built without oneDNN";
  const Tensor x = rand_tensor(DType::kFloat32, {2, 32, 12, 12}, 1000);
  const Tensor w = rand_tensor(DType::kFloat32, {48, 32, 3, 3}, 1001);
  const Tensor b = rand_tensor(DType::kFloat32, {48}, 1002);
  PackedWeightCache cache;
  Tensor want;
  // Not flagged constant: the cache is never used.
  EXPECT_TRUE(matches(run_with_cache(x, w, b, false, &cache, &want), want));
  EXPECT_EQ(cache.size(), 0u);
  // Flagged: one reordered copy, reused by the next call (which creates no primitive).
  EXPECT_TRUE(matches(run_with_cache(x, w, b, true, &cache, &want), want));
  ASSERT_EQ(cache.size(), 1u);
  EXPECT_GE(cache.bytes(), 48 * 32 * 9 * 4);
  const size_t prims = kern::onednn_conv_cached_primitives();
  EXPECT_TRUE(matches(run_with_cache(x, w, b, true, &cache, &want), want));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(kern::onednn_conv_cached_primitives(), prims);
  // A new constant set that keeps the weight carries the copy over; one that drops it does not.
  EXPECT_EQ(cache.carried_over({w.data_ptr()})->size(), 1u);
  EXPECT_EQ(cache.carried_over({})->size(), 0u);
}

TEST(ExternConvOneDnn, RoutingAndEnvOverride) {
  const kern::ConvGeom plain = geom(8, 1, 16), grouped = geom(8, 2, 16), dw = geom(8, 8, 16);
  const bool on = onednn_f32();
  using P = kern::ConvPath;
  EXPECT_EQ(kern::conv_path(plain, DType::kFloat32), on ? P::kOneDnn : P::kIm2col);
  EXPECT_EQ(kern::conv_path(grouped, DType::kFloat32), on ? P::kOneDnn : P::kIm2col);
  EXPECT_EQ(kern::conv_path(dw, DType::kFloat32), P::kDirect);  // depthwise is not routed
  EXPECT_EQ(kern::conv_path(plain, DType::kFloat64), P::kIm2col);
  EXPECT_EQ(kern::conv_path(plain, DType::kFloat16), P::kIm2col);
  EXPECT_EQ(kern::conv_path(plain, DType::kInt64), P::kIm2col);
  kern::ConvGeom tiny = plain;  // a 1x1 convolution on a 1x1 image: 128 multiply-adds
  tiny.kh = tiny.kw = 1;
  tiny.oh = tiny.ow = 1;
  EXPECT_EQ(kern::conv_path(tiny, DType::kFloat32), P::kIm2col);
  {
    ScopedEnv env("ANVIL_CONV_ONEDNN_MIN_MACS", "0");
    EXPECT_EQ(kern::conv_path(tiny, DType::kFloat32), on ? P::kOneDnn : P::kIm2col);
  }
  {
    ScopedEnv env("ANVIL_CONV", "im2col");
    EXPECT_EQ(kern::conv_path(plain, DType::kFloat32), P::kIm2col);
    EXPECT_EQ(kern::conv_path(dw, DType::kFloat32), P::kIm2col);
  }
  {
    ScopedEnv env("ANVIL_CONV", "direct");
    EXPECT_EQ(kern::conv_path(plain, DType::kFloat32), P::kIm2col);
    EXPECT_EQ(kern::conv_path(dw, DType::kFloat32), P::kDirect);
  }
  {
    ScopedEnv env("ANVIL_CONV", "onednn");
    EXPECT_EQ(kern::conv_path(dw, DType::kFloat32), on ? P::kOneDnn : P::kDirect);
    EXPECT_EQ(kern::conv_path(plain, DType::kFloat64), P::kIm2col);
  }
}

TEST(ExternConvOneDnn, ForcedOntoDepthwiseAgreesWithDirect) {
  if (!onednn_f32()) GTEST_SKIP() << "runtime built without oneDNN";
  const Tensor x = rand_tensor(DType::kFloat32, {2, 12, 15, 15}, 1100);
  auto run = [&] {
    ExternCase c("aten.conv2d.default");
    c.tensor("input", x)
        .tensor("weight", rand_tensor(DType::kFloat32, {24, 1, 5, 5}, 1101))
        .tensor("bias", rand_tensor(DType::kFloat32, {24}, 1102))
        .ints("stride", {2})
        .ints("padding", {2})
        .scalar("groups", 12);
    return c.check();
  };
  const Tensor direct = run();
  ScopedEnv env("ANVIL_CONV", "onednn");
  const size_t runs = kern::onednn_conv_runs();
  EXPECT_TRUE(matches(run(), direct));
  EXPECT_EQ(kern::onednn_conv_runs(), runs + 1);
}

}  // namespace
}  // namespace anvil::runtime::test
