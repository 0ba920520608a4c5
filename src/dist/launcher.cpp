// The `anvil launch` process supervisor.
#include "dist/launcher.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

#include "core/error.h"

extern char** environ;

namespace anvil::dist {

namespace {

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

/// The environment of a rank: ours with `vars` set (replacing existing values).
std::vector<std::string> child_environment(
    const std::vector<std::pair<std::string, std::string>>& vars) {
  std::map<std::string, std::string> over(vars.begin(), vars.end());
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string s = *e;
    const std::string key = s.substr(0, s.find('='));
    if (!over.count(key)) env.push_back(s);
  }
  for (const auto& [k, v] : vars) env.push_back(k + "=" + v);
  return env;
}

/// Forks one rank running `argv` with `env`; the rank dies with the launcher. Each rank leads
/// its own session and process group (torchrun's start_new_session), so stopping a rank reaches
/// what it started too (a shell wrapper's children, a Python rank's workers); being outside the
/// terminal's session, a rank that reads or writes the terminal (pdb) is not stopped by job
/// control.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error("fork failed", "anvil launch", "a new process", std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    ::setsid();
    for (int s : kForwarded) ::signal(s, SIG_DFL);
    execvpe(a[0], a.data(), e.data());
    const char* msg = "anvil launch: cannot execute the command: ";
    [[maybe_unused]] ssize_t k = ::write(2, msg, std::strlen(msg));
    k = ::write(2, a[0], std::strlen(a[0]));
    k = ::write(2, "\n", 1);
    _exit(127);
  }
  return pid;
}

}  // namespace

void check_launch_options(const LaunchOptions& o) {
  const char* w = "anvil launch";
  if (o.nproc_per_node < 1)
    throw Error("-n must be at least 1", w, ">= 1", std::to_string(o.nproc_per_node));
  if (o.nnodes < 1) throw Error("--nnodes must be at least 1", w, ">= 1", std::to_string(o.nnodes));
  if (o.node_rank < 0 || o.node_rank >= o.nnodes)
    throw Error("--node-rank must be below --nnodes", w, str("0 <= node rank < ", o.nnodes),
                std::to_string(o.node_rank));
  if (o.master_port < 0 || o.master_port > 65535)
    throw Error("--master-port out of range", w, "0..65535", std::to_string(o.master_port));
  if (o.command.empty()) throw Error("no command to launch", w, "-- CMD [ARGS...]", "nothing");
  if (o.master_addr.empty()) throw Error("--master-addr is empty", w, "a host name", "''");
}

std::vector<std::pair<std::string, std::string>> launch_env(const LaunchOptions& o, int local_rank,
                                                            int port) {
  const int rank = o.node_rank * o.nproc_per_node + local_rank;
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(o.nnodes * o.nproc_per_node)},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
          {"GROUP_RANK", std::to_string(o.node_rank)},
          {"NODE_RANK", std::to_string(o.node_rank)},
          {"MASTER_ADDR", o.master_addr},
          {"MASTER_PORT", std::to_string(port)},
          {"TORCHELASTIC_RUN_ID", "anvil"}};
}

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error("cannot create a socket", "pick_free_port", "", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw Error("cannot find a free port", "pick_free_port", "a free TCP port", why);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

int launch(const LaunchOptions& o) {
  using Clock = std::chrono::steady_clock;
  check_launch_options(o);
  const int port = o.master_port ? o.master_port : (o.nnodes == 1 ? pick_free_port() : 29500);
  const int n = o.nproc_per_node;

  struct sigaction sa {
  }, old[std::size(kForwarded)];
  sa.sa_handler = &on_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &sa, &old[i]);
  g_signal = 0;

  std::vector<pid_t> pids(static_cast<size_t>(n), -1);
  std::vector<bool> alive(static_cast<size_t>(n), false);
  int failed_rank = -1, failed_code = 0, interrupted = 0;
  Clock::time_point kill_at = Clock::time_point::max();
  bool killed = false;
  // Signals go to each live rank's process group (the rank and what it started); to the rank
  // alone while it has not made its group yet.
  auto signal_rank = [&](int l, int sig) {
    const pid_t p = pids[static_cast<size_t>(l)];
    if (::kill(-p, sig) != 0 && errno == ESRCH) ::kill(p, sig);
  };
  auto signal_alive = [&](int sig) {
    for (int l = 0; l < n; ++l)
      if (alive[static_cast<size_t>(l)]) signal_rank(l, sig);
  };
  try {
    for (int l = 0; l < n; ++l) {
      pids[static_cast<size_t>(l)] = spawn(o.command, child_environment(launch_env(o, l, port)));
      alive[static_cast<size_t>(l)] = true;
    }
  } catch (...) {
    signal_alive(SIGKILL);
    for (int l = 0; l < n; ++l)
      if (alive[static_cast<size_t>(l)]) waitpid(pids[static_cast<size_t>(l)], nullptr, 0);
    for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &old[i], nullptr);
    throw;
  }
  int remaining = n;
  while (remaining > 0) {
    if (const int sig = g_signal) {
      g_signal = 0;
      if (!interrupted) interrupted = sig;
      std::fprintf(stderr, "anvil launch: forwarding signal %d to the ranks\n", sig);
      signal_alive(sig);
      if (kill_at == Clock::time_point::max()) kill_at = Clock::now() + o.kill_grace;
    }
    bool reaped = false;
    for (int l = 0; l < n; ++l) {
      if (!alive[static_cast<size_t>(l)]) continue;
      int st = 0;
      const pid_t p = waitpid(pids[static_cast<size_t>(l)], &st, WNOHANG);
      if (p == 0 || (p < 0 && errno == EINTR)) continue;
      alive[static_cast<size_t>(l)] = false;
      --remaining;
      reaped = true;
      const int rank = o.node_rank * n + l;
      const bool bad = p < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
      // A stopped job leaves nothing behind: what a failed or stopped rank started is killed
      // with its group now, while the group still holds the rank's id.
      if (p > 0 && (bad || failed_rank >= 0 || interrupted)) ::kill(-p, SIGKILL);
      if (!bad || failed_rank >= 0 || interrupted) continue;
      failed_rank = rank;
      if (p < 0) {
        failed_code = 1;
        std::fprintf(stderr, "anvil launch: lost track of rank %d (pid %d)\n", rank, pids[l]);
      } else if (WIFSIGNALED(st)) {
        failed_code = 128 + WTERMSIG(st);
        std::fprintf(stderr, "anvil launch: rank %d (pid %d) was killed by signal %d (%s)", rank,
                     pids[l], WTERMSIG(st), strsignal(WTERMSIG(st)));
      } else {
        failed_code = WEXITSTATUS(st);
        std::fprintf(stderr, "anvil launch: rank %d (pid %d) exited with code %d", rank, pids[l],
                     failed_code);
      }
      if (remaining > 0) {
        std::fprintf(stderr, "; stopping the other %d rank(s)\n", remaining);
        signal_alive(SIGTERM);
        kill_at = Clock::now() + o.kill_grace;
      } else {
        std::fprintf(stderr, "\n");
      }
    }
    if (remaining > 0 && !killed && Clock::now() >= kill_at) {
      signal_alive(SIGKILL);
      killed = true;
    }
    if (!reaped && remaining > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &old[i], nullptr);
  if (failed_rank >= 0) return failed_code ? failed_code : 1;
  if (interrupted) return 128 + interrupted;
  return 0;
}

}  // namespace anvil::dist
