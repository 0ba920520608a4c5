// Unary math, activations and logical / bitwise not (src/ops/unary.cpp). Expected values from
// PyTorch (torch.exp(x), F.gelu(x, approximate="tanh"), ...).
#include <gtest/gtest.h>

#include <limits>
#include <map>

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

/// x = [[0.5, -1.25, 2.0], [4.0, 0.0, -3.0]] (any sign) and xp = [[0.25, 1.5, 2], [4, 9, 0]].
Tensor x_f32() { return f32({2, 3}, {0.5, -1.25, 2.0, 4.0, 0.0, -3.0}); }
Tensor xp_f32() { return f32({2, 3}, {0.25, 1.5, 2.0, 4.0, 9.0, 0.0}); }

struct UnaryCase {
  const char* target;
  bool positive_input;  // uses xp instead of x
  std::vector<double> want;
};

const std::vector<UnaryCase>& float_cases() {
  static const std::vector<UnaryCase> kCases = {
      {"aten.neg.default", false, {-0.5, 1.25, -2.0, -4.0, -0.0, 3.0}},
      {"aten.abs.default", false, {0.5, 1.25, 2.0, 4.0, 0.0, 3.0}},
      {"aten.exp.default",
       false,
       {1.6487212181091309, 0.2865048050880432, 7.389056205749512, 54.59815216064453, 1.0,
        0.049787066876888275}},
      {"aten.cos.default",
       false,
       {0.8775825500488281, 0.3153223693370819, -0.416146844625473, -0.6536436080932617, 1.0,
        -0.9899924993515015}},
      {"aten.sin.default",
       false,
       {0.4794255495071411, -0.9489846229553223, 0.9092974066734314, -0.756802499294281, 0.0,
        -0.14112000167369843}},
      {"aten.tanh.default",
       false,
       {0.46211716532707214, -0.8482836484909058, 0.9640275835990906, 0.9993293285369873, 0.0,
        -0.9950547814369202}},
      {"aten.erf.default",
       false,
       {0.5204998850822449, -0.9229001402854919, 0.9953222870826721, 1.0, 0.0,
        -0.9999778866767883}},
      {"aten.sigmoid.default",
       false,
       {0.622459352016449, 0.22270013391971588, 0.8807970285415649, 0.9820137619972229, 0.5,
        0.04742587357759476}},
      {"aten.relu.default", false, {0.5, 0.0, 2.0, 4.0, 0.0, 0.0}},
      {"aten.silu.default",
       false,
       {0.3112296760082245, -0.27837517857551575, 1.7615940570831299, 3.9280550479888916, 0.0,
        -0.14227761328220367}},
      // PyTorch's definitions: hardsigmoid = relu6(x + 3) / 6, hardswish = x * hardsigmoid(x)
      {"aten.hardswish.default",
       false,
       {0.5 * 3.5 / 6, -1.25 * 1.75 / 6, 2.0 * 5 / 6, 4.0, 0.0, 0.0}},
      {"aten.hardsigmoid.default", false, {3.5 / 6, 1.75 / 6, 5.0 / 6, 1.0, 0.5, 0.0}},
      {"aten.gelu.default",
       false,
       {0.3457311987876892, -0.13206231594085693, 1.9544999599456787, 3.999873161315918, 0.0,
        -0.004049867391586304}},
      {"aten.rsqrt.default",
       true,
       {2.0, 0.8164965510368347, 0.7071067690849304, 0.5, 0.3333333432674408, kInf}},
      {"aten.sqrt.default", true, {0.5, 1.2247449159622192, 1.4142135381698608, 2.0, 3.0, 0.0}},
      {"aten.reciprocal.default",
       true,
       {4.0, 0.6666666865348816, 0.5, 0.25, 0.1111111119389534, kInf}},
      {"aten.log.default",
       true,
       {-1.3862943649291992, 0.40546509623527527, 0.6931471824645996, 1.3862943649291992,
        2.1972246170043945, -kInf}},
  };
  return kCases;
}

TEST(OpsUnary, FloatInputsAllDtypesAndLayouts) {
  for (const UnaryCase& c : float_cases()) {
    const Tensor x = c.positive_input ? xp_f32() : x_f32();
    // float32, contiguous.
    Tensor y = OpRunner(c.target).tensor("self", x).run1();
    EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, c.want)) << c.target;
    // bfloat16 in, bfloat16 out (computed in float, rounded once).
    y = OpRunner(c.target).tensor("self", x.to(DType::kBFloat16)).run1();
    EXPECT_TRUE(matches(y, DType::kBFloat16, {2, 3}, c.want)) << c.target << " bf16";
    // float64.
    y = OpRunner(c.target).tensor("self", x.to(DType::kFloat64)).run1();
    EXPECT_TRUE(matches(y, DType::kFloat64, {2, 3}, c.want)) << c.target << " f64";
    // A transposed float32 input gives the transposed values.
    y = OpRunner(c.target).tensor("self", x.transpose(0, 1)).run1();
    std::vector<double> want_t = {c.want[0], c.want[3], c.want[1], c.want[4], c.want[2], c.want[5]};
    EXPECT_TRUE(matches(y, DType::kFloat32, {3, 2}, want_t)) << c.target << " transposed";
  }
}

TEST(OpsUnary, IntegerInputsPromoteToFloat32) {
  // xi.t() for xi = [[1, -2], [3, 0]] (int64), i.e. [[1, 3], [-2, 0]].
  const Tensor xi = i64({2, 2}, {1, -2, 3, 0}).transpose(0, 1);
  const std::map<std::string, std::vector<double>> want = {
      {"aten.exp.default", {2.7182817459106445, 20.08553695678711, 0.1353352814912796, 1.0}},
      {"aten.sqrt.default", {1.0, 1.7320507764816284, kNaN, 0.0}},
      {"aten.sigmoid.default", {0.7310585975646973, 0.9525741338729858, 0.11920291930437088, 0.5}},
      {"aten.tanh.default", {0.7615941762924194, 0.9950547814369202, -0.9640275835990906, 0.0}},
      {"aten.reciprocal.default", {1.0, 0.3333333432674408, -0.5, kInf}},
      {"aten.rsqrt.default", {1.0, 0.5773502588272095, kNaN, kInf}},
      {"aten.log.default", {0.0, 1.0986123085021973, kNaN, -kInf}},
      {"aten.cos.default", {0.5403023362159729, -0.9899924993515015, -0.416146844625473, 1.0}},
      {"aten.sin.default", {0.8414709568023682, 0.14112000167369843, -0.9092974066734314, 0.0}},
      {"aten.erf.default", {0.8427007794380188, 0.9999778866767883, -0.9953222870826721, 0.0}},
  };
  for (const auto& [target, values] : want) {
    Tensor y = OpRunner(target).tensor("self", xi).run1();
    EXPECT_TRUE(matches(y, DType::kFloat32, {2, 2}, values)) << target;
  }
  // bool inputs promote too: exp(True) = e.
  Tensor y = OpRunner("aten.exp.default").tensor("self", boolean({2}, {1, 0})).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2}, {2.7182817459106445, 1.0}));
}

TEST(OpsUnary, IntegerKeepingOps) {
  const Tensor xi = i64({2, 2}, {1, -2, 3, 0});
  Tensor y = OpRunner("aten.neg.default").tensor("self", xi.transpose(0, 1)).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2, 2}, {-1, -3, 2, 0}));
  y = OpRunner("aten.abs.default").tensor("self", xi).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2, 2}, {1, 2, 3, 0}));
  y = OpRunner("aten.relu.default").tensor("self", i32({4}, {1, -2, 3, 0})).run1();
  EXPECT_TRUE(matches(y, DType::kInt32, {4}, {1, 0, 3, 0}));
  // relu keeps NaN; neg of int64 min wraps like torch.
  y = OpRunner("aten.relu.default").tensor("self", f32({2}, {kNaN, -1})).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2}, {kNaN, 0}));
  Tensor mn = Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::min()});
  y = OpRunner("aten.neg.default").tensor("self", mn).run1();
  EXPECT_EQ(y.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  // torch has no bool kernels for neg / abs / relu, and no integer gelu / silu.
  for (const char* op : {"aten.neg.default", "aten.abs.default", "aten.relu.default"})
    ANVIL_EXPECT_ERROR(OpRunner(op).tensor("self", boolean({1}, {1})).run(),
                       "is not supported for bool tensors")
        << op;
  for (const char* op : {"aten.gelu.default", "aten.silu.default", "aten.hardswish.default",
                         "aten.hardsigmoid.default"})
    ANVIL_EXPECT_ERROR(OpRunner(op).tensor("self", i64({1}, {1})).run(),
                       "is only implemented for floating dtypes")
        << op;
}

TEST(OpsUnary, GeluApproximations) {
  const Tensor x = x_f32();
  Tensor y = OpRunner("aten.gelu.default").tensor("self", x).string("approximate", "none").run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3},
                      {0.3457311987876892, -0.13206231594085693, 1.9544999599456787,
                       3.999873161315918, 0.0, -0.004049867391586304}));
  const std::vector<double> tanh_want = {
      0.3457140028476715,    -0.13228580355644226, 1.9545977115631104, 3.999929904937744, 0.0,
      -0.0036374330520629883};
  y = OpRunner("aten.gelu.default").tensor("self", x).string("approximate", "tanh").run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, tanh_want));
  y = OpRunner("aten.gelu.default")
          .tensor("self", x.to(DType::kBFloat16))
          .string("approximate", "tanh")
          .run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {2, 3}, tanh_want));
  y = OpRunner("aten.gelu.default")
          .tensor("self", x.to(DType::kFloat64))
          .string("approximate", "tanh")
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat64, {2, 3}, tanh_want));
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.gelu.default").tensor("self", x).string("approximate", "fast").run(),
      "gelu: unknown approximate mode");
}

TEST(OpsUnary, LogicalAndBitwiseNot) {
  Tensor y = OpRunner("aten.logical_not.default").tensor("self", f32({3}, {0.0, kNaN, 2.0})).run1();
  EXPECT_TRUE(matches(y, DType::kBool, {3}, {1, 0, 0}));
  y = OpRunner("aten.logical_not.default")
          .tensor("self", i64({2, 2}, {0, 1, 2, 0}).transpose(0, 1))
          .run1();
  EXPECT_TRUE(matches(y, DType::kBool, {2, 2}, {1, 0, 0, 1}));
  y = OpRunner("aten.bitwise_not.default").tensor("self", boolean({2}, {1, 0})).run1();
  EXPECT_TRUE(matches(y, DType::kBool, {2}, {0, 1}));
  y = OpRunner("aten.bitwise_not.default").tensor("self", i64({3}, {0, 5, -1})).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {3}, {-1, -6, 0}));
  y = OpRunner("aten.bitwise_not.default")
          .tensor("self", Tensor::from_vector<uint8_t>({0, 5}))
          .run1();
  EXPECT_TRUE(matches(y, DType::kUInt8, {2}, {255, 250}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.bitwise_not.default").tensor("self", f32({1}, {1})).run(),
                     "bitwise_not needs a bool or integer tensor");
}

TEST(OpsUnary, SymbolicShapeRules) {
  const SymInt s0 = SymInt::symbol("s0"), s1 = SymInt::symbol("s1");
  auto rule = [&](const char* target, DType dt) {
    auto t = OpRunner(target).sym_tensor("self", dt, {s0, s1 * 2, 4}).shape();
    return t.size() == 1 ? t[0].str() : std::string("?");
  };
  const std::string dims = "[s0, " + (s1 * 2).str() + ", 4]";
  EXPECT_EQ(rule("aten.exp.default", DType::kInt64), "f32" + dims);
  EXPECT_EQ(rule("aten.rsqrt.default", DType::kBFloat16), "bf16" + dims);
  EXPECT_EQ(rule("aten.sigmoid.default", DType::kFloat64), "f64" + dims);
  EXPECT_EQ(rule("aten.neg.default", DType::kInt32), "i32" + dims);
  EXPECT_EQ(rule("aten.relu.default", DType::kFloat32), "f32" + dims);
  EXPECT_EQ(rule("aten.silu.default", DType::kBFloat16), "bf16" + dims);
  EXPECT_EQ(rule("aten.gelu.default", DType::kFloat32), "f32" + dims);
  EXPECT_EQ(rule("aten.logical_not.default", DType::kFloat32), "bool" + dims);
  EXPECT_EQ(rule("aten.bitwise_not.default", DType::kInt64), "i64" + dims);
  ANVIL_EXPECT_ERROR(rule("aten.silu.default", DType::kInt64),
                     "silu is only implemented for floating dtypes");
  ANVIL_EXPECT_ERROR(rule("aten.neg.default", DType::kBool),
                     "neg is not supported for bool tensors");
  ANVIL_EXPECT_ERROR(rule("aten.bitwise_not.default", DType::kFloat32),
                     "bitwise_not needs a bool or integer tensor");
}

}  // namespace
}  // namespace anvil::ops
