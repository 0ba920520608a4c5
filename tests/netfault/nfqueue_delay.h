// NfqueueDelay: delays the packets of one network namespace in user space, for kernels without
// the netem qdisc. An nftables rule in the namespace (or, where the kernel lacks nftables'
// queue expression, an iptables NFQUEUE rule) sends the packets leaving `eth0` to an NFQUEUE
// (with `bypass`: they pass when nobody listens); a thread holding a netlink socket
// opened inside that namespace receives each packet's id (metadata only, no payload) and
// accepts it `delay` later, in arrival order. Speaks nfnetlink_queue directly (no
// libnetfilter_queue).
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace anvil::dist::test {

class NfqueueDelay {
 public:
  /// Starts delaying the packets leaving `eth0` in namespace `ns` (a name under /var/run/netns)
  /// by `delay`, through queue `queue`. Throws std::runtime_error naming the failing step.
  NfqueueDelay(const std::string& ns, int queue, std::chrono::milliseconds delay);
  /// Removes the rule, then lets every held packet go and stops.
  ~NfqueueDelay();
  NfqueueDelay(const NfqueueDelay&) = delete;
  NfqueueDelay& operator=(const NfqueueDelay&) = delete;

  /// Packets delayed so far.
  long packets() const { return packets_.load(); }

 private:
  void loop();
  std::string iptables_rule() const;
  std::string ns_;
  std::string rule_;  // "nft" or "iptables": which rule queues the packets
  int queue_;
  std::chrono::milliseconds delay_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<long> packets_{0};
  std::thread thread_;
};

}  // namespace anvil::dist::test
