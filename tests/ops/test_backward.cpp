// The training ops' reference kernels (ops/conv_backward.cpp, ops/norm_backward.cpp,
// embedding_dense_backward, _embedding_bag, randperm, _fft_r2c / _fft_c2r) against PyTorch 2.11's
// values on small gen() inputs (computed with the same formula in Python), masked outputs, the
// in-place update of running statistics, and the refused forms.
#include <gtest/gtest.h>

#include <algorithm>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "op_test_util.h"

namespace anvil {
namespace {

using testing::expect_error;
using testing::f32;
using testing::gen;
using testing::i64;
using testing::matches;
using testing::OpRunner;

const Tensor& tensor_of(const std::vector<ir::RValue>& r, size_t k) {
  return std::get<Tensor>(r.at(k));
}

/// convolution_backward(gy, x, w, ...) with the given geometry and mask.
OpRunner conv_bwd(const Tensor& gy, const Tensor& x, const Tensor& w, std::vector<int64_t> s,
                  std::vector<int64_t> p, std::vector<int64_t> d, bool transposed,
                  std::vector<int64_t> op, int64_t groups, std::vector<bool> mask, int64_t bias) {
  OpRunner r("aten.convolution_backward.default");
  r.tensor("grad_output", gy)
      .tensor("input", x)
      .tensor("weight", w)
      .ints("bias_sizes", {bias})
      .ints("stride", s)
      .ints("padding", p)
      .ints("dilation", d)
      .scalar("transposed", transposed)
      .ints("output_padding", op)
      .scalar("groups", groups)
      .bools("output_mask", mask);
  return r;
}

TEST(Backward, ConvolutionBackwardMatchesTorch) {
  const Tensor x = gen({1, 2, 4, 4}), w = gen({3, 2, 2, 2}, 5, 7, 3, 2.0);
  const Tensor gy = gen({1, 3, 3, 3}, 3, 5, 2, 3.0);
  auto r =
      conv_bwd(gy, x, w, {1, 1}, {0, 0}, {1, 1}, false, {0, 0}, 1, {true, true, true}, 3).run();
  EXPECT_TRUE(
      matches(tensor_of(r, 0), DType::kFloat32, {1, 2, 4, 4},
              {1.0,        -2.5,       1.1666667,  0.3333333,  -0.3333334, 2.6666667, -1.3333334,
               -0.8333334, -0.3333334, -1.0000001, 0.8333333,  1.3333334,  0.6666667, -2.6666667,
               1.3333334,  -1.0000001, -1.3333334, -1.1666667, 0.5,        0.6666667, 1.6666666,
               2.3333335,  -3.3333335, -0.5,       0.6666666,  -2.1666667, 3.0,       1.0,
               0.8333334,  -2.1666667, 1.3333334,  -1.3333334}));
  EXPECT_TRUE(matches(
      tensor_of(r, 1), DType::kFloat32, {3, 2, 2, 2},
      {-0.0833335, -1.9166667, -0.0833334, 1.75,       1.75,       -1.0,       -1.0,      1.75,
       -0.0833334, 1.5,        0.7500001,  -0.4166667, -0.4166667, -1.5833334, 0.4166667, 0.1666667,
       -0.0833334, -1.3333334, -0.4999999, -1.75,      -1.75,      1.5833334,  0.5833334, 0.25}));
  EXPECT_TRUE(matches(tensor_of(r, 2), DType::kFloat32, {3}, {0.0, -0.6666666, 0.3333333}));
}

// A transposed, grouped 1-D convolution (stride 2, padding 1, output_padding 1).
TEST(Backward, TransposedGroupedConv1dBackwardMatchesTorch) {
  const Tensor x = gen({1, 4, 3}), w = gen({4, 1, 3}, 5, 7, 3, 2.0);
  const Tensor gy = gen({1, 2, 6}, 3, 5, 2, 3.0);
  auto r = conv_bwd(gy, x, w, {2}, {1}, {1}, true, {1}, 2, {true, true, true}, 2).run();
  EXPECT_TRUE(matches(tensor_of(r, 0), DType::kFloat32, {1, 4, 3},
                      {-0.6666667, -0.8333334, -1.0, -0.8333333, -0.5, -1.0, -0.8333334, -0.8333334,
                       1.3333334, -0.8333334, -0.6666667, 1.1666667}));
  EXPECT_TRUE(matches(tensor_of(r, 1), DType::kFloat32, {4, 1, 3},
                      {-0.1666667, 0.6666667, 0.25, -0.4166667, -0.9166667, 1.0833334, 0.0, 1.0,
                       -0.6666667, 0.0833333, 0.9166667, -0.6666667}));
  EXPECT_TRUE(matches(tensor_of(r, 2), DType::kFloat32, {2}, {-0.6666667, 0.3333333}));
}

TEST(Backward, ConvolutionBackwardLeavesMaskedOutputsOut) {
  const Tensor x = gen({1, 2, 4, 4}), w = gen({3, 2, 2, 2}), gy = gen({1, 3, 3, 3});
  auto r = conv_bwd(gy, x, w, {1}, {0}, {1}, false, {0}, 1, {true, false, true}, 3).run();
  EXPECT_TRUE(std::holds_alternative<Tensor>(r[0]));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(r[1]));
  EXPECT_TRUE(std::holds_alternative<Tensor>(r[2]));
}

TEST(Backward, ConvolutionBackwardRefusesInconsistentSizes) {
  const Tensor x = gen({1, 2, 4, 4}), w = gen({3, 2, 2, 2});
  expect_error(
      [&] {
        conv_bwd(gen({1, 3, 4, 4}), x, w, {1}, {0}, {1}, false, {0}, 1, {true, true, true}, 3)
            .run();
      },
      {"grad_output does not have the convolution's output size", "[1, 3, 3, 3]"});
  expect_error(
      [&] {
        conv_bwd(gen({1, 3, 3, 3}), x, gen({3, 3, 2, 2}), {1}, {0}, {1}, false, {0}, 1,
                 {true, true, true}, 3)
            .run();
      },
      {"the weight does not match the input's channels"});
  expect_error(
      [&] {
        conv_bwd(gen({1, 3, 3, 3}), x, w, {1}, {0}, {1}, false, {0}, 1, {true, true}, 3).run();
      },
      {"output_mask must have 3 values"});
  expect_error(
      [&] {
        conv_bwd(gen({1, 3, 3, 3}), x, w, {1, 1, 1}, {0}, {1}, false, {0}, 1, {true, true, true}, 3)
            .run();
      },
      {"'stride' must have 1 or 2 values"});
}

TEST(Backward, AvgPool2dBackwardMatchesTorch) {
  const Tensor x = gen({1, 1, 5, 5});
  Tensor r = OpRunner("aten.avg_pool2d_backward.default")
                 .tensor("grad_output", gen({1, 1, 3, 3}, 3, 5, 2, 3.0))
                 .tensor("self", x)
                 .ints("kernel_size", {3, 3})
                 .ints("stride", {2, 2})
                 .ints("padding", {1, 1})
                 .scalar("ceil_mode", false)
                 .scalar("count_include_pad", false)
                 .none("divisor_override")
                 .run1();
  EXPECT_TRUE(
      matches(r, DType::kFloat32, {1, 1, 5, 5},
              {-0.1666667, -0.1111111, 0.0555556,  -0.0277778, -0.0833333, -0.0555556, -0.0,
               0.0555556,  -0.1388889, -0.1944444, 0.1111111,  0.1111111,  0.0,        -0.1111111,
               -0.1111111, 0.1944444,  0.1388889,  -0.0555556, 0.0,        0.0555556,  0.0833333,
               0.0277778,  -0.0555556, 0.1111111,  0.1666667}));
  Tensor c = OpRunner("aten.avg_pool2d_backward.default")
                 .tensor("grad_output", gen({1, 1, 3, 3}, 3, 5, 2, 3.0))
                 .tensor("self", x)
                 .ints("kernel_size", {2, 2})
                 .ints("stride", {2, 2})
                 .ints("padding", {0, 0})
                 .scalar("ceil_mode", true)
                 .scalar("count_include_pad", true)
                 .none("divisor_override")
                 .run1();
  EXPECT_TRUE(
      matches(c, DType::kFloat32, {1, 1, 5, 5},
              {-0.1666667, -0.1666667, 0.0833333,  0.0833333, -0.1666667, -0.1666667, -0.1666667,
               0.0833333,  0.0833333,  -0.1666667, 0.1666667, 0.1666667,  0.0,        0.0,
               -0.3333333, 0.1666667,  0.1666667,  0.0,       0.0,        -0.3333333, 0.1666667,
               0.1666667,  -0.1666667, -0.1666667, 0.6666667}));
  expect_error(
      [&] {
        OpRunner("aten.avg_pool2d_backward.default")
            .tensor("grad_output", gen({1, 1, 2, 2}))
            .tensor("self", x)
            .ints("kernel_size", {3, 3})
            .ints("stride", {2, 2})
            .ints("padding", {1, 1})
            .scalar("ceil_mode", false)
            .scalar("count_include_pad", false)
            .none("divisor_override")
            .run();
      },
      {"grad_output does not have the pooled size", "[1, 1, 3, 3]"});
}

TEST(Backward, AdaptiveAvgPool2dBackwardMatchesTorch) {
  Tensor r = OpRunner("aten._adaptive_avg_pool2d_backward.default")
                 .tensor("grad_output", gen({1, 2, 3, 2}, 3, 5, 2, 3.0))
                 .tensor("self", gen({1, 2, 5, 4}))
                 .run1();
  EXPECT_TRUE(
      matches(r, DType::kFloat32, {1, 2, 5, 4},
              {-0.1666667, -0.1666667, 0.0833333,  0.0833333, -0.2222222, -0.2222222, 0.1944444,
               0.1944444,  -0.0555556, -0.0555556, 0.1111111, 0.1111111,  -0.0555556, -0.0555556,
               -0.0555556, -0.0555556, 0.0,        0.0,       -0.1666667, -0.1666667, 0.0833333,
               0.0833333,  -0.0833333, -0.0833333, 0.1944444, 0.1944444,  -0.0833333, -0.0833333,
               0.1111111,  0.1111111,  0.0,        0.0,       -0.0555556, -0.0555556, 0.0833333,
               0.0833333,  -0.1666667, -0.1666667, 0.0833333, 0.0833333}));
  expect_error(
      [&] {
        OpRunner("aten._adaptive_avg_pool2d_backward.default")
            .tensor("grad_output", gen({2, 3, 2}))
            .tensor("self", gen({1, 2, 5, 4}))
            .run();
      },
      {"grad_output must have the input's rank"});
}

OpRunner max_bwd(const Tensor& idx) {
  OpRunner r("aten.max_pool2d_with_indices_backward.default");
  r.tensor("grad_output", gen({1, 1, 2, 2}, 3, 5, 2, 3.0))
      .tensor("self", gen({1, 1, 4, 4}))
      .ints("kernel_size", {2, 2})
      .ints("stride", {2, 2})
      .ints("padding", {0, 0})
      .ints("dilation", {1, 1})
      .scalar("ceil_mode", false)
      .tensor("indices", idx);
  return r;
}

TEST(Backward, MaxPool2dWithIndicesBackwardMatchesTorch) {
  Tensor r = max_bwd(i64({1, 1, 2, 2}, {1, 3, 9, 14})).run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {1, 1, 4, 4},
                      {0.0, -0.6666667, 0.0, 0.3333333, 0.0, 0.0, 0.0, 0.0, 0.0, -0.3333333, 0.0,
                       0.0, 0.0, 0.0, 0.6666667, 0.0}));
  expect_error(
      [&] {
        max_bwd(i64({1, 1, 2, 2}, {1, 3, 16, 14})).run();
      },
      {"an index is outside the input plane", "0 <= index < 16", "16"});
  expect_error(
      [&] {
        max_bwd(i64({1, 1, 4}, {1, 3, 9, 14})).run();
      },
      {"indices must be int64 with grad_output's sizes"});
}

TEST(Backward, EmbeddingDenseBackwardMatchesTorch) {
  const Tensor g = gen({2, 3, 2}), ids = i64({2, 3}, {0, 2, 2, 3, 0, 2});
  auto run = [&](int64_t pad, bool scale) {
    return OpRunner("aten.embedding_dense_backward.default")
        .tensor("grad_output", g)
        .tensor("indices", ids)
        .scalar("num_weights", int64_t{4})
        .scalar("padding_idx", pad)
        .scalar("scale_grad_by_freq", scale)
        .run1();
  };
  EXPECT_TRUE(matches(run(2, true), DType::kFloat32, {4, 2}, {-1.125, 0.625, 0, 0, 0, 0, 1, 0}));
  EXPECT_TRUE(
      matches(run(-1, false), DType::kFloat32, {4, 2}, {-2.25, 1.25, 0, 0, -0.5, -0.75, 1, 0}));
  expect_error(
      [&] {
        OpRunner("aten.embedding_dense_backward.default")
            .tensor("grad_output", g)
            .tensor("indices", ids)
            .scalar("num_weights", int64_t{3})
            .scalar("padding_idx", int64_t{-1})
            .scalar("scale_grad_by_freq", false)
            .run();
      },
      {"an index is out of range", "0 <= index < 3"});
  expect_error(
      [&] {
        OpRunner("aten.embedding_dense_backward.default")
            .tensor("grad_output", gen({2, 2, 2}))
            .tensor("indices", ids)
            .scalar("num_weights", int64_t{4})
            .scalar("padding_idx", int64_t{-1})
            .scalar("scale_grad_by_freq", false)
            .run();
      },
      {"grad_output's leading sizes must be the indices' sizes"});
}

TEST(Backward, LayerNormBackwardMatchesTorch) {
  const Tensor x = gen({2, 2, 3}), g = gen({2, 2, 3}, 3, 5, 2, 3.0);
  const Tensor w = f32({3}, {0.5, 1.0, 1.5}), b = f32({3}, {0.1, 0.2, 0.3});
  const Tensor m = f32({2, 2, 1}, {-0.4166667, 0.25, 0.0, -0.25});
  const Tensor rs = f32({2, 2, 1}, {1.394958, 1.2247356, 1.2247356, 1.2247356});
  auto runner = [&](std::vector<int64_t> norm) {
    OpRunner r("aten.native_layer_norm_backward.default");
    r.tensor("grad_out", g)
        .tensor("input", x)
        .ints("normalized_shape", norm)
        .tensor("mean", m)
        .tensor("rstd", rs)
        .tensor("weight", w)
        .tensor("bias", b)
        .bools("output_mask", {true, true, true});
    return r;
  };
  auto r = runner({3}).run();
  EXPECT_TRUE(matches(tensor_of(r, 0), DType::kFloat32, {2, 2, 3},
                      {0.2387674, 0.1790926, -0.4178599, -0.1360694, 0.2721635, -0.1360942,
                       0.3742171, -0.7484496, 0.3742325, 0.3742202, -0.7484496, 0.3742294}));
  EXPECT_TRUE(matches(tensor_of(r, 1), DType::kFloat32, {3}, {1.9997123, 0.4262372, -0.3694963}));
  EXPECT_TRUE(matches(tensor_of(r, 2), DType::kFloat32, {3}, {0.3333333, -0.6666666, 0.0}));
  expect_error([&] { runner({4}).run(); }, {"normalized_shape does not match"});
  // bfloat16: computed in double, rounded once to bf16 (within bf16's tolerance of the values)
  auto h = OpRunner("aten.native_layer_norm_backward.default")
               .tensor("grad_out", g.to(DType::kBFloat16))
               .tensor("input", x.to(DType::kBFloat16))
               .ints("normalized_shape", {3})
               .tensor("mean", m.to(DType::kBFloat16))
               .tensor("rstd", rs.to(DType::kBFloat16))
               .tensor("weight", w.to(DType::kBFloat16))
               .none("bias")
               .bools("output_mask", {true, true, false})
               .run();
  EXPECT_TRUE(matches(tensor_of(h, 1), DType::kBFloat16, {3}, {1.9997123, 0.4262372, -0.3694963}));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(h[2]));
}

TEST(Backward, GroupNormBackwardMatchesTorch) {
  const Tensor x = gen({2, 4, 3}), g = gen({2, 4, 3}, 3, 5, 2, 3.0);
  const Tensor w = f32({4}, {0.5, 1.0, 1.5, 2.0});
  const Tensor m = f32({2, 2}, {-0.0833333, -0.125, 0.2916667, -0.2083333});
  const Tensor rs = f32({2, 2}, {1.1940361, 1.210631, 1.374223, 1.374223});
  auto runner = [&](int64_t c) {
    OpRunner r("aten.native_group_norm_backward.default");
    r.tensor("grad_out", g)
        .tensor("input", x)
        .tensor("mean", m)
        .tensor("rstd", rs)
        .tensor("weight", w)
        .scalar("N", int64_t{2})
        .scalar("C", c)
        .scalar("HxW", int64_t{3})
        .scalar("group", int64_t{2})
        .bools("output_mask", {true, true, true});
    return r;
  };
  auto r = runner(4).run();
  EXPECT_TRUE(matches(tensor_of(r, 0), DType::kFloat32, {2, 4, 3},
                      {0.2935743,  -0.0472841, 0.0906332,  0.1477869,  -0.1123078, -0.3724025,
                       0.8568839,  -0.6371478, 0.8953983,  0.1807182,  -1.7168571, 0.4210044,
                       -0.0375485, 0.2801067,  0.4685808,  -0.8170241, 0.1877427,  -0.0818576,
                       0.9912444,  -0.0105188, -2.0365469, 0.6262849,  -0.8335525, 1.2630887}));
  EXPECT_TRUE(
      matches(tensor_of(r, 1), DType::kFloat32, {4}, {0.5059903, 0.828591, -0.9897692, 0.7539123}));
  EXPECT_TRUE(matches(tensor_of(r, 2), DType::kFloat32, {4},
                      {-0.3333333, -0.6666667, 0.6666667, 0.3333333}));
  expect_error([&] { runner(6).run(); }, {"C does not match the input"});
}

// _native_batch_norm_legit.default: batch statistics, and the running statistics written in place.
TEST(Backward, BatchNormLegitUpdatesRunningStatsInPlace) {
  const Tensor x = gen({3, 2, 2});
  Tensor rm = f32({2}, {0.1, -0.1}), rv = f32({2}, {1.0, 2.0});
  auto runner = [&](bool training) {
    OpRunner r("aten._native_batch_norm_legit.default");
    r.tensor("input", x)
        .tensor("weight", f32({2}, {0.5, 2.0}))
        .none("bias")
        .tensor("running_mean", rm)
        .tensor("running_var", rv)
        .scalar("training", training)
        .scalar("momentum", 0.1)
        .scalar("eps", 1e-5);
    return r;
  };
  auto r = runner(true).run();
  EXPECT_TRUE(matches(tensor_of(r, 0), DType::kFloat32, {3, 2, 2},
                      {-0.6432622, 0.4824467, -1.2611767, 2.8133941, 0.3216311, -0.3216311,
                       2.2313128, -0.0970136, -0.4824467, 0.6432622, -0.6790951, -3.0074215}));
  EXPECT_TRUE(matches(tensor_of(r, 1), DType::kFloat32, {2}, {-0.25, 0.0416667}));
  EXPECT_TRUE(matches(tensor_of(r, 2), DType::kFloat32, {2}, {1.2865244, 1.1641631}));
  EXPECT_TRUE(matches(rm, DType::kFloat32, {2}, {0.065, -0.0858333}));
  EXPECT_TRUE(matches(rv, DType::kFloat32, {2}, {0.9725, 1.8885416}));
  expect_error([&] { runner(false).run(); },
               {"_native_batch_norm_legit_no_training", "training=False"});
}

TEST(Backward, BatchNormFunctionalAndNoStats) {
  const Tensor x = gen({3, 2, 2});
  const Tensor rm = f32({2}, {0.1, -0.1}), rv = f32({2}, {1.0, 2.0});
  auto f = OpRunner("aten._native_batch_norm_legit_functional.default")
               .tensor("input", x)
               .tensor("weight", f32({2}, {0.5, 2.0}))
               .none("bias")
               .tensor("running_mean", rm)
               .tensor("running_var", rv)
               .scalar("training", true)
               .scalar("momentum", 0.1)
               .scalar("eps", 1e-5)
               .run();
  ASSERT_EQ(f.size(), 5u);
  EXPECT_TRUE(matches(tensor_of(f, 3), DType::kFloat32, {2}, {0.065, -0.0858333}));
  EXPECT_TRUE(matches(tensor_of(f, 4), DType::kFloat32, {2}, {0.9725, 1.8885416}));
  EXPECT_TRUE(
      matches(rm, DType::kFloat32, {2}, {0.1, -0.1}));  // the functional form writes nothing
  auto n = OpRunner("aten._native_batch_norm_legit.no_stats")
               .tensor("input", x)
               .tensor("weight", f32({2}, {0.5, 2.0}))
               .none("bias")
               .scalar("training", true)
               .scalar("momentum", 0.1)
               .scalar("eps", 1e-5)
               .run();
  EXPECT_TRUE(matches(tensor_of(n, 1), DType::kFloat32, {2}, {-0.25, 0.0416667}));
  expect_error(
      [&] {
        OpRunner("aten._native_batch_norm_legit.no_stats")
            .tensor("input", gen({1, 2, 1}))
            .none("weight")
            .none("bias")
            .scalar("training", true)
            .scalar("momentum", 0.1)
            .scalar("eps", 1e-5)
            .run();
      },
      {"more than one value per channel"});
}

TEST(Backward, RandpermIsASeededPermutation) {
  auto perm = [](int64_t n, DType dt) {
    return OpRunner("aten.randperm.default").scalar("n", n).dtype("dtype", dt).run1();
  };
  default_generator().manual_seed(3);
  const Tensor a = perm(50, DType::kInt64);
  default_generator().manual_seed(3);
  const Tensor b = perm(50, DType::kInt64);
  EXPECT_EQ(a.to_doubles(), b.to_doubles());
  std::vector<double> v = a.to_doubles(), sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_NE(v, sorted);  // shuffled (one chance in 50! of failing by luck)
  const Tensor c = perm(7, DType::kInt32);
  EXPECT_EQ(c.dtype(), DType::kInt32);
  EXPECT_EQ(c.sizes(), Shape({7}));
  expect_error([&] { perm(200, DType::kInt8); },
               {"n is too large for the result dtype", "n <= 128"});
  expect_error([&] { perm(3, DType::kBool); }, {"randperm needs an integer or floating dtype"});
}

TEST(Backward, EmbeddingBagInternalMatchesThePaddingIdxForm) {
  const Tensor w = gen({5, 3}), ids = i64({6}, {1, 2, 4, 2, 0, 3}), offs = i64({3}, {0, 2, 2});
  auto run = [&](const char* target, int64_t mode) {
    return OpRunner(target)
        .tensor("weight", w)
        .tensor("indices", ids)
        .tensor("offsets", offs)
        .scalar("scale_grad_by_freq", false)
        .scalar("mode", mode)
        .scalar("sparse", false)
        .none("per_sample_weights")
        .scalar("include_last_offset", false)
        .scalar("padding_idx", int64_t{2})
        .run();
  };
  for (int64_t mode : {0, 1, 2}) {
    auto a = run("aten._embedding_bag.default", mode);
    auto b = run("aten.embedding_bag.padding_idx", mode);
    for (size_t k = 0; k < 4; ++k)
      EXPECT_TRUE(matches(tensor_of(a, k), tensor_of(b, k))) << mode << " " << k;
  }
}

TEST(Backward, FftR2cC2rMatchTorch) {
  const Tensor s = gen({2, 5});
  auto r2c = [&](std::vector<int64_t> dims, int64_t norm, bool onesided, const Tensor& in) {
    return OpRunner("aten._fft_r2c.default")
        .tensor("self", in)
        .ints("dim", dims)
        .scalar("normalization", norm)
        .scalar("onesided", onesided)
        .run1();
  };
  auto as_real = [](const Tensor& c) {
    return OpRunner("aten.view_as_real.default").tensor("self", c).run1();
  };
  EXPECT_TRUE(matches(as_real(r2c({1}, 1, true, s)), DType::kFloat32, {2, 3, 2},
                      {0.1118034, 0.0, -0.7267221, 0.3536834, -0.7267221, -0.8100359, 0.0, 0.0,
                       0.2682373, -0.3691969, -1.1067628, 0.359609}));
  EXPECT_TRUE(
      matches(as_real(r2c({0, 1}, 2, false, s)), DType::kFloat32, {2, 5, 2},
              {0.025,     0.0,        -0.1025203, -0.0034689, -0.4099797, -0.1007185, -0.4099797,
               0.1007185, -0.1025203, 0.0034689,  0.025,      0.0,        -0.2224797, 0.1616409,
               0.0849797, -0.2615406, 0.0849797,  0.2615406,  -0.2224797, -0.1616409}));
  const Tensor c = r2c({1}, 0, true, s);
  Tensor back = OpRunner("aten._fft_c2r.default")
                    .tensor("self", c)
                    .ints("dim", {1})
                    .scalar("normalization", int64_t{2})
                    .scalar("last_dim_size", int64_t{5})
                    .run1();
  EXPECT_TRUE(matches(back, DType::kFloat32, {2, 5},
                      {-1.25, 0.5000001, -0.5, 1.25, 0.25, -0.75, 1.0, -0.0, -1.0, 0.75}));
  expect_error([&] { r2c({1}, 3, true, s); }, {"unknown FFT normalization"});
  expect_error([&] { r2c({2}, 0, true, s); }, {"FFT dim out of range"});
  expect_error(
      [&] {
        OpRunner("aten._fft_c2r.default")
            .tensor("self", s)
            .ints("dim", {1})
            .scalar("normalization", int64_t{0})
            .scalar("last_dim_size", int64_t{5})
            .run();
      },
      {"_fft_c2r expects a complex input"});
}

}  // namespace
}  // namespace anvil
