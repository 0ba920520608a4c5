// Runtime extern kernels for indexing (embedding, index.Tensor, index_select, gather), joining
// (cat, stack, repeat) and scans (cumsum, diff, argmax), compared with the op table's reference
// kernels on contiguous / non-contiguous / broadcast inputs (f32, bf16, int64), plus
// hand-computed values, error cases and the registry's target list.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"
#include "test_externs_util.h"

namespace anvil::runtime::test {
namespace {

using anvil::testing::bf16;
using anvil::testing::boolean;
using anvil::testing::f32;
using anvil::testing::i32;
using anvil::testing::i64;

TEST(ExternRegistry, EveryDocumentedTargetIsRegistered) {
  const std::vector<std::string> targets = {"aten.convolution.default",
                                            "aten.conv2d.default",
                                            "aten.max_pool2d.default",
                                            "aten.avg_pool2d.default",
                                            "aten.adaptive_avg_pool2d.default",
                                            "aten.scaled_dot_product_attention.default",
                                            "aten.embedding.default",
                                            "aten.index.Tensor",
                                            "aten.index_select.default",
                                            "aten.gather.default",
                                            "aten.cumsum.default",
                                            "aten.diff.default",
                                            "aten.argmax.default",
                                            "aten.cat.default",
                                            "aten.stack.default",
                                            "aten.repeat.default",
                                            "aten.mm.default",
                                            "aten.bmm.default"};
  const std::vector<std::string> all = registered_externs();
  for (const std::string& t : targets) {
    EXPECT_NE(find_extern(t), nullptr) << t;
    EXPECT_TRUE(std::find(all.begin(), all.end(), t) != all.end()) << t;
  }
}

TEST(ExternIndex, Embedding) {
  ExternCase("aten.embedding.default")
      .tensor("weight", rand_tensor(DType::kFloat32, {10, 4}, 1))
      .tensor("indices", rand_tensor(DType::kInt64, {2, 3}, 2, 0, 10))
      .check();
  // Transposed bf16 table (column stride != 1), strided int32 indices, padding_idx given.
  ExternCase("aten.embedding.default")
      .tensor("weight", rand_tensor(DType::kBFloat16, {5, 12}, 3).transpose(0, 1))
      .tensor("indices", rand_strided(DType::kInt32, {4}, 4, 0, 12))
      .scalar("padding_idx", 0)
      .check();
  const Tensor got = ExternCase("aten.embedding.default")
                         .tensor("weight", f32({3, 2}, {0, 1, 10, 11, 20, 21}))
                         .tensor("indices", i64({2}, {2, 0}))
                         .check();
  EXPECT_TRUE(matches(got, DType::kFloat32, {2, 2}, {20, 21, 0, 1}));
  ExternCase bad("aten.embedding.default");
  bad.tensor("weight", f32({3, 2}, {0, 1, 2, 3, 4, 5})).tensor("indices", i64({1}, {3}));
  auto [rc, msg] = bad.run_api({1, 2}, DType::kFloat32);
  EXPECT_NE(rc, 0);
  EXPECT_NE(msg.find("index 3"), std::string::npos) << msg;
}

TEST(ExternIndex, IndexTensorAdjacentAndNonAdjacent) {
  const Tensor self = rand_strided(DType::kFloat32, {5, 6, 7}, 5);
  // [:, idx] with a 2-D index (negative values wrap).
  Tensor got = ExternCase("aten.index.Tensor")
                   .tensor("self", self)
                   .opt_tensors("indices", {std::nullopt, i64({2, 3}, {0, -1, 2, 5, 3, -6})})
                   .check();
  EXPECT_EQ(got.sizes(), (Shape{5, 2, 3, 7}));
  // [a, :, b] with broadcast index shapes [3, 1] and [4]: the index dims go in front.
  got = ExternCase("aten.index.Tensor")
            .tensor("self", self)
            .opt_tensors("indices", {i64({3, 1}, {0, 4, 2}), std::nullopt, i32({4}, {6, 0, 1, 3})})
            .check();
  EXPECT_EQ(got.sizes(), (Shape{3, 4, 6}));
  // Adjacent dims with an index broadcast along a stride-0 dim.
  ExternCase("aten.index.Tensor")
      .tensor("self", rand_tensor(DType::kBFloat16, {4, 5, 3}, 6))
      .opt_tensors("indices",
                   {i64({1}, {3}).expand({6}), rand_strided(DType::kInt64, {6}, 7, 0, 5)})
      .check();
}

TEST(ExternIndex, IndexTensorMasksAndInt64) {
  const Tensor mask = boolean({5}, {1, 0, 1, 1, 0});
  Tensor got = ExternCase("aten.index.Tensor")
                   .tensor("self", rand_tensor(DType::kInt64, {5, 3}, 8, -100, 100))
                   .opt_tensors("indices", {mask})
                   .check();
  EXPECT_EQ(got.sizes(), (Shape{3, 3}));
  // A 2-D mask over dims 1 and 2, after a None.
  std::vector<double> m(12, 0.0);
  m[1] = m[5] = m[11] = 1;
  got = ExternCase("aten.index.Tensor")
            .tensor("self", rand_tensor(DType::kFloat32, {2, 3, 4}, 9))
            .opt_tensors("indices", {std::nullopt, boolean({3, 4}, m)})
            .check();
  EXPECT_EQ(got.sizes(), (Shape{2, 3}));
  // Hand-computed: x[[1, 0]] of [[1, 2], [3, 4]].
  got = ExternCase("aten.index.Tensor")
            .tensor("self", f32({2, 2}, {1, 2, 3, 4}))
            .opt_tensors("indices", {i64({2}, {1, 0})})
            .check();
  EXPECT_TRUE(matches(got, DType::kFloat32, {2, 2}, {3, 4, 1, 2}));
  ExternCase bad("aten.index.Tensor");
  bad.tensor("self", f32({2, 2}, {1, 2, 3, 4}))
      .opt_tensors("indices", {std::nullopt, i64({1}, {2})});
  try {
    bad.run_extern({2, 1}, DType::kFloat32);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 2 is out of bounds for dim 1 with size 2"),
              std::string::npos)
        << e.what();
  }
}

TEST(ExternIndex, IndexSelect) {
  ExternCase("aten.index_select.default")
      .tensor("self", rand_strided(DType::kFloat32, {4, 6, 3}, 10))
      .scalar("dim", 1)
      .tensor("index", i64({5}, {5, 0, 0, 3, 1}))
      .check();
  ExternCase("aten.index_select.default")
      .tensor("self", rand_tensor(DType::kBFloat16, {4, 6}, 11))
      .scalar("dim", -2)
      .tensor("index", i32({}, {2}))
      .check();
  const Tensor got = ExternCase("aten.index_select.default")
                         .tensor("self", i64({2, 3}, {1, 2, 3, 4, 5, 6}))
                         .scalar("dim", 1)
                         .tensor("index", i64({2}, {2, 0}))
                         .check();
  EXPECT_TRUE(matches(got, DType::kInt64, {2, 2}, {3, 1, 6, 4}));
  ExternCase bad("aten.index_select.default");
  bad.tensor("self", f32({3}, {1, 2, 3})).scalar("dim", 0).tensor("index", i64({1}, {-1}));
  ANVIL_EXPECT_ERROR(bad.run_extern({1}, DType::kFloat32),
                     "index -1 is out of bounds for dim 0 with size 3");
}

TEST(ExternIndex, Gather) {
  ExternCase("aten.gather.default")
      .tensor("self", rand_strided(DType::kFloat32, {4, 5, 3}, 12))
      .scalar("dim", 1)
      .tensor("index", rand_strided(DType::kInt64, {3, 7, 2}, 13, 0, 5))
      .check();
  ExternCase("aten.gather.default")
      .tensor("self", rand_tensor(DType::kBFloat16, {3, 4}, 14))
      .scalar("dim", -1)
      .tensor("index", rand_tensor(DType::kInt64, {1, 4}, 15, 0, 4).expand({3, 4}))
      .check();
  const Tensor got = ExternCase("aten.gather.default")
                         .tensor("self", i64({2, 2}, {1, 2, 3, 4}))
                         .scalar("dim", 1)
                         .tensor("index", i64({2, 2}, {0, 0, 1, 0}))
                         .check();
  EXPECT_TRUE(matches(got, DType::kInt64, {2, 2}, {1, 1, 4, 3}));
  ExternCase bad("aten.gather.default");
  bad.tensor("self", f32({2}, {1, 2})).scalar("dim", 0).tensor("index", i64({1}, {2}));
  ANVIL_EXPECT_ERROR(bad.run_extern({1}, DType::kFloat32),
                     "index 2 is out of bounds for dim 0 with size 2");
}

TEST(ExternJoin, Cat) {
  ExternCase("aten.cat.default")
      .tensors("tensors", {rand_tensor(DType::kFloat32, {2, 3, 4}, 16),
                           rand_strided(DType::kFloat32, {2, 5, 4}, 17),
                           rand_tensor(DType::kFloat32, {1, 1, 4}, 18).expand({2, 2, 4})})
      .scalar("dim", 1)
      .check();
  // Mixed dtypes promote (the output dtype), a legacy empty tensor is skipped, negative dim.
  ExternCase("aten.cat.default")
      .tensors("tensors",
               {rand_tensor(DType::kInt64, {3, 2}, 19, -9, 9),
                rand_tensor(DType::kFloat32, {0}, 20), rand_tensor(DType::kBFloat16, {3, 3}, 21)})
      .scalar("dim", -1)
      .check();
  const Tensor got = ExternCase("aten.cat.default")
                         .tensors("tensors", {bf16({1, 2}, {1, 2}), bf16({1, 2}, {3, 4})})
                         .check();
  EXPECT_TRUE(matches(got, DType::kBFloat16, {2, 2}, {1, 2, 3, 4}));
}

TEST(ExternJoin, StackAndRepeat) {
  ExternCase("aten.stack.default")
      .tensors("tensors", {rand_tensor(DType::kFloat32, {3, 4}, 22),
                           rand_strided(DType::kFloat32, {3, 4}, 23)})
      .scalar("dim", -1)
      .check();
  const Tensor got = ExternCase("aten.stack.default")
                         .tensors("tensors", {i64({2}, {1, 2}), i64({2}, {3, 4}), i64({2}, {5, 6})})
                         .scalar("dim", 1)
                         .check();
  EXPECT_TRUE(matches(got, DType::kInt64, {2, 3}, {1, 3, 5, 2, 4, 6}));
  ExternCase("aten.repeat.default")
      .tensor("self", rand_strided(DType::kBFloat16, {2, 3}, 24))
      .ints("repeats", {2, 1, 3})
      .check();
  const Tensor rep = ExternCase("aten.repeat.default")
                         .tensor("self", i64({2}, {7, 8}))
                         .ints("repeats", {2, 2})
                         .check();
  EXPECT_TRUE(matches(rep, DType::kInt64, {2, 4}, {7, 8, 7, 8, 7, 8, 7, 8}));
}

TEST(ExternScan, Cumsum) {
  ExternCase("aten.cumsum.default")
      .tensor("self", rand_strided(DType::kFloat32, {3, 5, 4}, 25))
      .scalar("dim", 1)
      .check();
  ExternCase("aten.cumsum.default")
      .tensor("self", rand_tensor(DType::kBFloat16, {4, 6}, 26))
      .scalar("dim", -1)
      .check();
  // int32 input gives int64; with dtype=f32 the input is converted first.
  const Tensor got = ExternCase("aten.cumsum.default")
                         .tensor("self", i32({2, 3}, {1, 2, 3, 4, 5, 6}))
                         .scalar("dim", 0)
                         .check();
  EXPECT_TRUE(matches(got, DType::kInt64, {2, 3}, {1, 2, 3, 5, 7, 9}));
  ExternCase("aten.cumsum.default")
      .tensor("self", rand_tensor(DType::kInt64, {1, 5}, 27, -9, 9).expand({3, 5}))
      .scalar("dim", 1)
      .dtype("dtype", DType::kFloat32)
      .check();
}

TEST(ExternScan, Diff) {
  ExternCase("aten.diff.default").tensor("self", rand_strided(DType::kFloat32, {3, 6}, 28)).check();
  ExternCase("aten.diff.default")
      .tensor("self", rand_tensor(DType::kBFloat16, {3, 4}, 29))
      .scalar("n", 2)
      .scalar("dim", 0)
      .tensor("prepend", rand_tensor(DType::kBFloat16, {1, 4}, 30))
      .tensor("append", rand_tensor(DType::kBFloat16, {2, 4}, 31))
      .check();
  const Tensor got = ExternCase("aten.diff.default")
                         .tensor("self", i64({5}, {1, 4, 9, 16, 25}))
                         .scalar("n", 2)
                         .check();
  EXPECT_TRUE(matches(got, DType::kInt64, {3}, {2, 2, 2}));
  const Tensor x =
      ExternCase("aten.diff.default").tensor("self", boolean({4}, {1, 1, 0, 1})).check();
  EXPECT_TRUE(matches(x, DType::kBool, {3}, {0, 1, 1}));
  // n larger than the length: an empty result.
  ExternCase("aten.diff.default")
      .tensor("self", rand_tensor(DType::kFloat32, {2, 3}, 32))
      .scalar("n", 5)
      .absent()
      .tensor("append", rand_tensor(DType::kFloat32, {2, 1}, 33))
      .check();
}

TEST(ExternScan, Argmax) {
  ExternCase("aten.argmax.default")
      .tensor("self", rand_strided(DType::kFloat32, {4, 5, 3}, 34))
      .scalar("dim", 1)
      .scalar("keepdim", true)
      .check();
  ExternCase("aten.argmax.default")
      .tensor("self", rand_strided(DType::kBFloat16, {3, 7}, 35))
      .check();
  ExternCase("aten.argmax.default")
      .tensor("self", rand_tensor(DType::kInt64, {3, 4}, 36, -3, 3))
      .scalar("dim", -1)
      .check();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Ties take the first index; NaN counts as the maximum.
  Tensor got = ExternCase("aten.argmax.default")
                   .tensor("self", f32({2, 3}, {5, 1, 5, nan, 9, nan}))
                   .scalar("dim", 1)
                   .check();
  EXPECT_TRUE(matches(got, DType::kInt64, {2}, {0, 0}));
  got = ExternCase("aten.argmax.default")
            .tensor("self", f32({2, 2}, {1, 7, 7, 3}))
            .scalar("keepdim", true)
            .check();
  EXPECT_TRUE(matches(got, DType::kInt64, {1, 1}, {1}));
  ExternCase empty("aten.argmax.default");
  empty.tensor("self", f32({2, 0}, {})).scalar("dim", 1);
  ANVIL_EXPECT_ERROR(empty.run_extern({2}, DType::kInt64),
                     "argmax(): expected reduction dim to have non-zero size");
}

}  // namespace
}  // namespace anvil::runtime::test
