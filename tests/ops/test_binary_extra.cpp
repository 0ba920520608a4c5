// More binary ops: atan2, fmod, remainder, clamp.Tensor (src/ops/binary_extra.cpp), bitwise and
// logical xor and the Scalar forms of bitwise and / or (src/ops/compare.cpp), div.Scalar_mode
// (src/ops/binary.cpp). Expected values from PyTorch 2.11 (torch.remainder(a, b), ...).
#include <gtest/gtest.h>

#include <limits>

#include "common/check.h"
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

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(OpsBinaryMore, Atan2) {
  const Tensor y = f32({8}, {1.0, -1.0, 0.0, 0.0, -0.0, kInf, kNaN, 3.0});
  const Tensor x = f32({8}, {0.0, 0.0, -1.0, 1.0, -1.0, kInf, 1.0, -4.0});
  const std::vector<double> want = {1.5707963705062866,
                                    -1.5707963705062866,
                                    3.1415927410125732,
                                    0.0,
                                    -3.1415927410125732,
                                    0.7853981852531433,
                                    kNaN,
                                    2.498091697692871};
  Tensor r = OpRunner("aten.atan2.default").tensor("self", y).tensor("other", x).run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {8}, want));
  r = OpRunner("aten.atan2.default")
          .tensor("self", y.to(DType::kFloat64))
          .tensor("other", x.to(DType::kInt32))  // f64 with i32: f64
          .run1();
  EXPECT_EQ(r.dtype(), DType::kFloat64);
  // broadcast [2, 1] with [3]
  r = OpRunner("aten.atan2.default")
          .tensor("self", f32({2, 1}, {1.0, -2.0}))
          .tensor("other", f32({3}, {0.5, -1.0, 3.0}))
          .run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {2, 3},
                      {1.1071487665176392, 2.356194496154785, 0.32175055146217346,
                       -1.3258177042007446, -2.0344438552856445, -0.588002622127533}));
  // integers and bool promote to float32
  r = OpRunner("aten.atan2.default")
          .tensor("self", i64({3}, {1, -1, 0}))
          .tensor("other", i64({3}, {0, 0, -1}))
          .run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {3},
                      {1.5707963705062866, -1.5707963705062866, 3.1415927410125732}));
  r = OpRunner("aten.atan2.default")
          .tensor("self", boolean({1}, {1}))
          .tensor("other", boolean({1}, {1}))
          .run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {1}, {0.7853981852531433}));
}

TEST(OpsBinaryMore, FmodAndRemainderOfFloats) {
  const Tensor a = f32({12}, {5, -5, 5, -5, 5.5, kInf, 1, -0.0, 0, 3, 7.5, -7.5});
  const Tensor b = f32({12}, {3, 3, -3, -3, 0, 2, kInf, 2, -2, -kInf, 2.5, 2});
  Tensor r = OpRunner("aten.fmod.Tensor").tensor("self", a).tensor("other", b).run1();
  EXPECT_TRUE(
      matches(r, DType::kFloat32, {12}, {2, -2, 2, -2, kNaN, kNaN, 1, -0.0, 0, 3, 0, -1.5}));
  r = OpRunner("aten.remainder.Tensor").tensor("self", a).tensor("other", b).run1();
  EXPECT_TRUE(
      matches(r, DType::kFloat32, {12}, {2, 1, -1, -2, kNaN, kNaN, 1, -0.0, 0, -kInf, 0, 0.5}));
  r = OpRunner("aten.remainder.Tensor")
          .tensor("self", a.to(DType::kFloat64))
          .tensor("other", b.to(DType::kFloat64))
          .run1();
  EXPECT_TRUE(
      matches(r, DType::kFloat64, {12}, {2, 1, -1, -2, kNaN, kNaN, 1, -0.0, 0, -kInf, 0, 0.5}));
  // number divisors; remainder(-3, 1.5) is -0.0 (fmod's zero keeps its sign)
  const Tensor x = f32({2, 3}, {0.5, -1.25, 2.0, 4.0, 0.0, -3.0});
  r = OpRunner("aten.fmod.Scalar").tensor("self", x).scalar("other", -1.5).run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {2, 3}, {0.5, -1.25, 0.5, 1.0, 0.0, -0.0}));
  r = OpRunner("aten.remainder.Scalar").tensor("self", x).scalar("other", 1.5).run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {2, 3}, {0.5, 0.25, 0.5, 1.0, 0.0, -0.0}));
  r = OpRunner("aten.remainder.Scalar")
          .tensor("self", x.transpose(0, 1))
          .scalar("other", -1.5)
          .run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {3, 2}, {-1.0, -0.5, -1.25, 0.0, -1.0, -0.0}));
  // a bfloat16 tensor divides by bfloat16(2.1) = 2.09375, as PyTorch does
  r = OpRunner("aten.fmod.Scalar").tensor("self", bf16({1}, {5.3})).scalar("other", 2.1).run1();
  EXPECT_TRUE(matches(r, DType::kBFloat16, {1}, {1.125}));
  EXPECT_EQ(r.to_doubles()[0], 1.125);
  r = OpRunner("aten.remainder.Scalar")
          .tensor("self", bf16({1}, {-5.3}))
          .scalar("other", 2.1)
          .run1();
  EXPECT_EQ(r.to_doubles()[0], 0.96875);
}

TEST(OpsBinaryMore, FmodAndRemainderOfIntegers) {
  const Tensor a = i64({4}, {5, -5, 5, -5}), b = i64({4}, {3, 3, -3, -3});
  Tensor r = OpRunner("aten.fmod.Tensor").tensor("self", a).tensor("other", b).run1();
  EXPECT_TRUE(matches(r, DType::kInt64, {4}, {2, -2, 2, -2}));
  r = OpRunner("aten.remainder.Tensor").tensor("self", a).tensor("other", b).run1();
  EXPECT_TRUE(matches(r, DType::kInt64, {4}, {2, 1, -1, -2}));
  // int32 stays int32; a [1] divisor broadcasts
  r = OpRunner("aten.remainder.Tensor")
          .tensor("self", i32({3}, {5, -5, 7}))
          .tensor("other", i64({1}, {-3}).to(DType::kInt32))
          .run1();
  EXPECT_TRUE(matches(r, DType::kInt32, {3}, {-1, -2, -2}));
  r = OpRunner("aten.remainder.Tensor")
          .tensor("self", i64({2, 1}, {5, -7}))
          .tensor("other", i64({3}, {2, -3, 4}))
          .run1();
  EXPECT_TRUE(matches(r, DType::kInt64, {2, 3}, {1, -1, 1, 1, -1, 1}));
  r = OpRunner("aten.fmod.Scalar").tensor("self", i32({3}, {5, -5, 7})).scalar("other", -3).run1();
  EXPECT_TRUE(matches(r, DType::kInt32, {3}, {2, -2, 1}));
  // uint8 251 (torch.tensor([-5], dtype=torch.uint8)) % 3 = 2
  r = OpRunner("aten.remainder.Scalar")
          .tensor("self", Tensor::from_vector<uint8_t>({5, 251}))
          .scalar("other", 3)
          .run1();
  EXPECT_TRUE(matches(r, DType::kUInt8, {2}, {2, 2}));
  // a float number makes the result float: fmod(5, 2.5) = 0
  r = OpRunner("aten.fmod.Scalar").tensor("self", i64({1}, {5})).scalar("other", 2.5).run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {1}, {0.0}));
  // INT64_MIN % -1 is 0 (no overflow)
  const Tensor mn = Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::min()});
  for (const char* op : {"aten.fmod.Scalar", "aten.remainder.Scalar"}) {
    r = OpRunner(op).tensor("self", mn).scalar("other", -1).run1();
    EXPECT_EQ(r.data<int64_t>()[0], 0) << op;
  }
  // integer division by zero raises, as PyTorch's "ZeroDivisionError"
  for (const char* op : {"aten.fmod.Scalar", "aten.remainder.Scalar"})
    ANVIL_EXPECT_ERROR(OpRunner(op).tensor("self", i64({2}, {5, 1})).scalar("other", 0).run(),
                       "ZeroDivisionError")
        << op;
  for (const char* op : {"aten.fmod.Tensor", "aten.remainder.Tensor"})
    ANVIL_EXPECT_ERROR(
        OpRunner(op).tensor("self", i64({2}, {5, 1})).tensor("other", i64({2}, {2, 0})).run(),
        "ZeroDivisionError")
        << op;
  // float division by zero is NaN, not an error
  r = OpRunner("aten.remainder.Scalar").tensor("self", f32({2}, {5, -5})).scalar("other", 0).run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {2}, {kNaN, kNaN}));
  // bool has no kernel
  ANVIL_EXPECT_ERROR(OpRunner("aten.fmod.Tensor")
                         .tensor("self", boolean({1}, {1}))
                         .tensor("other", boolean({1}, {1}))
                         .run(),
                     "fmod is not implemented for bool");
  ANVIL_EXPECT_ERROR(OpRunner("aten.remainder.Scalar")
                         .sym_tensor("self", DType::kBool, {SymInt(2)})
                         .scalar("other", true)
                         .shape(),
                     "remainder is not implemented for bool");
}

TEST(OpsBinaryMore, ClampWithTensorBounds) {
  // NaN in x or in a bound gives NaN; min > max gives max
  Tensor r = OpRunner("aten.clamp.Tensor")
                 .tensor("self", f32({5}, {1, 5, kNaN, -3, 2}))
                 .tensor("min", f32({5}, {2, 2, 2, kNaN, 3}))
                 .tensor("max", f32({5}, {4, 4, 4, 4, 1}))
                 .run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {5}, {2, 4, kNaN, kNaN, 1}));
  // broadcast: self [2, 1], min [2], max 0-dim
  r = OpRunner("aten.clamp.Tensor")
          .tensor("self", f32({2, 1}, {1, 5}))
          .tensor("min", f32({2}, {2, 0}))
          .tensor("max", Tensor::scalar(4.0, DType::kFloat32))
          .run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {2, 2}, {2, 1, 4, 4}));
  // one bound only (min=None or max=None)
  r = OpRunner("aten.clamp.Tensor")
          .tensor("self", i64({3}, {1, 5, 9}))
          .none("min")
          .tensor("max", f32({3}, {0.5, 2.5, 20}))
          .run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {3}, {0.5, 2.5, 9}));
  r = OpRunner("aten.clamp.Tensor")
          .tensor("self", i64({3}, {1, 5, 9}))
          .tensor("min", i64({3}, {2, 2, 2}))
          .run1();
  EXPECT_TRUE(matches(r, DType::kInt64, {3}, {2, 5, 9}));
  // an integer tensor with a 0-dim float bound becomes float
  r = OpRunner("aten.clamp.Tensor")
          .tensor("self", i64({2}, {1, 5}))
          .tensor("min", Tensor::scalar(2.5, DType::kFloat32))
          .run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {2}, {2.5, 5}));
  r = OpRunner("aten.clamp.Tensor")
          .tensor("self", boolean({2}, {1, 0}))
          .tensor("min", boolean({2}, {0, 1}))
          .run1();
  EXPECT_TRUE(matches(r, DType::kBool, {2}, {1, 1}));
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.clamp.Tensor").tensor("self", f32({1}, {1})).none("min").none("max").run(),
      "at least one of 'min' or 'max' must not be None");
}

TEST(OpsBinaryMore, BitwiseXorAndScalarForms) {
  Tensor r = OpRunner("aten.bitwise_xor.Tensor")
                 .tensor("self", i32({2}, {12, -1}))
                 .tensor("other", i64({2}, {10, 5}))
                 .run1();
  EXPECT_TRUE(matches(r, DType::kInt64, {2}, {6, -6}));
  r = OpRunner("aten.__xor__.Tensor")
          .tensor("self", boolean({4}, {1, 1, 0, 0}))
          .tensor("other", boolean({4}, {1, 0, 1, 0}))
          .run1();
  EXPECT_TRUE(matches(r, DType::kBool, {4}, {0, 1, 1, 0}));
  r = OpRunner("aten.bitwise_xor.Scalar")
          .tensor("self", boolean({2}, {1, 0}))
          .scalar("other", true)
          .run1();
  EXPECT_TRUE(matches(r, DType::kBool, {2}, {0, 1}));
  // a Python int with a bool tensor gives int64
  r = OpRunner("aten.__xor__.Scalar")
          .tensor("self", boolean({2}, {1, 0}))
          .scalar("other", 3)
          .run1();
  EXPECT_TRUE(matches(r, DType::kInt64, {2}, {2, 3}));
  // the number wraps to the tensor's dtype: uint8 & 300 (= 44) -> 4, int8 | -1 -> -1
  r = OpRunner("aten.bitwise_and.Scalar")
          .tensor("self", Tensor::from_vector<uint8_t>({5, 6}))
          .scalar("other", 300)
          .run1();
  EXPECT_TRUE(matches(r, DType::kUInt8, {2}, {4, 4}));
  r = OpRunner("aten.bitwise_or.Scalar")
          .tensor("self", Tensor::from_vector<int8_t>({5, 6}))
          .scalar("other", -1)
          .run1();
  EXPECT_TRUE(matches(r, DType::kInt8, {2}, {-1, -1}));
  r = OpRunner("aten.__and__.Scalar")
          .tensor("self", i64({3}, {7, -8, 5}))
          .scalar("other", 6)
          .run1();
  EXPECT_TRUE(matches(r, DType::kInt64, {3}, {6, 0, 4}));
  r = OpRunner("aten.__or__.Scalar").tensor("self", i64({3}, {7, -8, 5})).scalar("other", 9).run1();
  EXPECT_TRUE(matches(r, DType::kInt64, {3}, {15, -7, 13}));
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.bitwise_xor.Scalar").tensor("self", f32({1}, {1})).scalar("other", 3).run(),
      "bitwise xor needs bool or integer operands");
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.bitwise_and.Scalar").tensor("self", i64({1}, {5})).scalar("other", 2.0).run(),
      "bitwise and / or need bool or integer operands");
}

TEST(OpsBinaryMore, LogicalXor) {
  Tensor r = OpRunner("aten.logical_xor.default")
                 .tensor("self", f32({4}, {0, 1, kNaN, 2}))
                 .tensor("other", i64({4}, {1, 1, 0, 0}))
                 .run1();
  EXPECT_TRUE(matches(r, DType::kBool, {4}, {1, 0, 1, 1}));
  r = OpRunner("aten.logical_xor.default")
          .tensor("self", f32({4}, {0, 1, kNaN, 2}))
          .tensor("other", Tensor::scalar(1.0, DType::kBool))
          .run1();
  EXPECT_TRUE(matches(r, DType::kBool, {4}, {1, 0, 0, 0}));
}

TEST(OpsBinaryMore, DivScalarMode) {
  Tensor r = OpRunner("aten.div.Scalar_mode")
                 .tensor("self", i64({2}, {7, -7}))
                 .scalar("other", 2)
                 .string("rounding_mode", "floor")
                 .run1();
  EXPECT_TRUE(matches(r, DType::kInt64, {2}, {3, -4}));
  r = OpRunner("aten.div.Scalar_mode")
          .tensor("self", i64({2}, {7, -7}))
          .scalar("other", 2)
          .string("rounding_mode", "trunc")
          .run1();
  EXPECT_TRUE(matches(r, DType::kInt64, {2}, {3, -3}));
  r = OpRunner("aten.div.Scalar_mode")
          .tensor("self", f32({2}, {7, -7}))
          .scalar("other", 2)
          .string("rounding_mode", "floor")
          .run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {2}, {3, -4}));
  r = OpRunner("aten.div.Scalar_mode")
          .tensor("self", i64({1}, {7}))
          .scalar("other", 2.0)
          .string("rounding_mode", "floor")
          .run1();
  EXPECT_TRUE(matches(r, DType::kFloat32, {1}, {3}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.div.Scalar_mode")
                         .tensor("self", i64({1}, {7}))
                         .scalar("other", 0)
                         .string("rounding_mode", "floor")
                         .run(),
                     "ZeroDivisionError");
  ANVIL_EXPECT_ERROR(OpRunner("aten.div.Scalar_mode")
                         .tensor("self", boolean({1}, {1}))
                         .scalar("other", true)
                         .string("rounding_mode", "floor")
                         .run(),
                     "rounding division is not implemented for bool");
}

TEST(OpsBinaryMore, SymbolicShapeRules) {
  const SymInt s0 = SymInt::symbol("s0");
  auto rule = [&](const char* target, DType a, DType b) {
    auto t = OpRunner(target).sym_tensor("self", a, {s0, 1}).sym_tensor("other", b, {4}).shape();
    return t.size() == 1 ? t[0].str() : std::string("?");
  };
  EXPECT_EQ(rule("aten.atan2.default", DType::kInt32, DType::kInt64), "f32[s0, 4]");
  EXPECT_EQ(rule("aten.fmod.Tensor", DType::kInt32, DType::kInt64), "i64[s0, 4]");
  EXPECT_EQ(rule("aten.remainder.Tensor", DType::kBFloat16, DType::kFloat32), "f32[s0, 4]");
  EXPECT_EQ(rule("aten.bitwise_xor.Tensor", DType::kBool, DType::kBool), "bool[s0, 4]");
  EXPECT_EQ(rule("aten.logical_xor.default", DType::kFloat32, DType::kInt64), "bool[s0, 4]");
  auto clamp = OpRunner("aten.clamp.Tensor")
                   .sym_tensor("self", DType::kInt64, {s0, 1})
                   .sym_tensor("min", DType::kFloat32, {4})
                   .shape();
  EXPECT_EQ(clamp.at(0).str(), "f32[s0, 4]");
  ANVIL_EXPECT_ERROR(rule("aten.bitwise_xor.Tensor", DType::kFloat32, DType::kInt64),
                     "bitwise xor needs bool or integer operands");
}

}  // namespace
}  // namespace anvil::ops
