// `anvil launch`: the torchrun-compatible environment, a job over gloo started by the launcher,
// a failing rank stopping the job (the launcher names it and exits non-zero), signal
// forwarding, and usage errors.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "dist/functional.h"
#include "dist/launcher.h"
#include "dist/world.h"
#include "dist_check.h"
#include "dist_harness.h"

namespace anvil::dist::test {
namespace {

using std::chrono::milliseconds;
namespace fs = std::filesystem;

std::string env_or(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

TEST(LaunchEnv, TorchrunVariablesPerRank) {
  LaunchOptions o;
  o.nproc_per_node = 3;
  o.nnodes = 2;
  o.node_rank = 1;
  o.master_addr = "10.0.0.1";
  o.command = {"x"};
  auto env = launch_env(o, 2, 1234);
  std::map<std::string, std::string> m(env.begin(), env.end());
  EXPECT_EQ(m["RANK"], "5");
  EXPECT_EQ(m["WORLD_SIZE"], "6");
  EXPECT_EQ(m["LOCAL_RANK"], "2");
  EXPECT_EQ(m["LOCAL_WORLD_SIZE"], "3");
  EXPECT_EQ(m["GROUP_RANK"], "1");
  EXPECT_EQ(m["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(m["MASTER_PORT"], "1234");
  o.node_rank = 2;
  EXPECT_TRUE(
      throws_error([&] { check_launch_options(o); }, {"--node-rank must be below --nnodes"}));
  o.node_rank = 0;
  o.command.clear();
  EXPECT_TRUE(throws_error([&] { check_launch_options(o); }, {"no command to launch"}));
}

// Each rank checks the environment the launcher gave it, then joins over gloo.
DIST_WORKER_NOINIT(launch_env_check) {
  EXPECT_EQ(env_or("WORLD_SIZE"), "3");
  EXPECT_EQ(env_or("LOCAL_WORLD_SIZE"), "3");
  EXPECT_EQ(env_or("LOCAL_RANK"), env_or("RANK"));
  EXPECT_EQ(env_or("MASTER_ADDR"), "127.0.0.1");
  EXPECT_FALSE(env_or("MASTER_PORT").empty());
  auto pg = init_world_from_env("gloo");
  EXPECT_EQ(pg->rank(), std::stoi(env_or("RANK")));
  Tensor y = functional::wait_tensor(
      functional::all_reduce(Tensor::full({2}, pg->rank(), DType::kInt64), ReduceOp::kSum, "0"));
  EXPECT_TRUE(all_equal(y, 3));
}

// Rank 1 exits with code 7 after joining; the others keep working until the launcher stops
// them.
DIST_WORKER_NOINIT(launch_fail) {
  auto pg = init_world_from_env("gloo");
  if (pg->rank() == 1) std::_Exit(7);
  std::this_thread::sleep_for(milliseconds(60000));
}

// Each rank records that it started, then sleeps; SIGTERM makes it record that and exit 0.
volatile sig_atomic_t g_term = 0;
DIST_WORKER_NOINIT(launch_sleeper) {
  signal(SIGTERM, [](int) { g_term = 1; });
  const std::string dir = env_or("ANVIL_TEST_OUTDIR");
  std::ofstream(dir + "/started" + env_or("RANK")) << "1";
  for (int i = 0; i < 3000 && !g_term; ++i) std::this_thread::sleep_for(milliseconds(10));
  if (g_term) std::ofstream(dir + "/term" + env_or("RANK")) << "1";
}

std::vector<std::string> launch_argv(int n) {
  return {ANVIL_CLI,
          "launch",
          "-n",
          std::to_string(n),
          "--",
          self_exe(),
          "--gtest_filter=DistWorker.Run"};
}

TEST(Launch, StartsRanksWithTheEnvironment) {
  if (!backend_available("gloo")) GTEST_SKIP() << "gloo backend not available";
  const auto dir = fs::temp_directory_path() / ("anvil_launch_env_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  bool timed_out = false;
  auto r = run_command(launch_argv(3),
                       {{"ANVIL_DIST_WORKER", "launch_env_check"}, {"ANVIL_TEST_OUTDIR", dir}},
                       milliseconds(60000), &timed_out);
  EXPECT_FALSE(timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(workers_confirmed(dir, "launch_env_check"), 3) << r.output;
  fs::remove_all(dir);
}

TEST(Launch, FailingRankStopsTheJobAndIsNamed) {
  if (!backend_available("gloo")) GTEST_SKIP() << "gloo backend not available";
  bool timed_out = false;
  auto r = run_command(launch_argv(3),
                       {{"ANVIL_DIST_WORKER", "launch_fail"}, {"ANVIL_DIST_TIMEOUT", "60"}},
                       milliseconds(60000), &timed_out);
  EXPECT_FALSE(timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 7) << r.output;
  EXPECT_NE(r.output.find("rank 1 (pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with code 7; stopping the other 2 rank(s)"), std::string::npos)
      << r.output;
}

TEST(Launch, ForwardsSignalsToTheRanks) {
  const auto dir = fs::temp_directory_path() / ("anvil_launch_sig_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> argv = launch_argv(2);
  std::map<std::string, std::string> env = {{"ANVIL_DIST_WORKER", "launch_sleeper"},
                                            {"ANVIL_TEST_OUTDIR", dir.string()}};
  // Start the launcher, wait until both ranks run, then SIGTERM the launcher only.
  std::vector<char*> a;
  for (auto& s : argv) a.push_back(s.data());
  a.push_back(nullptr);
  for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open((dir / "launcher.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(a[0], a.data());
    _exit(127);
  }
  for (auto& [k, v] : env) unsetenv(k.c_str());
  bool started = false;
  for (int i = 0; i < 3000 && !started; ++i) {
    started = fs::exists(dir / "started0") && fs::exists(dir / "started1");
    if (!started) std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(started);
  kill(pid, SIGTERM);
  int st = 0;
  bool done = false;
  for (int i = 0; i < 3000 && !done; ++i) {
    done = waitpid(pid, &st, WNOHANG) == pid;
    if (!done) std::this_thread::sleep_for(milliseconds(10));
  }
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  EXPECT_TRUE(done);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 128 + SIGTERM);
  EXPECT_TRUE(fs::exists(dir / "term0"));
  EXPECT_TRUE(fs::exists(dir / "term1"));
  fs::remove_all(dir);
}

/// True when process `pid` no longer runs (gone, or a zombie waiting for its reaper).
bool process_gone(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (stat.empty()) return true;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

TEST(Launch, StoppedJobLeavesNothingTheRanksStarted) {
  // Rank 0 is a shell whose child sleeps; rank 1 fails once that child runs. Stopping rank 0
  // must reach its child too (each rank leads a process group), so nothing outlives the job.
  const auto dir = fs::temp_directory_path() / ("anvil_launch_tree_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string script =
      "if [ \"$RANK\" = 0 ]; then sleep 60 & echo $! > \"$D/child.tmp\"; "
      "mv \"$D/child.tmp\" \"$D/child\"; wait; "
      "else while [ ! -f \"$D/child\" ]; do sleep 0.01; done; exit 3; fi";
  // Not run_command: its cleanup kills the launcher's process group, which would hide a rank
  // child left running in it.
  const pid_t launcher = fork();
  if (launcher == 0) {
    setenv("D", dir.c_str(), 1);
    const int fd = open((dir / "launcher.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(ANVIL_CLI, ANVIL_CLI, "launch", "-n", "2", "--", "sh", "-c", script.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  bool done = false;
  for (int i = 0; i < 3000 && !done; ++i) {
    done = waitpid(launcher, &st, WNOHANG) == launcher;
    if (!done) std::this_thread::sleep_for(milliseconds(10));
  }
  if (!done) {
    kill(launcher, SIGKILL);
    waitpid(launcher, &st, 0);
  }
  std::ifstream log(dir / "launcher.log");
  const std::string out((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(done) << out;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 3) << out;
  EXPECT_NE(out.find("rank 1 (pid"), std::string::npos) << out;
  std::ifstream f(dir / "child");
  pid_t child = 0;
  ASSERT_TRUE(f >> child) << "rank 0's child did not start\n" << out;
  bool gone = false;
  for (int i = 0; i < 200 && !(gone = process_gone(child)); ++i)
    std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(gone) << "rank 0's child " << child << " outlived the job";
  if (!gone) kill(child, SIGKILL);
  fs::remove_all(dir);
}

TEST(Launch, UsageErrors) {
  auto r = run_command({ANVIL_CLI, "launch", "-n", "0", "--", "true"}, {}, milliseconds(20000));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run_command({ANVIL_CLI, "launch", "-n", "2"}, {}, milliseconds(20000));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no command given"), std::string::npos) << r.output;
  r = run_command({ANVIL_CLI, "launch", "--help"}, {}, milliseconds(20000));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("MASTER_PORT"), std::string::npos) << r.output;
  r = run_command({ANVIL_CLI, "launch", "-n", "2", "--", "/nonexistent/program"}, {},
                  milliseconds(20000));
  EXPECT_EQ(r.exit_code, 127) << r.output;
  EXPECT_NE(r.output.find("cannot execute the command"), std::string::npos) << r.output;
  // A plain command with no "--" works too and gets the environment.
  r = run_command({ANVIL_CLI, "launch", "-n", "2", "sh", "-c", "test \"$WORLD_SIZE\" = 2"}, {},
                  milliseconds(20000));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace anvil::dist::test
