// NetLab (netlab.h): namespaces, veth pairs and faults through iproute2 and nftables.
#include "netfault/netlab.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <mutex>
#include <stdexcept>

namespace anvil::dist::test {

std::string sh(const std::string& cmd) {
  FILE* p = ::popen(("{\n" + cmd + "\n} 2>&1").c_str(), "r");  // a here-document may end cmd
  if (!p) throw std::runtime_error("cannot run '" + cmd + "'");
  std::string out;
  std::array<char, 512> buf{};
  while (size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int st = ::pclose(p);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    throw std::runtime_error("command failed (status " + std::to_string(WEXITSTATUS(st)) +
                             "): " + cmd + "\n" + out);
  return out;
}

namespace {

/// Runs `cmd`; true when it exited with 0 (its output is dropped).
bool quiet(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

}  // namespace

std::string NetLab::unavailable() {
  static std::once_flag once;
  static std::string why;
  std::call_once(once, [] {
    if (!quiet("command -v ip"))
      throw std::runtime_error(
          "the network-fault tests need `ip` (Debian: iproute2; "
          "scripts/setup.sh installs it)");
    const std::string probe = "anvnf" + std::to_string(::getpid()) + "probe";
    if (!quiet("ip netns add " + probe)) {
      why =
          "this process may not create network namespaces (`ip netns add` failed: needs root "
          "or CAP_SYS_ADMIN); the network-fault tests run as root in CI";
      return;
    }
    quiet("ip netns del " + probe);
  });
  return why;
}

bool NetLab::has_netem() {
  static std::once_flag once;
  static bool yes = false;
  std::call_once(once, [] {
    const std::string probe = "anvnf" + std::to_string(::getpid()) + "netem";
    if (!quiet("ip netns add " + probe)) return;
    yes = quiet("ip -n " + probe + " link add d0 type dummy") &&
          quiet("ip netns exec " + probe + " tc qdisc add dev d0 root netem delay 1ms");
    quiet("ip netns del " + probe);
  });
  return yes;
}

std::string NetLab::loss_method() { return has_netem() ? "netem" : "nftables"; }

std::string NetLab::delay_method() { return has_netem() ? "netem" : "nfqueue"; }

NetLab::NetLab(int ranks) : ranks_(ranks) {
  const std::string tag = "anvnf" + std::to_string(::getpid()) + "_";
  static int serial = 0;
  const std::string base = tag + std::to_string(serial++);
  hub_ = base + "h";
  try {
    sh("ip netns add " + hub_);
    made_.push_back(hub_);
    sh("ip -n " + hub_ + " link set lo up");
    sh("ip -n " + hub_ + " link add br0 type bridge");
    sh("ip -n " + hub_ + " addr add 10.77.0.254/24 dev br0");
    sh("ip -n " + hub_ + " link set br0 up");
    for (int r = 0; r < ranks; ++r) {
      const std::string n = base + "r" + std::to_string(r);
      sh("ip netns add " + n);
      made_.push_back(n);
      const std::string port = "r" + std::to_string(r);
      sh("ip -n " + hub_ + " link add " + port + " type veth peer name eth0 netns " + n);
      sh("ip -n " + hub_ + " link set " + port + " master br0 up");
      sh("ip -n " + n + " link set lo up");
      sh("ip -n " + n + " addr add " + addr(r) + "/24 dev eth0");
      sh("ip -n " + n + " link set eth0 up");
    }
  } catch (...) {
    teardown();
    throw;
  }
}

NetLab::~NetLab() { teardown(); }

void NetLab::teardown() {
  delayers_.clear();  // their rules go first, then their held packets
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) quiet("ip netns del " + *it);
  made_.clear();
}

std::string NetLab::ns(int rank) const { return made_.at(static_cast<size_t>(rank) + 1); }

std::string NetLab::addr(int rank) const { return "10.77.0." + std::to_string(rank + 1); }

std::vector<std::string> NetLab::exec_prefix(int rank) const {
  return {"ip", "netns", "exec", ns(rank)};
}

std::vector<std::string> NetLab::hub_prefix() const { return {"ip", "netns", "exec", hub_}; }

void NetLab::loss(int rank, int percent) {
  const std::string pct = std::to_string(percent);
  if (has_netem()) {  // both ways: the rank's egress and the hub port's egress toward it
    sh("ip netns exec " + ns(rank) + " tc qdisc replace dev eth0 root netem loss " + pct + "%");
    sh("ip netns exec " + hub_ + " tc qdisc replace dev r" + std::to_string(rank) +
       " root netem loss " + pct + "%");
    return;
  }
  if (!quiet("command -v nft"))
    throw std::runtime_error(
        "this kernel has no netem qdisc, and loss then needs `nft` "
        "(Debian: nftables; scripts/setup.sh installs it)");
  const std::string rule = "numgen random mod 100 < " + pct + " drop";
  sh("ip netns exec " + ns(rank) + " nft -f - <<'EOF'\n" +
     "table inet anvil_loss {\n"
     "  chain out { type filter hook output priority 0; oifname \"eth0\" " +
     rule + "; }\n" + "  chain in { type filter hook input priority 0; iifname \"eth0\" " + rule +
     "; }\n" + "}\nEOF");
}

void NetLab::delay(int rank, int ms) {
  if (has_netem()) {
    sh("ip netns exec " + ns(rank) + " tc qdisc replace dev eth0 root netem delay " +
       std::to_string(ms) + "ms");
    return;
  }
  if (!quiet("command -v nft"))
    throw std::runtime_error(
        "this kernel has no netem qdisc, and delay then needs `nft` "
        "(Debian: nftables; scripts/setup.sh installs it)");
  delayers_.push_back(
      std::make_unique<NfqueueDelay>(ns(rank), 70 + rank, std::chrono::milliseconds(ms)));
}

void NetLab::cut(int rank) { sh("ip -n " + hub_ + " link set r" + std::to_string(rank) + " down"); }

void NetLab::mend(int rank) { sh("ip -n " + hub_ + " link set r" + std::to_string(rank) + " up"); }

}  // namespace anvil::dist::test
