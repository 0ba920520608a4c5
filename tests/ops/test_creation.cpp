// Tests for the creation family (src/ops/creation.cpp): arange (all overloads), full, zeros,
// ones, empty, scalar_tensor, full_like / zeros_like / ones_like / empty_like and new_ones / new_zeros /
// new_full / new_empty. Expected values come from PyTorch (1.13 CPU), pasted in as literals.
#include <gtest/gtest.h>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::bf16;
using testing::f32;
using testing::i32;
using testing::i64;
using testing::matches;
using testing::OpRunner;

SymInt s0() { return SymInt::symbol("s0"); }

// ---- arange

TEST(Arange, DefaultDtypeInference) {
  // All-int arguments give int64; any float gives float32.
  EXPECT_TRUE(matches(OpRunner("aten.arange.default").scalar("end", 5).run1(), DType::kInt64, {5},
                      {0, 1, 2, 3, 4}));
  EXPECT_TRUE(matches(OpRunner("aten.arange.default").scalar("end", 2.5).run1(), DType::kFloat32,
                      {3}, {0, 1, 2}));
  EXPECT_TRUE(matches(OpRunner("aten.arange.default")
                          .scalar("end", 3)
                          .dtype("dtype", DType::kBFloat16)
                          .device("device", Device::cpu())
                          .scalar("pin_memory", false)
                          .run1(),
                      DType::kBFloat16, {3}, {0, 1, 2}));
  EXPECT_TRUE(
      matches(OpRunner("aten.arange.default").scalar("end", 0).run1(), DType::kInt64, {0}, {}));
}

TEST(Arange, StartAndStep) {
  EXPECT_TRUE(matches(OpRunner("aten.arange.start").scalar("start", 1).scalar("end", 4).run1(),
                      DType::kInt64, {3}, {1, 2, 3}));
  EXPECT_TRUE(matches(OpRunner("aten.arange.start_step")
                          .scalar("start", 5)
                          .scalar("end", 1)
                          .scalar("step", -2)
                          .run1(),
                      DType::kInt64, {2}, {5, 3}));
  EXPECT_TRUE(matches(OpRunner("aten.arange.start_step")
                          .scalar("start", 10)
                          .scalar("end", 0)
                          .scalar("step", -3)
                          .run1(),
                      DType::kInt64, {4}, {10, 7, 4, 1}));
  EXPECT_TRUE(matches(OpRunner("aten.arange.start_step")
                          .scalar("start", 1)
                          .scalar("end", 2)
                          .scalar("step", 0.3)
                          .run1(),
                      DType::kFloat32, {4}, {1.0, 1.3, 1.6, 1.9}));
  EXPECT_TRUE(matches(OpRunner("aten.arange.start_step")
                          .scalar("start", 1)
                          .scalar("end", 2)
                          .scalar("step", 0.3)
                          .dtype("dtype", DType::kBFloat16)
                          .run1(),
                      DType::kBFloat16, {4}, {1.0, 1.296875, 1.6015625, 1.8984375}));
  EXPECT_TRUE(matches(OpRunner("aten.arange.start_step")
                          .scalar("start", 0.0)
                          .scalar("end", 1)
                          .scalar("step", 0.1)
                          .run1(),
                      DType::kFloat32, {10}, {0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}));
  // block_tiny's rotary frequencies: arange(0, 16, 2, dtype=float32).
  EXPECT_TRUE(matches(OpRunner("aten.arange.start_step")
                          .scalar("start", 0)
                          .scalar("end", 16)
                          .scalar("step", 2)
                          .dtype("dtype", DType::kFloat32)
                          .run1(),
                      DType::kFloat32, {8}, {0, 2, 4, 6, 8, 10, 12, 14}));
  EXPECT_TRUE(matches(OpRunner("aten.arange.start_step")
                          .scalar("start", 0)
                          .scalar("end", 10)
                          .scalar("step", 3)
                          .dtype("dtype", DType::kInt32)
                          .run1(),
                      DType::kInt32, {4}, {0, 3, 6, 9}));
}

TEST(Arange, IntegerDtypeWithFloatArguments) {
  // int64 truncates the arguments, then counts in integers: [-2, 2) step 1.
  EXPECT_TRUE(matches(OpRunner("aten.arange.start_step")
                          .scalar("start", -2.5)
                          .scalar("end", 2)
                          .scalar("step", 1.5)
                          .dtype("dtype", DType::kInt64)
                          .run1(),
                      DType::kInt64, {4}, {-2, -1, 0, 1}));
  // Other integer dtypes count ceil((end - start) / step) in double.
  EXPECT_TRUE(matches(OpRunner("aten.arange.start_step")
                          .scalar("start", -2.5)
                          .scalar("end", 2)
                          .scalar("step", 1.5)
                          .dtype("dtype", DType::kInt32)
                          .run1(),
                      DType::kInt32, {3}, {-2, -1, 0}));
  EXPECT_TRUE(matches(OpRunner("aten.arange.start")
                          .scalar("start", 0)
                          .scalar("end", 2.5)
                          .dtype("dtype", DType::kInt64)
                          .run1(),
                      DType::kInt64, {2}, {0, 1}));
}

TEST(Arange, Errors) {
  ANVIL_EXPECT_ERROR(OpRunner("aten.arange.start").scalar("start", 5).scalar("end", 1).run1(),
                     "upper bound and lower bound inconsistent with step sign");
  ANVIL_EXPECT_ERROR(OpRunner("aten.arange.start_step")
                         .scalar("start", 0)
                         .scalar("end", 3)
                         .scalar("step", 0)
                         .run1(),
                     "step must be nonzero");
  // A step that truncates to 0 for an integer dtype.
  ANVIL_EXPECT_ERROR(OpRunner("aten.arange.start_step")
                         .scalar("start", -1.0)
                         .scalar("end", 1.0)
                         .scalar("step", 0.5)
                         .dtype("dtype", DType::kInt32)
                         .run1(),
                     "step must be nonzero");
  ANVIL_EXPECT_ERROR(OpRunner("aten.arange.default").scalar("end", std::nan("")).run1(),
                     "expected finite start and end");
}

TEST(Arange, SymbolicEnd) {
  // llama-style arange(sym_size) with the kernel seeing the concrete value.
  OpRunner r("aten.arange.default");
  r.symint("end", s0(), 4).device("device", Device::cpu()).scalar("pin_memory", false);
  auto t = r.shape();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].str(), "i64[s0]");
  // The kernel runs on the resolved value (OpRunner::run would compare [4] with [s0]).
  ir::KernelContext ctx(r.node(), {int64_t{4}, Device::cpu(), false});
  auto outs = ir::find_op("aten.arange.default")->kernel(ctx);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_TRUE(matches(std::get<Tensor>(outs[0]), DType::kInt64, {4}, {0, 1, 2, 3}));

  auto t2 = OpRunner("aten.arange.start").scalar("start", 2).symint("end", s0(), 7).shape();
  EXPECT_EQ(t2[0].sizes[0], s0() - SymInt(2));
  auto t3 = OpRunner("aten.arange.start_step")
                .scalar("start", 0)
                .symint("end", s0(), 7)
                .scalar("step", 2)
                .dtype("dtype", DType::kFloat32)
                .shape();
  EXPECT_EQ(t3[0].dtype, DType::kFloat32);
  EXPECT_EQ(t3[0].sizes[0], (s0() + SymInt(1)).floordiv(SymInt(2)));
  EXPECT_EQ(t3[0].sizes[0].evaluate({{"s0", 7}}), 4);
  EXPECT_EQ(t3[0].sizes[0].evaluate({{"s0", 8}}), 4);
  // Negative step with a symbolic start: ceil((s0 - 0) / 3).
  auto t4 = OpRunner("aten.arange.start_step")
                .symint("start", s0(), 7)
                .scalar("end", 0)
                .scalar("step", -3)
                .shape();
  EXPECT_EQ(t4[0].sizes[0].evaluate({{"s0", 7}}), 3);
  EXPECT_EQ(t4[0].sizes[0].evaluate({{"s0", 6}}), 2);
  // A float step with symbolic bounds cannot be sized symbolically.
  ANVIL_EXPECT_ERROR(OpRunner("aten.arange.start_step")
                         .scalar("start", 0)
                         .symint("end", s0(), 7)
                         .scalar("step", 0.5)
                         .shape(),
                     "arange with symbolic bounds needs int arguments and a constant nonzero step");
}

// ---- full / zeros / ones / empty / scalar_tensor

TEST(Full, DtypeFromFillValue) {
  EXPECT_TRUE(
      matches(OpRunner("aten.full.default").ints("size", {2}).scalar("fill_value", true).run1(),
              DType::kBool, {2}, {1, 1}));
  EXPECT_TRUE(
      matches(OpRunner("aten.full.default").ints("size", {2, 1}).scalar("fill_value", 3).run1(),
              DType::kInt64, {2, 1}, {3, 3}));
  EXPECT_TRUE(
      matches(OpRunner("aten.full.default").ints("size", {2}).scalar("fill_value", 2.5).run1(),
              DType::kFloat32, {2}, {2.5, 2.5}));
  EXPECT_TRUE(matches(OpRunner("aten.full.default")
                          .ints("size", {2})
                          .scalar("fill_value", 2.7)
                          .dtype("dtype", DType::kInt64)
                          .run1(),
                      DType::kInt64, {2}, {2, 2}));
  EXPECT_TRUE(matches(OpRunner("aten.full.default")
                          .ints("size", {2})
                          .scalar("fill_value", -1.5)
                          .dtype("dtype", DType::kBFloat16)
                          .run1(),
                      DType::kBFloat16, {2}, {-1.5, -1.5}));
  // Large int64 fill values stay exact.
  Tensor big = OpRunner("aten.full.default")
                   .ints("size", {1})
                   .scalar("fill_value", int64_t{9007199254740993})
                   .run1();
  EXPECT_EQ(big.data<int64_t>()[0], int64_t{9007199254740993});
  // An empty size list gives a 0-dim tensor.
  EXPECT_TRUE(
      matches(OpRunner("aten.full.default").ints("size", {}).scalar("fill_value", 4.0).run1(),
              DType::kFloat32, {}, {4.0}));
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.full.default").ints("size", {2, -1}).scalar("fill_value", 1).run1(),
      "cannot create a tensor with a negative dimension");
}

TEST(Full, SymbolicSizesAndDevice) {
  auto t = OpRunner("aten.full.default")
               .symints("size", {s0(), 4}, {3, 4})
               .scalar("fill_value", 1)
               .device("device", Device::cuda(0))
               .shape();
  EXPECT_EQ(t[0].str(), "i64[s0, 4]");
  EXPECT_EQ(t[0].device, Device::cuda(0));
  // The kernel sees the resolved sizes.
  EXPECT_TRUE(matches(
      OpRunner("aten.full.default").symints("size", {3, 4}, {3, 4}).scalar("fill_value", 1).run1(),
      DType::kInt64, {3, 4}, std::vector<double>(12, 1)));
}

TEST(ZerosOnesEmpty, DefaultFloat32AndDtype) {
  EXPECT_TRUE(matches(OpRunner("aten.zeros.default").ints("size", {2, 2}).run1(), DType::kFloat32,
                      {2, 2}, {0, 0, 0, 0}));
  EXPECT_TRUE(matches(
      OpRunner("aten.ones.default").ints("size", {3}).dtype("dtype", DType::kBFloat16).run1(),
      DType::kBFloat16, {3}, {1, 1, 1}));
  EXPECT_TRUE(
      matches(OpRunner("aten.ones.default").ints("size", {2}).dtype("dtype", DType::kInt64).run1(),
              DType::kInt64, {2}, {1, 1}));
  EXPECT_TRUE(matches(OpRunner("aten.empty.memory_format")
                          .ints("size", {2, 0})
                          .dtype("dtype", DType::kInt64)
                          .memory_format("memory_format", 1)
                          .run1(),
                      DType::kInt64, {2, 0}, {}));
  EXPECT_TRUE(matches(OpRunner("aten.empty.memory_format").ints("size", {2}).run1(),
                      DType::kFloat32, {2}, {0, 0}));
  auto t = OpRunner("aten.zeros.default")
               .symints("size", {s0(), SymInt(2) * s0()}, {1, 2})
               .dtype("dtype", DType::kBool)
               .shape();
  EXPECT_EQ(t[0].str(), "bool[s0, 2*s0]");
  ANVIL_EXPECT_ERROR(OpRunner("aten.ones.default").ints("size", {-2}).run1(),
                     "cannot create a tensor with a negative dimension");
}

TEST(ScalarTensor, Float32UnlessDtypeGiven) {
  EXPECT_TRUE(matches(OpRunner("aten.scalar_tensor.default").scalar("s", 3).run1(), DType::kFloat32,
                      {}, {3.0}));
  EXPECT_TRUE(matches(OpRunner("aten.scalar_tensor.default").scalar("s", true).run1(),
                      DType::kFloat32, {}, {1.0}));
  EXPECT_TRUE(matches(
      OpRunner("aten.scalar_tensor.default").scalar("s", 2.5).dtype("dtype", DType::kInt64).run1(),
      DType::kInt64, {}, {2}));
  EXPECT_TRUE(matches(OpRunner("aten.scalar_tensor.default")
                          .scalar("s", -0.75)
                          .dtype("dtype", DType::kBFloat16)
                          .run1(),
                      DType::kBFloat16, {}, {-0.75}));
}

// ---- *_like

TEST(Like, DtypeAndSizesFromSelf) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6}).transpose(0, 1);  // non-contiguous [3, 2]
  EXPECT_TRUE(matches(OpRunner("aten.zeros_like.default").tensor("self", x).run1(), DType::kFloat32,
                      {3, 2}, {0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(matches(OpRunner("aten.ones_like.default")
                          .tensor("self", x)
                          .dtype("dtype", DType::kInt64)
                          .memory_format("memory_format", 4)
                          .run1(),
                      DType::kInt64, {3, 2}, {1, 1, 1, 1, 1, 1}));
  EXPECT_TRUE(matches(OpRunner("aten.ones_like.default").tensor("self", bf16({2}, {7, 8})).run1(),
                      DType::kBFloat16, {2}, {1, 1}));
  // full_like takes self's dtype, not the fill value's: int32 truncates 2.7.
  EXPECT_TRUE(matches(OpRunner("aten.full_like.default")
                          .tensor("self", i32({2}, {0, 0}))
                          .scalar("fill_value", 2.7)
                          .run1(),
                      DType::kInt32, {2}, {2, 2}));
  EXPECT_TRUE(matches(OpRunner("aten.full_like.default")
                          .tensor("self", i64({1, 2}, {0, 0}))
                          .scalar("fill_value", 1.5)
                          .dtype("dtype", DType::kFloat32)
                          .run1(),
                      DType::kFloat32, {1, 2}, {1.5, 1.5}));
  // empty_like: self's sizes and dtype (or its dtype argument), zero-filled here.
  EXPECT_TRUE(matches(OpRunner("aten.empty_like.default").tensor("self", x).run1(),
                      DType::kFloat32, {3, 2}, {0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(matches(OpRunner("aten.empty_like.default")
                          .tensor("self", x)
                          .dtype("dtype", DType::kInt32)
                          .run1(),
                      DType::kInt32, {3, 2}, {0, 0, 0, 0, 0, 0}));
  auto t =
      OpRunner("aten.zeros_like.default").sym_tensor("self", DType::kBFloat16, {s0(), 3}).shape();
  EXPECT_EQ(t[0].str(), "bf16[s0, 3]");
}

// ---- new_*

TEST(NewFactories, DtypeFromSelfUnlessGiven) {
  Tensor self = bf16({2}, {1, 2});
  EXPECT_TRUE(
      matches(OpRunner("aten.new_ones.default").tensor("self", self).ints("size", {2, 3}).run1(),
              DType::kBFloat16, {2, 3}, {1, 1, 1, 1, 1, 1}));
  // As in llama/bert exports: new_ones(self, [], dtype=torch.bool).
  EXPECT_TRUE(matches(OpRunner("aten.new_ones.default")
                          .tensor("self", i64({2, 2}, {0, 0, 0, 0}))
                          .ints("size", {})
                          .dtype("dtype", DType::kBool)
                          .scalar("pin_memory", false)
                          .run1(),
                      DType::kBool, {}, {1}));
  EXPECT_TRUE(matches(
      OpRunner("aten.new_zeros.default").tensor("self", i64({1}, {5})).ints("size", {3}).run1(),
      DType::kInt64, {3}, {0, 0, 0}));
  EXPECT_TRUE(matches(OpRunner("aten.new_full.default")
                          .tensor("self", i32({1}, {5}))
                          .ints("size", {2})
                          .scalar("fill_value", 2.7)
                          .run1(),
                      DType::kInt32, {2}, {2, 2}));
  EXPECT_TRUE(matches(OpRunner("aten.new_full.default")
                          .tensor("self", f32({2, 3}, {0, 0, 0, 0, 0, 0}).transpose(0, 1))
                          .ints("size", {2})
                          .scalar("fill_value", true)
                          .run1(),
                      DType::kFloat32, {2}, {1, 1}));
  EXPECT_TRUE(matches(OpRunner("aten.new_empty.default")
                          .tensor("self", self)
                          .ints("size", {1, 2})
                          .dtype("dtype", DType::kFloat32)
                          .run1(),
                      DType::kFloat32, {1, 2}, {0, 0}));
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.new_zeros.default").tensor("self", self).ints("size", {-1}).run1(),
      "cannot create a tensor with a negative dimension");
}

TEST(NewFactories, SymbolicSizeAndDevice) {
  OpRunner r("aten.new_ones.default");
  r.sym_tensor("self", DType::kFloat32, {s0(), 4}).symints("size", {s0(), 1}, {5, 1});
  auto t = r.shape();
  EXPECT_EQ(t[0].str(), "f32[s0, 1]");
  EXPECT_EQ(t[0].device, Device::cpu());
}

}  // namespace
}  // namespace anvil
