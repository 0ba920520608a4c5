// Error cases (issue 5 acceptance; spec A and spec/collectives.md §5): bad arguments raised
// before anything is posted, mismatched sizes across ranks, a rank that never arrives (store
// timeout), a rank killed mid-collective, per-op timeouts. On gloo every surviving rank gets an
// Error; on MPI, which cannot time out a blocking call, the job ends non-zero (mpirun or the
// watchdog's MPI_Abort). Every job is bounded by the harness deadline.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "dist/functional.h"
#include "dist/world.h"
#include "dist_check.h"
#include "dist_harness.h"

namespace anvil::dist::test {
namespace {

namespace F = ::anvil::dist::functional;
using std::chrono::milliseconds;

// Argument errors are raised on the caller's thread before anything is posted: afterwards the
// ranks' queues are still aligned and a valid op works.
DIST_WORKER(bad_arguments) {
  const int W = ctx.world;
  ProcessGroup& pg = *ctx.pg;
  Tensor x = Tensor::full({W, 2}, 1, DType::kFloat32);
  Tensor out = Tensor::zeros({W, 2}, DType::kFloat32);
  std::vector<int64_t> ones(W, 1);
  auto bad = ones;
  bad[0] = 2;
  EXPECT_TRUE(throws_error([&] { pg.all_to_all_single(out, x, ones, bad); },
                           {"input split sizes don't match total dim 0 size", "sum", "got"}));
  EXPECT_TRUE(throws_error([&] { pg.all_to_all_single(out, x, {1}, ones); },
                           {"number of output split sizes not equal to group size"}));
  auto neg = ones;
  neg[0] = -1;
  neg[W - 1] += 2;
  EXPECT_TRUE(throws_error([&] { pg.all_to_all_single(out, x, ones, neg); }, {"is negative"}));
  Tensor odd = Tensor::full({W + 1, 2}, 1, DType::kFloat32);
  Tensor odd_out = Tensor::zeros({W + 1, 2}, DType::kFloat32);
  EXPECT_TRUE(throws_error([&] { pg.all_to_all_single(odd_out, odd, {}, {}); },
                           {"does not divide equally across group size"}));
  Tensor rs_out = Tensor::zeros({1, 2}, DType::kFloat32);
  EXPECT_TRUE(throws_error([&] { pg.reduce_scatter_tensor(rs_out, odd, ReduceOp::kSum); },
                           {"is not divisible by the group size"}));
  Tensor wrong = Tensor::zeros({W, 3}, DType::kFloat32);
  EXPECT_TRUE(throws_error([&] { pg.all_gather_into_tensor(wrong, x); },
                           {"output tensor of all_gather has the wrong shape"}));
  Tensor wrong_dt = Tensor::zeros({W * W, 2}, DType::kFloat64);
  EXPECT_TRUE(
      throws_error([&] { pg.all_gather_into_tensor(wrong_dt, x); }, {"output dtype differs"}));
  Tensor xi = Tensor::full({3}, 1, DType::kInt64);
  EXPECT_TRUE(throws_error([&] { pg.all_reduce(xi, ReduceOp::kAvg); }, {"avg needs a floating"}));
  EXPECT_TRUE(throws_error([&] { pg.all_reduce(x, ReduceOp::kBxor); },
                           {"bxor needs an integer or bool tensor"}));
  Tensor xb = Tensor::full({3}, 1, DType::kBool);
  EXPECT_TRUE(throws_error([&] { pg.all_reduce(xb, ReduceOp::kAvg); },
                           {"Cannot use ReduceOp.AVG with boolean inputs"}));
  Tensor xc = Tensor::zeros({3}, DType::kComplex64);
  EXPECT_TRUE(throws_error([&] { pg.all_reduce(xc, ReduceOp::kSum); },
                           {"not supported data type for collectives"}));
  EXPECT_TRUE(throws_error([&] { F::all_reduce(x, "premul_sum", "0"); },
                           {"unknown reduce op 'premul_sum'", "sum, avg, product"}));
  EXPECT_TRUE(throws_error([&] { F::all_gather_into_tensor(x, W + 1, "0"); },
                           {"group_size argument does not match the group"}));
  EXPECT_TRUE(throws_error([&] { F::permute_tensor(x, std::vector<int64_t>(W, 0), "0"); },
                           {"not a permutation"}));
  EXPECT_TRUE(throws_error([&] { pg.broadcast(x, -1); }, {"src rank -1 is outside the group"}));
  EXPECT_TRUE(throws_error([&] { pg.all_reduce(x, ReduceOp::kSum, OpOptions{milliseconds(-5)}); },
                           {"op timeout must not be negative"}));
  Tensor undefined;
  EXPECT_TRUE(throws_error([&] { pg.all_reduce(undefined, ReduceOp::kSum); }, {"undefined"}));
  // Nothing was posted: the next collective pairs up on every rank.
  Tensor y = Tensor::full({2}, ctx.rank, DType::kFloat32);
  pg.all_reduce(y, ReduceOp::kSum)->wait();
  EXPECT_TRUE(all_equal(y, W * (W - 1) / 2.0));
}

// Mismatched sizes across ranks without the consistency check (with it, see
// Ops.ConsistencyCheckNamesTheRanks: every rank gets a clean Error). gloo: a rank that receives a
// larger message than it posted is aborted by gloo's own network thread ("op.preamble.length <=
// op.nbytes", as in torch), and every surviving rank gets an Error (lost peer or op timeout),
// after which its group is unusable. mpi: undefined; the job must end within the deadline.
DIST_WORKER(mismatched_sizes) {
  Tensor x = Tensor::full({ctx.rank == 0 ? 1000 : 2000}, 1, DType::kFloat32);
  auto w = ctx.pg->all_reduce(x, ReduceOp::kSum);
  bool failed = false;
  try {
    w->wait();
  } catch (const std::exception& e) {
    failed = true;
    std::printf("rank %d: mismatch error: %s\n", ctx.rank, e.what());
  }
  if (ctx.backend == "gloo") {
    EXPECT_TRUE(failed);
    Tensor y = Tensor::full({2}, 1, DType::kFloat32);
    EXPECT_TRUE(throws_error([&] { ctx.pg->all_reduce(y, ReduceOp::kSum)->wait(); },
                             {"the group is unusable after an earlier failure"}));
  }
}

// A rank that hangs (sleeps past its job's deadline), for the harness's own test.
DIST_WORKER_NOINIT(hangs) { std::this_thread::sleep_for(std::chrono::seconds(60)); }

// A rank that never arrives: world W, only W-1 ranks started -> init fails on every started
// rank with the store timeout naming the key and the timeout.
DIST_WORKER_NOINIT(never_arrives) {
  EXPECT_TRUE(throws_error([&] { init_world_from_env("gloo"); },
                           {"timed out after 2000 ms waiting for key(s)", "anvil/world/"}));
}

// A rank killed in the middle of a collective: the last rank kills itself while a large
// all_reduce is in flight. gloo: every survivor gets an Error (lost peer or op timeout).
DIST_WORKER(killed_mid_collective) {
  const int victim = ctx.world - 1;
  Tensor x = Tensor::full({1 << 22}, 1, DType::kFloat32);  // 16 MiB: takes a while
  ctx.pg->barrier()->wait();
  if (ctx.rank == victim) {
    std::thread([] {
      std::this_thread::sleep_for(milliseconds(20));
      raise(SIGKILL);
    }).detach();
  }
  bool failed = false;
  try {
    for (int i = 0; i < 50; ++i) ctx.pg->all_reduce(x, ReduceOp::kSum)->wait();
  } catch (const std::exception& e) {
    failed = true;
    std::printf("rank %d: survivor error: %s\n", ctx.rank, e.what());
  }
  EXPECT_TRUE(failed) << "rank " << ctx.rank << " saw no error";
}

// A per-op timeout: rank 0 posts an all_reduce with a 500 ms timeout that no other rank joins.
// gloo: it fails with a timeout Error and the group is unusable afterwards. mpi: the watchdog
// aborts the job.
DIST_WORKER(op_timeout) {
  if (ctx.rank == 0) {
    Tensor x = Tensor::full({4}, 1, DType::kFloat32);
    auto w = ctx.pg->all_reduce(x, ReduceOp::kSum, OpOptions{milliseconds(500)});
    EXPECT_TRUE(throws_error([&] { w->wait(); }, {"Timed out"}));
    if (ctx.backend == "gloo") {  // every peer stayed away, and the error names them all
      try {
        w->wait();
      } catch (const std::exception& e) {
        for (int r = 1; r < ctx.world; ++r)
          EXPECT_TRUE(names_silent_rank(e.what(), r)) << "rank " << r << ": " << e.what();
      }
    }
    EXPECT_TRUE(w->is_completed());
    EXPECT_FALSE(w->is_success());
    EXPECT_NE(w->exception(), nullptr);
    EXPECT_TRUE(throws_error([&] { ctx.pg->all_reduce(x, ReduceOp::kSum)->wait(); },
                             {"unusable after an earlier failure", "Timed out"}));
  } else {
    std::this_thread::sleep_for(milliseconds(ctx.backend == "gloo" ? 1500 : 30000));
  }
}

class Errors : public ::testing::TestWithParam<DistParam> {
 protected:
  void SetUp() override {
    if (!backend_available(GetParam().backend)) GTEST_SKIP() << "backend not available";
  }
};

TEST_P(Errors, BadArgumentsRaisedBeforePosting) { EXPECT_DIST_JOB_OK("bad_arguments"); }

TEST_P(Errors, MismatchedSizesAcrossRanks) {
  const auto& p = GetParam();
  JobOptions o;
  o.env["ANVIL_DIST_TIMEOUT"] = "3";
  const auto r = run_job(p.backend, p.world, "mismatched_sizes", o);
  const std::string out = r.all_output();
  EXPECT_FALSE(r.timed_out) << out;
  if (p.backend == "gloo") {
    int survivors = 0;
    for (const auto& proc : r.procs) {
      if (proc.signal == SIGABRT) {
        EXPECT_NE(proc.output.find("op.preamble.length <= op.nbytes"), std::string::npos) << out;
      } else {
        EXPECT_EQ(proc.exit_code, 0) << out;  // it saw the Error (asserted in the worker)
        EXPECT_NE(proc.output.find("mismatch error: "), std::string::npos) << out;
        ++survivors;
      }
    }
    EXPECT_GE(survivors, 1) << out;
    for (size_t i = 0; i < r.procs.size(); ++i)
      if (r.procs[i].signal == 0) {
        EXPECT_TRUE(r.rank_confirmed[i]) << "rank " << i << "\n" << out;
      }
  } else {
    // Open MPI: a rank gets an Error from MPI, or the watchdog names the op that never
    // completed and aborts the job; either way the text says which.
    EXPECT_TRUE(out.find("mismatch error: ") != std::string::npos ||
                (out.find("mpi all_reduce on group '0'") != std::string::npos &&
                 out.find("did not complete within 3000 ms") != std::string::npos))
        << out;
    EXPECT_FALSE(r.ok()) << out;
  }
}

TEST(Harness, DeadlineKillsTheJobAndSaysWhatWasStillRunning) {
  // Every dist test relies on this bound; the description is what a one-off hang in CI leaves.
  JobOptions o;
  o.deadline = milliseconds(1500);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_job("gloo", 1, "hangs", o);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_TRUE(r.timed_out);
  ASSERT_EQ(r.procs.size(), 1u);
  EXPECT_EQ(r.procs[0].signal, SIGKILL);
  const std::string out = r.all_output();
  EXPECT_NE(out.find("*** deadline: processes of this job still running ***"), std::string::npos)
      << out;
  EXPECT_NE(out.find("wchan"), std::string::npos) << out;
  EXPECT_NE(out.find("DistWorker.Run"), std::string::npos) << out;  // the rank's command line
}

TEST(Harness, EndsAnMpirunLeftAloneWithItsExitedRanks) {
  // Open MPI's launcher was seen (under load, after MPI_Abort) never reaping its exited ranks.
  // A stand-in `mpirun` does the same: it starts two "ranks" that exit 3 after it sleeps as
  // `mpirun` without waiting for them. The job must end well before its deadline, as failed.
  const std::string dir = ::testing::TempDir() + "fake_mpirun_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir + "/mpirun");
    f << "#!/bin/bash\n(sleep 0.5; exit 3) &\n(sleep 0.5; exit 3) &\nexec -a mpirun sleep 120\n";
  }
  std::filesystem::permissions(dir + "/mpirun", std::filesystem::perms::owner_all);
  JobOptions o;
  o.deadline = milliseconds(60000);
  o.mpirun_prefix = {"env", "PATH=" + dir + ":" + std::getenv("PATH")};
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_job("mpi", 2, "hangs", o);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(40));
  const std::string out = r.all_output();
  EXPECT_FALSE(r.timed_out) << out;
  ASSERT_EQ(r.procs.size(), 1u);
  EXPECT_EQ(r.procs[0].exit_code, 1) << out;  // a rank exited 3
  EXPECT_FALSE(r.ok()) << out;
  EXPECT_NE(out.find("mpirun did not exit after its ranks"), std::string::npos) << out;
  EXPECT_NE(out.find("state Z"), std::string::npos) << out;  // the ranks it left unreaped
  std::filesystem::remove_all(dir);
}

TEST_P(Errors, RankThatNeverArrivesTimesOutInTheStore) {
  const auto& p = GetParam();
  if (p.backend != "gloo") GTEST_SKIP() << "mpirun starts every rank (no store rendezvous)";
  JobOptions o;
  o.env["ANVIL_DIST_TIMEOUT"] = "2";
  o.start_ranks = p.world - 1;
  const auto r = run_job(p.backend, p.world, "never_arrives", o);
  EXPECT_TRUE(r.ok()) << r.all_output();
  EXPECT_EQ(r.procs.size(), static_cast<size_t>(p.world - 1));
}

TEST_P(Errors, RankKilledMidCollective) {
  const auto& p = GetParam();
  JobOptions o;
  o.env["ANVIL_DIST_TIMEOUT"] = "5";
  o.deadline = milliseconds(60000);
  const auto r = run_job(p.backend, p.world, "killed_mid_collective", o);
  EXPECT_FALSE(r.timed_out) << r.all_output();
  if (p.backend == "gloo") {
    ASSERT_EQ(r.procs.size(), static_cast<size_t>(p.world));
    EXPECT_EQ(r.procs.back().signal, SIGKILL) << r.all_output();
    for (int i = 0; i + 1 < p.world; ++i) {
      EXPECT_EQ(r.procs[i].exit_code, 0) << "survivor " << i << "\n" << r.all_output();
      EXPECT_TRUE(r.rank_confirmed[i]) << "survivor " << i << "\n" << r.all_output();
      EXPECT_NE(r.procs[i].output.find("survivor error: "), std::string::npos) << r.all_output();
    }
    // The failure diagnosis names the victim among the peers that went silent. A survivor that
    // was waiting on another survivor fails only when that one exits (and with rank 0 gone, its
    // store is gone too), so not every survivor can; the first ones to fail do.
    int naming = 0;
    for (int i = 0; i + 1 < p.world; ++i)
      naming += names_silent_rank(r.procs[i].output, p.world - 1);
    EXPECT_GE(naming, 1) << "no survivor named rank " << p.world - 1 << "\n" << r.all_output();
  } else {
    EXPECT_NE(r.procs[0].exit_code, 0) << r.all_output();  // mpirun ends the job
    EXPECT_NE(r.all_output().find("rank " + std::to_string(p.world - 1) +
                                  " with PID"), std::string::npos) << r.all_output();
    EXPECT_NE(r.all_output().find("exited on signal 9"), std::string::npos) << r.all_output();
  }
}

TEST_P(Errors, PerOpTimeout) {
  const auto& p = GetParam();
  const auto r = run_job(p.backend, p.world, "op_timeout");
  EXPECT_FALSE(r.timed_out) << r.all_output();
  if (p.backend == "gloo") {
    EXPECT_TRUE(r.ok()) << r.all_output();
  } else {
    EXPECT_NE(r.procs[0].exit_code, 0) << r.all_output();
    EXPECT_NE(r.all_output().find("did not complete within 500 ms"), std::string::npos)
        << r.all_output();
    // MPI cannot say which peer is silent: the watchdog names those the op waits on
    EXPECT_NE(r.all_output().find(p.world == 2 ? "(waiting on rank 1 (world rank 1))"
                                               : "(waiting on ranks 1, 2"),
              std::string::npos)
        << r.all_output();
  }
}

INSTANTIATE_TEST_SUITE_P(Dist, Errors, ::testing::ValuesIn(all_params()), param_name);

// Joining without a launcher environment names what is missing.
TEST(DistInit, NoLauncherEnvironmentIsAClearError) {
  for (const char* v : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (std::getenv(v)) GTEST_SKIP() << "running under a launcher";
  EXPECT_TRUE(throws_error([] { read_world_env(); },
                           {"not started by a launcher", "RANK and WORLD_SIZE", "mpirun"}));
  EXPECT_TRUE(throws_error([] { init_world_from_env("gloo"); }, {"not started by a launcher"}));
#ifdef ANVIL_HAVE_NCCL  // built: the backend asks for its rendezvous store (test_nccl_cpu.cpp)
  EXPECT_TRUE(throws_error([] { create_process_group("nccl", nullptr, 0, 1); },
                           {"the nccl backend needs a rendezvous store"}));
#else
  EXPECT_TRUE(throws_error([] { create_process_group("nccl", nullptr, 0, 1); },
                           {"backend 'nccl' is not built into this anvil"}));
#endif
  EXPECT_TRUE(throws_error([] { create_process_group("ucc2", nullptr, 0, 1); },
                           {"unknown backend 'ucc2'", "fake"}));
}

// torchrun's agent hosts torch's store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), so
// anvil's store moves to the next port, or to ANVIL_STORE_PORT when set.
TEST(DistInit, StorePortUnderTorchrunsAgentStore) {
  for (const char* v : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (std::getenv(v)) GTEST_SKIP() << "running under a launcher";
  auto set = [](const char* name, const char* value) {
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  };
  set("RANK", "0");
  set("WORLD_SIZE", "2");
  set("MASTER_PORT", "29510");
  set("TORCHELASTIC_USE_AGENT_STORE", nullptr);
  set("ANVIL_STORE_PORT", nullptr);
  EXPECT_EQ(read_world_env().store_port, 29510);  // anvil launch: the store on MASTER_PORT
  set("TORCHELASTIC_USE_AGENT_STORE", "True");
  EXPECT_EQ(read_world_env().store_port, 29511);
  EXPECT_EQ(read_world_env().master_port, 29510);
  set("ANVIL_STORE_PORT", "31000");
  EXPECT_EQ(read_world_env().store_port, 31000);
  set("ANVIL_STORE_PORT", "x");
  EXPECT_TRUE(throws_error([] { read_world_env(); }, {"ANVIL_STORE_PORT", "'x'"}));
  for (const char* v :
       {"RANK", "WORLD_SIZE", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE", "ANVIL_STORE_PORT"})
    set(v, nullptr);
}

}  // namespace
}  // namespace anvil::dist::test
