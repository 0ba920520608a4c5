// The nccl backend's point-to-point lanes and barrier device choice on 2 GPUs (spec
// process_group_and_gemm.md A.3 cases 46 and 43), 2 real processes as in test_nccl.cpp.
//
// Case 46: ranks 0 and 1 send to each other and receive at the same time, every op posted before
// any wait, in each order (both send first, both receive first, one of each). The large message
// (64 MiB) is far beyond what NCCL buffers for a peer, so a send can only finish while its peer's
// receive runs: with one stream per group (send -> recv queued behind each other on both ranks)
// this deadlocks and the op times out. Also: p2p beside an unwaited collective, several messages
// in flight per direction (they match in posting order), ordering with the caller's stream, and
// a send whose peer never receives (a timeout naming the peer, never a hang).
//
// Case 43: barrier(device_ids = {d}) before the group used its GPU moves it to cuda:d (rank r
// picks cuda:1-r, so the two ranks keep distinct GPUs); its ops then run there, a tensor on the
// old GPU and a barrier on another GPU are multi-device errors naming both devices.
//
// Needs 2 GPUs: skips with fewer, unless ANVIL_REQUIRE_GPU=2 (then a failure).
#include <chrono>
#include <cstdint>
#include <fstream>
#include <thread>

#include "../dist/dist_check.h"
#include "../dist/dist_harness.h"
#include "dist/world.h"
#include "gpu_test_util.h"
#include "nccl_test_util.h"

namespace anvil::dist::test {
namespace {

using std::chrono::milliseconds;
using namespace anvil::nccl_test;

constexpr int64_t kBig = int64_t(1) << 24;  // i32 elements: 64 MiB per message
constexpr int64_t kSmall = 3;

/// The message rank `from` sends in round `round`: i32 values base + i (exact on the host).
int32_t base_of(int from, int round) { return 1000003 * (from + 1) + 7919 * round; }

/// A host i32 tensor of `n` elements base + i.
Tensor pattern(int64_t n, int32_t base) {
  Tensor t = Tensor::empty({n}, DType::kInt32);
  auto* p = static_cast<int32_t*>(t.data_ptr());
  for (int64_t i = 0; i < n; ++i) p[i] = base + static_cast<int32_t>(i);
  return t;
}

/// The elements of i32 tensor `t` that differ from base + step * i (0: the expected values).
int64_t mismatches(const Tensor& t, int32_t base, int32_t step = 1) {
  const Tensor h = on_host(t);
  const auto* p = static_cast<const int32_t*>(h.data_ptr());
  int64_t bad = 0;
  for (int64_t i = 0; i < h.numel(); ++i) bad += p[i] != base + step * static_cast<int32_t>(i);
  return bad;
}

// ---- case 46 -----------------------------------------------------------------------------------

DIST_WORKER(nccl_p2p_crossed) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank, peer = 1 - r;
  // A regression deadlocks: fail within 30 s instead of the group's 60.
  const OpOptions o{milliseconds(30000)};
  enum Order { kBothSendFirst, kBothRecvFirst, kMixed };
  int round = 0;
  for (Order order : {kBothSendFirst, kBothRecvFirst, kMixed}) {
    for (int64_t n : {kSmall, kBig}) {
      Tensor msg = on_gpu(pattern(n, base_of(r, round)), pg);
      Tensor got = on_gpu(Tensor::zeros({n}, DType::kInt32), pg);
      const bool send_first = order == kBothSendFirst || (order == kMixed && r == 0);
      std::shared_ptr<Work> s, v;
      if (send_first) {
        s = pg.send(msg, peer, 0, o);
        v = pg.recv(got, peer, 0, o);
      } else {
        v = pg.recv(got, peer, 0, o);
        s = pg.send(msg, peer, 0, o);
      }
      v->wait();
      s->wait();
      EXPECT_TRUE(s->is_success() && v->is_success()) << "order " << order << ", n " << n;
      EXPECT_EQ(v->source_rank(), peer);
      EXPECT_EQ(mismatches(got, base_of(peer, round)), 0)
          << "order " << order << ", " << n << " elements";
      ++round;
    }
  }
  // Two messages each way in flight, then a collective between them, all before any wait: the
  // messages of one direction match in posting order, the all_reduce runs beside them.
  Tensor a = on_gpu(pattern(kSmall, base_of(r, 100)), pg);
  Tensor b = on_gpu(pattern(kBig, base_of(r, 101)), pg);
  Tensor got_a = on_gpu(Tensor::zeros({kSmall}, DType::kInt32), pg);
  Tensor got_b = on_gpu(Tensor::zeros({kBig}, DType::kInt32), pg);
  Tensor sum = on_gpu(scaled({1, 2, 3}, r + 1, DType::kFloat32), pg);
  std::vector<std::shared_ptr<Work>> works = {
      pg.send(a, peer, 0, o), pg.send(b, peer, 0, o), pg.all_reduce(sum, ReduceOp::kSum, o),
      pg.recv(got_a, peer, 0, o), pg.recv(got_b, peer, 0, o)};
  for (auto& w : works) w->wait();
  EXPECT_EQ(mismatches(got_a, base_of(peer, 100)), 0);
  EXPECT_EQ(mismatches(got_b, base_of(peer, 101)), 0);
  EXPECT_TRUE(values_equal(on_host(sum), {3, 6, 9}));
  // Sequence numbers count p2p ops too: 12 crossed, 5 above.
  EXPECT_EQ(pg.sequence_number(), 17u);
  pg.barrier()->wait();
}

// The lanes start after the caller's stream and order it after them, as the group's stream
// does: an async copy into the message on stream s, send and recv ordered after s, the recv's
// wait_stream(s), an async copy back on s. A lane that did not wait for s sends zeros (or part
// of the copy); a recv whose Work did not order s copies back before the data arrived.
DIST_WORKER(nccl_p2p_caller_stream) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank, peer = 1 - r;
  const auto& api = runtime::device_backend(Device::Type::kCUDA);
  void* s = api.stream_create(r);
  ASSERT_NE(s, nullptr);
  const int64_t n = int64_t(1) << 22;  // 16 MiB of i32
  for (int round = 0; round < 3; ++round) {
    const Tensor src = pattern(n, base_of(r, round));
    Tensor back = Tensor::zeros({n}, DType::kInt32);
    Tensor msg = on_gpu(Tensor::zeros({n}, DType::kInt32), pg);
    Tensor got = on_gpu(Tensor::zeros({n}, DType::kInt32), pg);
    ASSERT_EQ(api.copy(r, msg.data_ptr(), src.data_ptr(), n * 4, ANVIL_COPY_HOST_TO_DEVICE, s), 0);
    OpOptions o;
    o.stream = s;
    auto sw = pg.send(msg, peer, 0, o);
    auto rw = pg.recv(got, peer, 0, o);
    rw->wait_stream(s);
    ASSERT_EQ(api.copy(r, back.data_ptr(), got.data_ptr(), n * 4, ANVIL_COPY_DEVICE_TO_HOST, s), 0);
    ASSERT_EQ(api.stream_synchronize(r, s), 0);
    EXPECT_EQ(mismatches(back, base_of(peer, round)), 0) << "round " << round;
    sw->wait();
    rw->wait();
  }
  api.stream_destroy(r, s);
}

// A receive whose peer never sends: rank 0's 64 MiB recv (2 s timeout) fails naming the op and
// rank 1, and the group is unusable; rank 1 waits for rank 0's verdict, then leaves. (A send with
// no receiver is no test of it: on 2 x H200 NCCL completed a 64 MiB send that nobody received.)
DIST_WORKER(nccl_p2p_timeout) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank, peer = 1 - r;
  Tensor msg = on_gpu(pattern(kSmall, base_of(r, 0)), pg);
  Tensor got = on_gpu(Tensor::zeros({kSmall}, DType::kInt32), pg);
  auto s = pg.send(msg, peer, 0);  // the lanes exist after this exchange
  pg.recv(got, peer, 0)->wait();
  s->wait();
  ASSERT_EQ(mismatches(got, base_of(peer, 0)), 0);
  const std::string marker = ctx.outdir + "/nccl_p2p_timeout_seen";
  if (r == 0) {
    // A receive with no matching send (a send alone may complete: NCCL can buffer it).
    Tensor big = on_gpu(Tensor::zeros({kBig}, DType::kInt32), pg);
    const auto start = std::chrono::steady_clock::now();
    auto w = pg.recv(big, 1, 0, OpOptions{milliseconds(2000)});
    EXPECT_TRUE(throws_error([&] { w->wait(); }, {"nccl recv #3 on group '0' (rank 0 of 2)",
                                                  "timed out", "rank 1 (world rank 1)"}));
    const auto took =
        std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(took, 20000) << "the failure took far longer than the op's 2 s timeout";
    EXPECT_FALSE(w->is_success());
    EXPECT_TRUE(
        throws_error([&] { pg.send(msg, 1)->wait(); }, {"unusable after an earlier failure"}));
    std::ofstream(marker) << "1";
  } else {
    for (int i = 0; i < 600 && !std::ifstream(marker).good(); ++i)
      std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(std::ifstream(marker).good()) << "rank 0 never reported its timeout";
  }
}

// ---- case 43 -----------------------------------------------------------------------------------

DIST_WORKER(nccl_barrier_device_ids) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank, other = 1 - r;
  ASSERT_EQ(pg.device(), Device::cuda(r));
  // Refused before posting: two ids, a negative id, a GPU this machine lacks.
  EXPECT_TRUE(throws_error(
      [&] {
        pg.barrier(std::vector<int>{0, 1});
      },
      {"at most one device id", "2"}));
  EXPECT_TRUE(throws_error([&] { pg.barrier(std::vector<int>{-1}); }, {"non-negative"}));
  const int n = gpu_count();
  EXPECT_TRUE(
      throws_error([&] { pg.barrier(std::vector<int>{n}); }, {str("cuda:", n, " does not exist")}));
  EXPECT_EQ(pg.sequence_number(), 0u);
  EXPECT_EQ(pg.device(), Device::cuda(r)) << "a refused barrier moved the group";

  // The barrier on cuda:other moves the group there (its communicator is made there).
  auto w = pg.barrier(std::vector<int>{other});
  w->wait();
  EXPECT_TRUE(w->is_success());
  EXPECT_EQ(pg.device(), Device::cuda(other));
  EXPECT_EQ(pg.sequence_number(), 1u);

  // An op on cuda:other ordered with a stream of cuda:other: the group's event is recorded on
  // that stream, which works only if the group's objects moved to that GPU.
  const auto& api = runtime::device_backend(Device::Type::kCUDA);
  void* s = api.stream_create(other);
  ASSERT_NE(s, nullptr);
  const int64_t count = int64_t(1) << 20;
  const Tensor src = pattern(count, base_of(r, 0));
  Tensor back = Tensor::zeros({count}, DType::kInt32);
  Tensor t = Tensor::zeros({count}, DType::kInt32).to(Device::cuda(other));
  ASSERT_EQ(api.copy(other, t.data_ptr(), src.data_ptr(), count * 4, ANVIL_COPY_HOST_TO_DEVICE, s),
            0);
  OpOptions o;
  o.stream = s;
  auto aw = pg.all_reduce(t, ReduceOp::kSum, o);
  aw->wait_stream(s);
  ASSERT_EQ(api.copy(other, back.data_ptr(), t.data_ptr(), count * 4, ANVIL_COPY_DEVICE_TO_HOST, s),
            0);
  ASSERT_EQ(api.stream_synchronize(other, s), 0);
  aw->wait();
  // the sum over ranks k of base_of(k, 0) + i
  EXPECT_EQ(mismatches(back, base_of(0, 0) + base_of(1, 0), 2), 0);
  api.stream_destroy(other, s);
  // p2p runs on the new GPU too
  Tensor msg = on_gpu(pattern(kSmall, base_of(r, 1)), pg);
  Tensor got = on_gpu(Tensor::zeros({kSmall}, DType::kInt32), pg);
  EXPECT_EQ(msg.device(), Device::cuda(other));
  auto sw = pg.send(msg, 1 - r);
  pg.recv(got, 1 - r)->wait();
  sw->wait();
  EXPECT_EQ(mismatches(got, base_of(1 - r, 1)), 0);

  // A later op on cuda:r, and a barrier on cuda:r: multi-device errors naming both GPUs.
  Tensor old = scaled({1, 2}, 1, DType::kFloat32).to(Device::cuda(r));
  EXPECT_TRUE(throws_error(
      [&] { pg.all_reduce(old, ReduceOp::kSum); },
      {str("is on cuda:", r), str("not on the group's device cuda:", other), "multi-device"}));
  EXPECT_TRUE(throws_error(
      [&] { pg.barrier(std::vector<int>{r}); },
      {str("already runs on cuda:", other), str("a barrier on cuda:", r), "multi-device"}));
  // A barrier on its own GPU, a plain one, and a sub-group (made on the group's GPU) still work.
  pg.barrier(std::vector<int>{other})->wait();
  pg.barrier()->wait();
  auto both = new_group({0, 1});
  ASSERT_NE(both, nullptr);
  EXPECT_EQ(both->device(), Device::cuda(other));
  Tensor sub = on_gpu(scaled({1, 2}, r + 1, DType::kFloat32), *both);
  both->all_reduce(sub, ReduceOp::kMax)->wait();
  EXPECT_TRUE(values_equal(on_host(sub), {2, 4}));
  // barrier, all_reduce, send, recv, two barriers (the refused calls took no number)
  EXPECT_EQ(pg.sequence_number(), 6u);
}

// ---- the tests (parent side) ------------------------------------------------------------------

TEST(Nccl2Gpu, Case46_CrossedSendRecvCompleteInEitherOrder) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_p2p_crossed");
  EXPECT_FALSE(r.timed_out) << r.all_output();
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2Gpu, Case46_P2pLanesOrderWithTheCallerStream) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_p2p_caller_stream");
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2Gpu, P2pTimeoutNamesTheOpAndThePeer) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_p2p_timeout", {}, milliseconds(90000));
  EXPECT_FALSE(r.timed_out) << r.all_output();
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2Gpu, Case43_BarrierOnAChosenGpuBindsTheGroup) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_barrier_device_ids");
  EXPECT_TRUE(r.ok()) << r.all_output();
}

}  // namespace
}  // namespace anvil::dist::test
