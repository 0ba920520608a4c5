// Tests for the reduction family (src/ops/reduction.cpp and src/ops/norm.cpp): sum, mean,
// amax/amin, argmax, any, cumsum, diff, softmax/_softmax/log_softmax, layer_norm, batch_norm and
// _native_batch_norm_legit_no_training. Expected values come from PyTorch (1.13 CPU; bf16 values
// computed in float and rounded once, which is what PyTorch 2.x does), pasted in as literals.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::bf16;
using testing::boolean;
using testing::f32;
using testing::i32;
using testing::i64;
using testing::matches;
using testing::OpRunner;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Values start + i * step for i in [0, n).
std::vector<double> ramp(int n, double step, double start) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(start + i * step);
  return v;
}

/// x = torch.arange(24.).reshape(2, 3, 4) * 0.37 - 3.1 (as `dtype`).
Tensor x234(DType dtype = DType::kFloat32) {
  return testing::make_tensor(dtype, {2, 3, 4}, ramp(24, 0.37, -3.1));
}

SymInt s0() { return SymInt::symbol("s0"); }

// ---- sum

TEST(Sum, DefaultFloatBf16IntBool) {
  Tensor a = f32({2, 3}, {0.5, -1.25, 3.0, 2.0, 4.5, -0.75});
  EXPECT_TRUE(
      matches(OpRunner("aten.sum.default").tensor("self", a).run1(), DType::kFloat32, {}, {8.0}));
  EXPECT_TRUE(matches(OpRunner("aten.sum.default").tensor("self", a.to(DType::kBFloat16)).run1(),
                      DType::kBFloat16, {}, {8.0}));
  // Integer and bool sums accumulate in (and return) int64.
  Tensor big = i64({3}, {4e15, 5e15, 7});
  EXPECT_TRUE(matches(OpRunner("aten.sum.default").tensor("self", big).run1(), DType::kInt64, {},
                      {9000000000000007.0}));
  EXPECT_TRUE(matches(OpRunner("aten.sum.default").tensor("self", i32({2}, {3, 4})).run1(),
                      DType::kInt64, {}, {7}));
  EXPECT_TRUE(matches(OpRunner("aten.sum.default").tensor("self", boolean({3}, {1, 0, 1})).run1(),
                      DType::kInt64, {}, {2}));
  // dtype casts the input first.
  EXPECT_TRUE(matches(OpRunner("aten.sum.default")
                          .tensor("self", i64({2}, {1, 2}))
                          .dtype("dtype", DType::kFloat32)
                          .run1(),
                      DType::kFloat32, {}, {3.0}));
}

TEST(Sum, DimListKeepdimNegativeAndNonContiguous) {
  EXPECT_TRUE(matches(OpRunner("aten.sum.dim_IntList")
                          .tensor("self", x234())
                          .ints("dim", {0, -1})
                          .scalar("keepdim", true)
                          .run1(),
                      DType::kFloat32, {1, 3, 1}, {-2.59999847, 9.24000072, 21.0799999}));
  // Transposed (non-contiguous) input, f32 and bf16.
  const std::vector<double> want = {-4.85999966, 8.46000099, -3.75,       9.56999969,
                                    -2.63999963, 10.6800003, -1.52999926, 11.7900009};
  EXPECT_TRUE(matches(OpRunner("aten.sum.dim_IntList")
                          .tensor("self", x234().transpose(0, 2))
                          .ints("dim", {1})
                          .run1(),
                      DType::kFloat32, {4, 2}, want));
  EXPECT_TRUE(matches(OpRunner("aten.sum.dim_IntList")
                          .tensor("self", x234(DType::kBFloat16).transpose(0, 2))
                          .ints("dim", {1})
                          .run1(),
                      DType::kBFloat16, {4, 2},
                      {-4.84375, 8.5, -3.75, 9.5625, -2.640625, 10.6875, -1.53125, 11.8125}));
  // int64 over a sliced input, dim given as a single negative int.
  Tensor i = i64({3, 4}, ramp(12, 1, -5)).slice(1, 1, 4, 2);  // [[-4,-2],[0,2],[4,6]]
  EXPECT_TRUE(matches(OpRunner("aten.sum.dim_IntList").tensor("self", i).scalar("dim", -2).run1(),
                      DType::kInt64, {2}, {0, 6}));
}

TEST(Sum, EmptyOrNoneDimReducesEverything) {
  EXPECT_TRUE(matches(OpRunner("aten.sum.dim_IntList")
                          .tensor("self", x234())
                          .ints("dim", {})
                          .scalar("keepdim", true)
                          .run1(),
                      DType::kFloat32, {1, 1, 1}, {27.72}));
  EXPECT_TRUE(matches(OpRunner("aten.sum.dim_IntList").tensor("self", x234()).none("dim").run1(),
                      DType::kFloat32, {}, {27.72}));
  // A 0-dim tensor accepts dim 0 / -1; an empty tensor sums to 0.
  EXPECT_TRUE(matches(
      OpRunner("aten.sum.dim_IntList").tensor("self", f32({}, {3.0})).ints("dim", {-1}).run1(),
      DType::kFloat32, {}, {3.0}));
  EXPECT_TRUE(matches(OpRunner("aten.sum.dim_IntList")
                          .tensor("self", Tensor::zeros({0, 3}, DType::kFloat32))
                          .ints("dim", {0})
                          .run1(),
                      DType::kFloat32, {3}, {0, 0, 0}));
}

TEST(Sum, Errors) {
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.sum.dim_IntList").tensor("self", x234()).ints("dim", {0, -3}).run1(),
      "dim 0 appears multiple times in the list of dims");
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.sum.dim_IntList").tensor("self", x234()).ints("dim", {3}).run1(),
      "dimension out of range (expected a dim in [-3, 2], got 3)");
}

TEST(Sum, SymbolicShape) {
  auto t = OpRunner("aten.sum.dim_IntList")
               .sym_tensor("self", DType::kBool, {s0(), 8, 2})
               .ints("dim", {1})
               .shape();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].str(), "i64[s0, 2]");
}

// ---- mean

TEST(Mean, DimFloatBf16NonContiguous) {
  EXPECT_TRUE(matches(OpRunner("aten.mean.dim")
                          .tensor("self", x234())
                          .ints("dim", {-1})
                          .scalar("keepdim", true)
                          .run1(),
                      DType::kFloat32, {2, 3, 1},
                      {-2.54499984, -1.06499982, 0.415000141, 1.89500022, 3.375, 4.85500002}));
  EXPECT_TRUE(matches(
      OpRunner("aten.mean.dim").tensor("self", x234().transpose(0, 1)).ints("dim", {0, 2}).run1(),
      DType::kFloat32, {2}, {-1.06499994, 3.37500024}));
  EXPECT_TRUE(matches(
      OpRunner("aten.mean.dim").tensor("self", x234(DType::kBFloat16)).ints("dim", {-1}).run1(),
      DType::kBFloat16, {2, 3}, {-2.546875, -1.0625, 0.416015625, 1.8984375, 3.375, 4.84375}));
  EXPECT_TRUE(matches(OpRunner("aten.mean.default")
                          .tensor("self", f32({2, 3}, {0.5, -1.25, 3.0, 2.0, 4.5, -0.75}))
                          .run1(),
                      DType::kFloat32, {}, {1.33333337}));
  // Empty reduction gives NaN.
  EXPECT_TRUE(matches(OpRunner("aten.mean.dim")
                          .tensor("self", Tensor::zeros({0, 2}, DType::kFloat32))
                          .ints("dim", {0})
                          .run1(),
                      DType::kFloat32, {2}, {kNaN, kNaN}));
}

TEST(Mean, IntegerInputNeedsFloatDtype) {
  Tensor i = i64({2, 2}, {1, 2, 3, 5});
  ANVIL_EXPECT_ERROR(OpRunner("aten.mean.dim").tensor("self", i).ints("dim", {1}).run1(),
                     "mean(): could not infer output dtype; the input must be floating");
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.mean.default").tensor("self", i).dtype("dtype", DType::kInt64).run1(),
      "mean(): could not infer output dtype; the dtype argument must be floating");
  EXPECT_TRUE(matches(OpRunner("aten.mean.dim")
                          .tensor("self", i)
                          .ints("dim", {1})
                          .scalar("keepdim", false)
                          .dtype("dtype", DType::kFloat32)
                          .run1(),
                      DType::kFloat32, {2}, {1.5, 4.0}));
}

TEST(Mean, SymbolicShape) {
  auto t = OpRunner("aten.mean.dim")
               .sym_tensor("self", DType::kFloat32, {s0(), 8})
               .ints("dim", {-1})
               .scalar("keepdim", true)
               .shape();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].str(), "f32[s0, 1]");
  auto t2 = OpRunner("aten.mean.default").sym_tensor("self", DType::kBFloat16, {s0(), 8}).shape();
  EXPECT_EQ(t2[0].str(), "bf16[]");
}

// ---- amax / amin

TEST(AmaxAmin, NaNPropagatesAndDims) {
  Tensor n = f32({2, 3}, {1.0, kNaN, 3.0, -2.0, 5.0, 0.5});
  EXPECT_TRUE(matches(OpRunner("aten.amax.default").tensor("self", n).ints("dim", {1}).run1(),
                      DType::kFloat32, {2}, {kNaN, 5.0}));
  EXPECT_TRUE(matches(OpRunner("aten.amin.default").tensor("self", n).ints("dim", {0}).run1(),
                      DType::kFloat32, {3}, {-2.0, kNaN, 0.5}));
  EXPECT_TRUE(matches(OpRunner("aten.amax.default")
                          .tensor("self", x234())
                          .ints("dim", {0, 2})
                          .scalar("keepdim", true)
                          .run1(),
                      DType::kFloat32, {1, 3, 1}, {2.45000029, 3.93000031, 5.41000032}));
  EXPECT_TRUE(matches(
      OpRunner("aten.amin.default")
          .tensor("self", x234(DType::kBFloat16).transpose(1, 2))
          .ints("dim", {-1})
          .run1(),
      DType::kBFloat16, {2, 4},
      {-3.09375, -2.734375, -2.359375, -1.9921875, 1.34375, 1.7109375, 2.078125, 2.453125}));
  Tensor i = i64({2, 3}, {3, -7, 9, 9, 2, -7});
  EXPECT_TRUE(
      matches(OpRunner("aten.amax.default").tensor("self", i).run1(), DType::kInt64, {}, {9}));
  EXPECT_TRUE(matches(OpRunner("aten.amin.default").tensor("self", i).ints("dim", {1}).run1(),
                      DType::kInt64, {2}, {-7, -7}));
}

TEST(AmaxAmin, EmptyReductionIsAnError) {
  Tensor e = Tensor::zeros({0, 3}, DType::kFloat32);
  ANVIL_EXPECT_ERROR(OpRunner("aten.amax.default").tensor("self", e).ints("dim", {0}).run1(),
                     "amax(): expected reduction dims to have non-zero size");
  // Reducing the non-empty dim of an empty tensor is fine: the result is empty.
  EXPECT_TRUE(matches(OpRunner("aten.amin.default").tensor("self", e).ints("dim", {1}).run1(),
                      DType::kFloat32, {0}, {}));
}

// ---- argmax

TEST(Argmax, FlattenDimKeepdimTiesNaN) {
  EXPECT_TRUE(matches(OpRunner("aten.argmax.default").tensor("self", x234()).run1(), DType::kInt64,
                      {}, {23}));
  EXPECT_TRUE(matches(OpRunner("aten.argmax.default")
                          .tensor("self", x234().transpose(0, 2))
                          .scalar("dim", 1)
                          .scalar("keepdim", true)
                          .run1(),
                      DType::kInt64, {4, 1, 2}, {2, 2, 2, 2, 2, 2, 2, 2}));
  Tensor i = i64({2, 3}, {3, -7, 9, 9, 2, -7});
  EXPECT_TRUE(matches(OpRunner("aten.argmax.default").tensor("self", i).scalar("dim", 1).run1(),
                      DType::kInt64, {2}, {2, 0}));
  // Ties take the first index.
  EXPECT_TRUE(matches(OpRunner("aten.argmax.default").tensor("self", i).scalar("dim", 0).run1(),
                      DType::kInt64, {3}, {1, 1, 0}));
  Tensor n = f32({2, 3}, {1.0, kNaN, 3.0, -2.0, 5.0, 0.5});
  EXPECT_TRUE(matches(OpRunner("aten.argmax.default").tensor("self", n).scalar("dim", -1).run1(),
                      DType::kInt64, {2}, {1, 1}));
  EXPECT_TRUE(matches(OpRunner("aten.argmax.default")
                          .tensor("self", x234(DType::kBFloat16))
                          .scalar("dim", -1)
                          .run1(),
                      DType::kInt64, {2, 3}, {3, 3, 3, 3, 3, 3}));
  // dim=None with keepdim keeps every dim as 1.
  EXPECT_TRUE(matches(
      OpRunner("aten.argmax.default").tensor("self", i).none("dim").scalar("keepdim", true).run1(),
      DType::kInt64, {1, 1}, {2}));
}

TEST(Argmax, BoolAndEmptyAreErrors) {
  ANVIL_EXPECT_ERROR(OpRunner("aten.argmax.default").tensor("self", boolean({2}, {0, 1})).run1(),
                     "argmax is not defined for bool tensors");
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.argmax.default").tensor("self", Tensor::zeros({0}, DType::kFloat32)).run1(),
      "argmax(): expected reduction dim to have non-zero size");
}

// ---- any.dim

TEST(AnyDim, FloatIntBool) {
  EXPECT_TRUE(matches(OpRunner("aten.any.dim")
                          .tensor("self", f32({2, 3}, {0, 0, 1, 0, 0, 0}))
                          .scalar("dim", 1)
                          .run1(),
                      DType::kBool, {2}, {1, 0}));
  EXPECT_TRUE(matches(OpRunner("aten.any.dim")
                          .tensor("self", i64({3, 2}, {0, 2, 0, 0, 0, 0}).transpose(0, 1))
                          .scalar("dim", 0)
                          .scalar("keepdim", true)
                          .run1(),
                      DType::kBool, {1, 3}, {1, 0, 0}));
  EXPECT_TRUE(matches(OpRunner("aten.any.dim")
                          .tensor("self", boolean({2, 2}, {0, 0, 0, 1}))
                          .scalar("dim", -1)
                          .run1(),
                      DType::kBool, {2}, {0, 1}));
  // NaN is truthy.
  EXPECT_TRUE(
      matches(OpRunner("aten.any.dim").tensor("self", f32({2}, {0, kNaN})).scalar("dim", 0).run1(),
              DType::kBool, {}, {1}));
}

// ---- cumsum

TEST(Cumsum, FloatBf16IntBoolDtype) {
  Tensor c = f32({2, 3}, {1.5, -2.0, 0.25, 3.0, 0.5, -1.0});
  EXPECT_TRUE(matches(OpRunner("aten.cumsum.default").tensor("self", c).scalar("dim", -1).run1(),
                      DType::kFloat32, {2, 3}, {1.5, -0.5, -0.25, 3.0, 3.5, 2.5}));
  EXPECT_TRUE(matches(
      OpRunner("aten.cumsum.default").tensor("self", c.transpose(0, 1)).scalar("dim", 1).run1(),
      DType::kFloat32, {3, 2}, {1.5, 4.5, -2.0, -1.5, 0.25, -0.75}));
  EXPECT_TRUE(matches(OpRunner("aten.cumsum.default")
                          .tensor("self", c.to(DType::kBFloat16))
                          .scalar("dim", 0)
                          .run1(),
                      DType::kBFloat16, {2, 3}, {1.5, -2.0, 0.25, 4.5, -1.5, -0.75}));
  EXPECT_TRUE(matches(OpRunner("aten.cumsum.default")
                          .tensor("self", i32({2, 2}, {1, 2, 3, 4}))
                          .scalar("dim", 0)
                          .run1(),
                      DType::kInt64, {2, 2}, {1, 2, 4, 6}));
  EXPECT_TRUE(matches(OpRunner("aten.cumsum.default")
                          .tensor("self", boolean({4}, {1, 0, 1, 1}))
                          .scalar("dim", 0)
                          .run1(),
                      DType::kInt64, {4}, {1, 1, 2, 3}));
  EXPECT_TRUE(matches(OpRunner("aten.cumsum.default")
                          .tensor("self", i64({3}, {5, -2, 7}))
                          .scalar("dim", 0)
                          .dtype("dtype", DType::kFloat32)
                          .run1(),
                      DType::kFloat32, {3}, {5.0, 3.0, 10.0}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.cumsum.default").tensor("self", c).scalar("dim", 2).run1(),
                     "dimension out of range (expected a dim in [-2, 1], got 2)");
}

TEST(Cumsum, SymbolicShape) {
  auto t = OpRunner("aten.cumsum.default")
               .sym_tensor("self", DType::kBool, {2, s0()})
               .scalar("dim", -1)
               .shape();
  EXPECT_EQ(t[0].str(), "i64[2, s0]");
}

// ---- diff

TEST(Diff, IntNPrependAppend) {
  Tensor d = i64({2, 4}, {1, 4, 9, 16, 2, 3, 5, 7});
  EXPECT_TRUE(matches(OpRunner("aten.diff.default").tensor("self", d).run1(), DType::kInt64, {2, 3},
                      {3, 5, 7, 1, 2, 2}));
  EXPECT_TRUE(matches(OpRunner("aten.diff.default").tensor("self", d).scalar("n", 2).run1(),
                      DType::kInt64, {2, 2}, {2, 2, 1, 0}));
  EXPECT_TRUE(matches(OpRunner("aten.diff.default")
                          .tensor("self", d)
                          .scalar("n", 1)
                          .scalar("dim", -1)
                          .tensor("prepend", i64({2, 1}, {0, 1}))
                          .tensor("append", i64({2, 1}, {20, 10}))
                          .run1(),
                      DType::kInt64, {2, 5}, {1, 3, 5, 7, 4, 1, 1, 2, 2, 3}));
  // n larger than the dim gives an empty result.
  EXPECT_TRUE(matches(OpRunner("aten.diff.default").tensor("self", d).scalar("n", 5).run1(),
                      DType::kInt64, {2, 0}, {}));
  // Promotion with a float prepend.
  EXPECT_TRUE(matches(OpRunner("aten.diff.default")
                          .tensor("self", i32({2}, {1, 2}))
                          .tensor("prepend", f32({1}, {1.5}))
                          .run1(),
                      DType::kFloat32, {2}, {-0.5, 1.0}));
}

TEST(Diff, FloatBf16BoolNonContiguous) {
  Tensor c = f32({2, 3}, {1.5, -2.0, 0.25, 3.0, 0.5, -1.0});
  EXPECT_TRUE(matches(
      OpRunner("aten.diff.default").tensor("self", c.transpose(0, 1)).scalar("dim", 0).run1(),
      DType::kFloat32, {2, 2}, {-3.5, -2.5, 2.25, -1.5}));
  EXPECT_TRUE(matches(OpRunner("aten.diff.default")
                          .tensor("self", c.to(DType::kBFloat16))
                          .scalar("n", 1)
                          .scalar("dim", 0)
                          .run1(),
                      DType::kBFloat16, {1, 3}, {1.5, 2.5, -1.25}));
  // Bool uses logical xor.
  EXPECT_TRUE(
      matches(OpRunner("aten.diff.default").tensor("self", boolean({4}, {1, 1, 0, 1})).run1(),
              DType::kBool, {3}, {0, 1, 1}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.diff.default").tensor("self", f32({}, {1})).run1(),
                     "diff expects a tensor with at least one dimension");
}

TEST(Diff, SymbolicShape) {
  // llama-style: diff over a symbolic dim with a one-column prepend keeps the length.
  auto t = OpRunner("aten.diff.default")
               .sym_tensor("self", DType::kInt64, {2, s0()})
               .scalar("n", 1)
               .scalar("dim", -1)
               .sym_tensor("prepend", DType::kInt64, {2, 1})
               .shape();
  EXPECT_EQ(t[0].str(), "i64[2, s0]");
}

// ---- softmax / log_softmax

const std::vector<double> kSoftRows = {1.0, 2.0, 3.0, -1.0, 0.5, 4.0};

TEST(Softmax, FloatDimsNonContiguousStable) {
  Tensor s = f32({2, 3}, kSoftRows);
  EXPECT_TRUE(matches(
      OpRunner("aten.softmax.int").tensor("self", s).scalar("dim", 1).run1(), DType::kFloat32,
      {2, 3}, {0.0900305733, 0.244728476, 0.665240943, 0.00649794331, 0.0291217621, 0.964380324}));
  EXPECT_TRUE(matches(
      OpRunner("aten.softmax.int").tensor("self", s.transpose(0, 1)).scalar("dim", 1).run1(),
      DType::kFloat32, {3, 2},
      {0.880797029, 0.119202912, 0.817574441, 0.182425514, 0.268941432, 0.731058598}));
  EXPECT_TRUE(matches(
      OpRunner("aten.softmax.int").tensor("self", s).scalar("dim", -2).run1(), DType::kFloat32,
      {2, 3}, {0.880797029, 0.817574441, 0.268941432, 0.119202919, 0.182425514, 0.731058598}));
  // Large logits: the max is subtracted, so no overflow.
  EXPECT_TRUE(matches(OpRunner("aten.softmax.int")
                          .tensor("self", f32({3}, {1000, 1001, 1002}))
                          .scalar("dim", 0)
                          .run1(),
                      DType::kFloat32, {3}, {0.0900305733, 0.244728476, 0.665240943}));
}

TEST(Softmax, Bf16AndDtypeArgument) {
  Tensor s = bf16({2, 3}, kSoftRows);
  EXPECT_TRUE(matches(
      OpRunner("aten.softmax.int").tensor("self", s).scalar("dim", -1).run1(), DType::kBFloat16,
      {2, 3}, {0.08984375, 0.245117188, 0.6640625, 0.00650024414, 0.0291748047, 0.96484375}));
  EXPECT_TRUE(
      matches(OpRunner("aten.softmax.int")
                  .tensor("self", s)
                  .scalar("dim", -1)
                  .dtype("dtype", DType::kFloat32)
                  .run1(),
              DType::kFloat32, {2, 3},
              {0.0900305733, 0.244728476, 0.665240943, 0.00649794331, 0.0291217621, 0.964380324}));
  // Integer input is an error (as in torch), unless dtype makes it floating.
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.softmax.int").tensor("self", i64({2}, {1, 2})).scalar("dim", 0).run1(),
      "softmax needs a floating dtype");
  EXPECT_TRUE(matches(OpRunner("aten.softmax.int")
                          .tensor("self", i64({2}, {1, 2}))
                          .scalar("dim", 0)
                          .dtype("dtype", DType::kFloat32)
                          .run1(),
                      DType::kFloat32, {2}, {0.268941432, 0.731058598}));
}

TEST(Softmax, InternalHalfToFloat) {
  EXPECT_TRUE(
      matches(OpRunner("aten._softmax.default")
                  .tensor("self", f32({2, 3}, kSoftRows))
                  .scalar("dim", 1)
                  .scalar("half_to_float", false)
                  .run1(),
              DType::kFloat32, {2, 3},
              {0.0900305733, 0.244728476, 0.665240943, 0.00649794331, 0.0291217621, 0.964380324}));
  EXPECT_TRUE(
      matches(OpRunner("aten._softmax.default")
                  .tensor("self", bf16({2, 3}, kSoftRows))
                  .scalar("dim", 1)
                  .scalar("half_to_float", true)
                  .run1(),
              DType::kFloat32, {2, 3},
              {0.0900305733, 0.244728476, 0.665240943, 0.00649794331, 0.0291217621, 0.964380324}));
  ANVIL_EXPECT_ERROR(OpRunner("aten._softmax.default")
                         .tensor("self", f32({2}, {1, 2}))
                         .scalar("dim", 0)
                         .scalar("half_to_float", true)
                         .run1(),
                     "half_to_float needs a 16-bit float input");
}

TEST(LogSoftmax, FloatBf16Stable) {
  EXPECT_TRUE(
      matches(OpRunner("aten.log_softmax.int")
                  .tensor("self", f32({2, 3}, kSoftRows))
                  .scalar("dim", 1)
                  .run1(),
              DType::kFloat32, {2, 3},
              {-2.40760589, -1.40760589, -0.407605946, -5.03626966, -3.53626966, -0.0362695642}));
  EXPECT_TRUE(matches(OpRunner("aten.log_softmax.int")
                          .tensor("self", f32({3}, {1000, 1001, 1002}))
                          .scalar("dim", 0)
                          .run1(),
                      DType::kFloat32, {3}, {-2.40760589, -1.40760589, -0.407605946}));
  EXPECT_TRUE(matches(OpRunner("aten.log_softmax.int")
                          .tensor("self", bf16({2, 3}, kSoftRows).transpose(0, 1))
                          .scalar("dim", 0)
                          .run1(),
                      DType::kBFloat16, {3, 2},
                      {-2.40625, -5.03125, -1.40625, -3.53125, -0.408203125, -0.0363769531}));
}

TEST(Softmax, SymbolicShape) {
  auto t = OpRunner("aten.softmax.int")
               .sym_tensor("self", DType::kBFloat16, {s0(), 4, s0()})
               .scalar("dim", -1)
               .dtype("dtype", DType::kFloat32)
               .shape();
  EXPECT_EQ(t[0].str(), "f32[s0, 4, s0]");
  ANVIL_EXPECT_ERROR(OpRunner("aten.softmax.int")
                         .sym_tensor("self", DType::kFloat32, {s0(), 4})
                         .scalar("dim", 2)
                         .shape(),
                     "dimension out of range (expected a dim in [-2, 1], got 2)");
}

// ---- layer_norm

/// l = torch.arange(24.).reshape(2, 3, 4) ** 1.3 * 0.1 - 1.
Tensor l234(DType dtype = DType::kFloat32) {
  std::vector<double> v;
  for (int i = 0; i < 24; ++i) v.push_back(std::pow(i, 1.3) * 0.1 - 1);
  return testing::make_tensor(dtype, {2, 3, 4}, v);
}

TEST(LayerNorm, WeightBiasEpsNonContiguous) {
  EXPECT_TRUE(matches(
      OpRunner("aten.layer_norm.default")
          .tensor("input", l234())
          .ints("normalized_shape", {4})
          .tensor("weight", f32({4}, {1.0, 0.5, -2.0, 1.5}))
          .tensor("bias", f32({4}, {0.1, 0.2, 0.3, -0.4}))
          .scalar("eps", 1e-5)
          .scalar("cudnn_enable", false)
          .run1(),
      DType::kFloat32, {2, 3, 4},
      {-1.11315286,  -0.0887248665, -0.404262841, 1.75770628,    -1.21615243,  -0.0363197476,
       -0.546685159, 1.64817393,    -1.22714829,  -0.0308132023, -0.566569924, 1.63323402,
       -1.23150134,  -0.0286396146, -0.574738026, 1.62711632,    -1.23384058,  -0.0274740905,
       -0.579199672, 1.62378013,    -1.23530054,  -0.0267466903, -0.582009971, 1.62168217}));
  EXPECT_TRUE(
      matches(OpRunner("aten.layer_norm.default")
                  .tensor("input", l234())
                  .ints("normalized_shape", {3, 4})
                  .none("weight")
                  .none("bias")
                  .scalar("eps", 1e-3)
                  .run1(),
              DType::kFloat32, {2, 3, 4},
              {-1.36867201,  -1.23121369, -1.03021014, -0.795310676, -0.535281181, -0.254809201,
               0.0431090221, 0.356363922, 0.683376729, 1.02291381,   1.37398005,   1.73575318,
               -1.54413426,  -1.28183985, -1.01341701, -0.739175379, -0.459390402, -0.174306989,
               0.115854576,  0.410894275, 0.71063149,  1.01490068,   1.32354903,   1.63643622}));
  // Transposed input [4, 3, 2], normalised over the last dim (two elements: +-1).
  std::vector<double> want;
  for (int i = 0; i < 12; ++i) {
    want.push_back(-0.99999);
    want.push_back(0.99999);
  }
  EXPECT_TRUE(matches(OpRunner("aten.layer_norm.default")
                          .tensor("input", l234().transpose(0, 2))
                          .ints("normalized_shape", {2})
                          .run1(),
                      DType::kFloat32, {4, 3, 2}, want));
}

TEST(LayerNorm, Bf16) {
  EXPECT_TRUE(
      matches(OpRunner("aten.layer_norm.default")
                  .tensor("input", l234(DType::kBFloat16))
                  .ints("normalized_shape", {4})
                  .tensor("weight", bf16({4}, {1.0, 0.5, -2.0, 1.5}))
                  .tensor("bias", bf16({4}, {0.1, 0.2, 0.3, -0.4}))
                  .run1(),
              DType::kBFloat16, {2, 3, 4},
              {-1.1171875,  -0.0854492188, -0.39453125, 1.7578125,     -1.21875,    -0.0354003906,
               -0.54296875, 1.6484375,     -1.2265625,  -0.0324707031, -0.57421875, 1.6328125,
               -1.234375,   -0.0322265625, -0.60546875, 1.6171875,     -1.2421875,  -0.0167236328,
               -0.56640625, 1.6171875,     -1.25,       -0.010925293,  -0.54296875, 1.625}));
}

TEST(LayerNorm, ShapeRuleAndErrors) {
  auto t = OpRunner("aten.layer_norm.default")
               .sym_tensor("input", DType::kFloat32, {s0(), 7, 16})
               .ints("normalized_shape", {16})
               .shape();
  EXPECT_EQ(t[0].str(), "f32[s0, 7, 16]");
  ANVIL_EXPECT_ERROR(OpRunner("aten.layer_norm.default")
                         .sym_tensor("input", DType::kFloat32, {s0(), 16})
                         .ints("normalized_shape", {8})
                         .shape(),
                     "normalized_shape does not match the input's trailing dims");
  ANVIL_EXPECT_ERROR(OpRunner("aten.layer_norm.default")
                         .tensor("input", l234())
                         .ints("normalized_shape", {4})
                         .tensor("weight", f32({3}, {1, 1, 1}))
                         .run1(),
                     "'weight' has the wrong number of elements");
}

// ---- batch_norm (inference)

/// bn = torch.arange(16.).reshape(2, 2, 2, 2) * 0.5 - 2, with running stats and affine params.
OpRunner batch_norm_runner(const std::string& target, const Tensor& input, bool affine,
                           double eps) {
  OpRunner r(target);
  r.tensor("input", input);
  if (affine) {
    r.tensor("weight", f32({2}, {1.5, -0.5})).tensor("bias", f32({2}, {0.25, 1.0}));
  } else {
    r.none("weight").none("bias");
  }
  r.tensor("running_mean", f32({2}, {0.5, -1.0})).tensor("running_var", f32({2}, {2.0, 0.25}));
  if (target == "aten.batch_norm.default") r.scalar("training", false);
  r.scalar("momentum", 0.1).scalar("eps", eps);
  if (target == "aten.batch_norm.default") r.scalar("cudnn_enabled", false);
  return r;
}

const std::vector<double> kBnWant = {-2.40164375,    -1.871315,    -1.34098625,  -0.810657501,
                                     2.00271606e-05, -0.499969959, -0.999959946, -1.49994993,
                                     1.84098625,     2.371315,     2.90164375,   3.4319725,
                                     -3.99989986,    -4.49988985,  -4.99987984,  -5.49986982};

TEST(BatchNorm, InferenceFloatBf16NonContiguous) {
  Tensor bn = f32({2, 2, 2, 2}, ramp(16, 0.5, -2));
  EXPECT_TRUE(matches(batch_norm_runner("aten.batch_norm.default", bn, true, 1e-5).run1(),
                      DType::kFloat32, {2, 2, 2, 2}, kBnWant));
  // Channels-last strides, no affine parameters.
  Tensor cl = bn.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  ASSERT_FALSE(cl.is_contiguous());
  EXPECT_TRUE(matches(batch_norm_runner("aten.batch_norm.default", cl, false, 1e-3).run1(),
                      DType::kFloat32, {2, 2, 2, 2},
                      {-1.76732528, -1.4138602, -1.06039512, -0.706930101, 1.99601209, 2.99401808,
                       3.99202418, 4.99003029, 1.06039512, 1.4138602, 1.76732528, 2.12079024,
                       9.98006058, 10.9780664, 11.9760723, 12.9740782}));
  // Rank-2 input (N, C).
  EXPECT_TRUE(matches(
      batch_norm_runner("aten.batch_norm.default", f32({3, 2}, {1, 2, 3, 4, 5, 6}), true, 1e-5)
          .run1(),
      DType::kFloat32, {3, 2},
      {0.780328751, -1.99993992, 2.90164375, -3.99989986, 5.02295876, -5.99985981}));
  // bf16 input with float32 parameters.
  EXPECT_TRUE(matches(
      batch_norm_runner("aten.batch_norm.default", bn.to(DType::kBFloat16), true, 1e-5).run1(),
      DType::kBFloat16, {2, 2, 2, 2},
      {-2.40625, -1.875, -1.34375, -0.8125, 2.00271606e-05, -0.5, -1.0, -1.5, 1.84375, 2.375,
       2.90625, 3.4375, -4.0, -4.5, -5.0, -5.5}));
}

TEST(BatchNorm, TrainingModeIsAClearError) {
  OpRunner r("aten.batch_norm.default");
  r.tensor("input", f32({1, 2}, {1, 2}))
      .none("weight")
      .none("bias")
      .tensor("running_mean", f32({2}, {0, 0}))
      .tensor("running_var", f32({2}, {1, 1}))
      .scalar("training", true)
      .scalar("momentum", 0.1)
      .scalar("eps", 1e-5)
      .scalar("cudnn_enabled", false);
  try {
    r.run1();
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("training"), std::string::npos) << e.what();
  }
  // Wrong channel count in the running stats (no weight / bias, whose count is checked first).
  ANVIL_EXPECT_ERROR(
      batch_norm_runner("aten.batch_norm.default", f32({1, 3}, {1, 2, 3}), false, 1e-5).run1(),
      "'running_mean' has the wrong number of elements");
}

TEST(BatchNorm, NativeNoTrainingReturnsThreeTensors) {
  Tensor bn = f32({2, 2, 2, 2}, ramp(16, 0.5, -2));
  auto outs =
      batch_norm_runner("aten._native_batch_norm_legit_no_training.default", bn, true, 1e-5).run();
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_TRUE(matches(std::get<Tensor>(outs[0]), DType::kFloat32, {2, 2, 2, 2}, kBnWant));
  EXPECT_TRUE(matches(std::get<Tensor>(outs[1]), DType::kFloat32, {0}, {}));
  EXPECT_TRUE(matches(std::get<Tensor>(outs[2]), DType::kFloat32, {0}, {}));
  auto types = OpRunner("aten._native_batch_norm_legit_no_training.default")
                   .sym_tensor("input", DType::kBFloat16, {s0(), 2, 5, 5})
                   .none("weight")
                   .none("bias")
                   .sym_tensor("running_mean", DType::kFloat32, {2})
                   .sym_tensor("running_var", DType::kFloat32, {2})
                   .scalar("momentum", 0.1)
                   .scalar("eps", 1e-5)
                   .shape();
  ASSERT_EQ(types.size(), 3u);
  EXPECT_EQ(types[0].str(), "bf16[s0, 2, 5, 5]");
  EXPECT_EQ(types[1].str(), "bf16[0]");
}

}  // namespace
}  // namespace anvil
