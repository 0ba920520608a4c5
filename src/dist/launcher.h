// The launcher behind `anvil launch`: starts N local ranks of a command with the
// torchrun-compatible environment, forwards signals to them, and stops the job when one rank
// fails.
//
// Environment given to local rank l of node n (N ranks per node, K nodes):
//   RANK = n*N + l, WORLD_SIZE = K*N, LOCAL_RANK = l, LOCAL_WORLD_SIZE = N, GROUP_RANK = n,
//   NODE_RANK = n, MASTER_ADDR, MASTER_PORT (and TORCHELASTIC_RUN_ID = "anvil").
// MASTER_PORT 0 on a single node picks a free port; rank 0 hosts the TCP store there.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dist/store.h"

namespace anvil::dist {

/// What `anvil launch` was asked to do.
struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port (single node) or 29500 (several nodes)
  std::vector<std::string> command;
  /// After a failure (or a forwarded SIGINT/SIGTERM), how long ranks get to exit after
  /// SIGTERM before SIGKILL.
  Millis kill_grace{5000};
};

/// Throws Error for inconsistent options (n < 1, node_rank outside [0, nnodes), no command...).
void check_launch_options(const LaunchOptions& o);
/// The environment variables (name, value) of local rank `local_rank`, with `port` as MASTER_PORT.
std::vector<std::pair<std::string, std::string>> launch_env(const LaunchOptions& o, int local_rank,
                                                            int port);
/// A TCP port that was free a moment ago (bound to port 0, then released).
int pick_free_port();
/// Runs the job: forks the ranks (each dies with the launcher), waits for them, forwards SIGINT,
/// SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2. When a rank exits non-zero or is killed, prints
/// "anvil launch: rank R (pid P) exited with code C" (or "was killed by signal S") to stderr,
/// stops the others (SIGTERM, then SIGKILL after kill_grace) and returns that rank's code (128 + S
/// for a signal). Returns 0 when every rank exited 0.
int launch(const LaunchOptions& o);

}  // namespace anvil::dist
