// spec/collectives.md §4 case 66: shape-only inference of the collectives on a data-less tensor
// (no group, no data: only the shape rules of src/ops/collective.cpp run). all_reduce keeps
// the shape, all_gather_into_tensor multiplies dim 0 by the group size, reduce_scatter_tensor
// divides it.
#include <gtest/gtest.h>

#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::OpRunner;

/// Sizes and dtype of the one type a shape rule returned, as text ("f32[2, 3, 4]").
std::string type_of(const std::vector<ir::TensorType>& types) {
  EXPECT_EQ(types.size(), 1u);
  return types.empty() ? "" : types[0].str();
}

TEST(CollectiveShapes, Case66_AllReduceKeepsTheShape) {
  auto t = OpRunner("_c10d_functional.all_reduce.default")
               .sym_tensor("input", DType::kFloat32, {2, 3, 4})
               .string("reduce_op", "sum")
               .string("group_name", "0")
               .shape();
  EXPECT_EQ(type_of(t), "f32[2, 3, 4]");
}

TEST(CollectiveShapes, Case66_AllGatherMultipliesDim0ByTheGroupSize) {
  auto t = OpRunner("_c10d_functional.all_gather_into_tensor.default")
               .sym_tensor("input", DType::kFloat32, {2, 3, 4})
               .scalar("group_size", 2)
               .string("group_name", "0")
               .shape();
  EXPECT_EQ(type_of(t), "f32[4, 3, 4]");
}

TEST(CollectiveShapes, Case66_ReduceScatterDividesDim0ByTheGroupSize) {
  auto t = OpRunner("_c10d_functional.reduce_scatter_tensor.default")
               .sym_tensor("input", DType::kFloat32, {2, 3, 4})
               .string("reduce_op", "sum")
               .scalar("group_size", 2)
               .string("group_name", "0")
               .shape();
  EXPECT_EQ(type_of(t), "f32[1, 3, 4]");
}

// Beyond case 66: a symbolic dim 0 gives the symbolic product / quotient, and a dim 0 not
// divisible by the group size is an error from the shape rule (before any communication).
TEST(CollectiveShapes, Case66_SymbolicDim0AndIndivisibleDim0) {
  const SymInt s0 = SymInt::symbol("s0");
  auto g = OpRunner("_c10d_functional.all_gather_into_tensor.default")
               .sym_tensor("input", DType::kFloat32, {s0, 3})
               .scalar("group_size", 2)
               .string("group_name", "0")
               .shape();
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].sizes[0], s0 * SymInt(2));
  EXPECT_EQ(g[0].sizes[1], SymInt(3));
  try {
    OpRunner("_c10d_functional.reduce_scatter_tensor.default")
        .sym_tensor("input", DType::kFloat32, {3, 3, 4})
        .string("reduce_op", "sum")
        .scalar("group_size", 2)
        .string("group_name", "0")
        .shape();
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not divisible"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace anvil
