// ProcessGroup ops beyond the §4 cases, on gloo and mpi with 2-4 ranks: every reduce op over
// the supported dtypes (spec A.3 #15-16), non-contiguous inputs and outputs (§5), send/recv
// (A.3 #44, #46), barrier, broadcast of f64 from a non-zero root (A.3 #24), Work's wait with a
// bound of its own, and the consistency check.
#include <thread>

#include "dist/functional.h"
#include "dist_check.h"
#include "dist_harness.h"

namespace anvil::dist::test {
namespace {

namespace F = ::anvil::dist::functional;
using std::chrono::milliseconds;

// A.3 #15/#16: every op on every collective dtype. Rank r holds r+1 (bool: r == 0).
DIST_WORKER(dtypes_ops) {
  const int W = ctx.world, r = ctx.rank;
  double sum = 0, prod = 1;
  int64_t band = -1, bor = 0, bxor = 0;
  for (int i = 0; i < W; ++i) {
    sum += i + 1;
    prod *= i + 1;
    band &= i + 1;
    bor |= i + 1;
    bxor ^= i + 1;
  }
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                   DType::kInt64, DType::kInt32, DType::kInt16, DType::kInt8, DType::kUInt8}) {
    Tensor x = Tensor::full({7}, r + 1, dt);
    auto reduce = [&](ReduceOp op) {
      Tensor y = x.clone();
      ctx.pg->all_reduce(y, op)->wait();
      return y;
    };
    EXPECT_TRUE(all_equal(reduce(ReduceOp::kSum), sum)) << dtype_name(dt);
    EXPECT_TRUE(all_equal(reduce(ReduceOp::kProduct), prod)) << dtype_name(dt);
    EXPECT_TRUE(all_equal(reduce(ReduceOp::kMin), 1)) << dtype_name(dt);
    EXPECT_TRUE(all_equal(reduce(ReduceOp::kMax), W)) << dtype_name(dt);
    if (is_floating(dt)) {
      EXPECT_TRUE(all_equal(reduce(ReduceOp::kAvg), sum / W)) << dtype_name(dt);
    } else {
      EXPECT_TRUE(all_equal(reduce(ReduceOp::kBand), static_cast<double>(band))) << dtype_name(dt);
      EXPECT_TRUE(all_equal(reduce(ReduceOp::kBor), static_cast<double>(bor))) << dtype_name(dt);
      EXPECT_TRUE(all_equal(reduce(ReduceOp::kBxor), static_cast<double>(bxor))) << dtype_name(dt);
    }
  }
  // bool: sum = or, product = and (A.3 #16); rank 0 true, the others false.
  Tensor b = Tensor::full({5}, r == 0 ? 1 : 0, DType::kBool);
  Tensor bs = b.clone(), bp = b.clone(), bx = b.clone();
  ctx.pg->all_reduce(bs, ReduceOp::kSum)->wait();
  ctx.pg->all_reduce(bp, ReduceOp::kProduct)->wait();
  ctx.pg->all_reduce(bx, ReduceOp::kBxor)->wait();
  EXPECT_TRUE(all_equal(bs, 1));
  EXPECT_TRUE(all_equal(bp, 0));
  EXPECT_TRUE(all_equal(bx, 1));
  // A reduction over a larger, non-uniform f32 tensor (several gloo segments).
  const int64_t n = 300000;
  Tensor big = Tensor::empty({n}, DType::kFloat32);
  float* p = big.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>((i % 1000) * (r + 1));
  ctx.pg->all_reduce(big, ReduceOp::kSum)->wait();
  bool good = true;
  for (int64_t i = 0; i < n && good; ++i) good = p[i] == static_cast<float>((i % 1000) * sum);
  EXPECT_TRUE(good);
}

// §5: non-contiguous (transposed / sliced) inputs and outputs are made contiguous internally and
// written back; the out-of-place input is never modified.
DIST_WORKER(noncontiguous) {
  const int W = ctx.world, r = ctx.rank;
  std::vector<float> vals;
  for (int i = 0; i < 12; ++i) vals.push_back(static_cast<float>(i + 100 * r));
  Tensor base = Tensor::from_vector(vals, {3, 4});
  Tensor t = base.transpose(0, 1);  // [4, 3], strides [1, 4]
  ASSERT_FALSE(t.is_contiguous());
  // In place through a transposed view: base's memory gets the sums, laid out as base.
  ctx.pg->all_reduce(t, ReduceOp::kSum)->wait();
  std::vector<double> want;
  for (int i = 0; i < 12; ++i) want.push_back(W * i + 100.0 * W * (W - 1) / 2);
  EXPECT_TRUE(values_equal(base, want));
  // Out of place from a strided slice: the input is untouched.
  Tensor big = Tensor::full({4, 6}, r, DType::kFloat32);
  Tensor col = big.slice(1, 2, 4);  // [4, 2], not contiguous
  Tensor g = F::wait_tensor(F::all_gather_into_tensor(col, W, "0"));
  ASSERT_EQ(g.sizes(), (Shape{4 * W, 2}));
  for (int j = 0; j < W; ++j) EXPECT_TRUE(all_equal(g.slice(0, 4 * j, 4 * j + 4), j));
  // A non-contiguous output of all_gather / reduce_scatter / all_to_all.
  Tensor out_base = Tensor::zeros({2, 2 * W}, DType::kFloat32);
  Tensor out = out_base.transpose(0, 1);  // [2W, 2]
  ctx.pg->all_gather_into_tensor(out, Tensor::full({2, 2}, r, DType::kFloat32))->wait();
  for (int j = 0; j < W; ++j) EXPECT_TRUE(all_equal(out_base.slice(1, 2 * j, 2 * j + 2), j));
  Tensor rs_base = Tensor::zeros({3, 2}, DType::kInt64);
  Tensor rs_out = rs_base.slice(1, 0, 1).transpose(0, 1);  // [1, 3], strides [1, 2]
  ASSERT_FALSE(rs_out.is_contiguous());
  ctx.pg->reduce_scatter_tensor(rs_out, Tensor::full({W, 3}, r, DType::kInt64), ReduceOp::kSum)
      ->wait();
  EXPECT_TRUE(all_equal(rs_base.select(1, 0), W * (W - 1) / 2.0));
  EXPECT_TRUE(all_equal(rs_base.select(1, 1), 0));
  // An expanded (self-overlapping) output cannot be written.
  Tensor one = Tensor::zeros({1}, DType::kFloat32);
  Tensor expanded = one.expand({W});
  EXPECT_TRUE(
      throws_error([&] { ctx.pg->all_reduce(expanded, ReduceOp::kSum); }, {"overlaps itself"}));
}

// A.3 #44/#46: send/recv around a ring, crossed pairs posted before any wait, source_rank.
DIST_WORKER(send_recv) {
  const int W = ctx.world, r = ctx.rank;
  const int next = (r + 1) % W, prev = (r - 1 + W) % W;
  Tensor out = Tensor::full({1000}, r, DType::kFloat32);
  Tensor in = Tensor::zeros({1000}, DType::kFloat32);
  // Every rank posts its send and its recv, then waits: no deadlock.
  auto s = ctx.pg->send(out, next, 7);
  auto rv = ctx.pg->recv(in, prev, 7);
  EXPECT_TRUE(rv->wait(milliseconds(30000)));
  EXPECT_TRUE(s->wait(milliseconds(30000)));
  EXPECT_TRUE(all_equal(in, prev));
  EXPECT_EQ(rv->source_rank(), prev);
  EXPECT_TRUE(throws_error([&] { s->source_rank(); }, {"source_rank() may only be called"}));
  // Two tags between the same pair arrive in their own buffers.
  if (r == 0) {
    auto a = ctx.pg->send(Tensor::full({3}, 11, DType::kInt64), 1, 1);
    auto b = ctx.pg->send(Tensor::full({3}, 22, DType::kInt64), 1, 2);
    a->wait();
    b->wait();
  } else if (r == 1) {
    Tensor b2 = Tensor::zeros({3}, DType::kInt64), b1 = Tensor::zeros({3}, DType::kInt64);
    auto wb = ctx.pg->recv(b2, 0, 2);
    auto wa = ctx.pg->recv(b1, 0, 1);
    wb->wait();
    wa->wait();
    EXPECT_TRUE(all_equal(b1, 11));
    EXPECT_TRUE(all_equal(b2, 22));
  }
  EXPECT_TRUE(throws_error([&] { ctx.pg->send(out, r, 0); }, {"cannot send to self"}));
  EXPECT_TRUE(throws_error([&] { ctx.pg->recv(in, W, 0); }, {"src rank", "outside the group"}));
  ctx.pg->barrier()->wait();
}

// A.3 #24 and #42: broadcast f64 from root W-1; a barrier does not return before the last
// rank arrives (rank W-1 sleeps first; the others then see its pre-barrier write via the store
// key it set before entering).
DIST_WORKER(broadcast_barrier) {
  const int W = ctx.world, r = ctx.rank;
  Tensor x = Tensor::full({2, 3}, r == W - 1 ? 2.5 : -1.0, DType::kFloat64);
  ctx.pg->broadcast(x, W - 1)->wait();
  EXPECT_TRUE(all_equal(x, 2.5));
  const std::string flag = ctx.outdir + "/arrived_late";
  if (r == W - 1) {
    std::this_thread::sleep_for(milliseconds(300));
    std::FILE* f = std::fopen(flag.c_str(), "w");
    if (f) std::fclose(f);
  }
  ctx.pg->barrier()->wait();
  std::FILE* f = std::fopen(flag.c_str(), "r");
  EXPECT_NE(f, nullptr) << "a rank left the barrier before rank " << W - 1 << " arrived";
  if (f) std::fclose(f);
  EXPECT_TRUE(throws_error([&] { ctx.pg->broadcast(x, W); }, {"src rank", "outside the group"}));
}

// Work.wait(timeout): rank 0 waits with a short bound while the last rank is late -> an Error
// naming the op and the bound; the op stays in flight and a later wait succeeds.
DIST_WORKER(wait_timeout) {
  const int W = ctx.world, r = ctx.rank;
  if (r == W - 1) std::this_thread::sleep_for(milliseconds(1500));
  Tensor x = Tensor::full({4}, 1, DType::kFloat32);
  auto w = ctx.pg->all_reduce(x, ReduceOp::kSum);
  if (r == 0) {
    EXPECT_TRUE(
        throws_error([&] { w->wait(milliseconds(50)); },
                     {"Work.wait timed out after 50 ms", "all_reduce #", "still in flight"}));
    EXPECT_FALSE(w->is_completed());
  }
  EXPECT_TRUE(w->wait());
  EXPECT_TRUE(w->is_completed());
  EXPECT_TRUE(w->is_success());
  EXPECT_EQ(w->exception(), nullptr);
  EXPECT_TRUE(all_equal(x, W));
  EXPECT_EQ(w->result().size(), 1u);
  EXPECT_GE(ctx.pg->sequence_number(), 1u);
}

// ANVIL_DIST_DEBUG=1: the consistency check names both ranks when their calls differ, and the
// group stays usable afterwards; mismatched all_to_all splits are caught too.
DIST_WORKER(consistency) {
  const int W = ctx.world, r = ctx.rank;
  ASSERT_TRUE(ctx.pg->options().check_consistency);
  Tensor x = Tensor::full({r == 1 ? 5 : 4}, 1, DType::kFloat32);
  auto w = ctx.pg->all_reduce(x, ReduceOp::kSum);
  EXPECT_TRUE(
      throws_error([&] { w->wait(); }, {"collective mismatch across ranks", "f32[5]", "f32[4]"}));
  // Splits: every rank sends 1 row to everyone but rank 0 expects 2 rows from rank 1. Only
  // rank 0's own arguments show it, yet every rank must fail the op (none may post it).
  std::vector<int64_t> in_splits(W, 1), out_splits(W, 1);
  if (r == 0) out_splits[1] = 2;
  int64_t rows = 0;
  for (auto s : out_splits) rows += s;
  Tensor in = Tensor::full({W, 2}, r, DType::kFloat32),
         out = Tensor::zeros({rows, 2}, DType::kFloat32);
  auto a = ctx.pg->all_to_all_single(out, in, out_splits, in_splits);
  EXPECT_TRUE(throws_error([&] { a->wait(); },
                           {"split sizes disagree", "rank 0 expects 2 rows from rank 1"}));
  // The group still works.
  Tensor y = Tensor::full({3}, r, DType::kFloat32);
  ctx.pg->all_reduce(y, ReduceOp::kSum)->wait();
  EXPECT_TRUE(all_equal(y, W * (W - 1) / 2.0));
}

// all_reduce_into: out of place (the input untouched, a strided input too), one tensor for both
// is the in-place all_reduce, and an output that overlaps its input or has another shape or
// dtype is refused before anything is posted (the group stays usable).
DIST_WORKER(all_reduce_into) {
  const int W = ctx.world, r = ctx.rank;
  Tensor in = Tensor::full({6}, r + 1, DType::kFloat32), out = Tensor::zeros({6}, DType::kFloat32);
  ctx.pg->all_reduce_into(out, in, ReduceOp::kSum)->wait();
  EXPECT_TRUE(all_equal(out, W * (W + 1) / 2.0));
  EXPECT_TRUE(all_equal(in, r + 1)) << "the input changed";
  Tensor wide = Tensor::full({4, 2}, r, DType::kFloat64);
  Tensor col = wide.as_strided({4}, {2}, 1), o2 = Tensor::zeros({4}, DType::kFloat64);
  ctx.pg->all_reduce_into(o2, col, ReduceOp::kMax)->wait();
  EXPECT_TRUE(all_equal(o2, W - 1));
  EXPECT_TRUE(all_equal(wide, r));
  ctx.pg->all_reduce_into(in, in, ReduceOp::kSum)->wait();  // in place
  EXPECT_TRUE(all_equal(in, W * (W + 1) / 2.0));
  Tensor buf = Tensor::zeros({8}, DType::kFloat32);
  Tensor lo = buf.as_strided({6}, {1}, 0), hi = buf.as_strided({6}, {1}, 2);
  EXPECT_TRUE(throws_error([&] { ctx.pg->all_reduce_into(hi, lo, ReduceOp::kSum); },
                           {"overlaps its input", "all_reduce", "bytes [8, 32) and [0, 24)"}));
  Tensor small = Tensor::zeros({5}, DType::kFloat32), half = Tensor::zeros({6}, DType::kFloat16);
  EXPECT_TRUE(throws_error([&] { ctx.pg->all_reduce_into(small, out, ReduceOp::kSum); },
                           {"operand counts must be same", "expected [6]"}));
  EXPECT_TRUE(throws_error([&] { ctx.pg->all_reduce_into(half, out, ReduceOp::kSum); },
                           {"another dtype", "f32"}));
  Tensor y = Tensor::full({3}, r, DType::kFloat32);
  ctx.pg->all_reduce(y, ReduceOp::kSum)->wait();
  EXPECT_TRUE(all_equal(y, W * (W - 1) / 2.0));
}

class Ops : public ::testing::TestWithParam<DistParam> {};

TEST_P(Ops, AllReduceIntoIsOutOfPlace) { EXPECT_DIST_JOB_OK("all_reduce_into"); }

TEST_P(Ops, EveryReduceOpEveryDtype) { EXPECT_DIST_JOB_OK("dtypes_ops"); }
TEST_P(Ops, NonContiguousInputsAndOutputs) { EXPECT_DIST_JOB_OK("noncontiguous"); }
TEST_P(Ops, SendRecv) { EXPECT_DIST_JOB_OK("send_recv"); }
TEST_P(Ops, BroadcastAndBarrier) { EXPECT_DIST_JOB_OK("broadcast_barrier"); }
TEST_P(Ops, WorkWaitWithItsOwnTimeout) { EXPECT_DIST_JOB_OK("wait_timeout"); }
TEST_P(Ops, ConsistencyCheckNamesTheRanks) {
  JobOptions o;
  o.env["ANVIL_DIST_DEBUG"] = "1";
  EXPECT_DIST_JOB_OK("consistency", o);
}

INSTANTIATE_TEST_SUITE_P(Dist, Ops, ::testing::ValuesIn(all_params()), param_name);

}  // namespace
}  // namespace anvil::dist::test
