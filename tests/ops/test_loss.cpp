// Tests for the loss family (src/ops/loss.cpp): cross_entropy_loss with class-index targets
// (weight, ignore_index inside and outside the class range, label_smoothing, every reduction, a
// 1-d input with a 0-d target, all targets ignored) and probability targets, plus its errors.
// Expected values come from PyTorch 1.13 CPU (F.cross_entropy in float64), pasted as literals.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::f32;
using testing::i64;
using testing::matches;
using testing::OpRunner;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kCe = "aten.cross_entropy_loss.default";

/// Logits (3, 4): ((i * 7) % 13) / 4 - 1.5.
Tensor logits() {
  return f32({3, 4}, {-1.5, 0.25, -1.25, 0.5, -1.0, 0.75, -0.75, 1.0, -0.5, 1.25, -0.25, 1.5});
}
Tensor class_weight() { return f32({4}, {0.5, 1.0, 2.0, 1.5}); }

TEST(CrossEntropy, IndexTargetsMeanNoWeight) {
  EXPECT_TRUE(
      matches(OpRunner(kCe).tensor("self", logits()).tensor("target", i64({3}, {1, 3, 0})).run1(),
              DType::kFloat32, {}, {1.486163570316931}));
}

TEST(CrossEntropy, NonContiguousAndBf16) {
  // The logits as the transpose of a (4, 3) tensor: same values, other strides.
  const Tensor l = logits();
  Tensor lt = Tensor::empty({4, 3}, DType::kFloat32);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) lt.data<float>()[j * 3 + i] = l.data<float>()[i * 4 + j];
  const Tensor t = i64({3}, {1, 3, 0});
  EXPECT_TRUE(matches(OpRunner(kCe).tensor("self", lt.transpose(0, 1)).tensor("target", t).run1(),
                      DType::kFloat32, {}, {1.486163570316931}));
  EXPECT_TRUE(
      matches(OpRunner(kCe).tensor("self", l.to(DType::kBFloat16)).tensor("target", t).run1(),
              DType::kBFloat16, {}, {1.486163570316931}));
}

TEST(CrossEntropy, WeightIgnoreIndexEveryReduction) {
  const Tensor t = i64({3}, {1, -100, 3});
  auto run = [&](int64_t reduction) {
    return OpRunner(kCe)
        .tensor("self", logits())
        .tensor("target", t)
        .tensor("weight", class_weight())
        .scalar("reduction", reduction)
        .run1();
  };
  // mean divides by the weights of the kept targets (1.0 + 1.5), not by their count.
  EXPECT_TRUE(matches(run(1), DType::kFloat32, {}, {0.8361635703169306}));
  EXPECT_TRUE(matches(run(0), DType::kFloat32, {3}, {0.9861635703169307, 0.0, 1.104245355475396}));
  EXPECT_TRUE(matches(run(2), DType::kFloat32, {}, {2.0904089257923264}));
}

TEST(CrossEntropy, IgnoreIndexInsideClassRange) {
  EXPECT_TRUE(matches(OpRunner(kCe)
                          .tensor("self", logits())
                          .tensor("target", i64({3}, {0, 2, 0}))
                          .scalar("reduction", int64_t{2})
                          .scalar("ignore_index", int64_t{0})
                          .run1(),
                      DType::kFloat32, {}, {2.486163570316931}));
}

TEST(CrossEntropy, LabelSmoothingIndexTargets) {
  const Tensor t = i64({3}, {1, -100, 3});
  auto run = [&](int64_t reduction, bool weighted) {
    OpRunner r(kCe);
    r.tensor("self", logits()).tensor("target", t);
    if (weighted) r.tensor("weight", class_weight());
    return r.scalar("reduction", reduction).scalar("label_smoothing", 0.2).run1();
  };
  EXPECT_TRUE(matches(run(1, true), DType::kFloat32, {}, {1.0061635703169307}));
  EXPECT_TRUE(
      matches(run(0, true), DType::kFloat32, {3}, {1.2104717488327774, 0.0, 1.3049371769595495}));
  // Without weights, mean divides by the number of kept targets (2).
  EXPECT_TRUE(matches(run(1, false), DType::kFloat32, {}, {1.0361635703169307}));
}

TEST(CrossEntropy, ProbabilityTargets) {
  const Tensor p =
      f32({3, 4}, {0.0, 0.375, 0.75, 0.125, 0.5, 0.875, 0.25, 0.625, 0.0, 0.375, 0.75, 0.125});
  EXPECT_TRUE(matches(OpRunner(kCe)
                          .tensor("self", logits())
                          .tensor("target", p)
                          .tensor("weight", class_weight())
                          .scalar("label_smoothing", 0.1)
                          .run1(),
                      DType::kFloat32, {}, {3.797073609237959}));
  EXPECT_TRUE(matches(OpRunner(kCe)
                          .tensor("self", logits())
                          .tensor("target", p)
                          .scalar("reduction", int64_t{0})
                          .run1(),
                      DType::kFloat32, {3},
                      {2.326454462896163, 3.312618033213094, 2.326454462896163}));
}

TEST(CrossEntropy, OneDimInputAndAllIgnored) {
  EXPECT_TRUE(matches(OpRunner(kCe)
                          .tensor("self", f32({4}, {0.5, -1.0, 2.0, 0.25}))
                          .tensor("target", i64({}, {2}))
                          .run1(),
                      DType::kFloat32, {}, {0.36927899844825335}));
  const Tensor ign = i64({3}, {-100, -100, -100});
  EXPECT_TRUE(matches(OpRunner(kCe).tensor("self", logits()).tensor("target", ign).run1(),
                      DType::kFloat32, {}, {kNaN}));
  EXPECT_TRUE(matches(OpRunner(kCe)
                          .tensor("self", logits())
                          .tensor("target", ign)
                          .scalar("reduction", int64_t{2})
                          .run1(),
                      DType::kFloat32, {}, {0.0}));
}

TEST(CrossEntropy, Errors) {
  // A class outside [0, C) that is not ignore_index.
  ANVIL_EXPECT_ERROR(
      OpRunner(kCe).tensor("self", logits()).tensor("target", i64({3}, {1, 4, 0})).run1(),
      "target class out of bounds");
  ANVIL_EXPECT_ERROR(OpRunner(kCe)
                         .tensor("self", logits())
                         .tensor("target", i64({3}, {1, 2, 0}))
                         .scalar("reduction", int64_t{3})
                         .run1(),
                     "invalid reduction");
  // Probability targets do not take ignore_index >= 0.
  ANVIL_EXPECT_ERROR(OpRunner(kCe)
                         .tensor("self", logits())
                         .tensor("target", logits())
                         .scalar("ignore_index", int64_t{1})
                         .run1(),
                     "ignore_index is not supported for floating point target");
  // A target of neither shape, a float index target, a weight of the wrong size.
  ANVIL_EXPECT_ERROR(
      OpRunner(kCe).tensor("self", logits()).tensor("target", i64({4}, {0, 1, 2, 3})).run1(),
      "target must have the input's shape");
  ANVIL_EXPECT_ERROR(
      OpRunner(kCe).tensor("self", logits()).tensor("target", f32({3}, {0, 1, 2})).run1(),
      "class-index targets must be integers");
  ANVIL_EXPECT_ERROR(OpRunner(kCe)
                         .tensor("self", logits())
                         .tensor("target", i64({3}, {0, 1, 2}))
                         .tensor("weight", f32({3}, {1, 1, 1}))
                         .run1(),
                     "weight must be a 1-d tensor with one entry per class");
  ANVIL_EXPECT_ERROR(OpRunner(kCe)
                         .tensor("self", logits())
                         .tensor("target", i64({3}, {0, 1, 2}))
                         .scalar("label_smoothing", 1.5)
                         .run1(),
                     "label_smoothing must be between 0.0 and 1.0");
}

}  // namespace
}  // namespace anvil
