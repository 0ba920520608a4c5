// Padding, roll and flip (src/ops/pad.cpp), addcmul / addcdiv (ternary.cpp), rounding, hardtanh,
// linalg_vector_norm and in-place forms imported by the general rule (ir/inplace.h). Expected
// values from PyTorch (F.pad(torch.tensor([[1., 2, 3, 4]]), (2, 1), mode=...), torch.roll,
// torch.round, ...) or by hand; the end-to-end checks against PyTorch's outputs are
// tests/aot/test_aot_op_cases.cpp.
#include <gtest/gtest.h>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil::ops {
namespace {

using testing::f32;
using testing::i64;
using testing::matches;
using testing::OpRunner;

TEST(OpsPad, EveryModeOnOneRow) {
  const Tensor x = f32({1, 4}, {1, 2, 3, 4});
  const std::vector<std::pair<const char*, std::vector<double>>> cases = {
      {"reflect", {3, 2, 1, 2, 3, 4, 3}},
      {"replicate", {1, 1, 1, 2, 3, 4, 4}},
      {"circular", {3, 4, 1, 2, 3, 4, 1}},
      {"constant", {0, 0, 1, 2, 3, 4, 0}},
  };
  for (const auto& [mode, want] : cases) {
    Tensor y = OpRunner("aten.pad.default").tensor("self", x).ints("pad", {2, 1}).string("mode", mode).run1();
    EXPECT_TRUE(matches(y, DType::kFloat32, {1, 7}, want)) << mode;
  }
  // Negative constant pads crop; value fills.
  Tensor c = OpRunner("aten.constant_pad_nd.default").tensor("self", x).ints("pad", {-1, 2}).scalar("value", 9.0).run1();
  EXPECT_TRUE(matches(c, DType::kFloat32, {1, 5}, {2, 3, 4, 9, 9}));
  Tensor r = OpRunner("aten.reflection_pad1d.default").tensor("self", x).ints("padding", {1, 3}).run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {1, 8}, {2, 1, 2, 3, 4, 3, 2, 1}));
}

TEST(OpsPad, RefusesWhatPyTorchRefuses) {
  const Tensor x = f32({1, 4}, {1, 2, 3, 4});
  auto pad = [&](std::vector<int64_t> p, const char* mode, bool shape_only = false) {
    OpRunner r("aten.pad.default");
    r.tensor("self", x).ints("pad", p).string("mode", mode);
    if (shape_only) r.shape();
    else r.run();
  };
  ANVIL_EXPECT_ERROR(pad({4, 0}, "reflect"), "reflect padding must be less than the input size");
  ANVIL_EXPECT_ERROR(pad({5, 0}, "circular"), "circular padding may not exceed the input size");
  ANVIL_EXPECT_ERROR(pad({1}, "constant"), "padding length must be even");
  ANVIL_EXPECT_ERROR(pad({1, 1}, "wrap"), "unknown padding mode");
  ANVIL_EXPECT_ERROR(pad({-1, 0}, "replicate"), "must not be negative");
  ANVIL_EXPECT_ERROR(pad({1, 1, 1, 1, 1, 1}, "constant"), "padding length too large");
  ANVIL_EXPECT_ERROR(pad({-3, -2}, "constant", true), "negative size");
  ANVIL_EXPECT_ERROR(OpRunner("aten.reflection_pad2d.default").tensor("self", x).ints("padding", {1, 1}).run(),
                     "padding length does not match the op");
}

TEST(OpsPad, RollAndFlip) {
  const Tensor x = f32({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor a = OpRunner("aten.roll.default").tensor("self", x).ints("shifts", {1}).ints("dims", {1}).run1();
  EXPECT_TRUE(matches(a, DType::kFloat32, {2, 3}, {2, 0, 1, 5, 3, 4}));
  Tensor b = OpRunner("aten.roll.default").tensor("self", x).ints("shifts", {-2}).run1();  // flattened
  EXPECT_TRUE(matches(b, DType::kFloat32, {2, 3}, {2, 3, 4, 5, 0, 1}));
  Tensor c = OpRunner("aten.flip.default").tensor("self", x).ints("dims", {0, -1}).run1();
  EXPECT_TRUE(matches(c, DType::kFloat32, {2, 3}, {5, 4, 3, 2, 1, 0}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.roll.default").tensor("self", x).ints("shifts", {1, 2}).ints("dims", {0}).run(),
                     "roll's shifts and dims differ in length");
  ANVIL_EXPECT_ERROR(OpRunner("aten.flip.default").tensor("self", x).ints("dims", {1, -1}).run(),
                     "flip dim appears multiple times");
}

TEST(OpsPad, AddcRoundHardtanhNorm) {
  const Tensor a = f32({2}, {1, 2}), b = f32({2}, {3, 4}), c = f32({2}, {2, 8});
  EXPECT_TRUE(matches(OpRunner("aten.addcmul.default").tensor("self", a).tensor("tensor1", b).tensor("tensor2", c).scalar("value", 0.5).run1(),
                      DType::kFloat32, {2}, {4, 18}));
  EXPECT_TRUE(matches(OpRunner("aten.addcdiv.default").tensor("self", a).tensor("tensor1", b).tensor("tensor2", c).run1(),
                      DType::kFloat32, {2}, {2.5, 2.5}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.addcdiv.default").tensor("self", i64({1}, {1})).tensor("tensor1", i64({1}, {1})).tensor("tensor2", i64({1}, {1})).run(),
                     "integer division with addcdiv");
  // torch.round is half to even: [-2.5, -0.5, 0.5, 1.5, 2.5] -> [-2, -0, 0, 2, 2]
  EXPECT_TRUE(matches(OpRunner("aten.round.default").tensor("self", f32({5}, {-2.5, -0.5, 0.5, 1.5, 2.5})).run1(),
                      DType::kFloat32, {5}, {-2, 0, 0, 2, 2}));
  EXPECT_TRUE(matches(OpRunner("aten.floor.default").tensor("self", f32({2}, {-1.5, 1.5})).run1(), DType::kFloat32, {2}, {-2, 1}));
  EXPECT_TRUE(matches(OpRunner("aten.ceil.default").tensor("self", f32({2}, {-1.5, 1.5})).run1(), DType::kFloat32, {2}, {-1, 2}));
  EXPECT_TRUE(matches(OpRunner("aten.trunc.default").tensor("self", f32({2}, {-1.5, 1.5})).run1(), DType::kFloat32, {2}, {-1, 1}));
  EXPECT_TRUE(matches(OpRunner("aten.round.default").tensor("self", i64({2}, {-3, 7})).run1(), DType::kInt64, {2}, {-3, 7}));
  EXPECT_TRUE(matches(OpRunner("aten.relu6.default").tensor("self", f32({3}, {-1, 3, 9})).run1(), DType::kFloat32, {3}, {0, 3, 6}));
  EXPECT_TRUE(matches(OpRunner("aten.hardtanh.default").tensor("self", f32({3}, {-3, 0.5, 9})).scalar("min_val", -2.0).scalar("max_val", 2.0).run1(),
                      DType::kFloat32, {3}, {-2, 0.5, 2}));
  const Tensor m = f32({2, 2}, {3, -4, 0, 1});
  EXPECT_TRUE(matches(OpRunner("aten.linalg_vector_norm.default").tensor("self", m).ints("dim", {1}).run1(), DType::kFloat32, {2}, {5, 1}));
  EXPECT_TRUE(matches(OpRunner("aten.linalg_vector_norm.default").tensor("self", m).scalar("ord", 0.0).run1(), DType::kFloat32, {}, {3}));
  EXPECT_TRUE(matches(OpRunner("aten.linalg_vector_norm.default").tensor("self", m).scalar("ord", 1.0).ints("dim", {0}).scalar("keepdim", true).run1(),
                      DType::kFloat32, {1, 2}, {3, 5}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.linalg_vector_norm.default").tensor("self", i64({1}, {1})).run(), "expects a floating point input");
}

// In-place ops without a row of their own run as the functional op plus copy_: the write lands
// in self (a strided view here), and results PyTorch cannot store in self are refused.
TEST(OpsPad, InPlaceFormsByTheGeneralRule) {
  Tensor base = f32({2, 3}, {-1, 0, 1, 2, 3, 4});
  Tensor col = base.slice(1, 1, 3);  // a strided view
  OpRunner("aten.hardtanh_.default").tensor("self", col).run();
  EXPECT_TRUE(matches(base, DType::kFloat32, {2, 3}, {-1, 0, 1, 2, 1, 1}));
  Tensor v = f32({3}, {0, 0, 0});
  OpRunner("aten.fill_.Tensor").tensor("self", v).tensor("value", f32({}, {2.5})).run();
  EXPECT_TRUE(matches(v, DType::kFloat32, {3}, {2.5, 2.5, 2.5}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.sqrt_.default").tensor("self", i64({1}, {4})).run(),
                     "in-place result type cannot be cast to self's dtype");
  ANVIL_EXPECT_ERROR(OpRunner("aten.fill_.Tensor").tensor("self", v).tensor("value", f32({1}, {1})).run(),
                     "fill's value is not a 0-dim tensor");
}

}  // namespace
}  // namespace anvil::ops
