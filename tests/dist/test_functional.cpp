// spec/collectives.md §4 cases 1-16 (eager functional ops), run as real processes on
// 127.0.0.1 with gloo and mpi on 2, 3 and 4 ranks. The reference setup is MP2 (two ranks); the
// expected values are written for W ranks and reduce to the spec's numbers for W = 2.
#include <random>

#include "dist/functional.h"
#include "dist_check.h"
#include "dist_harness.h"

namespace anvil::dist::test {
namespace {

namespace F = ::anvil::dist::functional;
constexpr const char* kG = "0";

// §4.1: all_reduce avg of full(10x10, r) -> a new tensor, all (W-1)/2; the input is unchanged.
DIST_WORKER(case01) {
  Tensor x = Tensor::full({10, 10}, ctx.rank, DType::kFloat32);
  Tensor y = F::all_reduce(x, ReduceOp::kAvg, kG);
  F::wait_tensor(y);
  EXPECT_FALSE(same_memory(x, y));
  EXPECT_TRUE(all_equal(y, (ctx.world - 1) / 2.0));
  EXPECT_TRUE(all_equal(x, ctx.rank));
}

// §4.2: all_reduce_ avg -> the same object, all (W-1)/2.
DIST_WORKER(case02) {
  Tensor x = Tensor::full({10, 10}, ctx.rank, DType::kFloat32);
  Tensor& y = F::all_reduce_(x, ReduceOp::kAvg, kG);
  F::wait_tensor(y);
  EXPECT_EQ(&y, &x);
  EXPECT_TRUE(all_equal(x, (ctx.world - 1) / 2.0));
}

// §4.3: all_reduce sum/product/min/max of full(4, r+1) -> W(W+1)/2, W!, 1, W (3/2/1/2 for
// W=2), in f32, bf16 and i64; i64 also band/bor/bxor of r+1.
DIST_WORKER(case03) {
  const int W = ctx.world;
  double sum = 0, prod = 1;
  int64_t band = -1, bor = 0, bxor = 0;
  for (int r = 0; r < W; ++r) {
    sum += r + 1;
    prod *= r + 1;
    band &= r + 1;
    bor |= r + 1;
    bxor ^= r + 1;
  }
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kInt64}) {
    Tensor x = Tensor::full({4}, ctx.rank + 1, dt);
    EXPECT_TRUE(all_equal(F::wait_tensor(F::all_reduce(x, "sum", kG)), sum)) << dtype_name(dt);
    EXPECT_TRUE(all_equal(F::wait_tensor(F::all_reduce(x, "product", kG)), prod)) << dtype_name(dt);
    EXPECT_TRUE(all_equal(F::wait_tensor(F::all_reduce(x, "min", kG)), 1)) << dtype_name(dt);
    EXPECT_TRUE(all_equal(F::wait_tensor(F::all_reduce(x, "max", kG)), W)) << dtype_name(dt);
  }
  Tensor xi = Tensor::full({4}, ctx.rank + 1, DType::kInt64);
  EXPECT_TRUE(all_equal(F::wait_tensor(F::all_reduce(xi, "band", kG)), static_cast<double>(band)));
  EXPECT_TRUE(all_equal(F::wait_tensor(F::all_reduce(xi, "bor", kG)), static_cast<double>(bor)));
  EXPECT_TRUE(all_equal(F::wait_tensor(F::all_reduce(xi, "bxor", kG)), static_cast<double>(bxor)));
}

std::vector<Tensor> coalesced_inputs(int rank) {
  std::vector<Tensor> in;
  for (int i = 0; i < 10; ++i) in.push_back(Tensor::full({i, i}, rank * i, DType::kFloat32));
  return in;
}

// §4.4: all_reduce_coalesced avg of full((i,i), r*i), i = 0..9 (0x0 included) -> output i all
// i*(W-1)/2, each a distinct new object.
DIST_WORKER(case04) {
  const auto in = coalesced_inputs(ctx.rank);
  auto out = F::all_reduce_coalesced(in, ReduceOp::kAvg, kG);
  ASSERT_EQ(out.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    F::wait_tensor(out[i]);
    EXPECT_EQ(out[i].sizes(), (Shape{i, i}));
    EXPECT_TRUE(all_equal(out[i], i * (ctx.world - 1) / 2.0)) << "output " << i;
    EXPECT_FALSE(same_memory(out[i], in[i]));
    EXPECT_TRUE(all_equal(in[i], ctx.rank * i));
    for (int j = 0; j < i; ++j) {
      if (out[i].numel() > 0) {
        EXPECT_NE(out[i].storage(), out[j].storage());
      }
    }
  }
}

// §4.5: all_reduce_coalesced_ -> the same objects, values i*(W-1)/2.
DIST_WORKER(case05) {
  auto in = coalesced_inputs(ctx.rank);
  std::vector<Tensor> before = in;
  auto& out = F::all_reduce_coalesced_(in, ReduceOp::kAvg, kG);
  EXPECT_EQ(&out, &in);
  for (int i = 0; i < 10; ++i) {
    F::wait_tensor(in[i]);
    EXPECT_TRUE(same_memory(in[i], before[i]));
    EXPECT_TRUE(all_equal(in[i], i * (ctx.world - 1) / 2.0)) << "tensor " << i;
  }
}

// §4.6: all_gather_into_tensor of full(10x10, r) -> (10W)x10, rows 10j..10j+9 = j.
DIST_WORKER(case06) {
  Tensor x = Tensor::full({10, 10}, ctx.rank, DType::kFloat32);
  Tensor y = F::wait_tensor(F::all_gather_into_tensor(x, ctx.world, kG));
  ASSERT_EQ(y.sizes(), (Shape{10 * ctx.world, 10}));
  for (int j = 0; j < ctx.world; ++j) EXPECT_TRUE(all_equal(y.slice(0, 10 * j, 10 * j + 10), j));
}

// §4.7: all_gather_into_tensor_out into a caller-allocated (10W)x10 -> same values, returns out.
DIST_WORKER(case07) {
  Tensor x = Tensor::full({10, 10}, ctx.rank, DType::kFloat32);
  Tensor out = Tensor::empty({10 * ctx.world, 10}, DType::kFloat32);
  Tensor& ret = F::all_gather_into_tensor_out(x, ctx.world, kG, out);
  F::wait_tensor(ret);
  EXPECT_EQ(&ret, &out);
  for (int j = 0; j < ctx.world; ++j) EXPECT_TRUE(all_equal(out.slice(0, 10 * j, 10 * j + 10), j));
}

// §4.8: all_gather_into_tensor_coalesced of full(10x10, r*i) -> output i block j = j*i.
DIST_WORKER(case08) {
  std::vector<Tensor> in;
  for (int i = 0; i < 10; ++i) in.push_back(Tensor::full({10, 10}, ctx.rank * i, DType::kFloat32));
  auto out = F::all_gather_into_tensor_coalesced(in, ctx.world, kG);
  ASSERT_EQ(out.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    F::wait_tensor(out[i]);
    for (int j = 0; j < ctx.world; ++j)
      EXPECT_TRUE(all_equal(out[i].slice(0, 10 * j, 10 * j + 10), j * i)) << "output " << i;
  }
}

Tensor arange_w(int w, double scale) {
  std::vector<float> v;
  for (int j = 0; j < w; ++j) v.push_back(static_cast<float>(j * scale));
  return Tensor::from_vector(v);
}

// §4.9: reduce_scatter_tensor avg of [0, 1, ..., W-1] -> rank r gets [r].
DIST_WORKER(case09) {
  Tensor y = F::wait_tensor(
      F::reduce_scatter_tensor(arange_w(ctx.world, 1), ReduceOp::kAvg, ctx.world, kG));
  EXPECT_EQ(y.sizes(), (Shape{1}));
  EXPECT_TRUE(all_equal(y, ctx.rank));
}

// §4.10: reduce_scatter_tensor_coalesced avg of i*[0..W-1] -> rank r gets [r*i].
DIST_WORKER(case10) {
  std::vector<Tensor> in;
  for (int i = 0; i < 10; ++i) in.push_back(arange_w(ctx.world, i));
  auto out = F::reduce_scatter_tensor_coalesced(in, ReduceOp::kAvg, ctx.world, kG);
  ASSERT_EQ(out.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(all_equal(F::wait_tensor(out[i]), ctx.rank * i)) << i;
}

// §4.11: all_to_all_single with a seeded random WxW split matrix S (0..19, one entry forced to
// 0): rank r sends row S[r] of full(sum S[r], r) -> output = concat_j full(S[j][r], j).
DIST_WORKER(case11) {
  const int W = ctx.world;
  std::mt19937 rng(1234);  // same seed on every rank
  std::vector<std::vector<int64_t>> S(W, std::vector<int64_t>(W));
  for (auto& row : S)
    for (auto& v : row) v = static_cast<int64_t>(rng() % 20);
  S[0][W - 1] = 0;
  std::vector<int64_t> in_splits = S[ctx.rank], out_splits;
  int64_t rows_in = 0;
  for (auto v : in_splits) rows_in += v;
  for (int j = 0; j < W; ++j) out_splits.push_back(S[j][ctx.rank]);
  Tensor x = Tensor::full({rows_in}, ctx.rank, DType::kFloat32);
  Tensor y = F::wait_tensor(F::all_to_all_single(x, out_splits, in_splits, kG));
  std::vector<double> want;
  for (int j = 0; j < W; ++j)
    for (int64_t k = 0; k < S[j][ctx.rank]; ++k) want.push_back(j);
  EXPECT_TRUE(values_equal(y, want));
}

// §4.12: all_to_all_single with the splits omitted, input full(Wx2, r) -> output row j = j.
DIST_WORKER(case12) {
  Tensor x = Tensor::full({ctx.world, 2}, ctx.rank, DType::kFloat32);
  Tensor y = F::wait_tensor(F::all_to_all_single(x, std::nullopt, std::nullopt, kG));
  ASSERT_EQ(y.sizes(), (Shape{ctx.world, 2}));
  for (int j = 0; j < ctx.world; ++j) EXPECT_TRUE(all_equal(y.select(0, j), j));
}

// §4.13: broadcast src=1 of full(10x10, r) -> all ones, a new object; broadcast_ -> same object.
DIST_WORKER(case13) {
  Tensor x = Tensor::full({10, 10}, ctx.rank, DType::kFloat32);
  Tensor y = F::wait_tensor(F::broadcast(x, 1, kG));
  EXPECT_FALSE(same_memory(x, y));
  EXPECT_TRUE(all_equal(y, 1));
  EXPECT_TRUE(all_equal(x, ctx.rank));
  Tensor& z = F::broadcast_(x, 1, kG);
  F::wait_tensor(z);
  EXPECT_EQ(&z, &x);
  EXPECT_TRUE(all_equal(x, 1));
}

// §4.14: permute_tensor with src_dst[i] = (i+1) mod W ([1, 0] for W=2) of arange(2) + 2r ->
// arange(2) + 2*((r-1+W) mod W).
DIST_WORKER(case14) {
  const int W = ctx.world;
  std::vector<int64_t> src_dst;
  for (int i = 0; i < W; ++i) src_dst.push_back((i + 1) % W);
  Tensor x = Tensor::from_vector(std::vector<float>{2.0f * ctx.rank, 2.0f * ctx.rank + 1});
  Tensor y = F::wait_tensor(F::permute_tensor(x, src_dst, kG));
  const double from = (ctx.rank - 1 + W) % W;
  EXPECT_TRUE(values_equal(y, {2 * from, 2 * from + 1}));
}

// §4.15: wait_tensor returns the same object; a second call is a no-op.
DIST_WORKER(case15) {
  Tensor y = F::all_reduce(Tensor::full({3}, 1, DType::kFloat32), ReduceOp::kSum, kG);
  const Tensor& a = F::wait_tensor(y);
  EXPECT_EQ(&a, &y);
  const Tensor& b = F::wait_tensor(y);
  EXPECT_EQ(&b, &y);
  EXPECT_TRUE(all_equal(y, ctx.world));
}

// §4.16: wait_tensor on a tensor with no pending work returns at once, values unchanged.
DIST_WORKER(case16) {
  Tensor x = Tensor::full({2, 2}, 7, DType::kFloat32);
  const Tensor& r = F::wait_tensor(x);
  EXPECT_EQ(&r, &x);
  EXPECT_TRUE(all_equal(x, 7));
}

class Functional : public ::testing::TestWithParam<DistParam> {};

TEST_P(Functional, Case01_AllReduceAvgNewTensor) { EXPECT_DIST_JOB_OK("case01"); }
TEST_P(Functional, Case02_AllReduceInPlaceSameObject) { EXPECT_DIST_JOB_OK("case02"); }
TEST_P(Functional, Case03_AllReduceOps) { EXPECT_DIST_JOB_OK("case03"); }
TEST_P(Functional, Case04_AllReduceCoalesced) { EXPECT_DIST_JOB_OK("case04"); }
TEST_P(Functional, Case05_AllReduceCoalescedInPlace) { EXPECT_DIST_JOB_OK("case05"); }
TEST_P(Functional, Case06_AllGather) { EXPECT_DIST_JOB_OK("case06"); }
TEST_P(Functional, Case07_AllGatherOut) { EXPECT_DIST_JOB_OK("case07"); }
TEST_P(Functional, Case08_AllGatherCoalesced) { EXPECT_DIST_JOB_OK("case08"); }
TEST_P(Functional, Case09_ReduceScatter) { EXPECT_DIST_JOB_OK("case09"); }
TEST_P(Functional, Case10_ReduceScatterCoalesced) { EXPECT_DIST_JOB_OK("case10"); }
TEST_P(Functional, Case11_AllToAllRandomSplits) { EXPECT_DIST_JOB_OK("case11"); }
TEST_P(Functional, Case12_AllToAllEqualSplits) { EXPECT_DIST_JOB_OK("case12"); }
TEST_P(Functional, Case13_Broadcast) { EXPECT_DIST_JOB_OK("case13"); }
TEST_P(Functional, Case14_PermuteTensor) { EXPECT_DIST_JOB_OK("case14"); }
TEST_P(Functional, Case15_WaitTensorSameObject) { EXPECT_DIST_JOB_OK("case15"); }
TEST_P(Functional, Case16_WaitTensorNothingPending) { EXPECT_DIST_JOB_OK("case16"); }

INSTANTIATE_TEST_SUITE_P(Dist, Functional, ::testing::ValuesIn(all_params()), param_name);

}  // namespace
}  // namespace anvil::dist::test
