// Tests of the sym family (src/ops/sym.cpp), the functional collectives (src/ops/collective.cpp)
// and the SymInt exact-division folding the shape rules rely on.
#include <gtest/gtest.h>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::f32;
using testing::i64;
using testing::OpRunner;
using testing::shares_storage;

/// Message of the Error `f` throws ("" when it does not throw).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// The single int a sym kernel returned.
int64_t int_of(const std::vector<ir::RValue>& outs) {
  EXPECT_EQ(outs.size(), 1u);
  return std::get<int64_t>(outs.at(0));
}

/// Runs _operator.NAME on two ints named like the export ("a", "b").
int64_t op_int(const std::string& name, int64_t a, int64_t b) {
  return int_of(OpRunner("_operator." + name).scalar("a", a).scalar("b", b).run());
}

TEST(SymSize, IntAndNumel) {
  Tensor x = f32({2, 3, 4}, std::vector<double>(24, 0));
  EXPECT_EQ(int_of(OpRunner("aten.sym_size.int").tensor("self", x).scalar("dim", 0).run()), 2);
  EXPECT_EQ(int_of(OpRunner("aten.sym_size.int").tensor("self", x).scalar("dim", -1).run()), 4);
  ANVIL_EXPECT_ERROR(OpRunner("aten.sym_size.int").tensor("self", x).scalar("dim", 3).run(),
                     "sym_size: dimension out of range");
  EXPECT_EQ(int_of(OpRunner("aten.sym_numel.default").tensor("self", x.transpose(0, 2)).run()), 24);
  // Shape rules yield no tensor types.
  EXPECT_TRUE(OpRunner("aten.sym_size.int")
                  .sym_tensor("self", DType::kInt64, {SymInt::symbol("s0")})
                  .scalar("dim", 0)
                  .shape()
                  .empty());
}

TEST(SymOperator, PythonIntSemantics) {
  EXPECT_EQ(op_int("add", 3, 4), 7);
  EXPECT_EQ(op_int("sub", 3, 4), -1);
  EXPECT_EQ(op_int("mul", -3, 4), -12);
  EXPECT_EQ(op_int("floordiv", 7, 2), 3);
  EXPECT_EQ(op_int("floordiv", -7, 2), -4);  // Python: -7 // 2 == -4
  EXPECT_EQ(op_int("floordiv", 7, -2), -4);
  EXPECT_EQ(op_int("mod", -7, 2), 1);   // Python: -7 % 2 == 1
  EXPECT_EQ(op_int("mod", 7, -2), -1);  // Python: 7 % -2 == -1
  EXPECT_EQ(op_int("mod", 6, 3), 0);
  ANVIL_EXPECT_ERROR(op_int("floordiv", 1, 0),
                     "_operator.floordiv): integer division or modulo by zero");
  ANVIL_EXPECT_ERROR(op_int("mod", 1, 0), "_operator.mod): integer division or modulo by zero");
  ANVIL_EXPECT_ERROR(op_int("add", std::numeric_limits<int64_t>::max(), 1),
                     "integer overflow in +");
  // Positional arguments under other names, and a float operand.
  auto outs = OpRunner("_operator.mul").scalar("x", int64_t{6}).scalar("y", 0.5).run();
  EXPECT_DOUBLE_EQ(std::get<double>(outs.at(0)), 3.0);
  outs = OpRunner("_operator.floordiv").scalar("a", -7.0).scalar("b", int64_t{2}).run();
  EXPECT_DOUBLE_EQ(std::get<double>(outs.at(0)), -4.0);
  EXPECT_TRUE(
      OpRunner("_operator.add").scalar("a", int64_t{1}).scalar("b", int64_t{2}).shape().empty());
}

TEST(SymAssert, ScalarAndConstrainRange) {
  EXPECT_TRUE(OpRunner("aten._assert_scalar.default")
                  .scalar("self", true)
                  .string("assert_msg", "u0 >= 0")
                  .run()
                  .empty());
  EXPECT_NO_THROW(OpRunner("aten._assert_scalar.default")
                      .scalar("self", int64_t{1})
                      .string("assert_msg", "ok")
                      .run());
  std::string msg = error_of([] {
    OpRunner("aten._assert_scalar.default")
        .scalar("self", false)
        .string("assert_msg", "Runtime assertion failed for expression Eq(s0, 4)")
        .run();
  });
  EXPECT_NE(msg.find("Eq(s0, 4)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node0"), std::string::npos) << msg;

  EXPECT_NO_THROW(
      OpRunner("aten.sym_constrain_range_for_size.default").scalar("size", int64_t{5}).run());
  EXPECT_NO_THROW(OpRunner("aten.sym_constrain_range_for_size.default")
                      .scalar("size", int64_t{5})
                      .scalar("min", int64_t{2})
                      .scalar("max", int64_t{8})
                      .run());
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.sym_constrain_range_for_size.default").scalar("size", int64_t{-1}).run(),
      "size -1 is outside its constrained range");
  ANVIL_EXPECT_ERROR(OpRunner("aten.sym_constrain_range_for_size.default")
                         .scalar("size", int64_t{9})
                         .none("min")
                         .scalar("max", int64_t{8})
                         .run(),
                     "size 9 is outside its constrained range (expected [0, 8], got 9)");
}

TEST(Collective, ShapesWaitAndAllReduceError) {
  SymInt s0 = SymInt::symbol("s0");
  auto ty = OpRunner("_c10d_functional.all_reduce.default")
                .sym_tensor("input", DType::kBFloat16, {s0, 64})
                .string("reduce_op", "sum")
                .string("group_name", "0")
                .shape();
  ASSERT_EQ(ty.size(), 1u);
  EXPECT_EQ(sym_shape_str(ty[0].sizes), "[s0, 64]");
  EXPECT_EQ(ty[0].dtype, DType::kBFloat16);
  ty = OpRunner("_c10d_functional.wait_tensor.default")
           .sym_tensor("tensor", DType::kFloat32, {s0})
           .shape();
  EXPECT_EQ(sym_shape_str(ty.at(0).sizes), "[s0]");

  Tensor x = i64({2}, {1, 2});
  // The op table has no kernels for collectives (ops may use only ir and core): the
  // interpreter runs them through dist (tests/interp, tests/dist).
  std::string msg = error_of([&] {
    OpRunner("_c10d_functional.all_reduce.default")
        .tensor("input", x)
        .string("reduce_op", "sum")
        .string("group_name", "tp0")
        .run();
  });
  EXPECT_NE(msg.find("interpreter runs them through dist"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node0"), std::string::npos) << msg;
}

TEST(SymIntDivision, ExactQuotientsFold) {
  SymInt s0 = SymInt::symbol("s0"), s1 = SymInt::symbol("s1");
  EXPECT_EQ((s0 * s1 * SymInt(64)).floordiv(s0 * s1 * SymInt(16)), SymInt(4));
  EXPECT_EQ((s0 * s1 * SymInt(64)).floordiv(s1 * SymInt(16)), s0 * SymInt(4));
  EXPECT_EQ((s0 * s1).floordiv(s1), s0);
  EXPECT_EQ((s0 * SymInt(2) + SymInt(4)).floordiv(2), s0 + SymInt(2));
  EXPECT_EQ((s0 * s1 * SymInt(6)).mod(s1 * SymInt(3)), SymInt(0));
  // Inexact quotients stay symbolic and still evaluate with Python semantics.
  SymInt q = (s0 + SymInt(1)).floordiv(2);
  EXPECT_FALSE(q.is_constant());
  EXPECT_EQ(q.evaluate({{"s0", 4}}), 2);
  SymInt r = (s0 * SymInt(3)).floordiv(s1);
  EXPECT_EQ(r.evaluate({{"s0", 5}, {"s1", 4}}), 3);
  EXPECT_EQ(s0.floordiv(s0 * s1).evaluate({{"s0", 3}, {"s1", 2}}), 0);
}

}  // namespace
}  // namespace anvil
