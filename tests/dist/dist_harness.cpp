// The dist test harness (dist_harness.h).
#include "dist_harness.h"

#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "dist/launcher.h"
#include "dist/world.h"

extern char** environ;

namespace anvil::dist::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct WorkerEntry {
  WorkerFn fn;
  bool init_world;
};
std::map<std::string, WorkerEntry>& workers() {
  static std::map<std::string, WorkerEntry> w;
  return w;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

/// A fresh temporary directory, removed by the destructor.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "anvil_dist_XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    path = p ? p : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// A started process (its own process group, dies with us).
struct Proc {
  pid_t pid = -1;
  std::string log;
  bool done = false;
  bool launcher = false;  // mpirun: watched for being left alone with its exited ranks
  ProcResult result;
};

Proc start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
           const std::string& log) {
  std::vector<std::string> envs;
  for (char** e = environ; e && *e; ++e) {
    const std::string s = *e;
    const std::string key = s.substr(0, s.find('='));
    // A sharded parent (bench/gpu_run.sh) must not shard its ranks: their filter names one test.
    if (key == "GTEST_TOTAL_SHARDS" || key == "GTEST_SHARD_INDEX") continue;
    if (!env.count(key)) envs.push_back(s);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : envs) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  Proc p;
  p.log = log;
  const pid_t parent = getpid();
  p.pid = fork();
  if (p.pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execvpe(a[0], a.data(), e.data());
    _exit(127);
  }
  return p;
}

/// A live process as /proc shows it.
struct ProcInfo {
  pid_t pid = 0, ppid = 0, pgrp = 0;
  int exit_status = 0;  // a zombie's wait status (stat field 52), 0 for a live process
  std::string state, wchan, cmd;
};

/// The text of a /proc file, "" when it cannot be read. Plain read(2): a process exiting while
/// it is read makes read fail (ESRCH), which libstdc++'s filebuf turns into an exception.
std::string read_proc(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

/// The processes of a job started as `root` (its own process group): the group's members and
/// every descendant of root, which includes ranks `anvil launch` put in sessions of their own.
/// Processes come and go while /proc is read: one that vanished is left out.
std::vector<ProcInfo> job_processes(pid_t root) {
  std::vector<ProcInfo> all;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string dir = "/proc/" + name + "/";
    const std::string stat = read_proc(dir + "stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));  // state ppid pgrp ...
    ProcInfo p;
    p.pid = static_cast<pid_t>(std::stol(name));
    if (!(rest >> p.state >> p.ppid >> p.pgrp)) continue;
    std::string field;
    for (int i = 6; i <= 52 && rest >> field; ++i)
      if (i == 52) p.exit_status = std::atoi(field.c_str());
    p.wchan = read_proc(dir + "wchan");
    p.cmd = read_proc(dir + "cmdline");
    std::replace(p.cmd.begin(), p.cmd.end(), '\0', ' ');
    all.push_back(p);
  }
  std::set<pid_t> in = {root};
  for (bool grew = true; grew;) {  // descendants by parent pid, to a fixed point
    grew = false;
    for (const auto& p : all)
      if ((p.pgrp == root || in.count(p.ppid)) && in.insert(p.pid).second) grew = true;
  }
  std::vector<ProcInfo> out;
  for (const auto& p : all)
    if (in.count(p.pid)) out.push_back(p);
  return out;
}

/// One line per process (pid, state, kernel wait channel, command): appended to a job's log
/// when it hits its deadline, so a hang seen once in CI says which process was stuck where
/// (mpirun, a rank in MPI, a rank in a signal handler, ...).
std::string describe(const std::vector<ProcInfo>& procs) {
  std::ostringstream os;
  for (const auto& p : procs)
    os << "  pid " << p.pid << " state " << p.state << " wchan "
       << (p.wchan.empty() ? "-" : p.wchan) << ": " << p.cmd.substr(0, 160) << "\n";
  return os.str();
}

bool is_mpirun(const ProcInfo& p) {
  const std::string argv0 = p.cmd.substr(0, p.cmd.find(' '));
  const std::string base = argv0.substr(argv0.rfind('/') + 1);
  return base == "mpirun" || base == "orterun";
}

/// Whether the job is an Open MPI launcher left alone: every rank it started has exited (a
/// zombie it has not reaped) and nothing but mpirun is alive. Seen under load after a rank's
/// MPI_Abort: mpirun sat in a futex wait and never reaped its ranks (docs/distributed.md).
/// `failed` says whether a rank exited with a non-zero status or a signal.
bool launcher_left_alone(const std::vector<ProcInfo>& job, bool* failed) {
  int zombies = 0;
  *failed = false;
  for (const auto& p : job) {
    if (p.state == "Z") {
      ++zombies;
      if (p.exit_status != 0) *failed = true;
    } else if (!is_mpirun(p)) {
      return false;
    }
  }
  return zombies > 0;
}

/// Waits for every process until `deadline`; kills the rest (whole process groups).
bool wait_all(std::vector<Proc>& procs, std::chrono::milliseconds deadline) {
  const auto end = Clock::now() + deadline;
  constexpr auto kLauncherGrace = std::chrono::seconds(5);
  std::map<pid_t, Clock::time_point> alone_since;  // by job: since when mpirun was left alone
  auto next_scan = Clock::now();
  bool timed_out = false;
  while (true) {
    bool all = true;
    const bool scan = Clock::now() >= next_scan;
    if (scan) next_scan = Clock::now() + std::chrono::milliseconds(200);
    for (auto& p : procs) {
      if (p.done) continue;
      int st = 0;
      const pid_t r = waitpid(p.pid, &st, WNOHANG);
      if (r == p.pid) {
        p.done = true;
        if (WIFEXITED(st)) p.result.exit_code = WEXITSTATUS(st);
        if (WIFSIGNALED(st)) p.result.signal = WTERMSIG(st);
        continue;
      }
      all = false;
      if (!scan || !p.launcher) continue;
      const auto job = job_processes(p.pid);
      bool failed = false;
      if (!launcher_left_alone(job, &failed)) {
        alone_since.erase(p.pid);
        continue;
      }
      const auto since = alone_since.emplace(p.pid, Clock::now()).first->second;
      if (Clock::now() - since < kLauncherGrace) continue;
      // Its ranks are over: end the launcher and report the job by its ranks' statuses.
      std::ofstream(p.log, std::ios::app)
          << "\n*** mpirun did not exit after its ranks (Open MPI launcher hang): ended by the "
             "harness; ranks "
          << (failed ? "failed" : "all exited 0") << " ***\n"
          << describe(job);
      for (const auto& q : job) kill(q.pid, SIGKILL);
      kill(-p.pid, SIGKILL);
      waitpid(p.pid, &st, 0);
      p.done = true;
      p.result.exit_code = failed ? 1 : 0;
    }
    if (all) break;
    if (Clock::now() >= end) {
      timed_out = true;
      for (auto& p : procs)
        if (!p.done) {
          const auto job = job_processes(p.pid);
          std::ofstream(p.log, std::ios::app)
              << "\n*** deadline: processes of this job still running ***\n"
              << describe(job);
          // Ranks still running print their main thread's stack (DistWorker.Run's handler)
          // into the same log before they are killed: where a hang was, not only that it was.
          for (const auto& q : job)
            if (q.cmd.find("DistWorker.Run") != std::string::npos)
              (void)syscall(SYS_tgkill, q.pid, q.pid, SIGUSR2);  // its main thread
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          for (const auto& q : job) kill(q.pid, SIGKILL);  // ranks in sessions of their own too
          kill(-p.pid, SIGKILL);
        }
      for (auto& p : procs)
        if (!p.done) {
          int st = 0;
          waitpid(p.pid, &st, 0);
          p.done = true;
          p.result.signal = SIGKILL;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& p : procs) {
    kill(-p.pid, SIGKILL);  // stragglers of its group (e.g. mpirun's children)
    p.result.output = read_all(p.log);
  }
  return timed_out;
}

}  // namespace

bool register_worker(const char* name, WorkerFn fn, bool init_world) {
  workers()[name] = {fn, init_world};
  return true;
}

std::string JobResult::all_output() const {
  std::ostringstream os;
  if (timed_out) os << "*** the job hit its deadline and was killed ***\n";
  if (confirmed != world)
    os << "*** " << confirmed << " of " << world << " ranks confirmed that worker '" << worker
       << "' ran to its end ***\n";
  for (size_t i = 0; i < procs.size(); ++i)
    os << "----- process " << i << " (exit " << procs[i].exit_code << ", signal " << procs[i].signal
       << ") -----\n"
       << procs[i].output << "\n";
  return os.str();
}

int workers_confirmed(const std::string& outdir, const std::string& name) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(outdir, ec))
    if (e.path().filename().string().rfind("worker_done." + name + ".", 0) == 0) ++n;
  return n;
}

bool worker_confirmed(const std::string& outdir, const std::string& name, int rank) {
  return fs::exists(fs::path(outdir) / ("worker_done." + name + "." + std::to_string(rank)));
}

bool JobResult::ok() const {
  if (timed_out || procs.empty() || confirmed != world) return false;
  for (const auto& p : procs)
    if (p.exit_code != 0) return false;
  return true;
}

std::string self_exe() {
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).string();
}

bool backend_available(const std::string& backend) {
  for (const auto& b : available_backends())
    if (b == backend) {
      if (backend != "mpi") return true;
      // Built with MPI but no launcher: a broken install, which must not shrink the suite.
      if (std::system("command -v mpirun > /dev/null 2>&1") == 0) return true;
      ADD_FAILURE() << "this build has the mpi backend but mpirun is not on PATH "
                       "(Debian: openmpi-bin)";
      return false;
    }
  // Only a build configured with -DANVIL_OPTIONAL_DIST_BACKENDS=ON lacks a backend; say so.
  std::printf("note: the %s backend is not compiled into this build: its cases are skipped\n",
              backend.c_str());
  return false;
}

ProcResult run_command(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env,
                       std::chrono::milliseconds deadline, bool* timed_out) {
  TempDir dir;
  std::vector<Proc> procs{start(argv, env, dir.path + "/out.log")};
  const bool t = wait_all(procs, deadline);
  if (timed_out) *timed_out = t;
  return procs[0].result;
}

JobResult run_job(const std::string& backend, int world, const std::string& name,
                  const JobOptions& opts) {
  TempDir dir;
  std::map<std::string, std::string> env = opts.env;
  env["ANVIL_DIST_WORKER"] = name;
  env["ANVIL_TEST_BACKEND"] = backend;
  env["ANVIL_TEST_OUTDIR"] = dir.path;
  env.emplace("ANVIL_DIST_TIMEOUT", "30");
  const std::vector<std::string> worker_args = {self_exe(), "--gtest_filter=DistWorker.Run"};
  std::vector<Proc> procs;
  if (backend == "mpi") {
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
    env.emplace("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    std::vector<std::string> argv = opts.mpirun_prefix;
    for (const char* a : {"mpirun", "--oversubscribe", "--bind-to", "none"}) argv.push_back(a);
    argv.insert(argv.end(), opts.mpirun_args.begin(), opts.mpirun_args.end());
    for (const auto& [k, v] : env) {
      argv.push_back("-x");
      argv.push_back(k);
    }
    if (!opts.rank_prefix) {
      argv.push_back("-n");
      argv.push_back(std::to_string(world));
      argv.insert(argv.end(), worker_args.begin(), worker_args.end());
    } else {
      for (int r = 0; r < world; ++r) {  // one app context per rank: rank r is the r-th
        if (r > 0) argv.push_back(":");
        argv.push_back("-n");
        argv.push_back("1");
        const auto pre = opts.rank_prefix(r);
        argv.insert(argv.end(), pre.begin(), pre.end());
        argv.insert(argv.end(), worker_args.begin(), worker_args.end());
      }
    }
    procs.push_back(start(argv, env, dir.path + "/mpirun.log"));
    procs.back().launcher = true;
  } else {
    const int port = pick_free_port();
    const int n = opts.start_ranks >= 0 ? opts.start_ranks : world;
    for (int r = 0; r < n; ++r) {
      auto e = env;
      e["RANK"] = std::to_string(r);
      e["WORLD_SIZE"] = std::to_string(world);
      e["LOCAL_RANK"] = std::to_string(r);
      e["LOCAL_WORLD_SIZE"] = std::to_string(world);
      e["MASTER_ADDR"] = opts.master_addr;
      e["MASTER_PORT"] = std::to_string(port);
      std::vector<std::string> argv =
          opts.rank_prefix ? opts.rank_prefix(r) : std::vector<std::string>{};
      argv.insert(argv.end(), worker_args.begin(), worker_args.end());
      procs.push_back(start(argv, e, dir.path + "/rank" + std::to_string(r) + ".log"));
    }
  }
  std::thread during;
  if (opts.during) {
    JobRunning running{dir.path, {}};
    for (const auto& p : procs) running.pids.push_back(p.pid);
    during = std::thread(opts.during, running);
  }
  JobResult res;
  res.timed_out = wait_all(procs, opts.deadline);
  if (during.joinable()) during.join();
  res.worker = name;
  res.world = backend == "mpi" || opts.start_ranks < 0 ? world : opts.start_ranks;
  res.confirmed = workers_confirmed(dir.path, name);
  for (int r = 0; r < world; ++r) res.rank_confirmed.push_back(worker_confirmed(dir.path, name, r));
  for (auto& p : procs) res.procs.push_back(std::move(p.result));
  return res;
}

std::string param_name(const testing::TestParamInfo<DistParam>& info) {
  return info.param.backend + "_w" + std::to_string(info.param.world);
}

std::vector<DistParam> all_params() {
  std::vector<DistParam> out;
  for (const char* b : {"gloo", "mpi"})
    for (int w : {2, 3, 4}) out.push_back({b, w});
  return out;
}

}  // namespace anvil::dist::test

namespace {
/// SIGUSR2 (the harness's deadline): the stack of the thread it lands on, to stderr (the
/// rank's log); frames of the test binary print as offsets (addr2line -e test_x -f -C OFFSET).
void print_stack_on_deadline(int) {
  static const char head[] = "\n*** this rank's stack at the job's deadline ***\n";
  (void)!write(2, head, sizeof(head) - 1);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
}
}  // namespace

// The entry point of every rank: runs the worker named by ANVIL_DIST_WORKER.
TEST(DistWorker, Run) {
  using namespace anvil::dist;
  using namespace anvil::dist::test;
  const char* name = std::getenv("ANVIL_DIST_WORKER");
  if (!name) GTEST_SKIP() << "runs only as a rank of a multi-process dist test";
  signal(SIGUSR2, print_stack_on_deadline);
  auto it = workers().find(name);
  ASSERT_NE(it, workers().end()) << "unknown dist worker '" << name << "'";
  WorkerCtx ctx;
  ctx.backend = std::getenv("ANVIL_TEST_BACKEND") ? std::getenv("ANVIL_TEST_BACKEND") : "gloo";
  ctx.outdir = std::getenv("ANVIL_TEST_OUTDIR") ? std::getenv("ANVIL_TEST_OUTDIR") : "/tmp";
  if (it->second.init_world) {
    ctx.pg = init_world_from_env(ctx.backend);
    ctx.rank = ctx.pg->rank();
    ctx.world = ctx.pg->size();
  } else {
    const WorldEnv e = read_world_env();
    ctx.rank = e.rank;
    ctx.world = e.world_size;
  }
  it->second.fn(ctx);
  // The proof that this rank ran the worker to its end: run_job counts these markers, so a rank
  // that ran no test (a wrong filter, a missing worker, a skip) cannot pass on its exit code.
  if (!::testing::Test::HasFailure() && !::testing::Test::IsSkipped())
    std::ofstream(ctx.outdir + "/worker_done." + name + "." + std::to_string(ctx.rank)) << "1";
}
