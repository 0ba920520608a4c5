// Runtime extern kernels for scaled_dot_product_attention and the bf16 / f16 matrix products,
// compared with the op table's reference kernels (f32, bf16, f16, f64, int64), plus
// hand-computed values and error cases.
#include <cmath>

#include "common/check.h"
#include "test_externs_util.h"

namespace anvil::runtime::test {
namespace {

using anvil::testing::boolean;
using anvil::testing::f32;
using anvil::testing::i64;

constexpr const char* kSdpa = "aten.scaled_dot_product_attention.default";

TEST(ExternSdpa, PlainDefaultScale) {
  ExternCase(kSdpa)
      .tensor("query", rand_tensor(DType::kFloat32, {2, 3, 5, 8}, 1))
      .tensor("key", rand_tensor(DType::kFloat32, {2, 3, 7, 8}, 2))
      .tensor("value", rand_tensor(DType::kFloat32, {2, 3, 7, 6}, 3))
      .absent()
      .check();
}

TEST(ExternSdpa, CausalSquareAndRectangular) {
  for (int64_t l : {6, 4})
    ExternCase(kSdpa)
        .tensor("query", rand_tensor(DType::kFloat32, {1, 2, l, 4}, 4))
        .tensor("key", rand_tensor(DType::kFloat32, {1, 2, 6, 4}, 5))
        .tensor("value", rand_tensor(DType::kFloat32, {1, 2, 6, 4}, 6))
        .none("attn_mask")
        .scalar("dropout_p", 0.0)
        .scalar("is_causal", true)
        .check();
}

TEST(ExternSdpa, BoolMaskWithFullyMaskedRowGivesZeros) {
  std::vector<double> m(5 * 7, 1.0);
  for (int j = 0; j < 7; ++j) m[2 * 7 + j] = 0;  // row 2: nothing to attend to
  m[0 * 7 + 3] = 0;
  m[4 * 7 + 6] = 0;
  const Tensor got = ExternCase(kSdpa)
                         .tensor("query", rand_tensor(DType::kFloat32, {2, 3, 5, 8}, 7))
                         .tensor("key", rand_tensor(DType::kFloat32, {2, 3, 7, 8}, 8))
                         .tensor("value", rand_tensor(DType::kFloat32, {2, 3, 7, 6}, 9))
                         .tensor("attn_mask", boolean({5, 7}, m))
                         .check();
  for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(got.item_at(2 * 6 + j), 0.0);
}

TEST(ExternSdpa, FloatMaskBroadcastAndScale) {
  ExternCase(kSdpa)
      .tensor("query", rand_tensor(DType::kFloat32, {2, 3, 5, 8}, 10))
      .tensor("key", rand_tensor(DType::kFloat32, {2, 3, 7, 8}, 11))
      .tensor("value", rand_tensor(DType::kFloat32, {2, 3, 7, 6}, 12))
      .tensor("attn_mask", rand_tensor(DType::kFloat32, {2, 1, 1, 7}, 13, -3, 0))
      .scalar("scale", 0.3)
      .check();
  // A mask of another float dtype, broadcast along the rows with stride 0.
  ExternCase(kSdpa)
      .tensor("query", rand_tensor(DType::kFloat32, {3, 5, 8}, 14))
      .tensor("key", rand_tensor(DType::kFloat32, {3, 7, 8}, 15))
      .tensor("value", rand_tensor(DType::kFloat32, {3, 7, 6}, 16))
      .tensor("attn_mask", rand_tensor(DType::kBFloat16, {1, 7}, 17).expand({5, 7}))
      .check();
}

TEST(ExternSdpa, GroupedQueryAttentionWithStridedKeys) {
  // Keys / values stored [B, S, Hkv, E] and viewed as [B, Hkv, S, E] (the usual model layout).
  const Tensor k = rand_tensor(DType::kFloat32, {2, 9, 2, 8}, 18).transpose(1, 2);
  const Tensor v = rand_tensor(DType::kFloat32, {2, 9, 2, 5}, 19).transpose(1, 2);
  ExternCase(kSdpa)
      .tensor("query", rand_tensor(DType::kFloat32, {2, 6, 4, 8}, 20))
      .tensor("key", k)
      .tensor("value", v)
      .absent()
      .scalar("is_causal", true)
      .scalar("enable_gqa", true)
      .check();
}

TEST(ExternSdpa, BroadcastBatchDims) {
  // key broadcast over the batch (stride 0), value of lower rank.
  ExternCase(kSdpa)
      .tensor("query", rand_strided(DType::kFloat32, {2, 3, 4, 8}, 21))
      .tensor("key", rand_tensor(DType::kFloat32, {1, 3, 5, 8}, 22).expand({2, 3, 5, 8}))
      .tensor("value", rand_tensor(DType::kFloat32, {3, 5, 4}, 23))
      .check();
}

TEST(ExternSdpa, Bf16F16F64AndLongSequences) {
  ExternCase(kSdpa)
      .tensor("query", rand_tensor(DType::kBFloat16, {1, 4, 10, 16}, 24))
      .tensor("key", rand_tensor(DType::kBFloat16, {1, 4, 10, 16}, 25))
      .tensor("value", rand_tensor(DType::kBFloat16, {1, 4, 10, 16}, 26))
      .absent()
      .scalar("is_causal", true)
      .check();
  ExternCase(kSdpa)
      .tensor("query", rand_tensor(DType::kFloat16, {2, 3, 8}, 27))
      .tensor("key", rand_tensor(DType::kFloat16, {2, 5, 8}, 28))
      .tensor("value", rand_tensor(DType::kFloat16, {2, 5, 8}, 29))
      .check();
  ExternCase(kSdpa)
      .tensor("query", rand_tensor(DType::kFloat64, {2, 6, 4}, 30))
      .tensor("key", rand_tensor(DType::kFloat64, {2, 6, 4}, 31))
      .tensor("value", rand_tensor(DType::kFloat64, {2, 6, 4}, 32))
      .check();
  // One batch x head with many query rows: split into row blocks over the pool.
  ExternCase(kSdpa)
      .tensor("query", rand_tensor(DType::kFloat32, {1, 1, 150, 16}, 33))
      .tensor("key", rand_tensor(DType::kFloat32, {1, 1, 150, 16}, 34))
      .tensor("value", rand_tensor(DType::kFloat32, {1, 1, 150, 8}, 35))
      .absent()
      .scalar("is_causal", true)
      .check();
}

TEST(ExternSdpa, LongFp32RowsWithNaNAndMaskedKeys) {
  // fp32 rows of 37 keys (two 16-lane blocks and a tail of the vectorised softmax) against the
  // reference; a NaN in one query row makes only that row NaN; a float mask of -inf on some
  // keys gives them zero weight.
  Tensor q = rand_tensor(DType::kFloat32, {1, 2, 9, 16}, 40);
  q.data<float>()[3 * 16 + 5] = std::numeric_limits<float>::quiet_NaN();  // head 0, row 3
  Tensor mask = rand_tensor(DType::kFloat32, {9, 37}, 43, -2, 2);
  for (int64_t i = 0; i < 9; ++i) mask.data<float>()[i * 37 + (i * 5) % 37] = -INFINITY;
  ExternCase c(kSdpa);
  c.tensor("query", q)
      .tensor("key", rand_tensor(DType::kFloat32, {1, 2, 37, 16}, 41))
      .tensor("value", rand_tensor(DType::kFloat32, {1, 2, 37, 8}, 42))
      .tensor("attn_mask", mask);
  const Tensor got = c.run_extern({1, 2, 9, 8}, DType::kFloat32);
  const std::vector<double> v = got.to_doubles();
  for (int64_t i = 0; i < 2 * 9 * 8; ++i)
    EXPECT_EQ(std::isnan(v[static_cast<size_t>(i)]), i / 8 == 3) << i;
  c.check();  // the reference agrees, NaNs included
}

// ViT-B/16's attention shape, scaled down in heads: 197 tokens (13 column panels of the packed
// kernel, the last one partial; row blocks of 50 + 50 + 50 + 47) and head dim 64, with q, k and
// v as strided views of one packed [197, 3 * H * 64] projection (as the model's qkv Linear leaves
// them), and with K^T stored both ways; non-causal, causal (the blocks read only their first
// keys of the packed V) and a float mask; on pools of 1, 3 and 8 threads.
TEST(ExternSdpa, VitShapePackedKernelOnEveryPoolSize) {
  constexpr int64_t kL = 197, kH = 3, kE = 64;
  const Tensor qkv = rand_tensor(DType::kFloat32, {kL, 3 * kH * kE}, 60);
  // [L, 3, H, E] -> three [1, H, L, E] views with row stride 3 * H * E
  const Tensor x = qkv.view({1, kL, 3, kH, kE});
  auto part = [&](int64_t i) { return x.select(2, i).permute({0, 2, 1, 3}); };
  const Tensor kt = rand_tensor(DType::kFloat32, {1, kH, kE, kL}, 61).transpose(2, 3);
  for (int threads : {1, 3, 8}) {
    ThreadPool pool(threads);
    ScopedThreadPool scope(&pool);
    for (int variant = 0; variant < 3; ++variant) {
      ExternCase c(kSdpa);
      c.tensor("query", part(0))
          .tensor("key", variant == 1 ? kt : part(1))
          .tensor("value", part(2));
      if (variant == 2)
        c.tensor("attn_mask", rand_tensor(DType::kFloat32, {kL, kL}, 62, -3, 1));
      else
        c.absent();
      c.scalar("dropout_p", 0.0).scalar("is_causal", variant == 1);
      SCOPED_TRACE("threads " + std::to_string(threads) + ", variant " + std::to_string(variant));
      c.check();
    }
  }
}

// Keys and values whose packed copies would pass 64 MiB (16.8 M floats here) are read in place
// by the per-block GEMMs instead: the same results.
TEST(ExternSdpa, LongKeysUseTheInPlaceGemms) {
  ExternCase(kSdpa)
      .tensor("query", rand_tensor(DType::kFloat32, {1, 1, 3, 128}, 63))
      .tensor("key", rand_tensor(DType::kFloat32, {1, 1, 65600, 128}, 64))
      .tensor("value", rand_tensor(DType::kFloat32, {1, 1, 65600, 128}, 65))
      .check();
}

TEST(ExternSdpa, HandComputed) {
  // q = [1, 0], k = [[1, 0], [0, 1]], scale 1: weights softmax([1, 0]) = [0.731059, 0.268941];
  // v = [[1, 2], [3, 4]] gives [1.537883, 2.537883].
  ExternCase c(kSdpa);
  c.tensor("query", f32({1, 2}, {1, 0}))
      .tensor("key", f32({2, 2}, {1, 0, 0, 1}))
      .tensor("value", f32({2, 2}, {1, 2, 3, 4}))
      .absent()
      .scalar("scale", 1.0);
  EXPECT_TRUE(matches(c.run_extern({1, 2}, DType::kFloat32), DType::kFloat32, {1, 2},
                      {1.537883, 2.537883}));
}

TEST(ExternSdpa, Errors) {
  const Tensor q = rand_tensor(DType::kFloat32, {1, 4, 3, 8}, 36);
  const Tensor k = rand_tensor(DType::kFloat32, {1, 2, 3, 8}, 37);
  ExternCase no_gqa(kSdpa);
  no_gqa.tensor("query", q).tensor("key", k).tensor("value", k);
  ANVIL_EXPECT_ERROR(no_gqa.run_extern({1, 4, 3, 8}, DType::kFloat32),
                     "do not broadcast (for grouped-query attention pass enable_gqa=True)");
  ExternCase both(kSdpa);
  both.tensor("query", q)
      .tensor("key", q)
      .tensor("value", q)
      .tensor("attn_mask", boolean({3, 3}, std::vector<double>(9, 1)))
      .scalar("is_causal", true);
  ANVIL_EXPECT_ERROR(both.run_extern({1, 4, 3, 8}, DType::kFloat32),
                     "an explicit attn_mask must not be set when is_causal=True");
  ExternCase dropout(kSdpa);
  dropout.tensor("query", q).tensor("key", q).tensor("value", q).absent().scalar("dropout_p", 0.1);
  ANVIL_EXPECT_ERROR(dropout.run_extern({1, 4, 3, 8}, DType::kFloat32),
                     "dropout is not supported at inference");
}

TEST(ExternMatmul, MmBf16F16F32Int64) {
  // bf16 with a transposed (column-major) second operand.
  ExternCase("aten.mm.default")
      .tensor("self", rand_tensor(DType::kBFloat16, {5, 7}, 40))
      .tensor("mat2", rand_tensor(DType::kBFloat16, {3, 7}, 41).transpose(0, 1))
      .check();
  ExternCase("aten.mm.default")
      .tensor("self", rand_strided(DType::kFloat16, {4, 6}, 42))
      .tensor("mat2", rand_tensor(DType::kFloat16, {6, 1}, 43).expand({6, 5}))
      .check();
  ExternCase("aten.mm.default")
      .tensor("self", rand_strided(DType::kFloat32, {33, 20}, 44))
      .tensor("mat2", rand_tensor(DType::kFloat32, {20, 40}, 45))
      .check();
  ExternCase("aten.mm.default")
      .tensor("self", rand_tensor(DType::kInt64, {3, 4}, 46, -9, 9))
      .tensor("mat2", rand_tensor(DType::kInt64, {4, 2}, 47, -9, 9))
      .check();
  // Hand-computed bf16: [[1, 2], [3, 4]] @ [[5], [6]] = [[17], [39]].
  ExternCase c("aten.mm.default");
  c.tensor("self", anvil::testing::bf16({2, 2}, {1, 2, 3, 4}))
      .tensor("mat2", anvil::testing::bf16({2, 1}, {5, 6}));
  EXPECT_TRUE(matches(c.run_extern({2, 1}, DType::kBFloat16), DType::kBFloat16, {2, 1}, {17, 39}));
  ExternCase bad("aten.mm.default");
  bad.tensor("self", rand_tensor(DType::kBFloat16, {2, 3}, 48))
      .tensor("mat2", rand_tensor(DType::kBFloat16, {2, 3}, 49));
  ANVIL_EXPECT_ERROR(bad.run_extern({2, 3}, DType::kBFloat16),
                     "inner sizes of the matrices differ");
}

TEST(ExternMatmul, Bmm) {
  ExternCase("aten.bmm.default")
      .tensor("self", rand_tensor(DType::kBFloat16, {6, 4, 9}, 50))
      .tensor("mat2", rand_strided(DType::kBFloat16, {6, 9, 5}, 51))
      .check();
  ExternCase("aten.bmm.default")
      .tensor("self", rand_tensor(DType::kFloat16, {1, 3, 4}, 52).expand({3, 3, 4}))
      .tensor("mat2", rand_tensor(DType::kFloat16, {3, 4, 2}, 53))
      .check();
  ExternCase("aten.bmm.default")
      .tensor("self", rand_tensor(DType::kInt64, {2, 2, 3}, 54, -5, 5))
      .tensor("mat2", rand_tensor(DType::kInt64, {2, 3, 2}, 55, -5, 5))
      .check();
  ExternCase zero_k("aten.bmm.default");
  zero_k.tensor("self", rand_tensor(DType::kBFloat16, {2, 3, 0}, 56))
      .tensor("mat2", rand_tensor(DType::kBFloat16, {2, 0, 4}, 57));
  EXPECT_TRUE(matches(zero_k.run_extern({2, 3, 4}, DType::kBFloat16), DType::kBFloat16, {2, 3, 4},
                      std::vector<double>(24, 0.0)));
}

}  // namespace
}  // namespace anvil::runtime::test
