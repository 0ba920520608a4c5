// Tests for the core-ATen forms of issue 18 outside the reductions: native_layer_norm /
// native_group_norm (with mean and rstd), _log_softmax, native_dropout, _adaptive_avg_pool2d,
// diagonal, select_scatter / slice_scatter, copy, masked_scatter, empty_strided and
// _local_scalar_dense. Expected values from PyTorch 2.11 (CPU), pasted in as literals.
#include <gtest/gtest.h>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::boolean;
using testing::f32;
using testing::i32;
using testing::matches;
using testing::OpRunner;

Tensor out(const std::vector<ir::RValue>& outs, size_t i) { return std::get<Tensor>(outs.at(i)); }

/// torch.arange(12.).reshape(3, 4).
Tensor a34() {
  std::vector<double> v;
  for (int i = 0; i < 12; ++i) v.push_back(i);
  return f32({3, 4}, v);
}

TEST(OpsNativeNorms, LayerNormMeanRstd) {
  auto r = OpRunner("aten.native_layer_norm.default")
               .tensor("input", f32({2, 3}, {1, 2, 3, 4, 6, 8}))
               .ints("normalized_shape", {3})
               .tensor("weight", f32({3}, {1, 2, 0.5}))
               .tensor("bias", f32({3}, {0, 1, 0}))
               .scalar("eps", 1e-5)
               .run();
  EXPECT_TRUE(matches(out(r, 0), DType::kFloat32, {2, 3},
                      {-1.2247356, 1.0, 0.6123678, -1.2247427, 1.0, 0.6123713}));
  EXPECT_TRUE(matches(out(r, 1), DType::kFloat32, {2, 1}, {2, 6}));
  EXPECT_TRUE(matches(out(r, 2), DType::kFloat32, {2, 1}, {1.2247356, 0.6123713}));
}

TEST(OpsNativeNorms, GroupNormMeanRstd) {
  auto r = OpRunner("aten.native_group_norm.default")
               .tensor("input", f32({1, 4, 2}, {1, 2, 2, 3, 3, 1, 5, 0}))
               .tensor("weight", f32({4}, {1, 2, 1, 0.5}))
               .tensor("bias", f32({4}, {0, 0, 1, 0}))
               .scalar("N", 1).scalar("C", 4).scalar("HxW", 2).scalar("group", 2)
               .scalar("eps", 1e-5)
               .run();
  EXPECT_TRUE(matches(out(r, 0), DType::kFloat32, {1, 4, 2},
                      {-1.4141995, 0, 0, 2.8283989, 1.3905662, 0.3490563, 0.7160380, -0.5858493}));
  EXPECT_TRUE(matches(out(r, 1), DType::kFloat32, {1, 2}, {2.0, 2.25}));
  EXPECT_TRUE(matches(out(r, 2), DType::kFloat32, {1, 2}, {1.4141995, 0.5207549}));
}

TEST(OpsNativeNorms, LogSoftmaxInternal) {
  EXPECT_TRUE(matches(OpRunner("aten._log_softmax.default").tensor("self", f32({1, 3}, {1, 2, 3}))
                          .scalar("dim", 1).scalar("half_to_float", false).run1(),
                      DType::kFloat32, {1, 3}, {-2.4076059, -1.4076059, -0.4076059}));
}

TEST(OpsNativeDropout, InferenceOnly) {
  Tensor x = f32({2}, {1.5, -2});
  auto r = OpRunner("aten.native_dropout.default").tensor("input", x).scalar("p", 0.5)
               .scalar("train", false).run();
  EXPECT_TRUE(matches(out(r, 0), DType::kFloat32, {2}, {1.5, -2}));
  EXPECT_TRUE(matches(out(r, 1), DType::kBool, {2}, {1, 1}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.native_dropout.default").tensor("input", x).scalar("p", 0.5)
                         .scalar("train", true).run(),
                     "train=True and p > 0 is not supported");
}

TEST(OpsAdaptiveAvgPool, InternalName) {
  EXPECT_TRUE(matches(OpRunner("aten._adaptive_avg_pool2d.default")
                          .tensor("self", a34().reshape({1, 3, 4}))
                          .ints("output_size", {2, 3}).run1(),
                      DType::kFloat32, {1, 2, 3}, {2.5, 3.5, 4.5, 6.5, 7.5, 8.5}));
}

TEST(OpsDiagonal, OffsetsAndDims) {
  EXPECT_TRUE(matches(OpRunner("aten.diagonal.default").tensor("self", a34()).scalar("offset", 1)
                          .run1(),
                      DType::kFloat32, {3}, {1, 6, 11}));
  EXPECT_TRUE(matches(OpRunner("aten.diagonal.default").tensor("self", a34()).scalar("offset", -1)
                          .run1(),
                      DType::kFloat32, {2}, {4, 9}));
  std::vector<double> v;
  for (int i = 0; i < 24; ++i) v.push_back(i);
  Tensor b = f32({2, 3, 4}, v);
  EXPECT_TRUE(matches(OpRunner("aten.diagonal.default").tensor("self", b).scalar("dim1", 1)
                          .scalar("dim2", 2).run1(),
                      DType::kFloat32, {2, 3}, {0, 5, 10, 12, 17, 22}));
  EXPECT_TRUE(matches(OpRunner("aten.diagonal.default").tensor("self", b).scalar("offset", 1)
                          .scalar("dim1", 2).scalar("dim2", 0).run1(),
                      DType::kFloat32, {3, 1}, {12, 16, 20}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.diagonal.default").tensor("self", b).scalar("dim1", 1)
                         .scalar("dim2", -2).run1(),
                     "diagonal dimensions cannot be identical");
}

TEST(OpsScatterViews, SelectAndSliceScatter) {
  EXPECT_TRUE(matches(OpRunner("aten.select_scatter.default").tensor("self", a34())
                          .tensor("src", f32({3}, {-1, -2, -3})).scalar("dim", 1)
                          .scalar("index", -2).run1(),
                      DType::kFloat32, {3, 4}, {0, 1, -1, 3, 4, 5, -2, 7, 8, 9, -3, 11}));
  EXPECT_TRUE(matches(OpRunner("aten.slice_scatter.default").tensor("self", a34())
                          .tensor("src", f32({3, 2}, {-1, -2, -3, -4, -5, -6})).scalar("dim", 1)
                          .scalar("start", 0).none("end").scalar("step", 2).run1(),
                      DType::kFloat32, {3, 4}, {-1, 1, -2, 3, -3, 5, -4, 7, -5, 9, -6, 11}));
  EXPECT_TRUE(matches(OpRunner("aten.slice_scatter.default").tensor("self", a34())
                          .tensor("src", f32({1, 4}, {-1, -2, -3, -4})).scalar("start", -1)
                          .run1(),
                      DType::kFloat32, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, -1, -2, -3, -4}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.select_scatter.default").tensor("self", a34())
                         .tensor("src", f32({4}, {1, 2, 3, 4})).scalar("dim", 1)
                         .scalar("index", 0).run1(),
                     "src must have the sizes of the slice it replaces");
}

TEST(OpsScatterViews, CopyBroadcastsAndCasts) {
  EXPECT_TRUE(matches(OpRunner("aten.copy.default").tensor("self", i32({2, 3}, {0, 0, 0, 0, 0, 0}))
                          .tensor("src", f32({3}, {1.7, -2.2, 3.9})).run1(),
                      DType::kInt32, {2, 3}, {1, -2, 3, 1, -2, 3}));
}

TEST(OpsScatterViews, MaskedScatter) {
  Tensor m = boolean({2, 3}, {1, 0, 1, 0, 1, 0});
  Tensor src = f32({4}, {10, 20, 30, 40});
  EXPECT_TRUE(matches(OpRunner("aten.masked_scatter.default")
                          .tensor("self", f32({2, 3}, {1, 2, 3, 4, 5, 6})).tensor("mask", m)
                          .tensor("source", src).run1(),
                      DType::kFloat32, {2, 3}, {10, 2, 20, 4, 30, 6}));
  EXPECT_TRUE(matches(OpRunner("aten.masked_scatter.default").tensor("self", f32({3}, {0, 0, 0}))
                          .tensor("mask", m).tensor("source", src).run1(),
                      DType::kFloat32, {2, 3}, {10, 0, 20, 0, 30, 0}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.masked_scatter.default").tensor("self", f32({3}, {0, 0, 0}))
                         .tensor("mask", m).tensor("source", f32({2}, {1, 2})).run1(),
                     "source has fewer elements than mask has True values");
}

TEST(OpsCreation, EmptyStridedIsZeroFilled) {
  EXPECT_TRUE(matches(OpRunner("aten.empty_strided.default").ints("size", {2, 3})
                          .ints("stride", {1, 2}).run1(),
                      DType::kFloat32, {2, 3}, {0, 0, 0, 0, 0, 0}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.empty_strided.default").ints("size", {2, 3})
                         .ints("stride", {1}).run1(),
                     "size and stride must have the same length");
}

TEST(OpsLocalScalarDense, LikeItem) {
  auto r = OpRunner("aten._local_scalar_dense.default").tensor("self", i32({1}, {7})).run();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(std::get<int64_t>(r[0]), 7);
}

}  // namespace
}  // namespace anvil
