// Tests of the shape family (src/ops/shape.cpp): views share storage, joins/splits, repeat, and
// the symbolic shape rules on the size patterns the real fixtures use. Expected values are
// hand-computed or from PyTorch (pasted).
#include <gtest/gtest.h>

#include <limits>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::bf16;
using testing::f32;
using testing::i64;
using testing::matches;
using testing::OpRunner;
using testing::shares_storage;

constexpr int64_t kBig = std::numeric_limits<int64_t>::max();
const SymInt s0 = SymInt::symbol("s0"), s1 = SymInt::symbol("s1");
const SymInt s23 = SymInt::symbol("s23"), s27 = SymInt::symbol("s27");

/// Sizes of the one type a shape rule returned, as text.
std::string shape_of(const std::vector<ir::TensorType>& types) {
  EXPECT_EQ(types.size(), 1u);
  return types.empty() ? "" : sym_shape_str(types[0].sizes);
}

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

// ---- view / reshape ------------------------------------------------------------------------

TEST(ShapeView, InfersMinusOneAndSharesStorage) {
  Tensor x = f32({2, 3}, iota(6));
  Tensor y = OpRunner("aten.view.default").tensor("self", x).ints("size", {3, -1}).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {3, 2}, iota(6)));
  EXPECT_TRUE(shares_storage(x, y));
  y.select(0, 1).fill(-1);  // elements 2 and 3 of x
  EXPECT_TRUE(matches(x, DType::kFloat32, {2, 3}, {0, 1, -1, -1, 4, 5}));
}

TEST(ShapeView, Bf16AndInt64) {
  Tensor b = bf16({4}, {0.5, 1.5, -2, 3});
  EXPECT_TRUE(matches(OpRunner("aten.view.default").tensor("self", b).ints("size", {2, 2}).run1(),
                      DType::kBFloat16, {2, 2}, {0.5, 1.5, -2, 3}));
  Tensor l = i64({6}, iota(6));
  EXPECT_TRUE(
      matches(OpRunner("aten.view.default").tensor("self", l).ints("size", {-1, 1, 3}).run1(),
              DType::kInt64, {2, 1, 3}, iota(6)));
}

TEST(ShapeView, NonContiguousCompatibleAndIncompatible) {
  // [4, 3] transposed to [3, 4]: splitting dim 1 keeps the strides valid, merging does not.
  Tensor t = f32({4, 3}, iota(12)).transpose(0, 1);
  Tensor v = OpRunner("aten.view.default").tensor("self", t).ints("size", {3, 2, 2}).run1();
  EXPECT_TRUE(matches(v, DType::kFloat32, {3, 2, 2}, {0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}));
  EXPECT_TRUE(shares_storage(v, t));
  std::string msg =
      error_of([&] { OpRunner("aten.view.default").tensor("self", t).ints("size", {12}).run1(); });
  EXPECT_NE(msg.find("node0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reshape"), std::string::npos) << msg;
}

TEST(ShapeView, BadSizes) {
  Tensor x = f32({2, 3}, iota(6));
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.view.default").tensor("self", x).ints("size", {4, -1}).run1(),
      "shape is invalid for the input's element count (expected 6 elements, got [4, -1])");
  ANVIL_EXPECT_ERROR(OpRunner("aten.view.default").tensor("self", x).ints("size", {-1, -1}).run1(),
                     "only one dimension can be inferred");
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.view.default").tensor("self", x).ints("size", {5}).run1(),
      "shape is invalid for the input's element count (expected 6 elements, got [5])");
}

TEST(ShapeView, SymbolicMinusOneInference) {
  // [s0*s1*64] viewed as [s0, s1, -1, 16] -> [s0, s1, 4, 16].
  auto t = OpRunner("aten.view.default")
               .sym_tensor("self", DType::kFloat32, {s0 * s1 * SymInt(64)})
               .symints("size", {s0, s1, -1, 16}, {})
               .shape();
  EXPECT_EQ(shape_of(t), "[s0, s1, 4, 16]");
  // llama_tiny: [s23, s27, 32] -> [s23, s27, -1, 16] = [s23, s27, 2, 16].
  t = OpRunner("aten.view.default")
          .sym_tensor("self", DType::kFloat32, {s23, s27, 32})
          .symints("size", {s23, s27, -1, 16}, {})
          .shape();
  EXPECT_EQ(shape_of(t), "[s23, s27, 2, 16]");
  // gpt2_tiny: ids [s23, s27] -> [-1, s27] = [s23, s27]; [s23, s27, 64] -> [-1, 64].
  t = OpRunner("aten.view.default")
          .sym_tensor("self", DType::kInt64, {s23, s27})
          .symints("size", {-1, s27}, {})
          .shape();
  EXPECT_EQ(shape_of(t), "[s23, s27]");
  EXPECT_EQ(t[0].dtype, DType::kInt64);
  t = OpRunner("aten.view.default")
          .sym_tensor("self", DType::kFloat32, {s23, s27, 64})
          .symints("size", {-1, 64}, {})
          .shape();
  EXPECT_EQ(t[0].sizes[0], s23 * s27);
  EXPECT_EQ(t[0].sizes[1], SymInt(64));
  // Not exactly divisible: stays a FloorDiv that evaluates correctly.
  t = OpRunner("aten.view.default")
          .sym_tensor("self", DType::kFloat32, {s0, 6})
          .symints("size", {-1, 4}, {})
          .shape();
  EXPECT_EQ(t[0].sizes[0].evaluate({{"s0", 2}}), 3);
}

TEST(ShapeReshape, CopiesOnlyWhenNeeded) {
  Tensor x = f32({2, 3}, iota(6));
  Tensor r = OpRunner("aten.reshape.default").tensor("self", x).ints("shape", {3, 2}).run1();
  EXPECT_TRUE(shares_storage(r, x));
  Tensor t = x.transpose(0, 1);  // [3, 2] non-contiguous
  Tensor c = OpRunner("aten.reshape.default").tensor("self", t).ints("shape", {-1}).run1();
  EXPECT_TRUE(matches(c, DType::kFloat32, {6}, {0, 3, 1, 4, 2, 5}));
  EXPECT_FALSE(shares_storage(c, x));
  Tensor b = bf16({2, 2}, {1, 2, 3, 4}).transpose(0, 1);
  EXPECT_TRUE(matches(OpRunner("aten.reshape.default").tensor("self", b).ints("shape", {4}).run1(),
                      DType::kBFloat16, {4}, {1, 3, 2, 4}));
  auto ty = OpRunner("aten.reshape.default")
                .sym_tensor("self", DType::kFloat32, {s23, s27, 4, 16})
                .symints("shape", {s23, s27, -1}, {})
                .shape();
  EXPECT_EQ(shape_of(ty), "[s23, s27, 64]");
}

TEST(ShapeUnsafeView, BehavesLikeReshape) {
  Tensor x = i64({2, 3}, iota(6));
  Tensor y = OpRunner("aten._unsafe_view.default").tensor("self", x).ints("size", {6}).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {6}, iota(6)));
  EXPECT_TRUE(shares_storage(x, y));
}

// ---- flatten / unflatten ---------------------------------------------------------------------

TEST(ShapeFlatten, RangesAndScalars) {
  Tensor x = f32({2, 3, 4}, iota(24));
  Tensor y = OpRunner("aten.flatten.using_ints").tensor("self", x).scalar("start_dim", 1).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 12}, iota(24)));
  EXPECT_TRUE(shares_storage(x, y));
  y = OpRunner("aten.flatten.using_ints")
          .tensor("self", x)
          .scalar("start_dim", 0)
          .scalar("end_dim", -2)
          .run1();
  EXPECT_EQ(y.sizes(), (Shape{6, 4}));
  Tensor s =
      OpRunner("aten.flatten.using_ints").tensor("self", Tensor::scalar(7, DType::kInt64)).run1();
  EXPECT_TRUE(matches(s, DType::kInt64, {1}, {7}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.flatten.using_ints")
                         .tensor("self", x)
                         .scalar("start_dim", 2)
                         .scalar("end_dim", 1)
                         .run1(),
                     "start_dim cannot come after end_dim");
  // Non-contiguous input: a copy with the permuted order.
  Tensor p = x.permute({2, 0, 1});
  Tensor f = OpRunner("aten.flatten.using_ints").tensor("self", p).run1();
  EXPECT_EQ(f.sizes(), (Shape{24}));
  EXPECT_EQ(f.item_at(1), 4);
  // block_tiny: [s77, 4, s27, 8, 2] with start_dim=-2 -> [s77, 4, s27, 16].
  SymInt s77 = SymInt::symbol("s77");
  auto ty = OpRunner("aten.flatten.using_ints")
                .sym_tensor("self", DType::kFloat32, {s77, 4, s27, 8, 2})
                .scalar("start_dim", -2)
                .shape();
  EXPECT_EQ(shape_of(ty), "[s77, 4, s27, 16]");
}

TEST(ShapeUnflatten, InfersAndViews) {
  Tensor x = bf16({2, 6}, iota(12));
  Tensor y = OpRunner("aten.unflatten.int")
                 .tensor("self", x)
                 .scalar("dim", -1)
                 .ints("sizes", {3, -1})
                 .run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {2, 3, 2}, iota(12)));
  EXPECT_TRUE(shares_storage(x, y));
  auto ty = OpRunner("aten.unflatten.int")
                .sym_tensor("self", DType::kFloat32, {s0, s1 * SymInt(64)})
                .scalar("dim", 1)
                .symints("sizes", {s1, -1}, {})
                .shape();
  EXPECT_EQ(shape_of(ty), "[s0, s1, 64]");
}

// ---- permute / transpose / t -----------------------------------------------------------------

TEST(ShapePermute, ValuesViewsAndErrors) {
  Tensor x = f32({2, 3, 4}, iota(24));
  Tensor y = OpRunner("aten.permute.default").tensor("self", x).ints("dims", {-1, 0, 1}).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {4, 2, 3}, {0, 4, 8,  12, 16, 20, 1, 5, 9,  13, 17, 21,
                                                      2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23}));
  EXPECT_TRUE(shares_storage(x, y));
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.permute.default").tensor("self", x).ints("dims", {0, 0, 1}).run1(),
      "permute: repeated dim");
  ANVIL_EXPECT_ERROR(OpRunner("aten.permute.default").tensor("self", x).ints("dims", {0, 1}).run1(),
                     "permute: number of dims does not match the tensor's rank");
  auto ty = OpRunner("aten.permute.default")
                .sym_tensor("self", DType::kFloat32, {s0, s1, 3, 4, 16})
                .ints("dims", {2, 0, 3, 1, 4})
                .shape();
  EXPECT_EQ(shape_of(ty), "[3, s0, 4, s1, 16]");
}

TEST(ShapeTranspose, IntAndT) {
  Tensor x = i64({2, 3}, iota(6));
  Tensor y =
      OpRunner("aten.transpose.int").tensor("self", x).scalar("dim0", -1).scalar("dim1", 0).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {3, 2}, {0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(shares_storage(x, y));
  Tensor t = OpRunner("aten.t.default").tensor("self", x).run1();
  EXPECT_TRUE(matches(t, DType::kInt64, {3, 2}, {0, 3, 1, 4, 2, 5}));
  Tensor v = f32({3}, {1, 2, 3});
  EXPECT_TRUE(matches(OpRunner("aten.t.default").tensor("self", v).run1(), DType::kFloat32, {3},
                      {1, 2, 3}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.t.default").tensor("self", f32({1, 1, 1}, {0})).run1(),
                     "t() expects a tensor with <= 2 dims");
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.transpose.int").tensor("self", x).scalar("dim0", 2).scalar("dim1", 0).run1(),
      "dimension out of range (expected a dim in [-2, 1], got 2)");
  auto ty = OpRunner("aten.transpose.int")
                .sym_tensor("self", DType::kFloat32, {s23, s27, 4, 16})
                .scalar("dim0", 1)
                .scalar("dim1", 2)
                .shape();
  EXPECT_EQ(shape_of(ty), "[s23, 4, s27, 16]");
}

// ---- unsqueeze / squeeze ---------------------------------------------------------------------

TEST(ShapeSqueeze, UnsqueezeAndSqueezeVariants) {
  Tensor x = f32({2, 3}, iota(6));
  Tensor u = OpRunner("aten.unsqueeze.default").tensor("self", x).scalar("dim", -1).run1();
  EXPECT_EQ(u.sizes(), (Shape{2, 3, 1}));
  EXPECT_TRUE(shares_storage(u, x));
  ANVIL_EXPECT_ERROR(OpRunner("aten.unsqueeze.default").tensor("self", x).scalar("dim", 3).run1(),
                     "dimension out of range (expected a dim in [-3, 2], got 3)");

  Tensor y = f32({1, 2, 1, 3}, iota(6));
  EXPECT_EQ(OpRunner("aten.squeeze.default").tensor("self", y).run1().sizes(), (Shape{2, 3}));
  EXPECT_EQ(OpRunner("aten.squeeze.dim").tensor("self", y).scalar("dim", -2).run1().sizes(),
            (Shape{1, 2, 3}));
  EXPECT_EQ(OpRunner("aten.squeeze.dim").tensor("self", y).scalar("dim", 1).run1().sizes(),
            (Shape{1, 2, 1, 3}));  // size 2: unchanged
  Tensor z = OpRunner("aten.squeeze.dims").tensor("self", y).ints("dim", {0, 1, -2}).run1();
  EXPECT_TRUE(matches(z, DType::kFloat32, {2, 3}, iota(6)));
  EXPECT_TRUE(shares_storage(z, y));

  auto ty = OpRunner("aten.unsqueeze.default")
                .sym_tensor("self", DType::kInt64, {s23})
                .scalar("dim", 1)
                .shape();
  EXPECT_EQ(shape_of(ty), "[s23, 1]");
  // Symbolic sizes are not squeezed (torch's size-oblivious rule); constant 1s are.
  ty = OpRunner("aten.squeeze.default").sym_tensor("self", DType::kFloat32, {1, s0, 1}).shape();
  EXPECT_EQ(shape_of(ty), "[s0]");
}

// ---- expand ----------------------------------------------------------------------------------

TEST(ShapeExpand, BroadcastsWithStrideZero) {
  Tensor x = f32({3, 1}, {1, 2, 3});
  Tensor y = OpRunner("aten.expand.default").tensor("self", x).ints("size", {2, -1, 2}).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  EXPECT_TRUE(shares_storage(x, y));
  EXPECT_EQ(y.stride(0), 0);
  EXPECT_EQ(y.stride(2), 0);
  Tensor b = bf16({1, 2}, {0.5, -1});
  EXPECT_TRUE(matches(OpRunner("aten.expand.default")
                          .tensor("self", b)
                          .ints("size", {2, 2})
                          .scalar("implicit", false)
                          .run1(),
                      DType::kBFloat16, {2, 2}, {0.5, -1, 0.5, -1}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.expand.default").tensor("self", x).ints("size", {4, 2}).run1(),
                     "must match the existing size (3) at non-singleton dim 0");
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.expand.default").tensor("self", x).ints("size", {-1, 3, 1}).run1(),
      "-1 is not allowed in a new leading dim 0");
  Tensor e = OpRunner("aten.expand_as.default")
                 .tensor("self", x)
                 .tensor("other", i64({3, 4}, iota(12)))
                 .run1();
  EXPECT_EQ(e.sizes(), (Shape{3, 4}));
  EXPECT_EQ(e.dtype(), DType::kFloat32);
}

TEST(ShapeExpand, Symbolic) {
  // llama_tiny: [1, s27] expanded to [sym_size(ids, 0) = s23, -1].
  auto ty = OpRunner("aten.expand.default")
                .sym_tensor("self", DType::kInt64, {1, s27})
                .symints("size", {s23, -1}, {})
                .shape();
  EXPECT_EQ(shape_of(ty), "[s23, s27]");
  ty = OpRunner("aten.expand.default")
           .sym_tensor("self", DType::kFloat32, {s23, 2, 1, s27, 16})
           .symints("size", {s23, 2, 2, s27, 16}, {})
           .shape();
  EXPECT_EQ(shape_of(ty), "[s23, 2, 2, s27, 16]");
  ty = OpRunner("aten.expand.default")
           .sym_tensor("self", DType::kBool, {s23, 1, s27, s27})
           .symints("size", {s23, -1, s27, s27}, {})
           .shape();
  EXPECT_EQ(shape_of(ty), "[s23, 1, s27, s27]");
  EXPECT_EQ(ty[0].dtype, DType::kBool);
}

// ---- slice / select / narrow -----------------------------------------------------------------

TEST(ShapeSlice, ClampsLikePython) {
  Tensor x = f32({2, 5}, iota(10));
  // s[:, -4:-1:2] = [[1, 3], [6, 8]] (PyTorch).
  Tensor y = OpRunner("aten.slice.Tensor")
                 .tensor("self", x)
                 .scalar("dim", 1)
                 .scalar("start", -4)
                 .scalar("end", -1)
                 .scalar("step", 2)
                 .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 2}, {1, 3, 6, 8}));
  EXPECT_TRUE(shares_storage(x, y));
  y.fill(0);
  EXPECT_TRUE(matches(x, DType::kFloat32, {2, 5}, {0, 0, 2, 0, 4, 5, 0, 7, 0, 9}));
  Tensor z = OpRunner("aten.slice.Tensor")
                 .tensor("self", x)
                 .scalar("dim", 0)
                 .scalar("start", 1)
                 .scalar("end", kBig)
                 .run1();
  EXPECT_EQ(z.sizes(), (Shape{1, 5}));
  Tensor e = OpRunner("aten.slice.Tensor")
                 .tensor("self", x)
                 .scalar("dim", 1)
                 .scalar("start", 3)
                 .scalar("end", 1)
                 .run1();
  EXPECT_EQ(e.sizes(), (Shape{2, 0}));
  Tensor all = OpRunner("aten.slice.Tensor").tensor("self", x).none("start").none("end").run1();
  EXPECT_EQ(all.sizes(), (Shape{2, 5}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.slice.Tensor")
                         .tensor("self", x)
                         .scalar("dim", 1)
                         .scalar("start", 0)
                         .scalar("end", 2)
                         .scalar("step", 0)
                         .run1(),
                     "slice step must be positive");
  // Non-contiguous int64 input, step 2 with a huge end (block_tiny's rotary slices).
  Tensor t = i64({4, 2}, iota(8)).transpose(0, 1);  // [[0,2,4,6],[1,3,5,7]]
  Tensor odd = OpRunner("aten.slice.Tensor")
                   .tensor("self", t)
                   .scalar("dim", -1)
                   .scalar("start", 1)
                   .scalar("end", kBig)
                   .scalar("step", 2)
                   .run1();
  EXPECT_TRUE(matches(odd, DType::kInt64, {2, 2}, {2, 6, 3, 7}));
}

TEST(ShapeSlice, Symbolic) {
  auto slice = [](std::vector<SymInt> sizes, int64_t dim, std::optional<SymInt> start,
                  std::optional<SymInt> end, int64_t step) {
    OpRunner r("aten.slice.Tensor");
    r.sym_tensor("self", DType::kFloat32, std::move(sizes)).scalar("dim", dim);
    if (start) r.symint("start", *start, 0);
    if (end) r.symint("end", *end, 0);
    r.scalar("step", step);
    return shape_of(r.shape());
  };
  EXPECT_EQ(slice({s23, s27}, 0, 0, kBig, 1), "[s23, s27]");
  EXPECT_EQ(slice({s23, 4, s27, 16}, 3, 8, kBig, 1), "[s23, 4, s27, 8]");
  EXPECT_EQ(slice({s23, 4, s27, 16}, 3, 0, 8, 1), "[s23, 4, s27, 8]");
  EXPECT_EQ(slice({s0, 16}, 1, 1, kBig, 2), "[s0, 8]");
  // Sizes are positive symbols, so 1 <= s27 folds (llama_tiny's [s23, s27][:, 0:1]).
  EXPECT_EQ(slice({s23, s27}, 1, 0, 1, 1), "[s23, 1]");
  EXPECT_EQ(slice({s23, s27}, 1, 0, 2, 1), "[s23, Min(2, s27)]");
  // bert_tiny: position_ids[:, 0:s27] of a [1, 128] buffer; s27 may exceed 128 as far as the
  // rule can tell, so the size is clamped symbolically.
  EXPECT_EQ(slice({1, 128}, 1, 0, s27, 1), "[1, Min(128, s27)]");
  EXPECT_EQ(slice({s0}, 0, 0, -1, 1), "[s0 - 1]");
  EXPECT_EQ(slice({s0}, 0, std::nullopt, s0, 1), "[s0]");
  OpRunner r("aten.slice.Tensor");
  r.sym_tensor("self", DType::kFloat32, {s0})
      .scalar("dim", 0)
      .scalar("start", 1)
      .scalar("end", kBig)
      .scalar("step", 2);
  SymInt n = r.shape()[0].sizes[0];
  for (int64_t v : {1, 2, 5, 6}) EXPECT_EQ(n.evaluate({{"s0", v}}), v / 2) << v;
}

TEST(ShapeSelect, ViewsAndBounds) {
  Tensor x = bf16({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y =
      OpRunner("aten.select.int").tensor("self", x).scalar("dim", 1).scalar("index", -1).run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {2}, {3, 6}));
  EXPECT_TRUE(shares_storage(x, y));
  std::string msg = error_of([&] {
    OpRunner("aten.select.int").tensor("self", x).scalar("dim", 1).scalar("index", 3).run1();
  });
  EXPECT_NE(msg.find("index 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dim 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 3"), std::string::npos) << msg;
  auto ty = OpRunner("aten.select.int")
                .sym_tensor("self", DType::kFloat32, {s23, s27, 64})
                .scalar("dim", 1)
                .scalar("index", 0)
                .shape();
  EXPECT_EQ(shape_of(ty), "[s23, 64]");
}

TEST(ShapeNarrow, ViewsAndBounds) {
  Tensor x = i64({5}, iota(5));
  Tensor y = OpRunner("aten.narrow.default")
                 .tensor("self", x)
                 .scalar("dim", 0)
                 .scalar("start", -3)
                 .scalar("length", 2)
                 .run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2}, {2, 3}));
  EXPECT_TRUE(shares_storage(x, y));
  ANVIL_EXPECT_ERROR(OpRunner("aten.narrow.default")
                         .tensor("self", x)
                         .scalar("dim", 0)
                         .scalar("start", 4)
                         .scalar("length", 2)
                         .run1(),
                     "start (4) + length (2) exceeds the dim's size");
}

// ---- cat / stack -----------------------------------------------------------------------------

TEST(ShapeCat, PromotesSkipsLegacyEmptyAndHandlesStrides) {
  Tensor a = i64({1, 2}, {1, 2});
  Tensor b = f32({2, 2}, {0.5, 1.5, 2.5, 3.5});
  Tensor empty = f32({0}, {});
  Tensor y = OpRunner("aten.cat.default").tensors("tensors", {a, empty, b}).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {3, 2}, {1, 2, 0.5, 1.5, 2.5, 3.5}));
  // dim -1 with a transposed (non-contiguous) input.
  Tensor t = f32({2, 2}, {1, 2, 3, 4}).transpose(0, 1);  // [[1,3],[2,4]]
  Tensor z = OpRunner("aten.cat.default").tensors("tensors", {t, b}).scalar("dim", -1).run1();
  EXPECT_TRUE(matches(z, DType::kFloat32, {2, 4}, {1, 3, 0.5, 1.5, 2, 4, 2.5, 3.5}));
  Tensor h =
      OpRunner("aten.cat.default").tensors("tensors", {bf16({1}, {1.5}), bf16({2}, {2, 3})}).run1();
  EXPECT_TRUE(matches(h, DType::kBFloat16, {3}, {1.5, 2, 3}));
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.cat.default").tensors("tensors", {a, f32({1, 3}, {1, 2, 3})}).run1(),
      "sizes of tensors must match except in dim 0");
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.cat.default").tensors("tensors", {Tensor::scalar(1, DType::kFloat32)}).run1(),
      "a 0-dim tensor (at position 0) cannot be concatenated");
}

TEST(ShapeCat, Symbolic) {
  ir::Graph g;
  // Built by hand: OpRunner's tensors() takes concrete tensors, so use sym types directly.
  ir::Node n;
  n.name = "cat";
  n.target = "aten.cat.default";
  ir::Arg a;
  a.name = "tensors";
  a.kind = ir::Arg::Kind::kTensors;
  for (auto sizes : {std::vector<SymInt>{s23, 4, s27, 8}, std::vector<SymInt>{s23, 4, s27, 8}}) {
    ir::Value* v = g.new_value("x" + std::to_string(a.values.size()));
    v->type.sizes = sizes;
    a.values.push_back(v);
  }
  n.args.push_back(a);
  ir::Arg d;
  d.name = "dim";
  d.kind = ir::Arg::Kind::kInt;
  d.i = -1;
  n.args.push_back(d);
  EXPECT_EQ(shape_of(ir::find_op("aten.cat.default")->shape(n)), "[s23, 4, s27, 16]");
  n.args[1].i = 0;
  EXPECT_EQ(shape_of(ir::find_op("aten.cat.default")->shape(n)), "[2*s23, 4, s27, 8]");
  EXPECT_EQ(shape_of(ir::find_op("aten.stack.default")->shape(n)), "[2, s23, 4, s27, 8]");
}

TEST(ShapeStack, NewDim) {
  Tensor a = i64({2}, {1, 2}), b = i64({2}, {3, 4});
  EXPECT_TRUE(
      matches(OpRunner("aten.stack.default").tensors("tensors", {a, b}).scalar("dim", -1).run1(),
              DType::kInt64, {2, 2}, {1, 3, 2, 4}));
  EXPECT_TRUE(matches(OpRunner("aten.stack.default").tensors("tensors", {a, b}).run1(),
                      DType::kInt64, {2, 2}, {1, 2, 3, 4}));
  Tensor c = f32({2, 2}, {1, 2, 3, 4}).transpose(0, 1);
  Tensor d = bf16({2, 2}, {5, 6, 7, 8});
  EXPECT_TRUE(
      matches(OpRunner("aten.stack.default").tensors("tensors", {c, d}).scalar("dim", 1).run1(),
              DType::kFloat32, {2, 2, 2}, {1, 3, 5, 6, 2, 4, 7, 8}));
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.stack.default").tensors("tensors", {a, i64({3}, {1, 2, 3})}).run1(),
      "stack expects each tensor to be equal size");
}

// ---- split / chunk / unbind ------------------------------------------------------------------

/// The tensors a multi-output kernel returned.
std::vector<Tensor> tensors_of(const std::vector<ir::RValue>& outs) {
  std::vector<Tensor> ts;
  for (const auto& r : outs) ts.push_back(std::get<Tensor>(r));
  return ts;
}

TEST(ShapeSplit, TensorSplitsAreViews) {
  Tensor x = f32({5, 2}, iota(10));
  auto parts =
      tensors_of(OpRunner("aten.split.Tensor").tensor("self", x).scalar("split_size", 2).run());
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_TRUE(matches(parts[0], DType::kFloat32, {2, 2}, {0, 1, 2, 3}));
  EXPECT_TRUE(matches(parts[2], DType::kFloat32, {1, 2}, {8, 9}));
  for (const auto& p : parts) EXPECT_TRUE(shares_storage(p, x));
  parts[1].fill(-1);
  EXPECT_EQ(x.item_at(4), -1);
  // split along a non-contiguous last dim.
  Tensor t = i64({3, 2}, iota(6)).transpose(0, 1);  // [[0,2,4],[1,3,5]]
  parts = tensors_of(OpRunner("aten.split.Tensor")
                         .tensor("self", t)
                         .scalar("split_size", 2)
                         .scalar("dim", -1)
                         .run());
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_TRUE(matches(parts[0], DType::kInt64, {2, 2}, {0, 2, 1, 3}));
  EXPECT_TRUE(matches(parts[1], DType::kInt64, {2, 1}, {4, 5}));
  // split_size larger than the dim: one piece.
  EXPECT_EQ(OpRunner("aten.split.Tensor").tensor("self", x).scalar("split_size", 9).run().size(),
            1u);
}

TEST(ShapeSplit, SymbolicUsesNodeOutputs) {
  // gpt2_tiny: [s23, s27, 192] split 64 on dim 2 -> three [s23, s27, 64].
  ir::Graph g;
  ir::Value* x = g.new_value("x");
  x->type.sizes = {s23, s27, 192};
  ir::Node n;
  n.name = "split";
  n.target = "aten.split.Tensor";
  n.args.resize(3);
  n.args[0].name = "self";
  n.args[0].kind = ir::Arg::Kind::kTensor;
  n.args[0].value = x;
  n.args[1].name = "split_size";
  n.args[1].kind = ir::Arg::Kind::kInt;
  n.args[1].i = 64;
  n.args[2].name = "dim";
  n.args[2].kind = ir::Arg::Kind::kInt;
  n.args[2].i = 2;
  auto ty = ir::find_op("aten.split.Tensor")->shape(n);
  ASSERT_EQ(ty.size(), 3u);
  for (const auto& t : ty) EXPECT_EQ(sym_shape_str(t.sizes), "[s23, s27, 64]");
  // Splitting a symbolic dim: the count comes from the node's outputs.
  n.args[2].i = 1;
  n.args[1].i = 4;
  ANVIL_EXPECT_ERROR(ir::find_op("aten.split.Tensor")->shape(n),
                     "split of a symbolic size needs the node's outputs to know the piece count");
  for (int i = 0; i < 2; ++i) n.outputs.push_back(g.new_value("o" + std::to_string(i)));
  ty = ir::find_op("aten.split.Tensor")->shape(n);
  ASSERT_EQ(ty.size(), 2u);
  EXPECT_EQ(sym_shape_str(ty[0].sizes), "[s23, 4, 192]");
  EXPECT_EQ(sym_shape_str(ty[1].sizes), "[s23, s27 - 4, 192]");
}

TEST(ShapeSplit, WithSizesChunkUnbind) {
  Tensor x = bf16({6}, iota(6));
  auto parts = tensors_of(OpRunner("aten.split_with_sizes.default")
                              .tensor("self", x)
                              .ints("split_sizes", {1, 0, 5})
                              .run());
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_TRUE(matches(parts[1], DType::kBFloat16, {0}, {}));
  EXPECT_TRUE(matches(parts[2], DType::kBFloat16, {5}, {1, 2, 3, 4, 5}));
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.split_with_sizes.default").tensor("self", x).ints("split_sizes", {2, 2}).run(),
      "split_with_sizes: sizes must sum to the dim's size");

  // chunk: 5 into 3 -> 2, 2, 1; 6 into 4 -> 2, 2, 2 (torch returns fewer chunks).
  auto c = tensors_of(
      OpRunner("aten.chunk.default").tensor("self", i64({5}, iota(5))).scalar("chunks", 3).run());
  ASSERT_EQ(c.size(), 3u);
  EXPECT_TRUE(matches(c[2], DType::kInt64, {1}, {4}));
  EXPECT_EQ(OpRunner("aten.chunk.default").tensor("self", x).scalar("chunks", 4).run().size(), 3u);

  Tensor m = f32({2, 3}, iota(6));
  auto rows = tensors_of(OpRunner("aten.unbind.int").tensor("self", m).scalar("dim", -1).run());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(matches(rows[1], DType::kFloat32, {2}, {1, 4}));
  EXPECT_TRUE(shares_storage(rows[1], m));
  // block_tiny: unbind of [3, s77, 4, s27, 16].
  SymInt s77 = SymInt::symbol("s77");
  auto ty =
      OpRunner("aten.unbind.int").sym_tensor("self", DType::kFloat32, {3, s77, 4, s27, 16}).shape();
  ASSERT_EQ(ty.size(), 3u);
  EXPECT_EQ(sym_shape_str(ty[2].sizes), "[s77, 4, s27, 16]");
}

// ---- repeat ----------------------------------------------------------------------------------

TEST(ShapeRepeat, TilesLikeTorch) {
  Tensor y = i64({2, 3}, iota(6));
  // torch: y.repeat(2, 1, 2).
  EXPECT_TRUE(
      matches(OpRunner("aten.repeat.default").tensor("self", y).ints("repeats", {2, 1, 2}).run1(),
              DType::kInt64, {2, 2, 6},
              {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  // torch: y.t().repeat(1, 2).
  EXPECT_TRUE(matches(OpRunner("aten.repeat.default")
                          .tensor("self", y.transpose(0, 1))
                          .ints("repeats", {1, 2})
                          .run1(),
                      DType::kInt64, {3, 4}, {0, 3, 0, 3, 1, 4, 1, 4, 2, 5, 2, 5}));
  Tensor b = bf16({2}, {0.5, 2});
  EXPECT_TRUE(
      matches(OpRunner("aten.repeat.default").tensor("self", b).ints("repeats", {0, 2}).run1(),
              DType::kBFloat16, {0, 4}, {}));
  ANVIL_EXPECT_ERROR(OpRunner("aten.repeat.default").tensor("self", y).ints("repeats", {2}).run1(),
                     "number of repeat dims can not be smaller than the tensor's rank");
  auto ty = OpRunner("aten.repeat.default")
                .sym_tensor("self", DType::kFloat32, {s0, 4})
                .ints("repeats", {1, 2, 3})
                .shape();
  EXPECT_EQ(shape_of(ty), "[1, 2*s0, 12]");
}

}  // namespace
}  // namespace anvil
