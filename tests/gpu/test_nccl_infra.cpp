// Process-group infrastructure on the nccl backend, 2 GPUs (spec process_group_and_gemm.md A.3
// cases 2-3; futures, trace): ANVIL_NCCL_BLOCKING_WAIT's op list decides which Work::wait_stream
// blocks the host; a device op's future completes with its host part (stream semantics); the
// trace records nccl ops.
//
// How "blocks the host" is observed without kernels of our own: rank 0 posts its side 500 ms
// late. On rank 1 an op that needs rank 0's data (all_reduce, and broadcast from root 0) cannot
// complete before that, so after a blocking wait_stream the Work is complete and the wait took
// about 500 ms, and after a non-blocking one it returned at once with the Work still pending.
//
// Needs 2 GPUs: skips with fewer, unless ANVIL_REQUIRE_GPU=2 (then a failure).
#include <chrono>
#include <thread>

#include "../dist/dist_check.h"
#include "../dist/dist_harness.h"
#include "dist/settings.h"
#include "dist/trace.h"
#include "gpu_test_util.h"
#include "nccl_test_util.h"

namespace anvil::dist::test {
namespace {

using std::chrono::milliseconds;
using namespace anvil::nccl_test;
using Clock = std::chrono::steady_clock;

constexpr int kLateMs = 500;

/// Rank 0 posts `post` kLateMs late; rank 1 posts at once on its own stream and checks that
/// wait_stream blocked the host exactly when `op` is in the blocking-wait set. Both ranks then
/// wait() and return the Work.
std::shared_ptr<Work> late_root_op(
    ProcessGroup& pg, OpType op, const std::function<std::shared_ptr<Work>(const OpOptions&)>& post,
    void* stream) {
  pg.barrier()->wait();  // both ranks start together (barrier always blocks)
  OpOptions o;
  o.stream = stream;
  if (pg.rank() == 0) std::this_thread::sleep_for(milliseconds(kLateMs));
  auto w = post(o);
  if (pg.rank() == 1) {
    const auto t0 = Clock::now();
    w->wait_stream(stream);
    const auto ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    const bool done = w->is_completed();
    if (dist_settings().blocking_wait.contains(op)) {
      EXPECT_TRUE(done) << op_type_name(op) << ": a blocking wait_stream returned early";
      EXPECT_GE(ms, kLateMs / 2) << op_type_name(op);
    } else {
      EXPECT_FALSE(done) << op_type_name(op) << ": complete before rank 0 posted?";
      EXPECT_LT(ms, kLateMs / 2) << op_type_name(op) << ": a non-blocking wait_stream blocked";
    }
  }
  w->wait();
  EXPECT_TRUE(w->is_success());
  return w;
}

// Blocking-wait list (" All_Reduce , send ": case 2; "all": case 3), futures and the trace.
DIST_WORKER(nccl_blocking_wait_list) {
  ProcessGroup& pg = *ctx.pg;
  ASSERT_EQ(pg.backend_name(), "nccl");
  const int r = ctx.rank;
  const auto& api = runtime::device_backend(Device::Type::kCUDA);
  void* s = api.stream_create(r);
  ASSERT_NE(s, nullptr);
  const OpTypeSet& blocking = dist_settings().blocking_wait;
  EXPECT_TRUE(blocking.contains(OpType::kAllReduce));
  EXPECT_TRUE(blocking.contains(OpType::kBarrier));
  const bool all = blocking.contains(OpType::kBroadcast);
  EXPECT_EQ(all, blocking == OpTypeSet::all());

  Tensor t = on_gpu(scaled({1, 2, 3}, r + 1, DType::kFloat32), pg);
  auto w = late_root_op(
      pg, OpType::kAllReduce,
      [&](const OpOptions& o) { return pg.all_reduce(t, ReduceOp::kSum, o); }, s);
  EXPECT_TRUE(values_equal(on_host(t), {3, 6, 9}));
  // The future of a device op: complete, its value the reduced tensor.
  auto f = w->get_future();
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->completed());
  EXPECT_TRUE(same_memory(f->value().at(0), t));

  Tensor b = on_gpu(scaled({4, 5}, r + 1, DType::kFloat32), pg);
  late_root_op(
      pg, OpType::kBroadcast, [&](const OpOptions& o) { return pg.broadcast(b, 0, o); }, s);
  EXPECT_TRUE(values_equal(on_host(b), {4, 5}));

  // A callback on a device op's future runs once, with the outputs (at once here: the host part
  // is done when the op returns, so the future is complete when it is made).
  Tensor c = on_gpu(scaled({1}, r + 1, DType::kFloat32), pg);
  auto wc = pg.all_reduce(c, ReduceOp::kMax);
  std::atomic<int> calls{0};
  wc->get_future()->add_callback([&](Future& g) {
    ++calls;
    EXPECT_TRUE(same_memory(g.value().at(0), c));
  });
  wc->wait();
  wc->get_future()->wait();
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(values_equal(on_host(c), {2}));

  // ANVIL_DIST_TRACE=1: the nccl ops are recorded with their sequence numbers.
  const std::string json = trace_json();
  EXPECT_NE(json.find("\"backend\": \"nccl\""), std::string::npos) << json;
  EXPECT_NE(json.find(str("\"op\": \"broadcast\"")), std::string::npos) << json;
  EXPECT_NE(json.find("\"kind\": \"wait\""), std::string::npos) << json;
  pg.barrier()->wait();
  api.stream_destroy(r, s);
}

TEST(Nccl2GpuInfra, Case02_BlockingWaitList) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_blocking_wait_list",
                              {{"ANVIL_NCCL_BLOCKING_WAIT", " All_Reduce , send "},
                               {"ANVIL_DIST_TRACE", "1"},
                               {"ANVIL_DIST_TRACE_DIR", "/tmp/anvil_nccl_infra_trace"}});
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2GpuInfra, Case03_BlockingWaitAll) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_blocking_wait_list",
                              {{"ANVIL_NCCL_BLOCKING_WAIT", "all"},
                               {"ANVIL_DIST_TRACE", "1"},
                               {"ANVIL_DIST_TRACE_DIR", "/tmp/anvil_nccl_infra_trace"}});
  EXPECT_TRUE(r.ok()) << r.all_output();
}

// Case 10 on nccl: the health check's verification barrier runs through NCCL.
DIST_WORKER(nccl_health_check) {
  Tensor t = on_gpu(scaled({1, 2}, ctx.rank + 1, DType::kFloat32), *ctx.pg);
  ctx.pg->all_reduce(t, ReduceOp::kSum)->wait();
  EXPECT_TRUE(values_equal(on_host(t), {3, 6}));
}

TEST(Nccl2GpuInfra, Case10_HealthCheck) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_health_check", {{"ANVIL_DIST_HEALTH_CHECK", "1"}});
  EXPECT_TRUE(r.ok()) << r.all_output();
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_NE(r.all_output().find(str("health check succeeded for nccl group (rank ", rank,
                                      " of 2) on cuda:", rank)),
              std::string::npos)
        << r.all_output();
}

}  // namespace
}  // namespace anvil::dist::test
