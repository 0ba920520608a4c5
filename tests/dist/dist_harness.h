// Harness of the dist tests: real processes on 127.0.0.1.
//
// Parent side: run_job() re-executes this test binary as the ranks of a job. For gloo it forks
// one process per rank with the torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR, a free
// MASTER_PORT); for mpi it runs `mpirun -n W --oversubscribe` (root-allowed). Each rank runs the
// gtest DistWorker.Run, which looks up the worker named by ANVIL_DIST_WORKER and runs it. Every
// job is bounded by a deadline after which all its processes are killed, so nothing hangs.
//
// Worker side: DIST_WORKER(name) { ... } defines a worker; it gets a WorkerCtx with the world
// group already joined (unless declared with DIST_WORKER_NOINIT) and may use gtest assertions.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"

namespace anvil::dist::test {

/// What a worker gets.
struct WorkerCtx {
  int rank = 0;
  int world = 1;
  std::string backend;
  std::shared_ptr<ProcessGroup> pg;  // the world group ("0"); null for NOINIT workers
  std::string outdir;                // a directory shared by the job's ranks
};

using WorkerFn = void (*)(WorkerCtx&);
/// Registers a worker (used by the DIST_WORKER macros).
bool register_worker(const char* name, WorkerFn fn, bool init_world);

/// One finished (or killed) process of a job.
struct ProcResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string output;  // its stdout + stderr
};

/// A finished job.
struct JobResult {
  std::vector<ProcResult> procs;  // gloo: one per started rank; mpi: one (mpirun)
  bool timed_out = false;
  std::string worker;      // the worker the ranks were to run
  int world = 0;           // ranks that were started to run it
  int confirmed = 0;       // ranks whose worker ran to its end with no failure (their markers)
  std::vector<bool> rank_confirmed;  // by rank

  /// Every process's output, each block headed by its name.
  std::string all_output() const;
  /// True when every process exited with 0, nothing timed out, and every rank confirmed that
  /// it ran the worker (an exit code of 0 alone also comes from a rank that ran no test).
  bool ok() const;
};

/// The number of ranks that left the marker of worker `name` in `outdir` (DistWorker.Run
/// writes it when the worker returns with no failure and no skip).
int workers_confirmed(const std::string& outdir, const std::string& name);
/// Whether rank `rank` left that marker.
bool worker_confirmed(const std::string& outdir, const std::string& name, int rank);

/// A job's processes as they run, for a JobOptions::during callback.
struct JobRunning {
  std::string outdir;       // the job's shared directory (the ranks' markers appear there)
  std::vector<pid_t> pids;  // gloo: the ranks; mpi: mpirun
};

/// Options of a job.
struct JobOptions {
  std::map<std::string, std::string> env;  // extra environment for every rank
  std::chrono::milliseconds deadline{60000};
  int start_ranks = -1;  // gloo: start only ranks [0, start_ranks)
  /// Words put before each rank's command line (e.g. `ip netns exec NS`): gloo execs them,
  /// mpi starts each rank as its own app context (`mpirun -n 1 PREFIX... exe : -n 1 ...`).
  std::function<std::vector<std::string>(int rank)> rank_prefix;
  std::vector<std::string> mpirun_prefix;  // words before `mpirun` (e.g. `ip netns exec HUB`)
  std::vector<std::string> mpirun_args;    // extra mpirun arguments (e.g. `--mca btl tcp,self`)
  std::string master_addr = "127.0.0.1";   // gloo: MASTER_ADDR of every rank
  /// Called on a thread of its own once every process started, while the job runs (e.g. to
  /// inject a fault); run_job joins it before returning, so it must end by itself.
  std::function<void(const JobRunning&)> during;
};

/// Runs worker `name` on `world` ranks with `backend` ("gloo" or "mpi").
JobResult run_job(const std::string& backend, int world, const std::string& name,
                  const JobOptions& opts = {});
/// Runs `argv` (a whole command line) with extra env, bounded by `deadline`.
ProcResult run_command(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env,
                       std::chrono::milliseconds deadline, bool* timed_out = nullptr);
/// Path of this test binary.
std::string self_exe();
/// True when `backend` is compiled in (and, for mpi, mpirun is on PATH).
bool backend_available(const std::string& backend);

/// gtest parameter: (backend, world size).
struct DistParam {
  std::string backend;
  int world;
};
std::string param_name(const testing::TestParamInfo<DistParam>& info);
/// Prints "gloo x 2" in gtest messages.
inline void PrintTo(const DistParam& p, std::ostream* os) { *os << p.backend << " x " << p.world; }
/// gloo and mpi with 2, 3 and 4 ranks.
std::vector<DistParam> all_params();

}  // namespace anvil::dist::test

#define DIST_WORKER_IMPL_(name, init)                                         \
  static void dist_worker_##name(::anvil::dist::test::WorkerCtx& ctx);        \
  [[maybe_unused]] static const bool dist_worker_reg_##name =                 \
      ::anvil::dist::test::register_worker(#name, &dist_worker_##name, init); \
  static void dist_worker_##name([[maybe_unused]] ::anvil::dist::test::WorkerCtx& ctx)

/// A worker that runs with the world group joined (ctx.pg).
#define DIST_WORKER(name) DIST_WORKER_IMPL_(name, true)
/// A worker that joins (or fails to join) the world itself.
#define DIST_WORKER_NOINIT(name) DIST_WORKER_IMPL_(name, false)

/// Runs worker `name` on the test's (backend, world) and expects success.
#define EXPECT_DIST_JOB_OK(name, ...)                                                        \
  do {                                                                                       \
    const auto& p_ = GetParam();                                                             \
    if (!::anvil::dist::test::backend_available(p_.backend))                                 \
      GTEST_SKIP() << p_.backend << " backend not available";                                \
    const auto r_ = ::anvil::dist::test::run_job(p_.backend, p_.world, name, ##__VA_ARGS__); \
    EXPECT_TRUE(r_.ok()) << r_.all_output();                                                 \
  } while (0)
