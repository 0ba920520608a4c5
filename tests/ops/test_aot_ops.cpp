// Tests of the ops added for the PyTorch 2.11 AOT fixtures: transposed convolution
// (conv_transpose1d / conv_transpose2d.input / convolution with transposed=True), scatter.src /
// scatter.value, scatter_reduce.two (every reduce mode, include_self on and off),
// index_put (boolean masks, integer indices with None entries and negatives, broadcast values,
// accumulate with duplicates), embedding_bag.padding_idx (sum / mean / max, padding_idx,
// include_last_offset, all four outputs), repeat_interleave.Tensor, item, the _operator
// comparisons and detach_. Expected values pasted from PyTorch 1.13 (torch.nn.functional /
// torch.ops.aten) or computed by hand; non-contiguous inputs and int64 / bf16 where allowed.
#include <gtest/gtest.h>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil {
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

/// 0, 1, ..., n-1 times `scale` plus `shift`.
std::vector<double> ramp(int n, double scale = 1, double shift = 0) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = i * scale + shift;
  return v;
}

/// A non-contiguous view with the values of `t` (a transposed copy transposed back).
Tensor strided_copy(const Tensor& t) { return t.transpose(-1, -2).contiguous().transpose(-1, -2); }

// ---- transposed convolution ------------------------------------------------------------------

const std::vector<double> kConvT2d = {0.64, 0.57, 0.68, 0.59, 0.72, 0.46, 0.29, 0.46, 0.27, 0.46,
                                      0.76, 0.63, 0.8,  0.65, 0.84, 0.46, 0.23, 0.46, 0.21, 0.46,
                                      0.88, 0.69, 0.92, 0.71, 0.96, 0.7,  0.71, 0.82, 0.81, 0.94,
                                      0.76, 0.67, 0.84, 0.73, 0.92, 1.06, 1.01, 1.18, 1.11, 1.3,
                                      1.0,  0.85, 1.08, 0.91, 1.16, 1.42, 1.31, 1.54, 1.41, 1.66};

TEST(ConvTranspose, TwoDStridePaddingOutputPadding) {
  // F.conv_transpose2d(arange(18)/10 [1,2,3,3], arange(16)/10-0.5 [2,2,2,2], [0.1,-0.2],
  //                    stride=2, padding=1, output_padding=1)
  Tensor x = f32({1, 2, 3, 3}, ramp(18, 0.1));
  Tensor w = f32({2, 2, 2, 2}, ramp(16, 0.1, -0.5));
  Tensor b = f32({2}, {0.1, -0.2});
  auto run = [&](const Tensor& xin) {
    return OpRunner("aten.conv_transpose2d.input")
        .tensor("input", xin)
        .tensor("weight", w)
        .tensor("bias", b)
        .ints("stride", {2, 2})
        .ints("padding", {1, 1})
        .ints("output_padding", {1, 1})
        .run1();
  };
  EXPECT_TRUE(matches(run(x), DType::kFloat32, {1, 2, 5, 5}, kConvT2d));
  EXPECT_TRUE(matches(run(strided_copy(x)), DType::kFloat32, {1, 2, 5, 5}, kConvT2d));
  // Same through aten.convolution.default with transposed=True.
  Tensor y = OpRunner("aten.convolution.default")
                 .tensor("input", x)
                 .tensor("weight", w)
                 .tensor("bias", b)
                 .ints("stride", {2, 2})
                 .ints("padding", {1, 1})
                 .ints("dilation", {1, 1})
                 .scalar("transposed", true)
                 .ints("output_padding", {1, 1})
                 .scalar("groups", 1)
                 .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {1, 2, 5, 5}, kConvT2d));
  // bf16 within bf16 tolerance; unbatched input drops the batch dim.
  Tensor yb = OpRunner("aten.conv_transpose2d.input")
                  .tensor("input", x.to(DType::kBFloat16))
                  .tensor("weight", w.to(DType::kBFloat16))
                  .tensor("bias", b.to(DType::kBFloat16))
                  .scalar("stride", 2)
                  .scalar("padding", 1)
                  .scalar("output_padding", 1)
                  .run1();
  EXPECT_TRUE(matches(yb, DType::kBFloat16, {1, 2, 5, 5}, kConvT2d));
  Tensor yu = OpRunner("aten.conv_transpose2d.input")
                  .tensor("input", x.reshape({2, 3, 3}))
                  .tensor("weight", w)
                  .tensor("bias", b)
                  .ints("stride", {2})
                  .ints("padding", {1})
                  .ints("output_padding", {1})
                  .run1();
  EXPECT_TRUE(matches(yu, DType::kFloat32, {2, 5, 5}, kConvT2d));
}

TEST(ConvTranspose, GroupsDilationAndInt64) {
  // F.conv_transpose2d(x, arange(8)/4-1 [2,1,2,2], groups=2, dilation=2)
  Tensor x = f32({1, 2, 3, 3}, ramp(18, 0.1));
  Tensor w = f32({2, 1, 2, 2}, ramp(8, 0.25, -1));
  Tensor y = OpRunner("aten.conv_transpose2d.input")
                 .tensor("input", x)
                 .tensor("weight", w)
                 .none("bias")
                 .scalar("groups", 2)
                 .ints("dilation", {2, 2})
                 .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {1, 2, 5, 5},
                      {0.0,  -0.1,  -0.2,  -0.075, -0.15, -0.3,  -0.4, -0.725, -0.3, -0.375,
                       -0.6, -0.75, -1.35, -0.55,  -0.65, -0.15, -0.2, -0.325, -0.1, -0.125,
                       -0.3, -0.35, -0.55, -0.175, -0.2,  0.0,   0.0,  0.225,  0.25, 0.275,
                       0.0,  0.0,   0.3,   0.325,  0.35,  0.45,  0.5,  1.6,    1.15, 1.25,
                       0.6,  0.65,  1.6,   0.975,  1.05,  0.75,  0.8,  1.975,  1.2,  1.275}));
  // Integers are exact: arange(8) [1,2,2,2] with arange(8)-3 [2,1,2,2], bias [1].
  Tensor yi = OpRunner("aten.conv_transpose2d.input")
                  .tensor("input", i64({1, 2, 2, 2}, ramp(8)))
                  .tensor("weight", i64({2, 1, 2, 2}, ramp(8, 1, -3)))
                  .tensor("bias", i64({1}, {1}))
                  .run1();
  EXPECT_TRUE(matches(yi, DType::kInt64, {1, 1, 3, 3}, {5, 11, 9, 13, 37, 29, 17, 43, 29}));
}

TEST(ConvTranspose, OneDStrideAndErrors) {
  // F.conv_transpose1d(arange(8)/8 [1,2,4], arange(18)/9-1 [2,3,3], [0.5,0,-0.5], stride=2,
  //                    padding=1)
  Tensor x = f32({1, 2, 4}, ramp(8, 1.0 / 8));
  Tensor w = f32({2, 3, 3}, ramp(18, 1.0 / 9, -1));
  Tensor y = OpRunner("aten.conv_transpose1d.default")
                 .tensor("input", strided_copy(x))
                 .tensor("weight", w)
                 .tensor("bias", f32({3}, {0.5, 0, -0.5}))
                 .ints("stride", {2})
                 .ints("padding", {1})
                 .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {1, 3, 7},
                      {0.555556,  0.486111, 0.458333,  0.291667, 0.361111, 0.097222, 0.263889,
                       0.222222,  0.402778, 0.208333,  0.375,    0.194444, 0.347222, 0.180556,
                       -0.111111, 0.319444, -0.041667, 0.458333, 0.027778, 0.597222, 0.097222}));
  // Symbolic length: (s - 1) * 2 - 2 + 2 + 1.
  const SymInt s = SymInt::symbol("s0");
  auto types = OpRunner("aten.conv_transpose1d.default")
                   .sym_tensor("input", DType::kFloat32, {2, 2, s})
                   .sym_tensor("weight", DType::kFloat32, {2, 3, 3})
                   .ints("stride", {2})
                   .ints("padding", {1})
                   .shape();
  ASSERT_EQ(types.size(), 1u);
  EXPECT_EQ(types[0].sizes[1].maybe_constant(), std::optional<int64_t>(3));
  EXPECT_EQ(types[0].sizes[2].evaluate({{"s0", 4}}), 7);
  // Channel mismatch and output_padding >= stride are errors.
  ANVIL_EXPECT_ERROR(OpRunner("aten.conv_transpose1d.default")
                         .tensor("input", f32({1, 3, 4}, ramp(12)))
                         .tensor("weight", w)
                         .run1(),
                     "weight does not fit the input");
  ANVIL_EXPECT_ERROR(OpRunner("aten.conv_transpose1d.default")
                         .tensor("input", x)
                         .tensor("weight", w)
                         .ints("stride", {2})
                         .ints("output_padding", {2})
                         .run1(),
                     "output padding must be smaller than either stride or dilation");
}

// ---- scatter / scatter_reduce -----------------------------------------------------------------

TEST(Scatter, SrcAndValue) {
  // zeros(3,4).scatter(1, [[0,1],[2,3],[3,0]], arange(1,13).reshape(3,4))
  Tensor idx = i64({3, 2}, {0, 1, 2, 3, 3, 0});
  Tensor src = f32({3, 4}, ramp(12, 1, 1));
  Tensor y = OpRunner("aten.scatter.src")
                 .tensor("self", f32({3, 4}, std::vector<double>(12, 0)))
                 .scalar("dim", 1)
                 .tensor("index", idx)
                 .tensor("src", strided_copy(src))
                 .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {3, 4}, {1, 2, 0, 0, 0, 0, 5, 6, 10, 0, 0, 9}));
  // int64 along dim 0 with a smaller index: [[2,0,1,1]].
  Tensor yi = OpRunner("aten.scatter.src")
                  .tensor("self", i64({3, 4}, std::vector<double>(12, 0)))
                  .scalar("dim", 0)
                  .tensor("index", i64({1, 4}, {2, 0, 1, 1}))
                  .tensor("src", i64({3, 4}, ramp(12, 1, 1)))
                  .run1();
  EXPECT_TRUE(matches(yi, DType::kInt64, {3, 4}, {0, 2, 0, 0, 0, 0, 3, 4, 1, 0, 0, 0}));
  // ones(2,3).scatter(1, [[2],[0]], -2.5)
  Tensor yv = OpRunner("aten.scatter.value")
                  .tensor("self", f32({2, 3}, std::vector<double>(6, 1)))
                  .scalar("dim", -1)
                  .tensor("index", i64({2, 1}, {2, 0}))
                  .scalar("value", -2.5)
                  .run1();
  EXPECT_TRUE(matches(yv, DType::kFloat32, {2, 3}, {1, 1, -2.5, -2.5, 1, 1}));
  // Out-of-range index and int32 index are errors.
  ANVIL_EXPECT_ERROR(OpRunner("aten.scatter.src")
                         .tensor("self", f32({3, 4}, ramp(12)))
                         .scalar("dim", 1)
                         .tensor("index", i64({1, 1}, {4}))
                         .tensor("src", src)
                         .run1(),
                     "index 4 is out of bounds for dimension 1 with size 4");
  ANVIL_EXPECT_ERROR(OpRunner("aten.scatter.src")
                         .tensor("self", f32({3, 4}, ramp(12)))
                         .scalar("dim", 1)
                         .tensor("index", i32({1, 1}, {0}))
                         .tensor("src", src)
                         .run1(),
                     "scatter(): expected an int64 index");
}

/// self.scatter_reduce(0, [0,1,0,1,2,1], src, reduce, include_self) on a 1-D self.
Tensor scatter_reduce_1d(const Tensor& self, const Tensor& src, const std::string& reduce,
                         bool include_self) {
  return OpRunner("aten.scatter_reduce.two")
      .tensor("self", self)
      .scalar("dim", 0)
      .tensor("index", i64({6}, {0, 1, 0, 1, 2, 1}))
      .tensor("src", src)
      .string("reduce", reduce)
      .scalar("include_self", include_self)
      .run1();
}

TEST(ScatterReduce, EveryModeWithAndWithoutSelf) {
  const Tensor self = f32({4}, {1, 2, 3, 4});
  const Tensor src = f32({6}, {5, -1, 2, 3, -4, 6});
  struct Case {
    const char* reduce;
    bool include_self;
    std::vector<double> want;
  };
  const std::vector<Case> cases = {
      {"sum", true, {8, 10, -1, 4}},
      {"sum", false, {7, 8, -4, 4}},
      {"prod", true, {10, -36, -12, 4}},
      {"prod", false, {10, -18, -4, 4}},
      {"mean", true, {2.666667, 2.5, -0.5, 4}},
      {"mean", false, {3.5, 2.666667, -4, 4}},
      {"amax", true, {5, 6, 3, 4}},
      {"amax", false, {5, 6, -4, 4}},
      {"amin", true, {1, -1, -4, 4}},
      {"amin", false, {2, -1, -4, 4}},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(matches(scatter_reduce_1d(self, src, c.reduce, c.include_self), DType::kFloat32,
                        {4}, c.want))
        << c.reduce << " include_self=" << c.include_self;
    EXPECT_TRUE(matches(scatter_reduce_1d(self.to(DType::kBFloat16), src.to(DType::kBFloat16),
                                          c.reduce, c.include_self),
                        DType::kBFloat16, {4}, c.want))
        << "bf16 " << c.reduce;
  }
  // int64 mean uses floor division.
  const Tensor si = i64({4}, {1, 2, 3, 4}), sri = i64({6}, {5, -1, 2, 3, -4, 6});
  EXPECT_TRUE(matches(scatter_reduce_1d(si, sri, "mean", true), DType::kInt64, {4}, {2, 2, -1, 4}));
  EXPECT_TRUE(
      matches(scatter_reduce_1d(si, sri, "mean", false), DType::kInt64, {4}, {3, 2, -4, 4}));
  // scatter_add is scatter_reduce sum with self.
  Tensor add = OpRunner("aten.scatter_add.default")
                   .tensor("self", self)
                   .scalar("dim", 0)
                   .tensor("index", i64({6}, {0, 1, 0, 1, 2, 1}))
                   .tensor("src", src)
                   .run1();
  EXPECT_TRUE(matches(add, DType::kFloat32, {4}, {8, 10, -1, 4}));
  ANVIL_EXPECT_ERROR(scatter_reduce_1d(self, src, "max", true), "unknown reduce mode");
}

TEST(ScatterReduce, TwoDimensional) {
  const Tensor s2 = f32({2, 3}, ramp(6));
  const Tensor i2 = i64({2, 3}, {1, 0, 1, 1, 1, 0});
  const Tensor src2 = f32({2, 3}, {10, 20, 30, 40, 50, 60});
  Tensor amax = OpRunner("aten.scatter_reduce.two")
                    .tensor("self", s2)
                    .scalar("dim", 1)
                    .tensor("index", i2)
                    .tensor("src", src2)
                    .string("reduce", "amax")
                    .scalar("include_self", false)
                    .run1();
  EXPECT_TRUE(matches(amax, DType::kFloat32, {2, 3}, {20, 30, 2, 60, 50, 5}));
  Tensor sum = OpRunner("aten.scatter_reduce.two")
                   .tensor("self", strided_copy(s2))
                   .scalar("dim", 0)
                   .tensor("index", i2)
                   .tensor("src", src2)
                   .string("reduce", "sum")
                   .run1();
  EXPECT_TRUE(matches(sum, DType::kFloat32, {2, 3}, {0, 21, 62, 53, 54, 35}));
}

// ---- index_put -------------------------------------------------------------------------------

/// aten.index_put(self, indices, values, accumulate).
Tensor index_put(const Tensor& self, const std::vector<std::optional<Tensor>>& indices,
                 const Tensor& values, bool accumulate) {
  return OpRunner("aten.index_put.default")
      .tensor("self", self)
      .opt_tensors("indices", indices)
      .tensor("values", values)
      .scalar("accumulate", accumulate)
      .run1();
}

TEST(IndexPut, BooleanMasks) {
  const Tensor a = f32({3, 4}, ramp(12));
  const Tensor m = boolean({3, 4}, {1, 0, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0});
  EXPECT_TRUE(matches(index_put(a, {m}, f32({}, {10}), true), DType::kFloat32, {3, 4},
                      {10, 1, 12, 3, 4, 5, 6, 17, 18, 19, 10, 11}));
  EXPECT_TRUE(matches(index_put(strided_copy(a), {m}, f32({5}, {1, 2, 3, 4, 5}), false),
                      DType::kFloat32, {3, 4}, {1, 1, 2, 3, 4, 5, 6, 3, 4, 5, 10, 11}));
  // A row mask with broadcast values.
  EXPECT_TRUE(matches(index_put(a, {boolean({3}, {1, 0, 1})}, f32({4}, {-1, -2, -3, -4}), false),
                      DType::kFloat32, {3, 4}, {-1, -2, -3, -4, 4, 5, 6, 7, -1, -2, -3, -4}));
  // A mask of the wrong shape is an error.
  ANVIL_EXPECT_ERROR(index_put(a, {boolean({2}, {1, 0})}, f32({}, {1}), false),
                     "the shape of the mask does not match the indexed tensor");
}

TEST(IndexPut, IntegerIndicesNoneAndDuplicates) {
  const Tensor a = f32({3, 4}, ramp(12));
  // Duplicates accumulate (in order), -1 is the last row, values broadcast from [4, 1].
  EXPECT_TRUE(matches(index_put(a, {i64({4}, {0, 2, 0, -1})}, f32({4, 1}, {1, 2, 3, 4}), true),
                      DType::kFloat32, {3, 4}, {4, 5, 6, 7, 4, 5, 6, 7, 14, 15, 16, 17}));
  // [None, [1, 3]] writes two columns.
  EXPECT_TRUE(matches(index_put(a, {std::nullopt, i64({2}, {1, 3})}, f32({2}, {100, 200}), false),
                      DType::kFloat32, {3, 4}, {0, 100, 2, 200, 4, 100, 6, 200, 8, 100, 10, 200}));
  // A pair of index tensors (int32 too).
  EXPECT_TRUE(matches(index_put(a, {i64({2}, {0, 2}), i32({2}, {3, 1})}, f32({2}, {7, 8}), true),
                      DType::kFloat32, {3, 4}, {0, 1, 2, 10, 4, 5, 6, 7, 8, 17, 10, 11}));
  // Non-adjacent indexed dims: the broadcast dim goes first, values [2, 3].
  Tensor b = f32({2, 3, 4}, ramp(24));
  Tensor vals = f32({2, 3}, {-1, -1, -1, -2, -2, -2});
  EXPECT_TRUE(matches(
      index_put(b, {i64({2}, {1, 0}), std::nullopt, i64({2}, {0, 3})}, vals, false),
      DType::kFloat32, {2, 3, 4},
      {0, 1, 2, -2, 4, 5, 6, -2, 8, 9, 10, -2, -1, 13, 14, 15, -1, 17, 18, 19, -1, 21, 22, 23}));
  // int64 accumulate and bf16.
  EXPECT_TRUE(
      matches(index_put(i64({2, 3}, ramp(6)), {i64({3}, {1, 1, 0})}, i64({3}, {10, 20, 30}), true),
              DType::kInt64, {2, 3}, {10, 21, 32, 23, 44, 65}));
  EXPECT_TRUE(matches(index_put(bf16({3}, {1, 2, 3}), {i64({2}, {2, 2})}, bf16({}, {0.5}), true),
                      DType::kBFloat16, {3}, {1, 2, 4}));
  // Out of range and dtype mismatch are errors.
  ANVIL_EXPECT_ERROR(index_put(a, {i64({1}, {3})}, f32({}, {1}), false),
                     "index 3 is out of bounds for dimension 0 with size 3");
  ANVIL_EXPECT_ERROR(index_put(a, {i64({1}, {0})}, f64({}, {1}), false),
                     "index_put requires the source and destination dtypes to match");
}

// ---- embedding_bag ---------------------------------------------------------------------------

/// aten.embedding_bag.padding_idx on weight arange(12)/2-1 [6, 2], indices [1,2,4,5,4,3,2,0],
/// offsets [0,3,3,6]; returns the four outputs.
std::vector<Tensor> embedding_bag(int64_t mode, std::optional<int64_t> padding_idx,
                                  bool include_last, DType wdt = DType::kFloat32) {
  OpRunner r("aten.embedding_bag.padding_idx");
  r.tensor("weight", f32({6, 2}, ramp(12, 0.5, -1)).to(wdt))
      .tensor("indices", i64({8}, {1, 2, 4, 5, 4, 3, 2, 0}))
      .tensor("offsets", i64({4}, {0, 3, 3, 6}))
      .scalar("scale_grad_by_freq", false)
      .scalar("mode", mode)
      .scalar("sparse", false)
      .none("per_sample_weights")
      .scalar("include_last_offset", include_last);
  if (padding_idx)
    r.scalar("padding_idx", *padding_idx);
  else
    r.none("padding_idx");
  std::vector<Tensor> out;
  for (const auto& v : r.run()) out.push_back(std::get<Tensor>(v));
  return out;
}

TEST(EmbeddingBag, SumMeanMaxAndTheirIndexOutputs) {
  const std::vector<double> o2b = {0, 0, 0, 2, 2, 2, 3, 3};
  auto sum = embedding_bag(0, std::nullopt, false);
  ASSERT_EQ(sum.size(), 4u);
  EXPECT_TRUE(matches(sum[0], DType::kFloat32, {4, 2}, {4, 5.5, 0, 0, 9, 10.5, 0, 1}));
  EXPECT_TRUE(matches(sum[1], DType::kInt64, {0}, {}));  // PyTorch's sum fast path
  // bag_size as PyTorch computes it for a weight that requires grad; max_indices copies it.
  EXPECT_TRUE(matches(sum[2], DType::kInt64, {4}, {3, 0, 3, 2}));
  EXPECT_TRUE(matches(sum[3], DType::kInt64, {4}, {3, 0, 3, 2}));
  auto mean = embedding_bag(1, std::nullopt, false);
  EXPECT_TRUE(
      matches(mean[0], DType::kFloat32, {4, 2}, {1.333333, 1.833333, 0, 0, 3, 3.5, 0, 0.5}));
  EXPECT_TRUE(matches(mean[1], DType::kInt64, {8}, o2b));
  EXPECT_TRUE(matches(mean[2], DType::kInt64, {4}, {3, 0, 3, 2}));
  EXPECT_TRUE(matches(mean[3], DType::kInt64, {4}, {3, 0, 3, 2}));
  auto max = embedding_bag(2, std::nullopt, false);
  EXPECT_TRUE(matches(max[0], DType::kFloat32, {4, 2}, {3, 3.5, 0, 0, 4, 4.5, 1, 1.5}));
  EXPECT_TRUE(matches(max[1], DType::kInt64, {8}, o2b));
  EXPECT_TRUE(matches(max[2], DType::kInt64, {4}, {3, 0, 3, 2}));
  EXPECT_TRUE(matches(max[3], DType::kInt64, {4, 2}, {4, 4, 0, 0, 5, 5, 2, 2}));
  // f64 weights leave the sum fast path: offset2bag is computed.
  auto sum64 = embedding_bag(0, std::nullopt, false, DType::kFloat64);
  EXPECT_TRUE(matches(sum64[0], DType::kFloat64, {4, 2}, {4, 5.5, 0, 0, 9, 10.5, 0, 1}));
  EXPECT_TRUE(matches(sum64[1], DType::kInt64, {8}, o2b));
  // bf16 weights.
  auto sumb = embedding_bag(0, std::nullopt, false, DType::kBFloat16);
  EXPECT_TRUE(matches(sumb[0], DType::kBFloat16, {4, 2}, {4, 5.5, 0, 0, 9, 10.5, 0, 1}));
}

TEST(EmbeddingBag, PaddingIdxLastOffsetAndTwoDInput) {
  auto sum = embedding_bag(0, 4, false);
  EXPECT_TRUE(matches(sum[0], DType::kFloat32, {4, 2}, {1, 2, 0, 0, 6, 7, 0, 1}));
  EXPECT_TRUE(matches(sum[1], DType::kInt64, {8}, {0, 0, 0, 2, 2, 2, 3, 3}));
  auto mean = embedding_bag(1, 4, false);
  EXPECT_TRUE(matches(mean[0], DType::kFloat32, {4, 2}, {0.5, 1, 0, 0, 3, 3.5, 0, 0.5}));
  EXPECT_TRUE(matches(mean[2], DType::kInt64, {4}, {2, 0, 2, 2}));
  auto max = embedding_bag(2, 4, false);
  EXPECT_TRUE(matches(max[0], DType::kFloat32, {4, 2}, {1, 1.5, 0, 0, 4, 4.5, 1, 1.5}));
  EXPECT_TRUE(matches(max[3], DType::kInt64, {4, 2}, {2, 2, 0, 0, 5, 5, 2, 2}));
  // include_last_offset: 3 bags [0,3), [3,3), [3,6).
  auto last = embedding_bag(2, std::nullopt, true);
  EXPECT_TRUE(matches(last[0], DType::kFloat32, {3, 2}, {3, 3.5, 0, 0, 4, 4.5}));
  // 2-D input [2, 2] in mode mean (hand-computed: rows 0, 5 and 3, 3).
  std::vector<ir::RValue> r = OpRunner("aten.embedding_bag.padding_idx")
                                  .tensor("weight", f32({6, 2}, ramp(12, 0.5, -1)))
                                  .tensor("indices", i64({2, 2}, {0, 5, 3, 3}))
                                  .none("offsets")
                                  .scalar("scale_grad_by_freq", false)
                                  .scalar("mode", 1)
                                  .scalar("sparse", false)
                                  .none("per_sample_weights")
                                  .scalar("include_last_offset", false)
                                  .none("padding_idx")
                                  .run();
  EXPECT_TRUE(matches(std::get<Tensor>(r.at(0)), DType::kFloat32, {2, 2}, {1.5, 2, 2, 2.5}));
  // per_sample_weights scale the rows in mode sum (hand-computed: row r is [r - 1, r - 0.5], so
  // 1 * row1 + 2 * row2 + 0.5 * row4 = [0 + 2 + 1.5, 0.5 + 3 + 1.75]).
  std::vector<ir::RValue> p = OpRunner("aten.embedding_bag.padding_idx")
                                  .tensor("weight", f32({6, 2}, ramp(12, 0.5, -1)))
                                  .tensor("indices", i64({3}, {1, 2, 4}))
                                  .tensor("offsets", i64({1}, {0}))
                                  .scalar("scale_grad_by_freq", false)
                                  .scalar("mode", 0)
                                  .scalar("sparse", false)
                                  .tensor("per_sample_weights", f32({3}, {1, 2, 0.5}))
                                  .scalar("include_last_offset", false)
                                  .none("padding_idx")
                                  .run();
  EXPECT_TRUE(matches(std::get<Tensor>(p.at(0)), DType::kFloat32, {1, 2}, {3.5, 5.25}));
  // Bad index and offsets[0] != 0 are errors.
  ANVIL_EXPECT_ERROR(OpRunner("aten.embedding_bag.padding_idx")
                         .tensor("weight", f32({6, 2}, ramp(12)))
                         .tensor("indices", i64({2}, {0, 6}))
                         .tensor("offsets", i64({1}, {0}))
                         .run(),
                     "index 6 is out of range");
  ANVIL_EXPECT_ERROR(OpRunner("aten.embedding_bag.padding_idx")
                         .tensor("weight", f32({6, 2}, ramp(12)))
                         .tensor("indices", i64({2}, {0, 1}))
                         .tensor("offsets", i64({1}, {1}))
                         .run(),
                     "offsets[0] has to be 0");
}

// ---- repeat_interleave, item, comparisons, detach_ -------------------------------------------

TEST(RepeatInterleave, WithAndWithoutOutputSize) {
  Tensor y = OpRunner("aten.repeat_interleave.Tensor")
                 .tensor("repeats", i64({4}, {2, 0, 3, 1}))
                 .scalar("output_size", 6)
                 .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {6}, {0, 0, 2, 2, 2, 3}));
  // Without output_size the size is an unbacked symbol; int32 repeats keep their dtype.
  auto types =
      OpRunner("aten.repeat_interleave.Tensor").sym_tensor("repeats", DType::kInt32, {3}).shape();
  ASSERT_EQ(types.size(), 1u);
  EXPECT_FALSE(types[0].sizes[0].is_constant());
  Tensor yi =
      OpRunner("aten.repeat_interleave.Tensor").tensor("repeats", i32({3}, {1, 2, 1})).run1();
  EXPECT_TRUE(matches(yi, DType::kInt32, {4}, {0, 1, 1, 2}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.repeat_interleave.Tensor")
                         .tensor("repeats", i64({2}, {1, 1}))
                         .scalar("output_size", 3)
                         .run1(),
                     "the sum of repeats does not match output_size");
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.repeat_interleave.Tensor").tensor("repeats", i64({2}, {1, -1})).run1(),
      "repeats can not be negative");
}

TEST(ItemAndComparisons, ValuesAndErrors) {
  auto item = [](const Tensor& t) { return OpRunner("aten.item.default").tensor("self", t).run(); };
  EXPECT_EQ(std::get<int64_t>(item(i64({}, {7})).at(0)), 7);
  EXPECT_EQ(std::get<int64_t>(item(i64({1, 1}, {-3})).at(0)), -3);
  EXPECT_DOUBLE_EQ(std::get<double>(item(f32({1}, {2.5})).at(0)), 2.5);
  ANVIL_EXPECT_ERROR(item(i64({2}, {1, 2})), "item() needs a tensor with exactly one element");
  auto cmp = [](const std::string& op, int64_t a, int64_t b) {
    return std::get<bool>(OpRunner("_operator." + op).scalar("a", a).scalar("b", b).run().at(0));
  };
  EXPECT_TRUE(cmp("ge", 4, 4));
  EXPECT_FALSE(cmp("gt", 3, 3));
  EXPECT_TRUE(cmp("le", -1, 0));
  EXPECT_FALSE(cmp("lt", 2, 1));
  EXPECT_TRUE(cmp("eq", 5, 5));
  EXPECT_TRUE(cmp("ne", 5, 6));
  EXPECT_TRUE(std::get<bool>(
      OpRunner("_operator.gt").scalar("a", 2.5).scalar("b", int64_t{2}).run().at(0)));
  // detach_ returns its input.
  Tensor x = f32({2}, {1, 2});
  EXPECT_TRUE(shares_storage(OpRunner("aten.detach_.default").tensor("self", x).run1(), x));
}

}  // namespace
}  // namespace anvil
