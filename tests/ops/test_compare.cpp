// Comparisons, logic, selection, clamp, copy_ and fill_ (src/ops/compare.cpp). Expected values
// from PyTorch (torch.lt(a, b), torch.where(...), ...) or by hand.
#include <gtest/gtest.h>

#include <limits>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil::ops {
namespace {

using testing::bf16;
using testing::boolean;
using testing::f32;
using testing::i32;
using testing::i64;
using testing::matches;
using testing::OpRunner;
using testing::shares_storage;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

SymInt sym(const char* name) { return SymInt::symbol(name); }

TEST(OpsCompare, TensorComparisonsBroadcastWithNaN) {
  Tensor a = f32({2, 3}, {1.0, 2.0, kNaN, 4.0, 2.5, -1.0});
  Tensor b = f32({3}, {2.0, 2.0, kNaN});
  const std::vector<std::pair<const char*, std::vector<double>>> cases = {
      {"aten.eq.Tensor", {0, 1, 0, 0, 0, 0}}, {"aten.ne.Tensor", {1, 0, 1, 1, 1, 1}},
      {"aten.lt.Tensor", {1, 0, 0, 0, 0, 0}}, {"aten.le.Tensor", {1, 1, 0, 0, 0, 0}},
      {"aten.gt.Tensor", {0, 0, 0, 1, 1, 0}}, {"aten.ge.Tensor", {0, 1, 0, 1, 1, 0}},
  };
  for (const auto& [op, want] : cases) {
    Tensor y = OpRunner(op).tensor("self", a).tensor("other", b).run1();
    EXPECT_TRUE(matches(y, DType::kBool, {2, 3}, want)) << op;
  }
}

TEST(OpsCompare, ScalarComparisonsPromote) {
  // int64 tensor against 2.5: compared as float32.
  Tensor x = i64({3}, {1, 2, 3});
  const std::vector<std::pair<const char*, std::vector<double>>> cases = {
      {"aten.eq.Scalar", {0, 0, 0}}, {"aten.ne.Scalar", {1, 1, 1}}, {"aten.lt.Scalar", {1, 1, 0}},
      {"aten.le.Scalar", {1, 1, 0}}, {"aten.gt.Scalar", {0, 0, 1}}, {"aten.ge.Scalar", {0, 0, 1}},
  };
  for (const auto& [op, want] : cases) {
    Tensor y = OpRunner(op).tensor("self", x).scalar("other", 2.5).run1();
    EXPECT_TRUE(matches(y, DType::kBool, {3}, want)) << op;
  }
  // The number is rounded to the tensor's bf16 first: bf16(0.1) == 0.1 is true in torch.
  Tensor y =
      OpRunner("aten.eq.Scalar").tensor("self", bf16({2}, {0.1, 0.2})).scalar("other", 0.1).run1();
  EXPECT_TRUE(matches(y, DType::kBool, {2}, {1, 0}));
  // The llama pattern: int64 ids != 1 on a transposed view.
  y = OpRunner("aten.ne.Scalar")
          .tensor("self", i64({2, 2}, {1, 2, 3, 1}).transpose(0, 1))
          .scalar("other", 1)
          .run1();
  EXPECT_TRUE(matches(y, DType::kBool, {2, 2}, {0, 1, 1, 0}));
  y = OpRunner("aten.ge.Scalar").tensor("self", i32({3}, {-1, 0, 1})).scalar("other", 0).run1();
  EXPECT_TRUE(matches(y, DType::kBool, {3}, {0, 1, 1}));
}

TEST(OpsCompare, BitwiseAndOr) {
  Tensor a = i64({2}, {3, 5}), b = i64({2, 1}, {6, 1});
  Tensor y = OpRunner("aten.__and__.Tensor").tensor("self", a).tensor("other", b).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2, 2}, {2, 4, 1, 1}));
  y = OpRunner("aten.bitwise_or.Tensor").tensor("self", a).tensor("other", b).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2, 2}, {7, 7, 3, 5}));
  y = OpRunner("aten.bitwise_and.Tensor")
          .tensor("self", boolean({2}, {1, 0}))
          .tensor("other", i64({2}, {3, 1}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2}, {1, 0}));
  // bool masks (the attention-mask pattern), one expanded.
  Tensor m = boolean({2, 2}, {1, 1, 0, 1});
  Tensor r = boolean({1, 2}, {1, 0}).expand({2, 2});
  y = OpRunner("aten.__and__.Tensor").tensor("self", m).tensor("other", r).run1();
  EXPECT_TRUE(matches(y, DType::kBool, {2, 2}, {1, 0, 0, 0}));
  y = OpRunner("aten.__or__.Tensor").tensor("self", m).tensor("other", r).run1();
  EXPECT_TRUE(matches(y, DType::kBool, {2, 2}, {1, 1, 1, 1}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.__and__.Tensor")
                         .tensor("self", f32({1}, {1}))
                         .tensor("other", f32({1}, {1}))
                         .run(),
                     "bitwise and / or need bool or integer operands");
}

TEST(OpsCompare, LogicalAndOr) {
  Tensor a = f32({4}, {0.0, kNaN, 2.0, 1.0});
  Tensor y = OpRunner("aten.logical_and.default")
                 .tensor("self", a)
                 .tensor("other", i64({4}, {1, 1, 0, 3}))
                 .run1();
  EXPECT_TRUE(matches(y, DType::kBool, {4}, {0, 1, 0, 1}));
  y = OpRunner("aten.logical_or.default")
          .tensor("self", f32({4}, {0.0, kNaN, 0.0, 0.0}))
          .tensor("other", i64({4}, {0, 0, 0, 3}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kBool, {4}, {0, 1, 0, 1}));
  y = OpRunner("aten.logical_or.default")
          .tensor("self", bf16({2, 1}, {0, 1}))
          .tensor("other", boolean({2}, {0, 1}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kBool, {2, 2}, {0, 1, 1, 1}));
}

TEST(OpsCompare, WhereOverloads) {
  Tensor y = OpRunner("aten.where.self")
                 .tensor("condition", boolean({2, 1}, {1, 0}))
                 .tensor("self", f32({3}, {1, 2, 3}))
                 .tensor("other", f32({2, 3}, {10, 20, 30, 40, 50, 60}))
                 .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, {1, 2, 3, 40, 50, 60}));
  // where(cond, int64 tensor, 1.5) -> float32.
  y = OpRunner("aten.where.ScalarOther")
          .tensor("condition", boolean({3}, {1, 0, 1}))
          .tensor("self", i64({3}, {1, 2, 3}))
          .scalar("other", 1.5)
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {3}, {1, 1.5, 3}));
  y = OpRunner("aten.where.ScalarSelf")
          .tensor("condition", boolean({2}, {1, 0}))
          .scalar("self", 7)
          .tensor("other", bf16({1, 2}, {1.5, 2.5}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {1, 2}, {7, 2.5}));
  // int64 selection on a transposed input.
  y = OpRunner("aten.where.self")
          .tensor("condition", boolean({2, 2}, {1, 0, 0, 1}))
          .tensor("self", i64({2, 2}, {1, 2, 3, 4}).transpose(0, 1))
          .tensor("other", i64({}, {-1}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2, 2}, {1, -1, -1, 4}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.where.self")
                         .tensor("condition", i64({1}, {1}))
                         .tensor("self", f32({1}, {1}))
                         .tensor("other", f32({1}, {2}))
                         .run(),
                     "argument 'condition' must be a bool tensor");
}

TEST(OpsCompare, MaskedFill) {
  Tensor y = OpRunner("aten.masked_fill.Scalar")
                 .tensor("self", f32({2, 2}, {1, 2, 3, 4}))
                 .tensor("mask", boolean({2}, {1, 0}))
                 .scalar("value", -kInf)
                 .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 2}, {-kInf, 2, -kInf, 4}));
  // int self: the float value is truncated; the mask broadcasts self to [2, 3].
  y = OpRunner("aten.masked_fill.Scalar")
          .tensor("self", i64({3}, {1, 2, 3}))
          .tensor("mask", boolean({2, 1}, {1, 0}))
          .scalar("value", 2.7)
          .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2, 3}, {2, 2, 2, 1, 2, 3}));
  y = OpRunner("aten.masked_fill.Tensor")
          .tensor("self", bf16({2}, {1.5, 2.5}))
          .tensor("mask", boolean({2}, {0, 1}))
          .tensor("value", f32({}, {0.1}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {2}, {1.5, 0.10009765625}));
  y = OpRunner("aten.masked_fill.Scalar")
          .tensor("self", f32({2, 2}, {1, 2, 3, 4}).transpose(0, 1))
          .tensor("mask", boolean({2, 2}, {0, 1, 0, 0}))
          .scalar("value", 0)
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 2}, {1, 0, 2, 4}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.masked_fill.Scalar")
                         .tensor("self", i64({1}, {1}))
                         .tensor("mask", boolean({1}, {1}))
                         .scalar("value", -kInf)
                         .run(),
                     "fill value cannot be converted to an integer dtype without overflow");
  ANVIL_EXPECT_ERROR(OpRunner("aten.masked_fill.Tensor")
                         .tensor("self", f32({2}, {1, 2}))
                         .tensor("mask", boolean({2}, {1, 0}))
                         .tensor("value", f32({1}, {0}))
                         .run(),
                     "masked_fill only supports a 0-dimensional value tensor");
  ANVIL_EXPECT_ERROR(OpRunner("aten.masked_fill.Scalar")
                         .tensor("self", f32({1}, {1}))
                         .tensor("mask", i64({1}, {1}))
                         .scalar("value", 0)
                         .run(),
                     "argument 'mask' must be a bool tensor");
}

TEST(OpsCompare, Clamp) {
  Tensor y = OpRunner("aten.clamp.default")
                 .tensor("self", f32({4}, {-2, 0.5, 3, kNaN}))
                 .scalar("min", -1.0)
                 .scalar("max", 2.0)
                 .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {4}, {-1, 0.5, 2, kNaN}));
  y = OpRunner("aten.clamp.default").tensor("self", i64({3}, {1, 2, 3})).scalar("min", 2).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {3}, {2, 2, 3}));
  // int tensor with a float bound promotes to float32; max only via min=None.
  y = OpRunner("aten.clamp.default")
          .tensor("self", i64({3}, {1, 2, 3}))
          .scalar("min", 2)
          .scalar("max", 2.5)
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {3}, {2, 2, 2.5}));
  y = OpRunner("aten.clamp.default")
          .tensor("self", bf16({3}, {1, 5, -3}))
          .none("min")
          .scalar("max", 2.3)
          .run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {3}, {1, 2.296875, -3}));
  // min > max gives max (torch: min(max(x, lo), hi)).
  y = OpRunner("aten.clamp.default")
          .tensor("self", f32({2, 1}, {1, 5}).expand({2, 2}))
          .scalar("min", 3.0)
          .scalar("max", 2.0)
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 2}, {2, 2, 2, 2}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.clamp.default").tensor("self", f32({1}, {1})).run(),
                     "at least one of 'min' or 'max' must not be None");
}

TEST(OpsCompare, CopyInPlaceCastsAndBroadcasts) {
  Tensor x = f32({2, 3}, {0, 0, 0, 0, 0, 0});
  Tensor view = x.transpose(0, 1);  // [3, 2]
  auto outs = OpRunner("aten.copy_.default")
                  .tensor("self", view)
                  .tensor("src", f32({1, 2}, {1.7, -2.5}))
                  .run();
  EXPECT_TRUE(shares_storage(std::get<Tensor>(outs[0]), x));
  EXPECT_TRUE(matches(x, DType::kFloat32, {2, 3}, {1.7, 1.7, 1.7, -2.5, -2.5, -2.5}));
  // copy_ casts any dtype into self's (float -> int truncates).
  Tensor n = i64({3}, {0, 0, 0});
  OpRunner("aten.copy_.default").tensor("self", n).tensor("src", f32({3}, {1.7, -2.5, 3.9})).run();
  EXPECT_TRUE(matches(n, DType::kInt64, {3}, {1, -2, 3}));
  Tensor h = bf16({2}, {0, 0});
  OpRunner("aten.copy_.default")
      .tensor("self", h)
      .tensor("src", i64({2}, {3, -7}))
      .scalar("non_blocking", false)
      .run();
  EXPECT_TRUE(matches(h, DType::kBFloat16, {2}, {3, -7}));
  // Overlapping source: copy_ of a tensor into its own transpose.
  Tensor s = f32({2, 2}, {1, 2, 3, 4});
  OpRunner("aten.copy_.default").tensor("self", s).tensor("src", s.transpose(0, 1)).run();
  EXPECT_TRUE(matches(s, DType::kFloat32, {2, 2}, {1, 3, 2, 4}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.copy_.default")
                         .tensor("self", f32({2}, {0, 0}))
                         .tensor("src", f32({3}, {1, 2, 3}))
                         .run(),
                     "shapes [2] and [3] cannot broadcast");
}

TEST(OpsCompare, FillInPlace) {
  Tensor x = i64({2, 4}, {0, 0, 0, 0, 0, 0, 0, 0});
  OpRunner("aten.fill_.Scalar").tensor("self", x.slice(1, 1, 4, 2)).scalar("value", 9).run();
  EXPECT_TRUE(matches(x, DType::kInt64, {2, 4}, {0, 9, 0, 9, 0, 9, 0, 9}));
  Tensor h = bf16({2}, {0, 0});
  OpRunner("aten.fill_.Scalar").tensor("self", h).scalar("value", 0.1).run();
  EXPECT_TRUE(matches(h, DType::kBFloat16, {2}, {0.10009765625, 0.10009765625}));
  Tensor big = i64({1}, {0});
  OpRunner("aten.fill_.Scalar")
      .tensor("self", big)
      .scalar("value", int64_t{9007199254740993})
      .run();
  EXPECT_EQ(big.data<int64_t>()[0], int64_t{9007199254740993});
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.fill_.Scalar").tensor("self", i64({1}, {0})).scalar("value", kInf).run(),
      "fill value cannot be converted to an integer dtype without overflow");
}

TEST(OpsCompare, SymbolicShapeRules) {
  const SymInt s0 = sym("s0"), s1 = sym("s1");
  auto t = OpRunner("aten.lt.Tensor")
               .sym_tensor("self", DType::kFloat32, {s0, 4})
               .sym_tensor("other", DType::kInt64, {4})
               .shape();
  EXPECT_EQ(t[0].str(), "bool[s0, 4]");
  t = OpRunner("aten.ne.Scalar")
          .sym_tensor("self", DType::kInt64, {s0, s1})
          .scalar("other", 1)
          .shape();
  EXPECT_EQ(t[0].str(), "bool[s0, s1]");
  t = OpRunner("aten.__and__.Tensor")
          .sym_tensor("self", DType::kBool, {s0, 1, s1})
          .sym_tensor("other", DType::kBool, {s0, s1, 1})
          .shape();
  EXPECT_EQ(t[0].str(), "bool[s0, s1, s1]");
  t = OpRunner("aten.where.ScalarOther")
          .sym_tensor("condition", DType::kBool, {s0, 1})
          .sym_tensor("self", DType::kInt64, {4})
          .scalar("other", 1.5)
          .shape();
  EXPECT_EQ(t[0].str(), "f32[s0, 4]");
  t = OpRunner("aten.masked_fill.Scalar")
          .sym_tensor("self", DType::kBFloat16, {s0, 4})
          .sym_tensor("mask", DType::kBool, {1, 4})
          .scalar("value", -1.0)
          .shape();
  EXPECT_EQ(t[0].str(), "bf16[s0, 4]");
  t = OpRunner("aten.clamp.default")
          .sym_tensor("self", DType::kInt64, {s0})
          .scalar("min", 0.5)
          .shape();
  EXPECT_EQ(t[0].str(), "f32[s0]");
  t = OpRunner("aten.copy_.default")
          .sym_tensor("self", DType::kInt64, {s0, 4})
          .sym_tensor("src", DType::kFloat32, {4})
          .shape();
  EXPECT_EQ(t[0].str(), "i64[s0, 4]");
  t = OpRunner("aten.fill_.Scalar")
          .sym_tensor("self", DType::kFloat32, {s0})
          .scalar("value", 0)
          .shape();
  EXPECT_EQ(t[0].str(), "f32[s0]");
  t = OpRunner("aten.logical_and.default")
          .sym_tensor("self", DType::kFloat32, {s0})
          .sym_tensor("other", DType::kInt64, {s0})
          .shape();
  EXPECT_EQ(t[0].str(), "bool[s0]");
  ANVIL_EXPECT_ERROR(OpRunner("aten.eq.Tensor")
                         .sym_tensor("self", DType::kFloat32, {s0})
                         .sym_tensor("other", DType::kFloat32, {s1})
                         .shape(),
                     "shapes [s0] and [s1] cannot broadcast");
  ANVIL_EXPECT_ERROR(OpRunner("aten.where.self")
                         .sym_tensor("condition", DType::kFloat32, {s0})
                         .sym_tensor("self", DType::kFloat32, {s0})
                         .sym_tensor("other", DType::kFloat32, {s0})
                         .shape(),
                     "argument 'condition' must be a bool tensor");
  ANVIL_EXPECT_ERROR(OpRunner("aten.bitwise_or.Tensor")
                         .sym_tensor("self", DType::kFloat32, {s0})
                         .sym_tensor("other", DType::kFloat32, {s0})
                         .shape(),
                     "bitwise and / or need bool or integer operands");
}

}  // namespace
}  // namespace anvil::ops
