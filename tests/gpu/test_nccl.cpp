// The nccl backend on 2 GPUs: 2 real processes (tests/dist's harness) over a loopback TCP store,
// rank r on cuda:r. Every op against exact values computed on the host, for representative
// dtypes and every reduce op NCCL has; sub-groups; send / recv; ordering with the caller's
// stream (kernel-free: an async host-to-device copy on the caller's stream, the op, an async copy
// back); a peer that died (the survivor fails within the timeout with an Error naming the op,
// the group and the peer, never hangs); bad tensors refused clearly; op events reused from the
// group's pool of spares; the watchdog failing an op nobody waits on.
//
// Needs 2 GPUs: skips with fewer, unless ANVIL_REQUIRE_GPU=2 (then a failure). ANVIL_REQUIRE_GPU=1
// (one GPU required) still skips on a 1-GPU machine.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "../dist/dist_check.h"
#include "../dist/dist_harness.h"
#include "dist/world.h"
#include "gpu_test_util.h"
#include "nccl_test_util.h"

namespace anvil::dist::test {
namespace {

using std::chrono::milliseconds;
using namespace anvil::nccl_test;

// ---- workers (each rank: ctx.pg is the world group on cuda:rank) -----------------------------

DIST_WORKER(nccl_all_reduce) {
  ProcessGroup& pg = *ctx.pg;
  ASSERT_EQ(pg.backend_name(), "nccl");
  ASSERT_EQ(pg.device(), Device::cuda(ctx.rank));
  const int r = ctx.rank;
  const std::vector<double> k = {1, 2, 3, 4, 5};  // rank r holds (r + 1) * k
  auto expect = [&](ReduceOp op) {
    std::vector<double> v;
    for (double x : k) {
      const double a = x, b = 2 * x;  // ranks 0 and 1
      v.push_back(op == ReduceOp::kSum       ? a + b
                  : op == ReduceOp::kProduct ? a * b
                  : op == ReduceOp::kMin     ? a
                  : op == ReduceOp::kMax     ? b
                                             : (a + b) / 2);
    }
    return v;
  };
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                   DType::kInt8, DType::kUInt8, DType::kInt32, DType::kInt64}) {
    const bool fp = dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kFloat16 ||
                    dt == DType::kBFloat16;
    std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin,
                                 ReduceOp::kMax};
    if (fp) ops.push_back(ReduceOp::kAvg);
    for (ReduceOp op : ops) {
      Tensor t = on_gpu(scaled(k, r + 1, dt), pg);
      auto w = pg.all_reduce(t, op);
      w->wait();
      EXPECT_TRUE(w->is_success());
      EXPECT_TRUE(values_equal(on_host(t), expect(op)))
          << dtype_name(dt) << " " << reduce_op_name(op);
    }
  }
  // bool: sum = or, product = and (as the host backends)
  const std::vector<double> bits = r == 0 ? std::vector<double>{1, 0, 1, 0}
                                          : std::vector<double>{1, 1, 0, 0};
  Tensor b = on_gpu(host_of({4}, bits, DType::kBool), pg);
  pg.all_reduce(b, ReduceOp::kSum)->wait();
  EXPECT_TRUE(values_equal(on_host(b), {1, 1, 1, 0}));
  Tensor c = on_gpu(host_of({4}, bits, DType::kBool), pg);
  pg.all_reduce(c, ReduceOp::kProduct)->wait();
  EXPECT_TRUE(values_equal(on_host(c), {1, 0, 0, 0}));
  // coalesced: tensors of two dtypes and shapes, one of them empty, in one grouped call
  std::vector<Tensor> ts = {on_gpu(scaled({1, 2, 3}, r + 1, DType::kFloat32), pg),
                            on_gpu(scaled({4, 5}, r + 1, DType::kInt64), pg),
                            on_gpu(Tensor::zeros({0}, DType::kFloat32), pg)};
  pg.all_reduce_coalesced(ts, ReduceOp::kSum)->wait();
  EXPECT_TRUE(values_equal(on_host(ts[0]), {3, 6, 9}));
  EXPECT_TRUE(values_equal(on_host(ts[1]), {12, 15}));
  EXPECT_EQ(ts[2].numel(), 0);
  // what NCCL cannot reduce is refused before posting, the same on every rank
  Tensor i16 = on_gpu(scaled(k, 1, DType::kInt16), pg);
  EXPECT_TRUE(throws_error([&] { pg.all_reduce(i16, ReduceOp::kSum); },
                           {"NCCL cannot reduce i16 tensors", "all_reduce"}));
  Tensor i32 = on_gpu(scaled(k, 1, DType::kInt32), pg);
  EXPECT_TRUE(throws_error([&] { pg.all_reduce(i32, ReduceOp::kBxor); },
                           {"NCCL has no bitwise reduction (bxor on i32)"}));
  // the sequence stayed aligned: one more op works
  Tensor last = on_gpu(scaled({1}, r + 1, DType::kFloat32), pg);
  pg.all_reduce(last, ReduceOp::kSum)->wait();
  EXPECT_TRUE(values_equal(on_host(last), {3}));
}

DIST_WORKER(nccl_gather_scatter_broadcast) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank;
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kInt64, DType::kUInt8}) {
    // all_gather: rank r holds 10 r + {0, 1, 2}; flat [6] and stacked [2, 3] outputs
    Tensor in = on_gpu(host_of({3}, {10.0 * r, 10.0 * r + 1, 10.0 * r + 2}, dt), pg);
    Tensor flat = on_gpu(Tensor::zeros({6}, dt), pg);
    pg.all_gather_into_tensor(flat, in)->wait();
    EXPECT_TRUE(values_equal(on_host(flat), {0, 1, 2, 10, 11, 12})) << dtype_name(dt);
    Tensor stacked = on_gpu(Tensor::zeros({2, 3}, dt), pg);
    pg.all_gather_into_tensor(stacked, in)->wait();
    EXPECT_TRUE(values_equal(on_host(stacked), {0, 1, 2, 10, 11, 12})) << dtype_name(dt);
    // reduce_scatter: rank r holds (r + 1) * {1, 2, 3, 4}; rank r gets chunk r reduced
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      Tensor rin = on_gpu(scaled({1, 2, 3, 4}, r + 1, dt), pg);
      Tensor rout = on_gpu(Tensor::zeros({2}, dt), pg);
      pg.reduce_scatter_tensor(rout, rin, op)->wait();
      const double a = 2.0 * r + 1, b = 2.0 * r + 2;  // chunk r of {1, 2, 3, 4}
      const double f = op == ReduceOp::kSum ? 3 : op == ReduceOp::kMax ? 2 : 1;
      EXPECT_TRUE(values_equal(on_host(rout), {f * a, f * b}))
          << dtype_name(dt) << " " << reduce_op_name(op);
    }
    // broadcast from rank 1
    Tensor bt = on_gpu(scaled({1, 2, 3}, r + 1, dt), pg);
    pg.broadcast(bt, 1)->wait();
    EXPECT_TRUE(values_equal(on_host(bt), {2, 4, 6})) << dtype_name(dt);
  }
  // avg of reduce_scatter on floats
  Tensor rin = on_gpu(scaled({1, 2, 3, 4}, r + 1, DType::kFloat32), pg);
  Tensor rout = on_gpu(Tensor::zeros({2}, DType::kFloat32), pg);
  pg.reduce_scatter_tensor(rout, rin, ReduceOp::kAvg)->wait();
  EXPECT_TRUE(values_equal(on_host(rout), {1.5 * (2 * r + 1), 1.5 * (2 * r + 2)}));
  // coalesced all_gather and reduce_scatter
  std::vector<Tensor> gin = {on_gpu(host_of({1}, {double(r)}, DType::kFloat32), pg),
                             on_gpu(host_of({2}, {double(r), 5.0 + r}, DType::kInt32), pg)};
  std::vector<Tensor> gout = {on_gpu(Tensor::zeros({2}, DType::kFloat32), pg),
                              on_gpu(Tensor::zeros({4}, DType::kInt32), pg)};
  pg.all_gather_into_tensor_coalesced(gout, gin)->wait();
  EXPECT_TRUE(values_equal(on_host(gout[0]), {0, 1}));
  EXPECT_TRUE(values_equal(on_host(gout[1]), {0, 5, 1, 6}));
  std::vector<Tensor> sin = {on_gpu(scaled({1, 2}, r + 1, DType::kFloat64), pg),
                             on_gpu(scaled({1, 2, 3, 4}, r + 1, DType::kFloat16), pg)};
  std::vector<Tensor> sout = {on_gpu(Tensor::zeros({1}, DType::kFloat64), pg),
                              on_gpu(Tensor::zeros({2}, DType::kFloat16), pg)};
  pg.reduce_scatter_tensor_coalesced(sout, sin, ReduceOp::kSum)->wait();
  EXPECT_TRUE(values_equal(on_host(sout[0]), {3.0 * (r + 1)}));
  EXPECT_TRUE(values_equal(on_host(sout[1]), {3.0 * (2 * r + 1), 3.0 * (2 * r + 2)}));
  pg.barrier()->wait();
}

DIST_WORKER(nccl_all_to_all) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank, W = ctx.world;
  // uneven splits: rank r sends r + j + 1 rows to rank j; rows of 2 values 100 r + 2 row + col
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kBFloat16}) {
    const A2aCase c = a2a_case(W, r);
    Tensor in = on_gpu(host_of({c.in_rows, 2}, c.in_values, dt), pg);
    Tensor out = on_gpu(Tensor::zeros({c.out_rows, 2}, dt), pg);
    pg.all_to_all_single(out, in, c.out_splits, c.in_splits)->wait();
    EXPECT_TRUE(values_equal(on_host(out), c.expected)) << dtype_name(dt);
  }
  // equal splits (empty split lists)
  Tensor in = on_gpu(host_of({2}, {10.0 * r, 10.0 * r + 1}, DType::kFloat32), pg);
  Tensor out = on_gpu(Tensor::zeros({2}, DType::kFloat32), pg);
  pg.all_to_all_single(out, in, {}, {})->wait();
  EXPECT_TRUE(values_equal(on_host(out), {double(r), 10.0 + r}));
}

DIST_WORKER(nccl_p2p_groups_and_bad_tensors) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank;
  // send / recv, ordered (rank 0 sends first, rank 1 receives first)
  Tensor msg = on_gpu(host_of({3}, {1, 2, 3}, DType::kFloat32), pg);
  Tensor got = on_gpu(Tensor::zeros({3}, DType::kFloat32), pg);
  if (r == 0) {
    pg.send(msg, 1)->wait();
    auto w = pg.recv(got, 1);
    w->wait();
    EXPECT_EQ(w->source_rank(), 1);
    EXPECT_TRUE(values_equal(on_host(got), {2, 4, 6}));
  } else {
    auto w = pg.recv(got, 0);
    w->wait();
    EXPECT_EQ(w->source_rank(), 0);
    EXPECT_TRUE(values_equal(on_host(got), {1, 2, 3}));
    Tensor back = on_gpu(host_of({3}, {2, 4, 6}, DType::kFloat32), pg);
    pg.send(back, 0)->wait();
  }
  EXPECT_TRUE(throws_error([&] { pg.send(msg, 1 - r, 5); },
                           {"NCCL has no message tags", "tag 0", "5"}));
  // bad tensors: a CPU tensor, a tensor on the other GPU, a non-contiguous one
  Tensor cpu = Tensor::full({4}, 1, DType::kFloat32);
  EXPECT_TRUE(throws_error([&] { pg.all_reduce(cpu, ReduceOp::kSum); },
                           {"is on cpu", str("not on the group's device cuda:", r)}));
  Tensor other = Tensor::full({4}, 1, DType::kFloat32).to(Device::cuda(1 - r));
  EXPECT_TRUE(throws_error([&] { pg.all_reduce(other, ReduceOp::kSum); },
                           {str("is on cuda:", 1 - r), str("not on the group's device cuda:", r)}));
  Tensor wide = on_gpu(Tensor::full({4, 2}, 1, DType::kFloat32), pg);
  Tensor column = wide.as_strided({4}, {2}, 0);
  EXPECT_TRUE(throws_error([&] { pg.all_reduce(column, ReduceOp::kSum); },
                           {"needs contiguous tensors"}));
  // sub-groups: both ranks (a communicator of its own), then rank 1 alone
  auto both = new_group({0, 1});
  ASSERT_NE(both, nullptr);
  EXPECT_EQ(both->backend_name(), "nccl");
  EXPECT_EQ(both->device(), Device::cuda(r));
  Tensor s = on_gpu(scaled({1, 2}, r + 1, DType::kFloat32), *both);
  both->all_reduce(s, ReduceOp::kMax)->wait();
  EXPECT_TRUE(values_equal(on_host(s), {2, 4}));
  auto solo = new_group({1});
  if (r == 1) {
    ASSERT_NE(solo, nullptr);
    EXPECT_EQ(solo->size(), 1);
    Tensor t = on_gpu(scaled({7}, 1, DType::kInt32), *solo);
    solo->all_reduce(t, ReduceOp::kSum)->wait();
    EXPECT_TRUE(values_equal(on_host(t), {7}));
  } else {
    EXPECT_EQ(solo, nullptr);
  }
  // the world still works after all that (the refused calls took no sequence number)
  Tensor last = on_gpu(scaled({1}, r + 1, DType::kFloat32), pg);
  pg.all_reduce(last, ReduceOp::kSum)->wait();
  EXPECT_TRUE(values_equal(on_host(last), {3}));
}

// Ordering with the caller's stream, without kernels: an async copy into t on stream s, the
// all_reduce ordered after s, wait_stream(s), an async copy back on s. A backend that did not
// wait for s would reduce zeros (or a partial copy); one whose Work did not order s after it
// would copy back unreduced values.
DIST_WORKER(nccl_wait_stream_orders_with_caller_stream) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank;
  const auto& api = runtime::device_backend(Device::Type::kCUDA);
  void* s = api.stream_create(r);
  ASSERT_NE(s, nullptr);
  const int64_t n = 1 << 22;  // 16 MiB: the copy takes long enough to expose a missing wait
  for (int round = 0; round < 3; ++round) {
    std::vector<float> src(static_cast<size_t>(n), float(r + 1 + round));
    std::vector<float> back(static_cast<size_t>(n), -1.f);
    Tensor t = on_gpu(Tensor::zeros({n}, DType::kFloat32), pg);
    ASSERT_EQ(api.copy(r, t.data_ptr(), src.data(), n * 4, ANVIL_COPY_HOST_TO_DEVICE, s), 0);
    OpOptions o;
    o.stream = s;
    auto w = pg.all_reduce(t, ReduceOp::kSum, o);
    w->wait_stream(s);
    ASSERT_EQ(api.copy(r, back.data(), t.data_ptr(), n * 4, ANVIL_COPY_DEVICE_TO_HOST, s), 0);
    ASSERT_EQ(api.stream_synchronize(r, s), 0);
    const float want = float(1 + round) + float(2 + round);
    int64_t bad = 0;
    for (float v : back) bad += v != want;
    EXPECT_EQ(bad, 0) << "round " << round << ": " << bad << " of " << n
                      << " elements differ from " << want << " (first: " << back[0] << ")";
    w->wait();
    EXPECT_TRUE(w->is_success());
  }
  api.stream_destroy(r, s);
}

/// Rank 0's side of the dead-peer tests: an all_reduce with a 4 s timeout against the dead
/// rank 1 fails within the timeout (plus the watchdog's polling) with an Error naming the op, the
/// group and rank 1, and the group is unusable afterwards.
void expect_the_survivor_fails(ProcessGroup& pg, Tensor& t) {
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  std::shared_ptr<Work> w;
  try {
    w = pg.all_reduce(t, ReduceOp::kSum, OpOptions{milliseconds(4000)});
    w->wait();
  } catch (const std::exception& e) {
    message = e.what();
  }
  const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() -
                                                             start).count();
  std::printf("rank 0: survivor error after %lld ms: %s\n", static_cast<long long>(took),
              message.c_str());
  EXPECT_FALSE(message.empty()) << "the op against a dead peer did not fail";
  for (const char* part : {"nccl all_reduce #", "on group '0'", "rank 1 (world rank 1)"})
    EXPECT_NE(message.find(part), std::string::npos) << "lacks '" << part << "': " << message;
  EXPECT_LT(took, 20000) << "the failure took far longer than the op's 4 s timeout";
  if (w) {
    EXPECT_FALSE(w->is_success());
  }
  EXPECT_TRUE(throws_error([&] { pg.all_reduce(t, ReduceOp::kSum)->wait(); },
                           {"unusable after an earlier failure"}));
}

// A peer that died: after a first op (the communicator exists), rank 1 exits; rank 0's next
// all_reduce fails within its timeout. Never a hang (the harness deadline bounds the job).
DIST_WORKER(nccl_dead_peer) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank;
  Tensor t = on_gpu(scaled({1, 2, 3}, r + 1, DType::kFloat32), pg);
  pg.all_reduce(t, ReduceOp::kSum)->wait();
  ASSERT_TRUE(values_equal(on_host(t), {3, 6, 9}));
  pg.barrier()->wait();
  if (r == 1) {
    std::printf("rank 1: exiting before the next op\n");
    std::fflush(stdout);
    ::_exit(0);
  }
  std::this_thread::sleep_for(milliseconds(300));
  expect_the_survivor_fails(pg, t);
}

// A peer that died before the group's first op: the communicator exists (ANVIL_NCCL_EAGER_INIT)
// but no op ran. A blocking communicator made its connections when it was created
// (NCCL_RUNTIME_CONNECT=0), so rank 0's first all_reduce is enqueued without waiting on rank 1
// and fails through its deadline like any op; never a hang, never the process's end.
DIST_WORKER(nccl_dead_peer_before_first_op) {
  ProcessGroup& pg = *ctx.pg;
  if (ctx.rank == 1) {
    std::printf("rank 1: exiting before any op\n");
    std::fflush(stdout);
    ::_exit(0);
  }
  std::this_thread::sleep_for(milliseconds(1000));
  Tensor t = on_gpu(scaled({1, 2, 3}, 1, DType::kFloat32), pg);
  expect_the_survivor_fails(pg, t);
}

// Rank 1's side of the tests where only rank 0 posts: waits (up to 30 s) for the file rank 0
// writes once it has seen `what`, so rank 1 stays alive (a live peer) until then.
void await_marker(const std::string& marker, const std::string& what) {
  for (int i = 0; i < 600 && !std::ifstream(marker).good(); ++i)
    std::this_thread::sleep_for(milliseconds(50));
  EXPECT_TRUE(std::ifstream(marker).good()) << "rank 0 never reported " << what;
}

// A per-op timeout with a live peer that never posts the op: rank 0's all_reduce (1 s timeout)
// fails with a timeout naming the op and rank 1; rank 1 waits for rank 0's verdict, then leaves.
DIST_WORKER(nccl_op_timeout) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank;
  Tensor t = on_gpu(scaled({1, 2}, r + 1, DType::kFloat32), pg);
  pg.all_reduce(t, ReduceOp::kSum)->wait();  // the communicator exists
  const std::string marker = ctx.outdir + "/nccl_timeout_seen";
  if (r == 0) {
    auto w = pg.all_reduce(t, ReduceOp::kSum, OpOptions{milliseconds(1000)});
    EXPECT_TRUE(throws_error([&] { w->wait(); },
                             {"nccl all_reduce #2 on group '0' (rank 0 of 2)", "timed out",
                              "did not complete within 1000 ms", "rank 1 (world rank 1)"}));
    EXPECT_TRUE(w->is_completed());
    EXPECT_FALSE(w->is_success());
    std::ofstream(marker) << "1";
  } else {
    await_marker(marker, "its timeout");
  }
}

// Op events come from a pool of spares (NcclState::take_event / give_event, at most 1024 kept):
// 1100 all_reduces in flight at once (more events than the pool keeps: the rest are destroyed
// when given back), their Works dropped, three rounds (later rounds reuse given-back events),
// each round then ordering a caller's stream after a reused event (as the wait_stream test).
// An event given back while still in use, or a reused one reporting an earlier op, would show
// as a wrong value here.
DIST_WORKER(nccl_event_pool_reuse) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank;
  const auto& api = runtime::device_backend(Device::Type::kCUDA);
  void* s = api.stream_create(r);
  ASSERT_NE(s, nullptr);
  constexpr int kOps = 1100;
  for (int round = 0; round < 3; ++round) {
    std::vector<Tensor> ts;
    std::vector<std::shared_ptr<Work>> ws;
    for (int i = 0; i < kOps; ++i) {
      ts.push_back(on_gpu(scaled({double(i), double(round)}, r + 1, DType::kFloat32), pg));
      ws.push_back(pg.all_reduce(ts.back(), ReduceOp::kSum));
    }
    for (auto& w : ws) w->wait();
    ws.clear();  // every op's event given back
    int64_t bad = 0;
    for (int i = 0; i < kOps; ++i)
      bad += !values_equal(on_host(ts[i]), {3.0 * i, 3.0 * round});
    EXPECT_EQ(bad, 0) << "round " << round << ": " << bad << " of " << kOps << " ops wrong";
    const int64_t n = 1 << 22;  // the copy takes long enough to expose a missing wait
    std::vector<float> src(static_cast<size_t>(n), float(r + 1 + round));
    std::vector<float> back(static_cast<size_t>(n), -1.f);
    Tensor t = on_gpu(Tensor::zeros({n}, DType::kFloat32), pg);
    ASSERT_EQ(api.copy(r, t.data_ptr(), src.data(), n * 4, ANVIL_COPY_HOST_TO_DEVICE, s), 0);
    OpOptions o;
    o.stream = s;
    auto w = pg.all_reduce(t, ReduceOp::kSum, o);  // a reused event
    w->wait_stream(s);
    ASSERT_EQ(api.copy(r, back.data(), t.data_ptr(), n * 4, ANVIL_COPY_DEVICE_TO_HOST, s), 0);
    ASSERT_EQ(api.stream_synchronize(r, s), 0);
    const float want = float(1 + round) + float(2 + round);
    bad = 0;
    for (float v : back) bad += v != want;
    EXPECT_EQ(bad, 0) << "round " << round << ": " << bad << " of " << n
                      << " elements differ from " << want << " (first: " << back[0] << ")";
  }
  api.stream_destroy(r, s);
}

// The watchdog alone fails an op nobody waits on: after the group idled (the watchdog in its
// long sleep), rank 0 posts an all_reduce of 1 s timeout that rank 1 never posts and never polls
// its Work; 2 s later the group is unusable, quoting that op's timeout (the watchdog is woken
// only when the first op of an idle group is pending, not per op).
DIST_WORKER(nccl_watchdog_fails_an_unwatched_op) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank;
  Tensor t = on_gpu(scaled({1, 2}, r + 1, DType::kFloat32), pg);
  pg.all_reduce(t, ReduceOp::kSum)->wait();  // the communicator exists
  const std::string marker = ctx.outdir + "/nccl_watchdog_seen";
  if (r == 0) {
    std::this_thread::sleep_for(milliseconds(500));
    auto w = pg.all_reduce(t, ReduceOp::kSum, OpOptions{milliseconds(1000)});
    std::this_thread::sleep_for(milliseconds(2000));  // w is not polled meanwhile
    EXPECT_TRUE(throws_error([&] { pg.all_reduce(t, ReduceOp::kSum)->wait(); },
                             {"unusable after an earlier failure",
                              "nccl all_reduce #2 on group '0' (rank 0 of 2)", "timed out",
                              "did not complete within 1000 ms", "rank 1 (world rank 1)"}));
    EXPECT_TRUE(w->is_completed());
    EXPECT_FALSE(w->is_success());
    std::ofstream(marker) << "1";
  } else {
    await_marker(marker, "the watchdog's failure");
  }
}

// ---- the tests (parent side) ------------------------------------------------------------------

TEST(Nccl2Gpu, AllReduceEveryDtypeAndReduceOp) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_all_reduce");
  EXPECT_TRUE(r.ok()) << r.all_output();
}

// The same with the one-shot all_reduce off: every op through NCCL.
TEST(Nccl2Gpu, AllReduceEveryDtypeAndReduceOpThroughNccl) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_all_reduce", {{"ANVIL_NCCL_ONE_SHOT_BYTES", "0"}});
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2Gpu, AllGatherReduceScatterBroadcastAndCoalesced) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_gather_scatter_broadcast");
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2Gpu, AllToAllSingleWithSplits) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_all_to_all");
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2Gpu, SendRecvSubgroupsAndBadTensors) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_p2p_groups_and_bad_tensors");
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2Gpu, WaitStreamOrdersWithTheCallerStream) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_wait_stream_orders_with_caller_stream");
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2Gpu, BlockingWaitAndEagerInit) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_wait_stream_orders_with_caller_stream",
                              {{"ANVIL_NCCL_BLOCKING_WAIT", "1"}, {"ANVIL_NCCL_EAGER_INIT", "1"}});
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2Gpu, OpTimeoutWithALivePeerNamesTheOpAndThePeer) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_op_timeout", {}, milliseconds(90000));
  EXPECT_FALSE(r.timed_out) << r.all_output();
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2Gpu, DeadPeerFailsTheSurvivorWithinTheTimeout) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_dead_peer", {}, milliseconds(90000));
  EXPECT_FALSE(r.timed_out) << r.all_output();
  ASSERT_EQ(r.procs.size(), 2u) << r.all_output();
  EXPECT_EQ(r.procs[0].exit_code, 0) << r.all_output();
  EXPECT_TRUE(r.rank_confirmed[0]) << r.all_output();
  EXPECT_EQ(r.procs[1].exit_code, 0) << r.all_output();  // _exit(0) before the op
  EXPECT_NE(r.procs[0].output.find("survivor error after"), std::string::npos) << r.all_output();
}

// The same on the non-blocking communicator (ANVIL_NCCL_BLOCKING_COMM=0), through NCCL (the
// one-shot all_reduce off: the test above runs its small all_reduce on the one-shot kernel).
TEST(Nccl2Gpu, DeadPeerFailsTheSurvivorOnANonBlockingComm) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r =
      run_nccl_job("nccl_dead_peer",
                   {{"ANVIL_NCCL_BLOCKING_COMM", "0"}, {"ANVIL_NCCL_ONE_SHOT_BYTES", "0"}},
                   milliseconds(90000));
  EXPECT_FALSE(r.timed_out) << r.all_output();
  ASSERT_EQ(r.procs.size(), 2u) << r.all_output();
  EXPECT_EQ(r.procs[0].exit_code, 0) << r.all_output();
  EXPECT_NE(r.procs[0].output.find("survivor error after"), std::string::npos) << r.all_output();
}

TEST(Nccl2Gpu, DeadPeerBeforeTheFirstOpFailsTheSurvivor) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_dead_peer_before_first_op", {{"ANVIL_NCCL_EAGER_INIT", "1"}},
                              milliseconds(90000));
  EXPECT_FALSE(r.timed_out) << r.all_output();
  ASSERT_EQ(r.procs.size(), 2u) << r.all_output();
  EXPECT_EQ(r.procs[0].exit_code, 0) << r.all_output();
  EXPECT_TRUE(r.rank_confirmed[0]) << r.all_output();
  EXPECT_EQ(r.procs[1].exit_code, 0) << r.all_output();  // _exit(0) before any op
  EXPECT_NE(r.procs[0].output.find("survivor error after"), std::string::npos) << r.all_output();
}

TEST(Nccl2Gpu, OpEventsAreReusedFromAPoolOfSpares) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_event_pool_reuse");
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2Gpu, TheWatchdogFailsAnOpNobodyWaitsOn) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_watchdog_fails_an_unwatched_op", {}, milliseconds(90000));
  EXPECT_FALSE(r.timed_out) << r.all_output();
  EXPECT_TRUE(r.ok()) << r.all_output();
}

}  // namespace
}  // namespace anvil::dist::test
