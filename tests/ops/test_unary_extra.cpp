// More unary ops: tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, expm1, log1p, log2,
// log10 (src/ops/unary.cpp), sign, isnan, isinf, elu and leaky_relu (src/ops/unary_extra.cpp).
// Expected values from PyTorch 2.11 (torch.asin(u), F.elu(x, 0.5), ...).
#include <gtest/gtest.h>

#include <cmath>
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
using testing::i64;
using testing::matches;
using testing::OpRunner;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// The inputs (2 x 3, float32): x has any sign, u lies in [-1, 2] (the domain edges of
/// asin / acos / atanh / log1p), v in [0.5, 9] (acosh).
Tensor input(char which) {
  if (which == 'u') return f32({2, 3}, {0.5, -0.75, 1.0, -1.0, 0.0, 2.0});
  if (which == 'v') return f32({2, 3}, {1.0, 1.5, 2.0, 4.0, 9.0, 0.5});
  return f32({2, 3}, {0.5, -1.25, 2.0, 4.0, 0.0, -3.0});
}

struct MathCase {
  const char* target;
  char input;
  std::vector<double> want;
};

const std::vector<MathCase>& math_cases() {
  static const std::vector<MathCase> kCases = {
      {"aten.tan.default",
       'x',
       {0.5463024973869324, -3.0095696449279785, -2.185039758682251, 1.1578212976455688, 0.0,
        0.14254654943943024}},
      {"aten.asin.default",
       'u',
       {0.5235987901687622, -0.8480620980262756, 1.5707963705062866, -1.5707963705062866, 0.0,
        kNaN}},
      {"aten.acos.default",
       'u',
       {1.0471975803375244, 2.418858528137207, 0.0, 3.1415927410125732, 1.5707963705062866, kNaN}},
      {"aten.atan.default",
       'x',
       {0.46364760398864746, -0.8960554003715515, 1.1071487665176392, 1.3258177042007446, 0.0,
        -1.249045729637146}},
      {"aten.sinh.default",
       'x',
       {0.5210952758789062, -1.601919174194336, 3.6268603801727295, 27.289918899536133, 0.0,
        -10.017874717712402}},
      {"aten.cosh.default",
       'x',
       {1.1276259422302246, 1.8884238004684448, 3.7621958255767822, 27.308231353759766, 1.0,
        10.067662239074707}},
      {"aten.asinh.default",
       'x',
       {0.4812118411064148, -1.0475929975509644, 1.4436354637145996, 2.094712495803833, 0.0,
        -1.8184465169906616}},
      {"aten.acosh.default",
       'v',
       {0.0, 0.9624236822128296, 1.316957950592041, 2.063436985015869, 2.887270927429199, kNaN}},
      {"aten.atanh.default",
       'u',
       {0.5493061542510986, -0.9729551076889038, kInf, -kInf, 0.0, kNaN}},
      {"aten.expm1.default",
       'x',
       {0.6487212777137756, -0.7134951949119568, 6.389056205749512, 53.598148345947266, 0.0,
        -0.9502129554748535}},
      {"aten.log1p.default",
       'u',
       {0.40546509623527527, -1.3862943649291992, 0.6931471824645996, -kInf, 0.0,
        1.0986123085021973}},
      {"aten.log2.default", 'x', {-1.0, kNaN, 1.0, 2.0, -kInf, kNaN}},
      {"aten.log10.default",
       'x',
       {-0.3010300099849701, kNaN, 0.3010300099849701, 0.6020600199699402, -kInf, kNaN}},
  };
  return kCases;
}

TEST(OpsUnaryMore, MathFunctionsAllDtypesAndLayouts) {
  for (const MathCase& c : math_cases()) {
    const Tensor x = input(c.input);
    Tensor y = OpRunner(c.target).tensor("self", x).run1();
    EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, c.want)) << c.target;
    y = OpRunner(c.target).tensor("self", x.to(DType::kBFloat16)).run1();
    EXPECT_TRUE(matches(y, DType::kBFloat16, {2, 3}, c.want)) << c.target << " bf16";
    y = OpRunner(c.target).tensor("self", x.to(DType::kFloat64)).run1();
    EXPECT_TRUE(matches(y, DType::kFloat64, {2, 3}, c.want)) << c.target << " f64";
    y = OpRunner(c.target).tensor("self", x.transpose(0, 1)).run1();
    const std::vector<double> want_t = {c.want[0], c.want[3], c.want[1],
                                        c.want[4], c.want[2], c.want[5]};
    EXPECT_TRUE(matches(y, DType::kFloat32, {3, 2}, want_t)) << c.target << " transposed";
  }
}

TEST(OpsUnaryMore, MathFunctionsPromoteIntegersAndBoolToFloat32) {
  // [[1, -2], [3, 0]].t() = [[1, 3], [-2, 0]] (int64)
  const Tensor xi = i64({2, 2}, {1, -2, 3, 0}).transpose(0, 1);
  const std::map<std::string, std::vector<double>> want = {
      {"aten.tan.default", {1.5574077367782593, -0.14254654943943024, 2.185039758682251, 0.0}},
      {"aten.asin.default", {1.5707963705062866, kNaN, kNaN, 0.0}},
      {"aten.acos.default", {0.0, kNaN, kNaN, 1.5707963705062866}},
      {"aten.atan.default", {0.7853981852531433, 1.249045729637146, -1.1071487665176392, 0.0}},
      {"aten.sinh.default", {1.175201177597046, 10.017874717712402, -3.6268603801727295, 0.0}},
      {"aten.cosh.default", {1.5430805683135986, 10.067662239074707, 3.7621958255767822, 1.0}},
      {"aten.asinh.default", {0.8813735842704773, 1.8184465169906616, -1.4436354637145996, 0.0}},
      {"aten.acosh.default", {0.0, 1.7627471685409546, kNaN, kNaN}},
      {"aten.atanh.default", {kInf, kNaN, kNaN, 0.0}},
      {"aten.expm1.default", {1.718281865119934, 19.08553695678711, -0.8646647334098816, 0.0}},
      {"aten.log1p.default", {0.6931471824645996, 1.3862943649291992, kNaN, 0.0}},
      {"aten.log2.default", {0.0, 1.5849624872207642, kNaN, -kInf}},
      {"aten.log10.default", {0.0, 0.4771212637424469, kNaN, -kInf}},
  };
  for (const auto& [target, values] : want) {
    Tensor y = OpRunner(target).tensor("self", xi).run1();
    EXPECT_TRUE(matches(y, DType::kFloat32, {2, 2}, values)) << target;
  }
  Tensor y = OpRunner("aten.log1p.default").tensor("self", boolean({2}, {1, 0})).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2}, {0.6931471824645996, 0.0}));
}

TEST(OpsUnaryMore, SignKeepsTheDtypeAndGivesZeroForNaN) {
  // torch.sign: (0 < x) - (x < 0), so NaN -> 0 and -0.0 -> +0.0
  const Tensor x = f32({7}, {kNaN, -0.0, 0.0, -2.5, 3.0, kInf, -kInf});
  Tensor y = OpRunner("aten.sign.default").tensor("self", x).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {7}, {0, 0, 0, -1, 1, 1, -1}));
  EXPECT_FALSE(std::signbit(y.data<float>()[1])) << "sign(-0.0) is +0.0 in PyTorch";
  y = OpRunner("aten.sign.default").tensor("self", x.to(DType::kBFloat16)).run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {7}, {0, 0, 0, -1, 1, 1, -1}));
  y = OpRunner("aten.sign.default").tensor("self", i64({3}, {-3, 0, 4})).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {3}, {-1, 0, 1}));
  y = OpRunner("aten.sign.default").tensor("self", boolean({2}, {1, 0})).run1();
  EXPECT_TRUE(matches(y, DType::kBool, {2}, {1, 0}));
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.sign.default").sym_tensor("self", DType::kComplex64, {SymInt(2)}).shape(),
      "sign is not defined for complex tensors");
}

TEST(OpsUnaryMore, IsNanIsInf) {
  const Tensor x = f32({2, 3}, {kNaN, kInf, -kInf, 1.0, -0.0, 3e38});
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat64}) {
    Tensor y = OpRunner("aten.isnan.default").tensor("self", x.to(dt)).run1();
    EXPECT_TRUE(matches(y, DType::kBool, {2, 3}, {1, 0, 0, 0, 0, 0})) << dtype_name(dt);
    y = OpRunner("aten.isinf.default").tensor("self", x.to(dt).transpose(0, 1)).run1();
    // bfloat16(3e38) is finite (its largest is 3.39e38)
    EXPECT_TRUE(matches(y, DType::kBool, {3, 2}, {0, 0, 1, 0, 1, 0})) << dtype_name(dt);
  }
  for (const char* op : {"aten.isnan.default", "aten.isinf.default"}) {
    Tensor y = OpRunner(op).tensor("self", i64({3}, {1, -2, 0})).run1();
    EXPECT_TRUE(matches(y, DType::kBool, {3}, {0, 0, 0})) << op;
    y = OpRunner(op).tensor("self", boolean({1}, {1})).run1();
    EXPECT_TRUE(matches(y, DType::kBool, {1}, {0})) << op;
  }
}

TEST(OpsUnaryMore, EluWithAlphaScaleInputScale) {
  const Tensor x = f32({5}, {-1.0, 0.0, 2.0, kNaN, -100.0});
  Tensor y = OpRunner("aten.elu.default").tensor("self", x).run1();  // defaults 1, 1, 1
  EXPECT_TRUE(matches(y, DType::kFloat32, {5}, {-0.6321205496788025, 0.0, 2.0, kNaN, -1.0}));
  y = OpRunner("aten.elu.default").tensor("self", x).scalar("alpha", 0.5).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {5}, {-0.31606027483940125, 0.0, 2.0, kNaN, -0.5}));
  y = OpRunner("aten.elu.default")
          .tensor("self", x)
          .scalar("alpha", 0.5)
          .scalar("scale", 2.0)
          .scalar("input_scale", 3.0)
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {5}, {-0.9502129554748535, 0.0, 4.0, kNaN, -1.0}));
  y = OpRunner("aten.elu.default")
          .tensor("self", x.to(DType::kBFloat16))
          .scalar("alpha", 0.5)
          .run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {5}, {-0.31640625, 0.0, 2.0, kNaN, -0.5}));
  // expm1, not exp - 1: elu(-1e-7) keeps its digits
  y = OpRunner("aten.elu.default").tensor("self", f32({1}, {-1e-7})).run1();
  EXPECT_NEAR(y.data<float>()[0], -9.999999406318238e-08, 1e-14);
  ANVIL_EXPECT_ERROR(OpRunner("aten.elu.default").tensor("self", i64({1}, {1})).run(),
                     "elu is only implemented for floating dtypes");
}

TEST(OpsUnaryMore, LeakyRelu) {
  const Tensor x = f32({6}, {-1.0, 0.0, 2.0, kNaN, -100.0, -0.0});
  Tensor y = OpRunner("aten.leaky_relu.default").tensor("self", x).run1();  // slope 0.01
  EXPECT_TRUE(
      matches(y, DType::kFloat32, {6}, {-0.009999999776482582, 0.0, 2.0, kNaN, -1.0, -0.0}));
  y = OpRunner("aten.leaky_relu.default")
          .tensor("self", x.to(DType::kFloat64))
          .scalar("negative_slope", 0.2)
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat64, {6}, {-0.2, 0.0, 2.0, kNaN, -20.0, -0.0}));
  EXPECT_TRUE(std::signbit(y.data<double>()[5])) << "leaky_relu(-0.0) is -0.0 in PyTorch";
  for (DType dt : {DType::kInt64, DType::kBool})
    ANVIL_EXPECT_ERROR(
        OpRunner("aten.leaky_relu.default").tensor("self", i64({1}, {1}).to(dt)).run(),
        "leaky_relu is only implemented for floating dtypes");
}

TEST(OpsUnaryMore, SymbolicShapeRules) {
  const SymInt s0 = SymInt::symbol("s0");
  auto rule = [&](const char* target, DType dt) {
    auto t = OpRunner(target).sym_tensor("self", dt, {s0, 3}).shape();
    return t.size() == 1 ? t[0].str() : std::string("?");
  };
  EXPECT_EQ(rule("aten.asinh.default", DType::kInt32), "f32[s0, 3]");
  EXPECT_EQ(rule("aten.log10.default", DType::kBFloat16), "bf16[s0, 3]");
  EXPECT_EQ(rule("aten.sign.default", DType::kInt32), "i32[s0, 3]");
  EXPECT_EQ(rule("aten.isnan.default", DType::kFloat64), "bool[s0, 3]");
  EXPECT_EQ(rule("aten.isinf.default", DType::kInt64), "bool[s0, 3]");
  EXPECT_EQ(rule("aten.elu.default", DType::kFloat16), "f16[s0, 3]");
  EXPECT_EQ(rule("aten.leaky_relu.default", DType::kFloat32), "f32[s0, 3]");
  ANVIL_EXPECT_ERROR(rule("aten.elu.default", DType::kInt64),
                     "elu is only implemented for floating dtypes");
}

}  // namespace
}  // namespace anvil::ops
