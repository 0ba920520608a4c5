// Binary arithmetic (src/ops/binary.cpp) and the promotion / broadcasting helpers of
// src/ops/common.h. Expected values come from PyTorch (torch.add(a, b, alpha=2), ...) or by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/check.h"
#include "ops/common.h"
#include "ops/op_test_util.h"

namespace anvil::ops {
namespace {

using testing::bf16;
using testing::boolean;
using testing::f32;
using testing::f64;
using testing::i32;
using testing::i64;
using testing::matches;
using testing::OpRunner;
using testing::shares_storage;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

SymInt sym(const char* name) { return SymInt::symbol(name); }

// ---- common.h: result_type, broadcasting, loops

TEST(OpsCommon, ResultTypeFollowsTorch) {
  auto tensor = [](DType dt, int64_t dim) { return Operand{Tensor::empty(Shape(dim, 1), dt), {}}; };
  auto num = [](Scalar s) { return Operand{std::nullopt, s}; };
  // int tensor + Python float -> default float dtype.
  EXPECT_EQ(result_type({tensor(DType::kInt64, 1), num(Scalar::from_float(2.5))}), DType::kFloat32);
  // bool tensor + Python int -> int64.
  EXPECT_EQ(result_type({tensor(DType::kBool, 2), num(Scalar::from_int(1))}), DType::kInt64);
  // Same category: the dimensioned tensor wins over a Python number.
  EXPECT_EQ(result_type({tensor(DType::kInt32, 1), num(Scalar::from_int(5))}), DType::kInt32);
  EXPECT_EQ(result_type({tensor(DType::kBFloat16, 1), num(Scalar::from_float(0.5))}),
            DType::kBFloat16);
  // 0-dim tensors: lower priority within a category, but a higher category still wins.
  EXPECT_EQ(result_type({tensor(DType::kInt32, 1), tensor(DType::kInt64, 0)}), DType::kInt32);
  EXPECT_EQ(result_type({tensor(DType::kFloat32, 2), tensor(DType::kFloat64, 0)}), DType::kFloat32);
  EXPECT_EQ(result_type({tensor(DType::kInt64, 1), tensor(DType::kFloat64, 0)}), DType::kFloat64);
  EXPECT_EQ(result_type({tensor(DType::kInt64, 0), num(Scalar::from_float(1.0))}), DType::kFloat32);
  EXPECT_EQ(result_type({tensor(DType::kFloat64, 0), num(Scalar::from_float(1.0))}),
            DType::kFloat64);
  // Dimensioned tensors promote normally.
  EXPECT_EQ(result_type({tensor(DType::kBFloat16, 1), tensor(DType::kFloat16, 1)}),
            DType::kFloat32);
  EXPECT_EQ(result_type({tensor(DType::kUInt8, 1), tensor(DType::kInt8, 1)}), DType::kInt16);
  // Numbers alone.
  EXPECT_EQ(result_type({num(Scalar::from_bool(true)), num(Scalar::from_int(2))}), DType::kInt64);
}

TEST(OpsCommon, CanCast) {
  EXPECT_TRUE(can_cast(DType::kInt64, DType::kFloat32));
  EXPECT_TRUE(can_cast(DType::kFloat64, DType::kBFloat16));
  EXPECT_FALSE(can_cast(DType::kFloat32, DType::kInt64));
  EXPECT_FALSE(can_cast(DType::kInt64, DType::kBool));
  EXPECT_TRUE(can_cast(DType::kBool, DType::kBool));
}

TEST(OpsCommon, SymbolicBroadcast) {
  const SymInt s0 = sym("s0"), s1 = sym("s1");
  EXPECT_EQ(sym_shape_str(broadcast_sym_shapes({s0, 4}, {4}, "t")), "[s0, 4]");
  EXPECT_EQ(sym_shape_str(broadcast_sym_shapes({s0, 1}, {1, s1}, "t")), "[s0, s1]");
  EXPECT_EQ(sym_shape_str(broadcast_sym_shapes({s0 * 2, 3}, {SymInt(2) * s0, 1}, "t")),
            "[" + (s0 * 2).str() + ", 3]");
  ANVIL_EXPECT_ERROR(broadcast_sym_shapes({s0}, {s1}, "t"),
                     "shapes [s0] and [s1] cannot broadcast");
  try {
    broadcast_sym_shapes({s0, 4}, {3}, "here");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[s0, 4]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[3]"), std::string::npos) << e.what();
    EXPECT_EQ(e.where(), "here");
  }
}

TEST(OpsCommon, Map3BroadcastsStridedInputs) {
  // a: transposed [3, 2]; b: expanded row [1, 2] -> [3, 2]; c: 0-dim.
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}).transpose(0, 1);
  Tensor b = i64({1, 2}, {10, 20});
  Tensor c = f64({}, {0.5});
  Tensor out = map3<float, int64_t, double, double>(
      a, b, c, [](float x, int64_t y, double z) { return (x + double(y)) * z; }, "test");
  EXPECT_TRUE(matches(out, DType::kFloat64, {3, 2}, {5.5, 12, 6, 12.5, 6.5, 13}));
}

// ---- add / sub / rsub

TEST(OpsBinary, AddTensorAlphaBroadcast) {
  Tensor a = f32({2, 3}, {1.5, -2.0, 3.25, 0.5, 4.0, -1.0});
  Tensor b = f32({3}, {0.25, 1.0, -3.0});
  Tensor y =
      OpRunner("aten.add.Tensor").tensor("self", a).tensor("other", b).scalar("alpha", 2).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, {2.0, 0.0, -2.75, 1.0, 6.0, -7.0}));
}

TEST(OpsBinary, AddBFloat16Transposed) {
  Tensor a = bf16({2, 2}, {1.5, 2.25, 3.0, -4.5});
  Tensor b = bf16({2, 2}, {0.1, 0.2, 0.3, 0.4}).transpose(0, 1);
  Tensor y = OpRunner("aten.add.Tensor").tensor("self", a).tensor("other", b).run1();
  // torch: tensor([[1.6015625, 2.546875], [3.203125, -4.09375]], dtype=torch.bfloat16)
  EXPECT_TRUE(matches(y, DType::kBFloat16, {2, 2}, {1.6015625, 2.546875, 3.203125, -4.09375}));
}

TEST(OpsBinary, AddPromotesPythonScalars) {
  // int64 tensor + 2.5 -> float32 (torch.add.Tensor with a float `other`, as exports write it).
  Tensor y =
      OpRunner("aten.add.Tensor").tensor("self", i64({3}, {1, 2, -3})).scalar("other", 2.5).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {3}, {3.5, 4.5, -0.5}));
  // bool tensor + 1 -> int64.
  y = OpRunner("aten.add.Tensor").tensor("self", boolean({2}, {1, 0})).scalar("other", 1).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2}, {2, 1}));
  // int32 tensor + int -> int32; int32 + 0-dim int64 tensor -> int32.
  y = OpRunner("aten.add.Scalar").tensor("self", i32({2}, {1, 2})).scalar("other", 5).run1();
  EXPECT_TRUE(matches(y, DType::kInt32, {2}, {6, 7}));
  y = OpRunner("aten.add.Tensor")
          .tensor("self", i32({2}, {1, 2}))
          .tensor("other", i64({}, {7}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kInt32, {2}, {8, 9}));
  // float32 tensor + 0-dim float64 -> float32; int64 tensor + 0-dim float64 -> float64.
  y = OpRunner("aten.add.Tensor")
          .tensor("self", f32({2}, {1, 2}))
          .tensor("other", f64({}, {0.5}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2}, {1.5, 2.5}));
  y = OpRunner("aten.add.Tensor")
          .tensor("self", i64({2}, {1, 2}))
          .tensor("other", f64({}, {0.5}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat64, {2}, {1.5, 2.5}));
  // bf16 tensor + float scalar stays bf16.
  y = OpRunner("aten.add.Tensor").tensor("self", bf16({2}, {1, 2})).scalar("other", 1e-6).run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {2}, {1, 2}));
}

TEST(OpsBinary, AddInt64NonContiguous) {
  // self: every other column of a [2, 4]; other: a [2, 1] column expanded.
  Tensor base = i64({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor self = base.slice(1, 0, 4, 2);                   // [[1, 3], [5, 7]]
  Tensor other = i64({2, 1}, {100, 200}).expand({2, 2});  // stride 0
  Tensor y = OpRunner("aten.add.Tensor")
                 .tensor("self", self)
                 .tensor("other", other)
                 .scalar("alpha", 3)
                 .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2, 2}, {301, 303, 605, 607}));
}

TEST(OpsBinary, AddIntWrapsLikeTorch) {
  Tensor y = OpRunner("aten.add.Tensor")
                 .tensor("self", i32({1}, {2147483647}))
                 .tensor("other", i32({1}, {1}))
                 .run1();
  EXPECT_TRUE(matches(y, DType::kInt32, {1}, {-2147483648.0}));
}

TEST(OpsBinary, SubAndRsub) {
  Tensor a = f32({2, 3}, {1.5, -2.0, 3.25, 0.5, 4.0, -1.0});
  Tensor b = f32({3}, {0.25, 1.0, -3.0});
  Tensor y =
      OpRunner("aten.sub.Tensor").tensor("self", a).tensor("other", b).scalar("alpha", 0.5).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, {1.375, -2.5, 4.75, 0.375, 3.5, 0.5}));
  y = OpRunner("aten.sub.Tensor").tensor("self", i64({2}, {5, 6})).scalar("other", 1).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2}, {4, 5}));
  y = OpRunner("aten.sub.Scalar").tensor("self", bf16({2}, {5, 6.5})).scalar("other", 0.5).run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {2}, {4.5, 6}));
  // rsub: other - alpha * self.
  y = OpRunner("aten.rsub.Scalar").tensor("self", a).scalar("other", 10).scalar("alpha", 2).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, {7.0, 14.0, 3.5, 9.0, 2.0, 12.0}));
  y = OpRunner("aten.rsub.Tensor")
          .tensor("self", i64({2, 3}, {1, 2, 3, 4, 5, 6}))
          .tensor("other", i64({3}, {10, 20, 30}))
          .scalar("alpha", 3)
          .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2, 3}, {7, 14, 21, -2, 5, 12}));
}

TEST(OpsBinary, SubRejectsBoolAndFloatAlphaForInts) {
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.sub.Tensor").tensor("self", boolean({1}, {1})).scalar("other", 1).run(),
      "subtraction with a bool tensor is not supported");
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.rsub.Scalar").tensor("self", boolean({1}, {1})).scalar("other", 1).run(),
      "subtraction with a bool tensor is not supported");
  ANVIL_EXPECT_ERROR(OpRunner("aten.add.Tensor")
                         .tensor("self", i64({1}, {1}))
                         .tensor("other", i64({1}, {1}))
                         .scalar("alpha", 0.5)
                         .run(),
                     "argument alpha must not be a floating point number");
}

// ---- mul / div

TEST(OpsBinary, MulTensorAndScalar) {
  Tensor a = f32({2, 3}, {1.5, -2.0, 3.25, 0.5, 4.0, -1.0});
  Tensor b = f32({3, 2}, {3.25, -1.0, -2.0, 4.0, 1.5, 0.5}).transpose(0, 1);  // non-contiguous
  Tensor y = OpRunner("aten.mul.Tensor").tensor("self", a).tensor("other", b).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, {4.875, 4.0, 4.875, -0.5, 16.0, -0.5}));
  y = OpRunner("aten.mul.Tensor").tensor("self", i64({3}, {1, -2, 3})).scalar("other", 0.5).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {3}, {0.5, -1.0, 1.5}));
  y = OpRunner("aten.mul.Scalar")
          .tensor("self", i64({2, 2}, {1, -2, 3, 4}).transpose(0, 1))
          .scalar("other", 3)
          .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2, 2}, {3, 9, -6, 12}));
  y = OpRunner("aten.mul.Tensor")
          .tensor("self", bf16({3}, {1.5, -2, 3}))
          .scalar("other", 0.1)
          .run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {3}, {0.150390625, -0.2001953125, 0.30078125}));
  // bool * bool is logical and.
  y = OpRunner("aten.mul.Tensor")
          .tensor("self", boolean({3}, {1, 1, 0}))
          .tensor("other", boolean({3}, {1, 0, 0}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kBool, {3}, {1, 0, 0}));
}

TEST(OpsBinary, TrueDivision) {
  Tensor y = OpRunner("aten.div.Tensor")
                 .tensor("self", i64({3}, {7, -7, 1}))
                 .tensor("other", i64({3}, {2, 2, 3}))
                 .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {3}, {3.5, -3.5, 0.3333333432674408}));
  y = OpRunner("aten.div.Tensor")
          .tensor("self", f32({2, 2}, {1, 2, 3, 4}))
          .scalar("other", 16)
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 2}, {0.0625, 0.125, 0.1875, 0.25}));
  y = OpRunner("aten.div.Scalar").tensor("self", bf16({2}, {1, -3})).scalar("other", 2.0).run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {2}, {0.5, -1.5}));
  y = OpRunner("aten.div.Tensor")
          .tensor("self", f32({3}, {1, -1, 0}))
          .tensor("other", f32({1}, {0}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {3}, {kInf, -kInf, kNaN}));
  // rounding_mode None is true division.
  y = OpRunner("aten.div.Tensor_mode")
          .tensor("self", i64({1}, {7}))
          .tensor("other", i64({1}, {2}))
          .none("rounding_mode")
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {1}, {3.5}));
}

TEST(OpsBinary, RoundingDivision) {
  Tensor num = i64({6}, {7, -7, 7, -7, 0, 9}), den = i64({6}, {2, 2, -2, -2, 3, 3});
  Tensor y = OpRunner("aten.div.Tensor_mode")
                 .tensor("self", num)
                 .tensor("other", den)
                 .string("rounding_mode", "trunc")
                 .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {6}, {3, -3, -3, 3, 0, 3}));
  y = OpRunner("aten.div.Tensor_mode")
          .tensor("self", num)
          .tensor("other", den)
          .string("rounding_mode", "floor")
          .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {6}, {3, -4, -4, 3, 0, 3}));

  Tensor fn = f32({7}, {7.5, -7.5, 7.5, -7.5, -0.0, 1.0, 5.0});
  Tensor fd = f32({7}, {2.0, 2.0, -2.0, -2.0, 3.0, 0.0, 0.1});
  y = OpRunner("aten.div.Tensor_mode")
          .tensor("self", fn)
          .tensor("other", fd)
          .string("rounding_mode", "trunc")
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {7}, {3, -3, -3, 3, -0.0, kInf, 50}));
  y = OpRunner("aten.div.Tensor_mode")
          .tensor("self", fn)
          .tensor("other", fd)
          .string("rounding_mode", "floor")
          .run1();
  // Python floor semantics: 5.0 // 0.1 == 49.0.
  EXPECT_TRUE(matches(y, DType::kFloat32, {7}, {3, -4, -4, 3, -0.0, kInf, 49}));
  EXPECT_TRUE(std::signbit(y.item_at(4)));
  y = OpRunner("aten.div.Tensor_mode")
          .tensor("self", fn.to(DType::kBFloat16))
          .tensor("other", fd.to(DType::kBFloat16))
          .string("rounding_mode", "floor")
          .run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {7}, {3, -4, -4, 3, -0.0, kInf, 49}));

  ANVIL_EXPECT_ERROR(OpRunner("aten.div.Tensor_mode")
                         .tensor("self", num)
                         .tensor("other", i64({1}, {0}))
                         .string("rounding_mode", "floor")
                         .run(),
                     "integer division by zero");
  ANVIL_EXPECT_ERROR(OpRunner("aten.div.Tensor_mode")
                         .tensor("self", num)
                         .tensor("other", den)
                         .string("rounding_mode", "round")
                         .run(),
                     "rounding_mode to be one of None, 'trunc', or 'floor'");
}

// ---- pow

TEST(OpsBinary, PowTensorScalar) {
  Tensor a = f32({2, 3}, {1.5, -2.0, 3.25, 0.5, 4.0, -1.0});
  Tensor y = OpRunner("aten.pow.Tensor_Scalar").tensor("self", a).scalar("exponent", 2).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, {2.25, 4.0, 10.5625, 0.25, 16.0, 1.0}));
  y = OpRunner("aten.pow.Tensor_Scalar")
          .tensor("self", a.transpose(0, 1))
          .scalar("exponent", 3.0)
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {3, 2}, {3.375, 0.125, -8.0, 64.0, 34.328125, -1.0}));
  y = OpRunner("aten.pow.Tensor_Scalar")
          .tensor("self", f32({4}, {4, 2, 0, -1}))
          .scalar("exponent", 0.5)
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {4}, {2.0, 1.4142135381698608, 0.0, kNaN}));
  y = OpRunner("aten.pow.Tensor_Scalar")
          .tensor("self", f32({3}, {4, 2, 0.5}))
          .scalar("exponent", 1.7)
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {3},
                      {10.556063652038574, 3.249009609222412, 0.30778610706329346}));
  y = OpRunner("aten.pow.Tensor_Scalar")
          .tensor("self", bf16({3}, {1.5, -2, 3}))
          .scalar("exponent", 2)
          .run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {3}, {2.25, 4, 9}));
  // int ** int stays int; int ** float becomes float32; bool ** int is int64.
  Tensor x = i64({2, 3}, {1, 2, 3, 4, 5, 6});
  y = OpRunner("aten.pow.Tensor_Scalar").tensor("self", x).scalar("exponent", 2).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2, 3}, {1, 4, 9, 16, 25, 36}));
  y = OpRunner("aten.pow.Tensor_Scalar").tensor("self", x).scalar("exponent", 0.5).run1();
  EXPECT_TRUE(matches(
      y, DType::kFloat32, {2, 3},
      {1.0, 1.4142135381698608, 1.7320507764816284, 2.0, 2.2360680103302, 2.4494898319244385}));
  y = OpRunner("aten.pow.Tensor_Scalar")
          .tensor("self", boolean({2}, {1, 0}))
          .scalar("exponent", 2)
          .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2}, {1, 0}));
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.pow.Tensor_Scalar").tensor("self", x).scalar("exponent", -1).run(),
      "integers to negative integer powers are not allowed");
}

TEST(OpsBinary, PowTensorTensorAndScalarBase) {
  // Integer powers with negative exponents: 1 -> 1, -1 -> +-1, others -> 0.
  Tensor y = OpRunner("aten.pow.Tensor_Tensor")
                 .tensor("self", i64({6}, {2, 1, -1, -1, 3, 0}))
                 .tensor("exponent", i64({6}, {-1, -3, -3, -2, 3, 0}))
                 .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {6}, {0, 1, -1, 1, 27, 1}));
  y = OpRunner("aten.pow.Tensor_Tensor")
          .tensor("self", f32({2, 1}, {2, 3}))
          .tensor("exponent", f32({3}, {0.5, 2, -1}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3},
                      {1.4142135381698608, 4.0, 0.5, 1.7320507764816284, 9.0, 0.3333333432674408}));
  // pow.Scalar: 10000 ** float tensor (the rotary-embedding pattern) and 2 ** int tensor.
  y = OpRunner("aten.pow.Scalar")
          .scalar("self", 10000)
          .tensor("exponent", f32({4}, {0, 0.125, 0.25, 0.375}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {4}, {1.0, 3.1622776985168457, 10.0, 31.62277603149414}));
  y = OpRunner("aten.pow.Scalar").scalar("self", 2).tensor("exponent", i64({3}, {0, 3, 10})).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {3}, {1, 8, 1024}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.pow.Tensor_Tensor")
                         .tensor("self", boolean({1}, {1}))
                         .tensor("exponent", boolean({1}, {1}))
                         .run(),
                     "pow is not supported for bool results");
}

// ---- maximum / minimum

TEST(OpsBinary, MaximumMinimumPropagateNaN) {
  Tensor a = f32({2, 3}, {1.0, kNaN, 3.0, -1.0, 2.0, 5.0});
  Tensor b = f32({3}, {2.0, 0.0, kNaN});
  Tensor y = OpRunner("aten.maximum.default").tensor("self", a).tensor("other", b).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, {2.0, kNaN, kNaN, 2.0, 2.0, kNaN}));
  y = OpRunner("aten.minimum.default").tensor("self", a).tensor("other", b).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, {1.0, kNaN, kNaN, -1.0, 0.0, kNaN}));
  // torch.max(a, b) / torch.min(a, b) export as aten.max.other / aten.min.other
  y = OpRunner("aten.max.other").tensor("self", a).tensor("other", b).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, {2.0, kNaN, kNaN, 2.0, 2.0, kNaN}));
  y = OpRunner("aten.min.other").tensor("self", a).tensor("other", b).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, {1.0, kNaN, kNaN, -1.0, 0.0, kNaN}));
  y = OpRunner("aten.maximum.default")
          .tensor("self", i64({2, 2}, {1, 7, 5, -2}).transpose(0, 1))
          .tensor("other", i64({2}, {3, 0}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2, 2}, {3, 5, 7, 0}));
  y = OpRunner("aten.minimum.default")
          .tensor("self", bf16({2}, {1.5, -2}))
          .tensor("other", bf16({2}, {1, 0.5}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {2}, {1, -2}));
  // float32 tensor with a 0-dim float64 tensor stays float32.
  y = OpRunner("aten.maximum.default")
          .tensor("self", f32({1}, {1}))
          .tensor("other", f64({}, {2}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {1}, {2}));
}

// ---- in-place arithmetic

TEST(OpsBinary, InPlaceAddWritesThroughStrides) {
  Tensor base = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor self = base.transpose(0, 1);  // [3, 2], non-contiguous view of base
  auto outs =
      OpRunner("aten.add_.Tensor").tensor("self", self).tensor("other", f32({2}, {10, 20})).run();
  ASSERT_EQ(outs.size(), 1u);
  const Tensor& y = std::get<Tensor>(outs[0]);
  EXPECT_TRUE(shares_storage(y, base));
  EXPECT_EQ(y.strides(), self.strides());
  EXPECT_TRUE(matches(y, DType::kFloat32, {3, 2}, {11, 24, 12, 25, 13, 26}));
  EXPECT_TRUE(matches(base, DType::kFloat32, {2, 3}, {11, 12, 13, 24, 25, 26}));
}

TEST(OpsBinary, InPlaceScalarsAndDtypes) {
  // The const_and_buffer pattern: buffer.mul_(0.9).add_(1) on float32.
  Tensor buf = f32({3}, {1, 2, 3});
  OpRunner("aten.mul_.Tensor").tensor("self", buf).scalar("other", 0.9).run();
  OpRunner("aten.add_.Tensor").tensor("self", buf).scalar("other", 1).run();
  EXPECT_TRUE(matches(buf, DType::kFloat32, {3}, {1.9, 2.8, 3.7}));
  // bf16 self keeps its dtype; the float32 other is computed in float and rounded once.
  Tensor h = bf16({2}, {1.5, 2});
  OpRunner("aten.mul_.Tensor").tensor("self", h).tensor("other", f32({2}, {0.1, 3})).run();
  EXPECT_TRUE(matches(h, DType::kBFloat16, {2}, {0.150390625, 6}));
  // int64 self: sub_ with alpha, mul_.Scalar, add_.Scalar.
  Tensor n = i64({3}, {10, 20, 30});
  OpRunner("aten.sub_.Tensor")
      .tensor("self", n)
      .tensor("other", i64({3}, {1, 2, 3}))
      .scalar("alpha", 2)
      .run();
  OpRunner("aten.mul_.Scalar").tensor("self", n).scalar("other", 3).run();
  OpRunner("aten.add_.Scalar").tensor("self", n).scalar("other", -4).run();
  EXPECT_TRUE(matches(n, DType::kInt64, {3}, {20, 44, 68}));
  // div_ on float32 with a broadcast other.
  Tensor d = f32({2, 2}, {1, 2, 3, 4});
  OpRunner("aten.div_.Tensor").tensor("self", d).tensor("other", f32({2, 1}, {2, 4})).run();
  EXPECT_TRUE(matches(d, DType::kFloat32, {2, 2}, {0.5, 1, 0.75, 1}));
}

TEST(OpsBinary, InPlaceRejectsBadResults) {
  // torch: "result type Float can't be cast to the desired output type Long".
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.mul_.Tensor").tensor("self", i64({1}, {3})).scalar("other", 0.9).run(),
      "in-place result type cannot be cast to self's dtype");
  ANVIL_EXPECT_ERROR(OpRunner("aten.div_.Tensor")
                         .tensor("self", i64({1}, {3}))
                         .tensor("other", i64({1}, {2}))
                         .run(),
                     "in-place result type cannot be cast to self's dtype");
  // other may not broadcast self to a bigger shape.
  ANVIL_EXPECT_ERROR(OpRunner("aten.add_.Tensor")
                         .tensor("self", f32({3}, {1, 2, 3}))
                         .tensor("other", f32({2, 3}, {1, 2, 3, 4, 5, 6}))
                         .run(),
                     "in-place output does not match the broadcast shape");
}

// ---- shape rules on symbolic shapes

TEST(OpsBinary, SymbolicShapeRules) {
  const SymInt s0 = sym("s0"), s1 = sym("s1");
  auto types = OpRunner("aten.add.Tensor")
                   .sym_tensor("self", DType::kFloat32, {s0, 4})
                   .sym_tensor("other", DType::kFloat32, {4})
                   .shape();
  ASSERT_EQ(types.size(), 1u);
  EXPECT_EQ(types[0].str(), "f32[s0, 4]");
  types = OpRunner("aten.mul.Tensor")
              .sym_tensor("self", DType::kInt64, {s0, 1})
              .scalar("other", 0.5)
              .shape();
  EXPECT_EQ(types[0].str(), "f32[s0, 1]");
  types = OpRunner("aten.sub.Tensor")
              .sym_tensor("self", DType::kBFloat16, {s0, 1})
              .sym_tensor("other", DType::kFloat32, {1, s1})
              .shape();
  EXPECT_EQ(types[0].str(), "f32[s0, s1]");
  types = OpRunner("aten.div.Tensor")
              .sym_tensor("self", DType::kInt64, {s0})
              .sym_tensor("other", DType::kInt64, {})
              .shape();
  EXPECT_EQ(types[0].str(), "f32[s0]");
  types = OpRunner("aten.div.Tensor_mode")
              .sym_tensor("self", DType::kInt64, {s0})
              .scalar("other", 2)
              .string("rounding_mode", "floor")
              .shape();
  EXPECT_EQ(types[0].str(), "i64[s0]");
  types = OpRunner("aten.pow.Scalar")
              .scalar("self", 10000)
              .sym_tensor("exponent", DType::kFloat32, {s0 * 2})
              .shape();
  EXPECT_EQ(types[0].str(), "f32[" + (s0 * 2).str() + "]");
  types = OpRunner("aten.maximum.default")
              .sym_tensor("self", DType::kInt32, {s0, 3})
              .sym_tensor("other", DType::kInt64, {3})
              .shape();
  EXPECT_EQ(types[0].str(), "i64[s0, 3]");
  types = OpRunner("aten.add_.Tensor")
              .sym_tensor("self", DType::kFloat32, {s0, 4})
              .sym_tensor("other", DType::kFloat32, {s0, 1})
              .shape();
  EXPECT_EQ(types[0].str(), "f32[s0, 4]");
  // A symbolic size that does not match: error naming both shapes.
  ANVIL_EXPECT_ERROR(OpRunner("aten.add.Tensor")
                         .sym_tensor("self", DType::kFloat32, {s0, 4})
                         .sym_tensor("other", DType::kFloat32, {s1, 4})
                         .shape(),
                     "shapes [s0, 4] and [s1, 4] cannot broadcast");
  ANVIL_EXPECT_ERROR(OpRunner("aten.add.Tensor")
                         .sym_tensor("self", DType::kFloat32, {s0, 4})
                         .sym_tensor("other", DType::kFloat32, {3})
                         .shape(),
                     "shapes [s0, 4] and [3] cannot broadcast");
  // In place: other may not grow self; the result must be castable to self's dtype.
  ANVIL_EXPECT_ERROR(OpRunner("aten.add_.Tensor")
                         .sym_tensor("self", DType::kFloat32, {4})
                         .sym_tensor("other", DType::kFloat32, {s0, 4})
                         .shape(),
                     "in-place output does not match the broadcast shape");
  ANVIL_EXPECT_ERROR(OpRunner("aten.mul_.Tensor")
                         .sym_tensor("self", DType::kInt64, {4})
                         .scalar("other", 0.9)
                         .shape(),
                     "in-place result type cannot be cast to self's dtype");
  // A SymInt operand promotes like a Python int.
  types = OpRunner("aten.mul.Tensor")
              .sym_tensor("self", DType::kInt32, {s0})
              .symint("other", s0, 3)
              .shape();
  EXPECT_EQ(types[0].str(), "i32[s0]");
}

TEST(OpsBinary, SymIntOperandKernel) {
  Tensor y = OpRunner("aten.mul.Tensor")
                 .tensor("self", i32({2}, {2, 3}))
                 .symint("other", sym("s0"), 5)
                 .run1();
  EXPECT_TRUE(matches(y, DType::kInt32, {2}, {10, 15}));
}

}  // namespace
}  // namespace anvil::ops
