// NetLab: a small private network for the network-fault tests. Each rank gets a network
// namespace of its own with one interface, eth0 (10.77.0.<rank+1>/24), plugged by a veth pair
// into a bridge in a hub namespace (10.77.0.254, where mpirun runs). Nothing is added to the
// caller's namespace; the destructor deletes every namespace (their links go with them).
//
// Faults act on one rank's link:
//   loss(r, pct)   drops pct % of its packets both ways: tc netem where the kernel has it,
//                  else an nftables rule (numgen random) in its namespace
//   delay(r, ms)   delays its outgoing packets: tc netem where the kernel has it, else an
//                  nftables rule queueing them to a user-space delayer (NfqueueDelay)
//   cut(r)         sets the hub's end of its veth down: its packets vanish, nothing is reset
//   mend(r)        sets it up again
// A frozen peer needs no network: the tests SIGSTOP the rank.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "netfault/nfqueue_delay.h"

namespace anvil::dist::test {

class NetLab {
 public:
  /// "" when this process may create network namespaces; else why not (the tests skip).
  static std::string unavailable();
  /// Whether the kernel has the netem queueing discipline (delay, and loss without nftables).
  static bool has_netem();

  /// Creates the hub and `ranks` rank namespaces. Throws std::runtime_error naming the
  /// command and its output when a step fails (what was made is removed).
  explicit NetLab(int ranks);
  ~NetLab();
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;

  int ranks() const { return ranks_; }
  const std::string& hub() const { return hub_; }
  std::string ns(int rank) const;
  /// The rank's address, 10.77.0.<rank+1>.
  std::string addr(int rank) const;
  static std::string subnet() { return "10.77.0.0/24"; }
  /// `ip netns exec NS`: the words that run a command in the rank's namespace.
  std::vector<std::string> exec_prefix(int rank) const;
  /// The same for the hub.
  std::vector<std::string> hub_prefix() const;

  /// How loss() drops packets: "netem" or "nftables"; how delay() holds them: "netem" or
  /// "nfqueue".
  static std::string loss_method();
  static std::string delay_method();
  void loss(int rank, int percent);
  void delay(int rank, int ms);
  void cut(int rank);
  void mend(int rank);

 private:
  void teardown();
  int ranks_;
  std::string hub_;
  std::vector<std::string> made_;  // namespaces made so far
  std::vector<std::unique_ptr<NfqueueDelay>> delayers_;
};

/// Runs `cmd` through /bin/sh; throws std::runtime_error naming it, its exit status and its
/// output when it fails. Returns the output (stdout and stderr).
std::string sh(const std::string& cmd);

}  // namespace anvil::dist::test
