// Tests for src/ops/reduction_more.cpp and src/ops/sort.cpp: any / all, argmin, max.dim /
// min.dim, prod, the variance family, logsumexp, cumprod, sort / argsort / topk. Expected values
// come from PyTorch 2.11 (CPU), pasted in as literals; ties, NaN, empty and error cases included.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::boolean;
using testing::f32;
using testing::i32;
using testing::i64;
using testing::matches;
using testing::OpRunner;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Output `i` of a multi-output run.
Tensor out(const std::vector<ir::RValue>& outs, size_t i) { return std::get<Tensor>(outs.at(i)); }

/// [[1, nan, 3, nan], [2, 2, 1, 1]]: NaN and ties.
Tensor nan_ties() { return f32({2, 4}, {1, kNaN, 3, kNaN, 2, 2, 1, 1}); }

// ---- any / all

TEST(OpsAnyAll, EveryForm) {
  Tensor x = f32({2, 3}, {0, 1, 0, 0, 0, 0});
  EXPECT_TRUE(matches(OpRunner("aten.any.default").tensor("self", x).run1(), DType::kBool, {}, {1}));
  EXPECT_TRUE(matches(OpRunner("aten.all.default").tensor("self", x).run1(), DType::kBool, {}, {0}));
  EXPECT_TRUE(matches(OpRunner("aten.any.dims").tensor("self", x).ints("dim", {1}).run1(),
                      DType::kBool, {2}, {1, 0}));
  EXPECT_TRUE(matches(OpRunner("aten.any.dims").tensor("self", x).ints("dim", {0, 1})
                          .scalar("keepdim", true).run1(),
                      DType::kBool, {1, 1}, {1}));
  Tensor y = boolean({2, 3}, {1, 1, 0, 1, 0, 0});
  EXPECT_TRUE(matches(OpRunner("aten.all.dim").tensor("self", y).scalar("dim", 0).run1(),
                      DType::kBool, {3}, {1, 0, 0}));
  // uint8 in, uint8 out (torch keeps uint8 for any / all)
  Tensor u = testing::make_tensor(DType::kUInt8, {3}, {0, 1, 2});
  EXPECT_TRUE(matches(OpRunner("aten.any.default").tensor("self", u).run1(), DType::kUInt8, {}, {1}));
  EXPECT_TRUE(matches(OpRunner("aten.all.default").tensor("self", u).run1(), DType::kUInt8, {}, {0}));
  // empty reductions: any False, all True; NaN counts as True
  Tensor e = f32({2, 0}, {});
  EXPECT_TRUE(matches(OpRunner("aten.any.dims").tensor("self", e).ints("dim", {1}).run1(),
                      DType::kBool, {2}, {0, 0}));
  EXPECT_TRUE(matches(OpRunner("aten.all.dim").tensor("self", e).scalar("dim", 1).run1(),
                      DType::kBool, {2}, {1, 1}));
  EXPECT_TRUE(matches(OpRunner("aten.all.default").tensor("self", f32({1}, {kNaN})).run1(),
                      DType::kBool, {}, {1}));
}

// ---- argmin / max.dim / min.dim

TEST(OpsArgmin, TiesNanFlattenedErrors) {
  EXPECT_TRUE(matches(OpRunner("aten.argmin.default")
                          .tensor("self", f32({2, 3}, {3, 1, 1, kNaN, 2, kNaN}))
                          .scalar("dim", 1).run1(),
                      DType::kInt64, {2}, {1, 0}));
  Tensor x = f32({2, 2}, {3, 1, 0, 0});
  EXPECT_TRUE(matches(OpRunner("aten.argmin.default").tensor("self", x).run1(), DType::kInt64, {},
                      {2}));
  EXPECT_TRUE(matches(OpRunner("aten.argmin.default").tensor("self", x).scalar("keepdim", true)
                          .run1(),
                      DType::kInt64, {1, 1}, {2}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.argmin.default").tensor("self", boolean({2}, {1, 0})).run1(),
                     "argmin is not defined for bool tensors");
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.argmin.default").tensor("self", f32({0, 3}, {})).scalar("dim", 0).run1(),
      "expected reduction dim to have non-zero size");
}

TEST(OpsMaxMinDim, ValuesAndFirstIndexNanWins) {
  auto mx = OpRunner("aten.max.dim").tensor("self", nan_ties()).scalar("dim", 1).run();
  EXPECT_TRUE(matches(out(mx, 0), DType::kFloat32, {2}, {kNaN, 2}));
  EXPECT_TRUE(matches(out(mx, 1), DType::kInt64, {2}, {1, 0}));
  auto mn = OpRunner("aten.min.dim").tensor("self", nan_ties()).scalar("dim", 1).run();
  EXPECT_TRUE(matches(out(mn, 0), DType::kFloat32, {2}, {kNaN, 1}));
  EXPECT_TRUE(matches(out(mn, 1), DType::kInt64, {2}, {1, 2}));
  auto k = OpRunner("aten.max.dim").tensor("self", nan_ties()).scalar("dim", 0)
               .scalar("keepdim", true).run();
  EXPECT_TRUE(matches(out(k, 0), DType::kFloat32, {1, 4}, {2, kNaN, 3, kNaN}));
  EXPECT_TRUE(matches(out(k, 1), DType::kInt64, {1, 4}, {1, 0, 0, 0}));
  // an empty reduced dim is an error unless there is nothing to reduce into
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.max.dim").tensor("self", f32({0, 3}, {})).scalar("dim", 0).run(),
      "expected reduction dim to have non-zero size");
  auto e = OpRunner("aten.max.dim").tensor("self", f32({0, 3}, {})).scalar("dim", 1).run();
  EXPECT_TRUE(matches(out(e, 1), DType::kInt64, {0}, {}));
}

// ---- prod

TEST(OpsProd, DefaultDimIntegerEmpty) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(matches(OpRunner("aten.prod.default").tensor("self", x).run1(), DType::kFloat32, {},
                      {720}));
  EXPECT_TRUE(matches(OpRunner("aten.prod.dim_int").tensor("self", x).scalar("dim", 1).run1(),
                      DType::kFloat32, {2}, {6, 120}));
  EXPECT_TRUE(matches(OpRunner("aten.prod.default").tensor("self", i32({2}, {2, 3})).run1(),
                      DType::kInt64, {}, {6}));
  EXPECT_TRUE(matches(OpRunner("aten.prod.default").tensor("self", f32({0}, {})).run1(),
                      DType::kFloat32, {}, {1}));
}

// ---- var / std / var_mean / std_mean

TEST(OpsVariance, CorrectionUnbiasedAndMean) {
  Tensor x = f32({2, 3}, {1, 2, 4, 3, 5, 9});
  EXPECT_TRUE(matches(OpRunner("aten.var.correction").tensor("self", x).ints("dim", {1}).run1(),
                      DType::kFloat32, {2}, {2.3333333, 9.3333330}));
  EXPECT_TRUE(matches(OpRunner("aten.var.correction").tensor("self", x).run1(), DType::kFloat32,
                      {}, {8.0}));
  EXPECT_TRUE(matches(OpRunner("aten.var.correction").tensor("self", x).ints("dim", {1})
                          .scalar("correction", 0.5).run1(),
                      DType::kFloat32, {2}, {1.8666667, 7.4666667}));
  EXPECT_TRUE(matches(OpRunner("aten.var.dim").tensor("self", x).ints("dim", {1})
                          .scalar("unbiased", false).run1(),
                      DType::kFloat32, {2}, {1.5555556, 6.2222223}));
  EXPECT_TRUE(matches(OpRunner("aten.std.dim").tensor("self", x).ints("dim", {0}).run1(),
                      DType::kFloat32, {3}, {1.4142135, 2.1213202, 3.5355339}));
  EXPECT_TRUE(matches(OpRunner("aten.std.correction").tensor("self", x).ints("dim", {1})
                          .scalar("correction", 2).run1(),
                      DType::kFloat32, {2}, {2.1602468, 4.3204937}));
  auto vm = OpRunner("aten.var_mean.correction").tensor("self", x).ints("dim", {1})
                .scalar("correction", 0).scalar("keepdim", true).run();
  EXPECT_TRUE(matches(out(vm, 0), DType::kFloat32, {2, 1}, {1.5555556, 6.2222223}));
  EXPECT_TRUE(matches(out(vm, 1), DType::kFloat32, {2, 1}, {2.3333333, 5.6666665}));
  // one element with correction 1: 0 / 0 = NaN, as in torch
  EXPECT_TRUE(matches(OpRunner("aten.var.correction").tensor("self", f32({1}, {1})).run1(),
                      DType::kFloat32, {}, {kNaN}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.var.correction").tensor("self", i64({2}, {1, 2})).run1(),
                     "std and var only support floating point");
}

// ---- logsumexp

TEST(OpsLogsumexp, InfinitiesNanAndIntegers) {
  Tensor x = f32({3, 3}, {1, 2, 3, -kInf, -kInf, -kInf, kInf, 1, 2});
  EXPECT_TRUE(matches(OpRunner("aten.logsumexp.default").tensor("self", x).ints("dim", {1}).run1(),
                      DType::kFloat32, {3}, {3.4076059, -kInf, kInf}));
  EXPECT_TRUE(matches(OpRunner("aten.logsumexp.default").tensor("self", f32({2, 2}, {1, 2, 3, kNaN}))
                          .ints("dim", {0}).scalar("keepdim", true).run1(),
                      DType::kFloat32, {1, 2}, {3.1269281, kNaN}));
  EXPECT_TRUE(matches(OpRunner("aten.logsumexp.default").tensor("self", i64({3}, {1, 2, 3}))
                          .ints("dim", {0}).run1(),
                      DType::kFloat32, {}, {3.4076059}));
}

// ---- cumprod

TEST(OpsCumprod, FloatAndInteger) {
  EXPECT_TRUE(matches(OpRunner("aten.cumprod.default").tensor("self", f32({2, 3}, {1, 2, 3, 4, 5, 0.5}))
                          .scalar("dim", 1).run1(),
                      DType::kFloat32, {2, 3}, {1, 2, 6, 4, 20, 10}));
  EXPECT_TRUE(matches(OpRunner("aten.cumprod.default").tensor("self", i32({3}, {1, 2, 3}))
                          .scalar("dim", 0).run1(),
                      DType::kInt64, {3}, {1, 2, 6}));
}

// ---- sort / argsort / topk

TEST(OpsSort, StableNanLastAscendingFirstDescending) {
  auto a = OpRunner("aten.sort.default").tensor("self", nan_ties()).scalar("dim", 1).run();
  EXPECT_TRUE(matches(out(a, 0), DType::kFloat32, {2, 4}, {1, 3, kNaN, kNaN, 1, 1, 2, 2}));
  EXPECT_TRUE(matches(out(a, 1), DType::kInt64, {2, 4}, {0, 2, 1, 3, 2, 3, 0, 1}));
  auto d = OpRunner("aten.sort.default").tensor("self", nan_ties()).scalar("dim", 1)
               .scalar("descending", true).run();
  EXPECT_TRUE(matches(out(d, 0), DType::kFloat32, {2, 4}, {kNaN, kNaN, 3, 1, 2, 2, 1, 1}));
  EXPECT_TRUE(matches(out(d, 1), DType::kInt64, {2, 4}, {1, 3, 2, 0, 0, 1, 2, 3}));
  Tensor z = f32({2, 4}, {0.5, -1, 3, 2, 4, -2, 0, 1});
  EXPECT_TRUE(matches(OpRunner("aten.argsort.default").tensor("self", z).scalar("dim", 0)
                          .scalar("descending", true).run1(),
                      DType::kInt64, {2, 4}, {1, 0, 0, 0, 0, 1, 1, 1}));
  EXPECT_TRUE(matches(OpRunner("aten.argsort.stable").tensor("self", nan_ties())
                          .scalar("stable", true).run1(),
                      DType::kInt64, {2, 4}, {0, 2, 1, 3, 2, 3, 0, 1}));
}

TEST(OpsTopk, LargestSmallestAndRange) {
  Tensor z = f32({2, 4}, {0.5, -1, 3, 2, 4, -2, 0, 1});
  auto t = OpRunner("aten.topk.default").tensor("self", z).scalar("k", 2).run();
  EXPECT_TRUE(matches(out(t, 0), DType::kFloat32, {2, 2}, {3, 2, 4, 1}));
  EXPECT_TRUE(matches(out(t, 1), DType::kInt64, {2, 2}, {2, 3, 0, 3}));
  auto s = OpRunner("aten.topk.default").tensor("self", z).scalar("k", 3).scalar("dim", 1)
               .scalar("largest", false).run();
  EXPECT_TRUE(matches(out(s, 0), DType::kFloat32, {2, 3}, {-1, 0.5, 2, -2, 0, 1}));
  EXPECT_TRUE(matches(out(s, 1), DType::kInt64, {2, 3}, {1, 0, 3, 1, 2, 3}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.topk.default").tensor("self", z).scalar("k", 5).run(),
                     "selected index k out of range");
}

}  // namespace
}  // namespace anvil
