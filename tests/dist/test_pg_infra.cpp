// Process-group infrastructure (spec process_group_and_gemm.md A.3; issue 15 item 3): the
// process-wide settings read once and validated at construction (cases 1-6), Work futures and
// their callbacks (cases 14, 48), the health check at construction (cases 10-12), the destructor
// draining pending ops in FIFO order and the per-op JSON trace (case 50). Settings and futures
// are also checked in this process (the pure parser; Work objects completed by hand); everything
// that reads the environment runs in real processes on 127.0.0.1 (gloo and mpi), since the
// settings are read once per process.
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "dist/fake_process_group.h"
#include "dist/nccl/one_shot_record.h"
#include "dist/registry.h"
#include "dist/settings.h"
#include "dist/trace.h"
#include "dist/world.h"
#include "dist_check.h"
#include "dist_harness.h"

namespace anvil::dist::test {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

DistSettings parse(const std::map<std::string, std::string>& env) {
  return parse_dist_settings([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

// ---- settings (cases 1-6) ---------------------------------------------------------------------

// Case 1: no variables set: futures on, health check and trace off, blocking set = {barrier}.
TEST(PgSettings, Case01_Defaults) {
  const DistSettings s = parse({});
  EXPECT_TRUE(s.use_future);
  EXPECT_FALSE(s.health_check);
  EXPECT_FALSE(s.trace);
  OpTypeSet barrier_only;
  barrier_only.insert(OpType::kBarrier);
  EXPECT_TRUE(s.blocking_wait == barrier_only) << s.blocking_wait.names();
  EXPECT_EQ(s.describe(),
            "ANVIL_DIST_USE_FUTURE=1 ANVIL_DIST_HEALTH_CHECK=0 ANVIL_DIST_TRACE=0 "
            "ANVIL_DIST_TRACE_DIR=/tmp/anvil_dist_trace ANVIL_NCCL_BLOCKING_WAIT=barrier "
            "ANVIL_NCCL_BLOCKING_COMM=1 ANVIL_NCCL_CALLER_STREAM_BYTES=65536 "
            "ANVIL_NCCL_ONE_SHOT_BYTES=8192");
}

// Cases 2-3: a trimmed, case-insensitive op list; "all" = every op type.
TEST(PgSettings, Case02_03_BlockingWaitList) {
  const DistSettings s = parse({{"ANVIL_NCCL_BLOCKING_WAIT", " All_Reduce , send "}});
  EXPECT_TRUE(s.blocking_wait.contains(OpType::kAllReduce));
  EXPECT_TRUE(s.blocking_wait.contains(OpType::kSend));
  EXPECT_TRUE(s.blocking_wait.contains(OpType::kBarrier));  // always
  EXPECT_FALSE(s.blocking_wait.contains(OpType::kBroadcast));
  EXPECT_FALSE(s.blocking_wait.contains(OpType::kRecv));
  EXPECT_EQ(s.blocking_wait.names(), "all_reduce, barrier, send");
  const DistSettings a = parse({{"ANVIL_NCCL_BLOCKING_WAIT", "ALL"}});
  const auto ops = all_op_types();
  EXPECT_GE(ops.size(), 11u);
  for (OpType op : ops) EXPECT_TRUE(a.blocking_wait.contains(op)) << op_type_name(op);
  EXPECT_TRUE(parse({{"ANVIL_NCCL_BLOCKING_WAIT", "1"}}).blocking_wait == a.blocking_wait);
  EXPECT_EQ(parse({{"ANVIL_NCCL_BLOCKING_WAIT", "none"}}).blocking_wait.names(), "barrier");
  // the list forms and the tensor forms are distinct ops
  const DistSettings lists = parse({{"ANVIL_NCCL_BLOCKING_WAIT", "all_gather,reduce_scatter"}});
  EXPECT_EQ(lists.blocking_wait.names(), "barrier, all_gather, reduce_scatter");
  const DistSettings tensors =
      parse({{"ANVIL_NCCL_BLOCKING_WAIT", "all_gather_into_tensor,reduce_scatter_tensor"}});
  EXPECT_EQ(tensors.blocking_wait.names(), "all_gather_into_tensor, reduce_scatter_tensor, barrier");
}

// Cases 4-5: a malformed value is an Error naming the variable, the value and what it accepts.
TEST(PgSettings, Case04_05_BadValuesNameTheVariable) {
  EXPECT_TRUE(throws_error(
      [] {
        parse({{"ANVIL_NCCL_BLOCKING_WAIT", "all_reduce,foo"}});
      },
      {"ANVIL_NCCL_BLOCKING_WAIT", "unknown op 'foo'", "'all_reduce,foo'",
       "none, all, or a comma list", "all_reduce"}));
  EXPECT_TRUE(throws_error(
      [] {
        parse({{"ANVIL_DIST_USE_FUTURE", "abc"}});
      },
      {"ANVIL_DIST_USE_FUTURE", "is not 0 or 1", "'abc'"}));
  EXPECT_TRUE(throws_error(
      [] {
        parse({{"ANVIL_DIST_HEALTH_CHECK", "2"}});
      },
      {"ANVIL_DIST_HEALTH_CHECK", "'2'"}));
  EXPECT_TRUE(throws_error([] { parse({{"ANVIL_NCCL_BLOCKING_COMM", "yes"}}); },
                           {"ANVIL_NCCL_BLOCKING_COMM", "is not 0 or 1", "'yes'"}));
  EXPECT_FALSE(parse({{"ANVIL_NCCL_BLOCKING_COMM", "0"}}).nccl_blocking_comm);
  EXPECT_TRUE(parse({}).nccl_blocking_comm);
  EXPECT_EQ(parse({{"ANVIL_NCCL_CALLER_STREAM_BYTES", "0"}}).nccl_caller_stream_bytes, 0);
  EXPECT_EQ(parse({{"ANVIL_NCCL_CALLER_STREAM_BYTES", "1048576"}}).nccl_caller_stream_bytes,
            1048576);
  for (const char* bad : {"-1", "64k", " 12", "1e3", "99999999999999999999"})
    EXPECT_TRUE(throws_error([&] { parse({{"ANVIL_NCCL_CALLER_STREAM_BYTES", bad}}); },
                             {"ANVIL_NCCL_CALLER_STREAM_BYTES", "not a byte count",
                              "a non-negative integer", str("'", bad, "'")}))
        << bad;
  EXPECT_EQ(parse({}).nccl_one_shot_bytes, 8192);
  EXPECT_EQ(parse({{"ANVIL_NCCL_ONE_SHOT_BYTES", "0"}}).nccl_one_shot_bytes, 0);
  EXPECT_EQ(parse({{"ANVIL_NCCL_ONE_SHOT_BYTES", "4096"}}).nccl_one_shot_bytes, 4096);
  for (const char* bad : {"-8", "32k", "x"})
    EXPECT_TRUE(throws_error([&] { parse({{"ANVIL_NCCL_ONE_SHOT_BYTES", bad}}); },
                             {"ANVIL_NCCL_ONE_SHOT_BYTES", "not a byte count",
                              str("'", bad, "'")}))
        << bad;
  EXPECT_TRUE(throws_error(
      [] {
        parse({{"ANVIL_DIST_TRACE", "yes"}});
      },
      {"ANVIL_DIST_TRACE", "'yes'"}));
  const DistSettings off = parse({{"ANVIL_DIST_USE_FUTURE", "0"},
                                  {"ANVIL_DIST_TRACE", "1"},
                                  {"ANVIL_DIST_TRACE_DIR", "/x/y"}});
  EXPECT_FALSE(off.use_future);
  EXPECT_TRUE(off.trace);
  EXPECT_EQ(off.trace_dir, "/x/y");
}

// Cases 4-5 in a real job: construction fails with the setting's Error, on every rank.
DIST_WORKER_NOINIT(bad_setting_fails_construction) {
  const std::string var =
      std::getenv("ANVIL_DIST_USE_FUTURE") ? "ANVIL_DIST_USE_FUTURE" : "ANVIL_NCCL_BLOCKING_WAIT";
  EXPECT_TRUE(throws_error([&] { init_world_from_env(ctx.backend); }, {var, "'"}));
  EXPECT_FALSE(world_initialized());
  EXPECT_TRUE(throws_error([&] { FakeProcessGroup pg(0, 2); }, {var}));
}

// Case 6: settings are read once: a group made after the environment changed (even to a bad
// value) uses the first read's values.
DIST_WORKER_NOINIT(settings_read_once) {
  auto pg1 = std::make_shared<FakeProcessGroup>(0, 2);
  ::setenv("ANVIL_DIST_USE_FUTURE", "0", 1);
  ::setenv("ANVIL_NCCL_BLOCKING_WAIT", "foo", 1);
  auto pg2 = std::make_shared<FakeProcessGroup>(0, 2);  // no Error: not read again
  EXPECT_TRUE(dist_settings().use_future);
  EXPECT_EQ(dist_settings().blocking_wait.names(), "barrier");
  Tensor t = Tensor::full({3}, 2, DType::kFloat32);
  auto w = pg2->all_reduce(t, ReduceOp::kSum);
  ASSERT_NE(w->get_future(), nullptr);  // futures still on
  w->wait();
  EXPECT_TRUE(same_memory(w->get_future()->value().at(0), t));
}

// ---- futures (cases 14, 48) -------------------------------------------------------------------

// A callback registered before completion and one registered after each run exactly once; the
// value is the op's output; the same Future every time.
TEST(PgFuture, CallbacksBeforeAndAfterCompletionRunOnce) {
  Work w(OpType::kAllReduce, 7, "test all_reduce #7");
  Tensor t = Tensor::full({4}, 3, DType::kFloat32);
  w.set_result({t});
  auto f = w.get_future();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(w.get_future(), f);
  EXPECT_FALSE(f->completed());
  int before = 0, after = 0;
  f->add_callback([&](Future& g) {
    ++before;
    EXPECT_EQ(&g, f.get());
    EXPECT_EQ(g.error(), nullptr);
  });
  EXPECT_EQ(before, 0);
  w.finish(nullptr);
  EXPECT_EQ(before, 1);
  EXPECT_TRUE(f->completed());
  f->add_callback([&](Future&) { ++after; });  // already complete: runs now
  EXPECT_EQ(after, 1);
  w.finish(nullptr);  // a second completion is ignored by the future
  EXPECT_EQ(before, 1);
  EXPECT_EQ(after, 1);
  const auto v = f->value();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(same_memory(v[0], t));
  EXPECT_TRUE(all_equal(v[0], 3));
}

// A failed op: callbacks see the error; value() and wait() rethrow it; a future taken after the
// failure holds it too. A throwing callback does not stop the others.
TEST(PgFuture, ErrorReachesCallbacksAndValue) {
  Work w(OpType::kBroadcast, 2, "test broadcast #2");
  auto f = w.get_future();
  std::string seen;
  f->add_callback([](Future&) { throw std::runtime_error("callback bug"); });
  f->add_callback([&](Future& g) { seen = message_of(g.error()); });
  w.finish(std::make_exception_ptr(Error("peer 1 went away", "test broadcast #2")));
  EXPECT_NE(seen.find("peer 1 went away"), std::string::npos) << seen;
  EXPECT_TRUE(throws_error([&] { f->value(); }, {"peer 1 went away"}));
  EXPECT_TRUE(throws_error([&] { f->wait(); }, {"peer 1 went away"}));
  Work late(OpType::kAllReduce, 3, "test all_reduce #3");
  late.finish(std::make_exception_ptr(Error("timed out", "x")));
  ASSERT_NE(late.get_future(), nullptr);
  EXPECT_TRUE(late.get_future()->completed());
  EXPECT_TRUE(throws_error([&] { late.get_future()->value(); }, {"timed out"}));
  Future pending("never completes");
  EXPECT_TRUE(throws_error([&] { pending.wait(milliseconds(20)); },
                           {"Future.wait timed out after 20 ms", "never completes"}));
}

// A device op's future completes with its host part (stream semantics), with the outputs.
TEST(PgFuture, DeviceOpCompletesAtItsHostPart) {
  struct NeverPasses : DeviceEvent {
    bool query() override { return false; }
    void synchronize() override {}
    void block_stream(void*) override {}
    std::string device() const override { return "cuda:0"; }
  };
  Work w(OpType::kAllReduce, 1, "test nccl all_reduce #1");
  Tensor t = Tensor::full({2}, 1, DType::kFloat32);
  w.set_result({t});
  auto f = w.get_future();
  int calls = 0;
  f->add_callback([&](Future&) { ++calls; });
  w.finish_on(std::make_shared<NeverPasses>());
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(w.is_completed());  // the device has not passed the event
  EXPECT_TRUE(same_memory(f->value().at(0), t));
}

// Case 14: fp32 [1000], rank r holds r + 1: all_reduce SUM; the Work is completed and
// successful, result() and the future's value are the reduced tensor; a callback registered
// before completion ran once.
DIST_WORKER(future_value) {
  const int W = ctx.world;
  Tensor t = Tensor::full({1000}, ctx.rank + 1, DType::kFloat32);
  if (ctx.rank == 0) std::this_thread::sleep_for(milliseconds(200));  // others register first
  auto w = ctx.pg->all_reduce(t, ReduceOp::kSum);
  auto f = w->get_future();
  ASSERT_NE(f, nullptr);
  std::promise<std::vector<Tensor>> seen;
  auto seen_f = seen.get_future();
  std::atomic<int> calls{0};
  f->add_callback([&](Future& g) {
    if (calls++ == 0) seen.set_value(g.value());
  });
  w->wait();
  EXPECT_TRUE(w->is_completed());
  EXPECT_TRUE(w->is_success());
  ASSERT_EQ(seen_f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const auto v = seen_f.get();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(same_memory(v[0], t));
  EXPECT_TRUE(all_equal(v[0], W * (W + 1) / 2.0));
  EXPECT_TRUE(same_memory(w->result().at(0), t));
  EXPECT_TRUE(same_memory(f->value().at(0), t));
  EXPECT_EQ(calls.load(), 1);
  // A barrier completes its future with no tensors.
  auto b = ctx.pg->barrier();
  EXPECT_TRUE(b->get_future()->value().empty());
}

// Case 48: ANVIL_DIST_USE_FUTURE=0: no future, wait still works.
DIST_WORKER(futures_off) {
  Tensor t = Tensor::full({16}, ctx.rank + 1, DType::kFloat32);
  auto w = ctx.pg->all_reduce(t, ReduceOp::kSum);
  EXPECT_EQ(w->get_future(), nullptr);
  w->wait();
  EXPECT_TRUE(all_equal(t, ctx.world * (ctx.world + 1) / 2.0));
}

// Case 47's future half: rank 1 skips an all_reduce; on rank 0 the op times out (500 ms), its
// future holds the error and a callback sees it; the trace records the op as failed and the wait
// as failed.
DIST_WORKER(future_holds_timeout) {
  if (ctx.rank != 0) {
    std::this_thread::sleep_for(milliseconds(1500));
    return;
  }
  Tensor x = Tensor::full({4}, 1, DType::kFloat32);
  auto w = ctx.pg->all_reduce(x, ReduceOp::kSum, OpOptions{milliseconds(500)});
  auto f = w->get_future();
  std::promise<std::string> seen;
  auto seen_f = seen.get_future();
  f->add_callback([&](Future& g) { seen.set_value(g.error() ? message_of(g.error()) : "none"); });
  EXPECT_TRUE(throws_error([&] { w->wait(); }, {"Timed out"}));
  EXPECT_TRUE(w->is_completed());
  EXPECT_FALSE(w->is_success());
  ASSERT_EQ(seen_f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_NE(seen_f.get().find("Timed out"), std::string::npos);
  EXPECT_TRUE(throws_error([&] { f->value(); }, {"Timed out"}));
  const auto j = nlohmann::json::parse(trace_json());
  int failed_ops = 0, failed_waits = 0;
  for (const auto& r : j) {
    if (r.at("seq") != w->seq() || r.at("group") != "0") continue;
    const bool failed = r.at("status") == "error" &&
                        r.at("error").get<std::string>().find("Timed out") != std::string::npos;
    (r.at("kind") == "op" ? failed_ops : failed_waits) += failed;
  }
  EXPECT_EQ(failed_ops, 1) << j.dump();
  EXPECT_EQ(failed_waits, 1) << j.dump();
}

// ---- health check (cases 10-12) ---------------------------------------------------------------

// GroupOptions::health_check turns it on for one group (here the fake backend, in this
// process): the verification barrier runs and the success line names the group.
TEST(PgHealthCheck, OptionRunsTheCheck) {
  GroupOptions o;
  o.health_check = true;
  for (int size : {1, 4}) {
    ::testing::internal::CaptureStderr();
    auto pg = create_process_group("fake", nullptr, 0, size, o);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(str("health check succeeded for fake group (rank 0 of ", size, ") on cpu")),
              std::string::npos)
        << err;
    EXPECT_EQ(pg->sequence_number(), size == 1 ? 0u : 1u);  // the barrier, with 4 ranks
  }
  ::testing::internal::CaptureStderr();
  create_process_group("fake", nullptr, 0, 4);  // off by default
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("health check"), std::string::npos);
}

// Case 10: on, every rank healthy: construction returns and says so; the group works.
DIST_WORKER(health_check_healthy) {
  EXPECT_TRUE(dist_settings().health_check);
  Tensor t = Tensor::full({2}, 1, DType::kFloat32);
  ctx.pg->all_reduce(t, ReduceOp::kSum)->wait();
  EXPECT_TRUE(all_equal(t, ctx.world));
}

// Case 11: on, one rank: nothing to communicate, construction returns at once.
DIST_WORKER_NOINIT(health_check_one_rank) {
  const auto t0 = Clock::now();
  auto pg = init_world_from_env(ctx.backend);
  EXPECT_LT(ms_since(t0), 5000);  // the group timeout is 30 s: no wait on anyone
  EXPECT_EQ(pg->size(), 1);
  EXPECT_EQ(pg->sequence_number(), 0u);  // not even the verification barrier
}

// Case 12: on, the last rank never starts: every present rank fails within the timeout (2 s)
// with an Error naming the missing rank.
DIST_WORKER_NOINIT(health_check_missing_rank) {
  const auto t0 = Clock::now();
  const std::string missing = std::to_string(ctx.world - 1);
  EXPECT_TRUE(
      throws_error([&] { init_world_from_env(ctx.backend); },
                   {"health check failed: rank " + missing + " of " + std::to_string(ctx.world) +
                        " never joined the group within 2000 ms",
                    "missing rank " + missing}));
  const int64_t ms = ms_since(t0);
  EXPECT_GE(ms, 1500);
  EXPECT_LT(ms, 6000);  // the timeout plus the report, not the store's or gloo's own wait
}

// ---- destruction and trace (case 50) ----------------------------------------------------------

/// The op records of `group` in a trace, by sequence number, and its wait records' sequence
/// numbers.
struct GroupTrace {
  std::map<uint64_t, nlohmann::json> ops;
  std::vector<uint64_t> waits;
};
GroupTrace read_trace(const std::string& path, const std::string& group) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "no trace file " << path;
  GroupTrace g;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << " is not valid JSON: " << e.what();
    return g;
  }
  EXPECT_TRUE(j.is_array());
  for (const auto& r : j) {
    if (r.at("group") != group) continue;
    if (r.at("kind") == "op")
      g.ops[r.at("seq").get<uint64_t>()] = r;
    else
      g.waits.push_back(r.at("seq").get<uint64_t>());
  }
  return g;
}

// Case 50: all_reduce A then B posted without waiting, then the group destroyed: the
// destructor drains both (B completes no earlier than A: their callbacks run in that order);
// sequence numbers rise by 1 per op; the trace file (ANVIL_DIST_TRACE=1) is a valid JSON array
// with the records of A and B, and of each wait once waited.
DIST_WORKER(destructor_drains_and_trace) {
  const int W = ctx.world;
  std::vector<int> all;
  for (int r = 0; r < W; ++r) all.push_back(r);
  auto g = new_group(all);
  ASSERT_NE(g, nullptr);
  const std::string name = g->name();
  GroupRegistry::instance().unregister(name);
  const uint64_t seq0 = g->sequence_number();
  Tensor a = Tensor::full({4}, ctx.rank + 1, DType::kFloat32);
  Tensor b = Tensor::full({2, 3}, 10 * (ctx.rank + 1), DType::kInt64);
  if (ctx.rank == W - 1) std::this_thread::sleep_for(milliseconds(300));  // others go first
  auto wa = g->all_reduce(a, ReduceOp::kSum);
  auto wb = g->all_reduce(b, ReduceOp::kSum);
  EXPECT_EQ(wa->seq(), seq0 + 1);
  EXPECT_EQ(wb->seq(), seq0 + 2);
  EXPECT_EQ(g->sequence_number(), seq0 + 2);
  std::mutex mu;
  std::vector<char> order;
  wa->get_future()->add_callback([&](Future&) {
    std::lock_guard<std::mutex> lk(mu);
    order.push_back('A');
  });
  wb->get_future()->add_callback([&](Future&) {
    std::lock_guard<std::mutex> lk(mu);
    order.push_back('B');
  });
  g.reset();  // the last owner: the destructor drains A and B
  EXPECT_TRUE(wa->is_completed());
  EXPECT_TRUE(wb->is_completed());
  EXPECT_TRUE(wa->is_success());
  EXPECT_TRUE(wb->is_success());
  {
    std::lock_guard<std::mutex> lk(mu);
    EXPECT_EQ(std::string(order.begin(), order.end()), "AB");
  }
  EXPECT_TRUE(all_equal(a, W * (W + 1) / 2.0));
  EXPECT_TRUE(all_equal(b, 10.0 * W * (W + 1) / 2.0));

  const std::string path = dist_settings().trace_dir + "/rank" + std::to_string(ctx.rank) + ".json";
  GroupTrace t = read_trace(path, name);  // written by the destructor
  ASSERT_EQ(t.ops.count(seq0 + 1), 1u) << path;
  ASSERT_EQ(t.ops.count(seq0 + 2), 1u) << path;
  const auto& ra = t.ops[seq0 + 1];
  const auto& rb = t.ops[seq0 + 2];
  EXPECT_EQ(ra.at("op"), "all_reduce");
  EXPECT_EQ(ra.at("backend"), ctx.backend);
  EXPECT_EQ(ra.at("rank"), ctx.rank);
  EXPECT_EQ(ra.at("size"), W);
  EXPECT_EQ(ra.at("dtype"), "f32");
  EXPECT_EQ(ra.at("in_sizes"), nlohmann::json::parse("[[4]]"));
  EXPECT_EQ(rb.at("dtype"), "i64");
  EXPECT_EQ(rb.at("out_sizes"), nlohmann::json::parse("[[2, 3]]"));
  for (const auto* r : {&ra, &rb}) {
    EXPECT_EQ(r->at("status"), "ok") << r->dump();
    ASSERT_TRUE(r->at("started_ns").is_number() && r->at("ended_ns").is_number()) << r->dump();
    EXPECT_LE(r->at("posted_ns").get<int64_t>(), r->at("started_ns").get<int64_t>());
    EXPECT_LE(r->at("started_ns").get<int64_t>(), r->at("ended_ns").get<int64_t>());
  }
  EXPECT_LE(ra.at("ended_ns").get<int64_t>(), rb.at("started_ns").get<int64_t>());  // FIFO
  EXPECT_TRUE(t.waits.empty());
  wa->wait();
  wb->wait();
  EXPECT_EQ(write_trace(), path);
  t = read_trace(path, name);
  EXPECT_EQ(t.waits, (std::vector<uint64_t>{seq0 + 1, seq0 + 2}));
}

// ---- the jobs ---------------------------------------------------------------------------------

class PgInfra : public ::testing::TestWithParam<DistParam> {};

std::string temp_dir() {
  char tmpl[] = "/tmp/anvil_pg_infra_XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  return d ? d : "/tmp";
}

TEST_P(PgInfra, Case04_BadBlockingWaitFailsConstruction) {
  JobOptions o;
  o.env["ANVIL_NCCL_BLOCKING_WAIT"] = "all_reduce,foo";
  EXPECT_DIST_JOB_OK("bad_setting_fails_construction", o);
}

TEST_P(PgInfra, Case05_BadUseFutureFailsConstruction) {
  JobOptions o;
  o.env["ANVIL_DIST_USE_FUTURE"] = "abc";
  EXPECT_DIST_JOB_OK("bad_setting_fails_construction", o);
}

// One gloo process is enough: nothing is communicated. With ANVIL_DIST_DEBUG=1 the settings
// are printed once, at the first read (case 1's env dump).
TEST(PgInfraGloo, Case06_SettingsReadOnce) {
  JobOptions o;
  o.env["ANVIL_DIST_DEBUG"] = "1";
  const auto r = run_job("gloo", 1, "settings_read_once", o);
  EXPECT_TRUE(r.ok()) << r.all_output();
  const std::string dump =
      "anvil dist: settings: ANVIL_DIST_USE_FUTURE=1 ANVIL_DIST_HEALTH_CHECK=0 ANVIL_DIST_TRACE=0";
  const size_t at = r.all_output().find(dump);
  EXPECT_NE(at, std::string::npos) << r.all_output();
  EXPECT_EQ(r.all_output().find(dump, at + 1), std::string::npos) << r.all_output();
}

TEST_P(PgInfra, Case14_FutureValueAndCallback) { EXPECT_DIST_JOB_OK("future_value"); }

TEST_P(PgInfra, Case48_FuturesOff) {
  JobOptions o;
  o.env["ANVIL_DIST_USE_FUTURE"] = "0";
  EXPECT_DIST_JOB_OK("futures_off", o);
}

TEST_P(PgInfra, Case10_HealthCheckHealthy) {
  const auto& p = GetParam();
  if (!backend_available(p.backend)) GTEST_SKIP() << p.backend << " backend not available";
  JobOptions o;
  o.env["ANVIL_DIST_HEALTH_CHECK"] = "1";
  const auto r = run_job(p.backend, p.world, "health_check_healthy", o);
  EXPECT_TRUE(r.ok()) << r.all_output();
  for (int rank = 0; rank < p.world; ++rank)
    EXPECT_NE(r.all_output().find(str("health check succeeded for ", p.backend, " group (rank ",
                                      rank, " of ", p.world, ")")),
              std::string::npos)
        << r.all_output();
}

TEST(PgInfraGloo, Case11_HealthCheckOneRank) {
  JobOptions o;
  o.env["ANVIL_DIST_HEALTH_CHECK"] = "1";
  const auto r = run_job("gloo", 1, "health_check_one_rank", o);
  EXPECT_TRUE(r.ok()) << r.all_output();
  EXPECT_NE(r.all_output().find("(one rank: nothing to check)"), std::string::npos)
      << r.all_output();
}

// gloo only: MPI cannot time out a blocking collective (its watchdog aborts the job).
TEST(PgInfraGloo, Case47_FutureHoldsTheTimeoutError) {
  JobOptions o;
  o.env["ANVIL_DIST_TRACE"] = "1";
  o.env["ANVIL_DIST_TRACE_DIR"] = temp_dir();
  const auto r = run_job("gloo", 2, "future_holds_timeout", o);
  EXPECT_TRUE(r.ok()) << r.all_output();
  std::filesystem::remove_all(o.env["ANVIL_DIST_TRACE_DIR"]);
}

// gloo only: mpirun starts every rank (there is no store rendezvous to miss).
TEST(PgInfraGloo, Case12_HealthCheckMissingRankFailsFast) {
  for (int world : {2, 4}) {
    JobOptions o;
    o.env["ANVIL_DIST_HEALTH_CHECK"] = "1";
    o.env["ANVIL_DIST_TIMEOUT"] = "2";
    o.start_ranks = world - 1;
    const auto r = run_job("gloo", world, "health_check_missing_rank", o);
    EXPECT_TRUE(r.ok()) << "world " << world << "\n" << r.all_output();
    EXPECT_EQ(r.procs.size(), static_cast<size_t>(world - 1));
  }
}

TEST_P(PgInfra, Case50_DestructorDrainsInOrderAndTraceIsJson) {
  JobOptions o;
  o.env["ANVIL_DIST_TRACE"] = "1";
  const std::string dir = temp_dir();
  o.env["ANVIL_DIST_TRACE_DIR"] = dir;
  EXPECT_DIST_JOB_OK("destructor_drains_and_trace", o);
  // Every rank's file (rewritten at exit, the world group's ops included) is a JSON array.
  const auto& p = GetParam();
  if (!backend_available(p.backend)) return;
  for (int rank = 0; rank < p.world; ++rank) {
    const std::string path = dir + "/rank" + std::to_string(rank) + ".json";
    std::ifstream f(path);
    ASSERT_TRUE(f.good()) << path;
    const auto j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(j.is_array()) << path;
    EXPECT_GE(j.size(), 4u) << path;  // A, B and their waits at least
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Backends, PgInfra,
                         ::testing::Values(DistParam{"gloo", 2}, DistParam{"gloo", 4},
                                           DistParam{"mpi", 2}, DistParam{"mpi", 3}),
                         param_name);

// The nccl one-shot all_reduce's connect record (dist/nccl/one_shot_record.h): a peer's record
// is accepted only on this host, from another process, with the same slot size; anything else
// (no buffer, a malformed record) keeps every rank on NCCL, with the reason.
TEST(PgSettings, OneShotRecordsAreCheckedBeforeMapping) {
  using namespace anvil::dist::nccl;
  const OneShotRecord here{"node7", "0a1b", 100, 8192};
  const std::string peer = format_one_shot_record({"node7", "ffee", 101, 8192});
  std::string handle;
  EXPECT_EQ(check_one_shot_record(peer, here, false, "rank 1", &handle), "");
  EXPECT_EQ(handle, "ffee");
  EXPECT_EQ(check_one_shot_record(format_one_shot_record(here), here, true, "rank 0", &handle), "");
  EXPECT_EQ(handle, "0a1b");
  auto why = [&](const std::string& rec) {
    return check_one_shot_record(rec, here, false, "rank 1", nullptr);
  };
  EXPECT_NE(why(format_one_shot_record({"node8", "ffee", 101, 8192})).find("another host (node8)"),
            std::string::npos);
  EXPECT_NE(why(format_one_shot_record({"node7", "ffee", 100, 8192})).find("in this process"),
            std::string::npos);
  EXPECT_NE(why(format_one_shot_record({"node7", "ffee", 101, 16384})).find("slots of 16384"),
            std::string::npos);
  for (const char* bad : {"", "node7 ffee 101", "node7 XYZ 101 8192", "node7 ffee 101 8192 x"})
    EXPECT_NE(why(bad).find("rank 1 has no peer-mappable buffer"), std::string::npos) << bad;
}

}  // namespace
}  // namespace anvil::dist::test
