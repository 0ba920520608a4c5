// `anvil launch`: start N ranks of a command with the torchrun-compatible environment
// (src/dist/launcher.h does the work).
#include <iostream>
#include <set>

#include "commands.h"
#include "core/error.h"
#include "dist/launcher.h"

namespace anvil::cli {

/// The options and --help text of `anvil launch`.
ArgParser launch_parser() {
  ArgParser p(
      "launch",
      "launch -n N [--nnodes K --node-rank R --master-addr A --master-port P] -- CMD [ARGS...]",
      "Run N ranks of a command with RANK/WORLD_SIZE/... set (torchrun-compatible).");
  p.option("--nproc-per-node", "-n", "N", "ranks to start on this node (default 1)")
      .option("--nnodes", "", "K", "number of nodes (default 1)")
      .option("--node-rank", "", "R", "this node's index in [0, K) (default 0)")
      .option("--master-addr", "", "A",
              "host of rank 0, which hosts the TCP store (default 127.0.0.1)")
      .option("--master-port", "", "P",
              "port of the TCP store (default: a free port on one node, 29500 on several)")
      .notes(
          "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK,\n"
          "MASTER_ADDR and MASTER_PORT. SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 are "
          "forwarded\n"
          "to the ranks. When one rank fails, the others are stopped (SIGTERM, then SIGKILL after\n"
          "5 s) and launch exits with that rank's code, naming the rank. For MPI jobs use\n"
          "`mpirun -n N CMD` instead (as root: --oversubscribe, OMPI_ALLOW_RUN_AS_ROOT=1,\n"
          "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1).\n");
  return p;
}

/// Never called: main.cpp routes `launch` to launch_main, which needs the raw command tail.
int cmd_launch(const ParsedArgs&) { return kExitUsage; }

int launch_main(const std::vector<std::string>& args) {
  // Split the launcher's options from the command: the command starts after "--", or at the
  // first argument that is neither an option nor an option's value.
  static const std::set<std::string> kValued = {"-n",          "--nproc-per-node", "--nnodes",
                                                "--node-rank", "--master-addr",    "--master-port"};
  std::vector<std::string> opts, command;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a.empty() || a[0] != '-') {
      command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    opts.push_back(a);
    if (kValued.count(a) && i + 1 < args.size()) opts.push_back(args[++i]);
  }
  const ArgParser parser = launch_parser();
  auto usage = [](const std::string& msg) {
    std::cerr << "anvil: error: " << msg << "\n(run 'anvil launch --help' for usage)\n";
    return kExitUsage;
  };
  ParsedArgs parsed;
  try {
    parsed = parser.parse(opts);
  } catch (const UsageError& e) {
    return usage(e.what());
  }
  if (parsed.help()) {
    std::cout << parser.help();
    return kExitOk;
  }
  dist::LaunchOptions o;
  try {
    o.nproc_per_node = static_cast<int>(parsed.int_value("--nproc-per-node", 1, 1, 4096));
    o.nnodes = static_cast<int>(parsed.int_value("--nnodes", 1, 1, 65536));
    o.node_rank = static_cast<int>(parsed.int_value("--node-rank", 0, 0, 65535));
    o.master_port = static_cast<int>(parsed.int_value("--master-port", 0, 0, 65535));
  } catch (const UsageError& e) {
    return usage(e.what());
  }
  if (auto a = parsed.value("--master-addr")) o.master_addr = *a;
  o.command = command;
  if (o.command.empty()) return usage("no command given: anvil launch -n N -- CMD [ARGS...]");
  if (o.node_rank >= o.nnodes)
    return usage(str("--node-rank ", o.node_rank, " must be below --nnodes ", o.nnodes));
  return dist::launch(o);
}

}  // namespace anvil::cli
