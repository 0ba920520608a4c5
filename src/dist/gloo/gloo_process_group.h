// The gloo backend: CPU collectives over Gloo's TCP transport (Debian libgloo-dev).
// Rendezvous goes through a dist::Store (adapted to gloo::rendezvous::Store); each group owns a
// gloo context (a full mesh of TCP pairs) created from its own PrefixStore namespace.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/host_process_group.h"
#include "dist/store.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace anvil::dist {

/// The network interface gloo binds to: GLOO_SOCKET_IFNAME (or ANVIL_GLOO_IFNAME) when set, else
/// 127.0.0.1 when `master_addr` is a loopback name or empty, else this host's name.
struct GlooDeviceSpec {
  std::string hostname;
  std::string iface;
};
GlooDeviceSpec gloo_device_from_env(const std::string& master_addr);

/// Broadcasts of at least this many bytes take the chain path (gloo_broadcast.cpp) unless
/// ANVIL_GLOO_BCAST_CHAIN_MIN sets another threshold (bytes; 0 = always, "off" = never).
inline constexpr int64_t kGlooChainBroadcastMin = 0;
/// The chain path forwards the message in chunks of this many bytes (ANVIL_GLOO_BCAST_CHUNK).
inline constexpr int64_t kGlooChainBroadcastChunk = 1 << 20;

/// A process group over a gloo context (on the host engine).
class GlooProcessGroup : public HostProcessGroup {
 public:
  /// Connects the full mesh through `store` (keys live under the store's namespace, so give
  /// each group its own PrefixStore); blocks until every rank arrived or the store's timeout.
  GlooProcessGroup(std::shared_ptr<Store> store, int rank, int size, std::vector<int> global_ranks,
                   GroupOptions options, GlooDeviceSpec device = {"127.0.0.1", ""});
  ~GlooProcessGroup() override;
  std::string backend_name() const override { return "gloo"; }
  const std::shared_ptr<Store>& store() const { return store_; }

 protected:
  void run_all_reduce(Tensor& t, ReduceOp op, Millis timeout) override;
  void run_all_gather(Tensor& out, const Tensor& in, Millis timeout) override;
  void run_all_to_all(Tensor& out, const Tensor& in, const std::vector<int64_t>& out_counts,
                      const std::vector<int64_t>& in_counts, Millis timeout) override;
  void run_reduce(Tensor& t, ReduceOp op, int root, Millis timeout) override;
  void run_broadcast(Tensor& t, int src, Millis timeout) override;
  void run_barrier(Millis timeout) override;
  P2PWaiter post_send(const Tensor& t, int dst, int tag) override;
  P2PWaiter post_recv(Tensor& t, int src, int tag) override;
  P2PWaiter post_recv_any(Tensor& t, int tag) override;
  std::shared_ptr<ProcessGroup> make_subgroup(const std::vector<int>& members,
                                              const std::string& name) override;
  /// A fifth of the timeout, at most 1 s (none for a group of one).
  Millis diagnosis_budget(Millis timeout) const override;
  /// Names the peers that did not report failing the same op through the group's store within
  /// `budget` (gloo_diagnose.cpp): a stopped, cut-off or crashed peer stays silent, survivors
  /// report. When the store does not answer either, says this rank's network is likely down.
  std::string diagnose_failure(const Work& work, Millis budget) override;

 private:
  std::shared_ptr<Store> store_;
  GlooDeviceSpec device_spec_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;

  // The chain broadcast (gloo_broadcast.cpp): a second full mesh whose pairs run in gloo's
  // synchronous mode, connected on the first large broadcast (a collective call, so every rank
  // connects it at the same point).
  void init_chain_settings();
  bool use_chain_broadcast(int64_t nbytes, Millis timeout) const;
  void chain_broadcast(Tensor& t, int src);
  std::shared_ptr<gloo::Context> sync_context_;
  int64_t chain_min_ = kGlooChainBroadcastMin;
  int64_t chain_chunk_ = kGlooChainBroadcastChunk;
};

}  // namespace anvil::dist
