// Tests of the indexing ops (src/ops/index.cpp): index.Tensor (integer and boolean indices,
// broadcasting, None entries, torch's placement rule for non-adjacent indexed dims),
// index_select and gather. Expected values from PyTorch (pasted).
#include <gtest/gtest.h>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::bf16;
using testing::boolean;
using testing::f32;
using testing::i32;
using testing::i64;
using testing::matches;
using testing::OpRunner;

const SymInt s23 = SymInt::symbol("s23"), s27 = SymInt::symbol("s27");

/// 0, 1, ..., n-1 as doubles.
std::vector<double> iota(int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

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

/// Runs aten.index.Tensor on self with the given indices.
Tensor index(const Tensor& self, const std::vector<std::optional<Tensor>>& indices) {
  return OpRunner("aten.index.Tensor").tensor("self", self).opt_tensors("indices", indices).run1();
}

// ---- index.Tensor ----------------------------------------------------------------------------

TEST(IndexTensor, SingleIndexWithNegatives) {
  Tensor a = f32({3, 4}, iota(12));
  // a[tensor([2, -3])]
  EXPECT_TRUE(
      matches(index(a, {i64({2}, {2, -3})}), DType::kFloat32, {2, 4}, {8, 9, 10, 11, 0, 1, 2, 3}));
  // int32 indices, bf16 data.
  Tensor b = bf16({3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(matches(index(b, {i32({2}, {1, 1})}), DType::kBFloat16, {2, 2}, {3, 4, 3, 4}));
}

TEST(IndexTensor, AdjacentIndicesBroadcast) {
  Tensor a = f32({3, 4}, iota(12));
  // a[[[0], [2]], [1, 3]] -> [[1, 3], [9, 11]]
  EXPECT_TRUE(matches(index(a, {i64({2, 1}, {0, 2}), i64({2}, {1, 3})}), DType::kFloat32, {2, 2},
                      {1, 3, 9, 11}));
  // b[:, [2, 0], [[3], [1]]]: adjacent after a None -> result dims stay in place.
  Tensor b = i64({2, 3, 4}, iota(24));
  EXPECT_TRUE(matches(index(b, {std::nullopt, i64({2}, {2, 0}), i64({2, 1}, {3, 1})}),
                      DType::kInt64, {2, 2, 2}, {11, 3, 9, 1, 23, 15, 21, 13}));
}

TEST(IndexTensor, NonAdjacentIndicesGoFirst) {
  Tensor b = f32({2, 3, 4}, iota(24));
  // b[[1, 0], :, [3, 2]] -> shape [2, 3]
  EXPECT_TRUE(matches(index(b, {i64({2}, {1, 0}), std::nullopt, i64({2}, {3, 2})}), DType::kFloat32,
                      {2, 3}, {15, 19, 23, 2, 6, 10}));
}

/// Runs index.Tensor's kernel alone (a boolean mask's result size is data-dependent, so the
/// shape rule's type is symbolic and OpRunner::run's comparison does not apply).
Tensor index_kernel(const Tensor& self, const std::vector<std::optional<Tensor>>& indices) {
  OpRunner r("aten.index.Tensor");
  r.tensor("self", self).opt_tensors("indices", indices);
  ir::KernelContext ctx(r.node(), {ir::RValue(self), ir::RValue(indices)});
  auto outs = r.node().schema->kernel(ctx);
  EXPECT_EQ(outs.size(), 1u);
  return std::get<Tensor>(outs.at(0));
}

TEST(IndexTensor, BooleanMasks) {
  Tensor a = f32({3, 4}, iota(12));
  Tensor m = boolean({3, 4}, {1, 0, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0});
  EXPECT_TRUE(matches(index_kernel(a, {m}), DType::kFloat32, {5}, {0, 2, 7, 8, 9}));
  Tensor b = f32({2, 3, 4}, iota(24));
  EXPECT_TRUE(matches(index_kernel(b, {std::nullopt, boolean({3}, {1, 0, 1})}), DType::kFloat32,
                      {2, 2, 4}, {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 20, 21, 22, 23}));
  EXPECT_TRUE(matches(index_kernel(a, {boolean({3}, {0, 0, 0})}), DType::kFloat32, {0, 4}, {}));
  ANVIL_EXPECT_ERROR(index_kernel(a, {boolean({4}, {1, 0, 1, 0})}),
                     "the shape of the mask does not match the indexed tensor at dim 0");
  auto ty = OpRunner("aten.index.Tensor")
                .sym_tensor("self", DType::kFloat32, {3, 4})
                .opt_tensors("indices", {boolean({3, 4}, std::vector<double>(12, 1))})
                .shape();
  ASSERT_EQ(ty.size(), 1u);
  EXPECT_EQ(sym_shape_str(ty[0].sizes), "[u_node0]");
}

TEST(IndexTensor, NonContiguousSelf) {
  Tensor c = f32({4, 3}, iota(12)).transpose(0, 1);  // [3, 4]
  EXPECT_TRUE(matches(index(c, {std::nullopt, i64({2}, {3, 0})}), DType::kFloat32, {3, 2},
                      {9, 0, 10, 1, 11, 2}));
}

TEST(IndexTensor, Errors) {
  Tensor a = f32({3, 4}, iota(12));
  std::string msg = error_of([&] { index(a, {std::nullopt, i64({2}, {1, 4})}); });
  EXPECT_NE(msg.find("index 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dim 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 4"), std::string::npos) << msg;
  ANVIL_EXPECT_ERROR(index(a, {i64({1}, {0}), i64({1}, {0}), i64({1}, {0})}),
                     "too many indices for a tensor of rank 2");  // too many
  ANVIL_EXPECT_ERROR(
      index(a, {f32({1}, {0})}),
      "tensors used as indices must be long, int, byte or bool tensors");  // float index
  ANVIL_EXPECT_ERROR(index(a, {i64({2}, {0, 1}), i64({3}, {0, 1, 2})}),
                     "shapes [2] and [3] cannot broadcast");  // broadcast
}

TEST(IndexTensor, SymbolicShapes) {
  // llama_tiny / bert_tiny causal-mask gather: self [s23, s27],
  // indices [s23, 1, 1, 1] and [1, 1, s27, 1] -> [s23, 1, s27, 1].
  ir::Graph g;
  ir::Node n;
  n.name = "index";
  n.target = "aten.index.Tensor";
  n.args.resize(2);
  n.args[0].name = "self";
  n.args[0].kind = ir::Arg::Kind::kTensor;
  n.args[0].value = g.new_value("self");
  n.args[0].value->type.dtype = DType::kBool;
  n.args[0].value->type.sizes = {s23, s27};
  n.args[1].name = "indices";
  n.args[1].kind = ir::Arg::Kind::kTensors;
  for (auto sizes : {std::vector<SymInt>{s23, 1, 1, 1}, std::vector<SymInt>{1, 1, s27, 1}}) {
    ir::Value* v = g.new_value("i" + std::to_string(n.args[1].values.size()));
    v->type.dtype = DType::kInt64;
    v->type.sizes = sizes;
    n.args[1].values.push_back(v);
  }
  auto ty = ir::find_op("aten.index.Tensor")->shape(n);
  ASSERT_EQ(ty.size(), 1u);
  EXPECT_EQ(sym_shape_str(ty[0].sizes), "[s23, 1, s27, 1]");
  EXPECT_EQ(ty[0].dtype, DType::kBool);
  // Non-adjacent: x[idx, :, idx2] with x [s23, 5, 7] -> [B..., 5].
  n.args[0].value->type.sizes = {s23, 5, 7};
  n.args[1].kind = ir::Arg::Kind::kOptTensors;
  n.args[1].values = {n.args[1].values[0], nullptr, n.args[1].values[1]};
  ty = ir::find_op("aten.index.Tensor")->shape(n);
  EXPECT_EQ(sym_shape_str(ty[0].sizes), "[s23, 1, s27, 1, 5]");
}

// ---- index_select ----------------------------------------------------------------------------

TEST(IndexSelect, ValuesAndErrors) {
  Tensor c = f32({4, 3}, iota(12)).transpose(0, 1);  // [3, 4], non-contiguous
  Tensor y = OpRunner("aten.index_select.default")
                 .tensor("self", c)
                 .scalar("dim", -1)
                 .tensor("index", i64({3}, {3, 0, 3}))
                 .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {3, 3}, {9, 0, 9, 10, 1, 10, 11, 2, 11}));
  Tensor b = bf16({2, 3}, iota(6));
  EXPECT_TRUE(matches(OpRunner("aten.index_select.default")
                          .tensor("self", b)
                          .scalar("dim", 1)
                          .tensor("index", Tensor::scalar(2, DType::kInt32))
                          .run1(),
                      DType::kBFloat16, {2, 1}, {2, 5}));
  Tensor l = i64({3}, {7, 8, 9});
  EXPECT_TRUE(matches(OpRunner("aten.index_select.default")
                          .tensor("self", l)
                          .scalar("dim", 0)
                          .tensor("index", i64({4}, {2, 2, 0, 1}))
                          .run1(),
                      DType::kInt64, {4}, {9, 9, 7, 8}));
  std::string msg = error_of([&] {
    OpRunner("aten.index_select.default")
        .tensor("self", l)
        .scalar("dim", 0)
        .tensor("index", i64({1}, {-1}))
        .run1();
  });
  EXPECT_NE(msg.find("index -1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 3"), std::string::npos) << msg;
  ANVIL_EXPECT_ERROR(OpRunner("aten.index_select.default")
                         .tensor("self", l)
                         .scalar("dim", 0)
                         .tensor("index", i64({1, 1}, {0}))
                         .run1(),
                     "index must be a vector or a scalar");
  auto ty = OpRunner("aten.index_select.default")
                .sym_tensor("self", DType::kFloat32, {s23, 8})
                .scalar("dim", 0)
                .sym_tensor("index", DType::kInt64, {s27})
                .shape();
  EXPECT_EQ(sym_shape_str(ty[0].sizes), "[s27, 8]");
}

// ---- gather ----------------------------------------------------------------------------------

TEST(Gather, ValuesAndErrors) {
  Tensor g = f32({3, 4}, iota(12));
  EXPECT_TRUE(matches(OpRunner("aten.gather.default")
                          .tensor("self", g)
                          .scalar("dim", 1)
                          .tensor("index", i64({3, 2}, {0, 3, 2, 2, 1, 0}))
                          .run1(),
                      DType::kFloat32, {3, 2}, {0, 3, 6, 6, 9, 8}));
  EXPECT_TRUE(matches(OpRunner("aten.gather.default")
                          .tensor("self", g)
                          .scalar("dim", -2)
                          .tensor("index", i64({1, 4}, {2, 0, 1, 1}))
                          .scalar("sparse_grad", false)
                          .run1(),
                      DType::kFloat32, {1, 4}, {8, 1, 6, 7}));
  // Non-contiguous self (g.t(), [4, 3]) and int64 data.
  Tensor gl = i64({3, 4}, iota(12)).transpose(0, 1);
  EXPECT_TRUE(matches(OpRunner("aten.gather.default")
                          .tensor("self", gl)
                          .scalar("dim", 0)
                          .tensor("index", i64({2, 3}, {3, 0, 1, 1, 1, 2}))
                          .run1(),
                      DType::kInt64, {2, 3}, {3, 4, 9, 1, 5, 10}));
  Tensor b = bf16({1, 4}, {0.5, 1.5, 2.5, 3.5});
  EXPECT_TRUE(matches(OpRunner("aten.gather.default")
                          .tensor("self", b)
                          .scalar("dim", 1)
                          .tensor("index", i64({1, 2}, {3, 0}))
                          .run1(),
                      DType::kBFloat16, {1, 2}, {3.5, 0.5}));
  std::string msg = error_of([&] {
    OpRunner("aten.gather.default")
        .tensor("self", g)
        .scalar("dim", 1)
        .tensor("index", i64({1, 1}, {-1}))
        .run1();
  });
  EXPECT_NE(msg.find("index -1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dim 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 4"), std::string::npos) << msg;
  ANVIL_EXPECT_ERROR(OpRunner("aten.gather.default")
                         .tensor("self", g)
                         .scalar("dim", 1)
                         .tensor("index", i32({1, 1}, {0}))
                         .run1(),
                     "gather(): expected dtype int64 for index");  // int32 index
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.gather.default")
          .tensor("self", g)
          .scalar("dim", 1)
          .tensor("index", i64({4, 1}, {0, 0, 0, 0}))
          .run1(),
      "index size 4 exceeds the input size 3 at dim 0");  // index larger than self outside dim
  // bert_tiny: token_type_ids [1, 128] gathered with [1, s27].
  auto ty = OpRunner("aten.gather.default")
                .sym_tensor("self", DType::kInt64, {1, 128})
                .scalar("dim", 1)
                .sym_tensor("index", DType::kInt64, {1, s27})
                .shape();
  EXPECT_EQ(sym_shape_str(ty[0].sizes), "[1, s27]");
  EXPECT_EQ(ty[0].dtype, DType::kInt64);
}

}  // namespace
}  // namespace anvil
