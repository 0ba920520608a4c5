// GlooProcessGroup: the gloo backend's primitives.
#include "dist/gloo/gloo_process_group.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/error.h"
#include "dist/gloo/gloo_store.h"
#include "dist/reduce.h"

namespace anvil::dist {

namespace {

/// Slot prefix of point-to-point messages: distinct from gloo's collective prefixes (0x01-0x08).
constexpr uint64_t kP2PSlotPrefix = 0xA5;

uint64_t p2p_slot(int tag) { return (kP2PSlotPrefix << 56) | static_cast<uint32_t>(tag); }

/// Calls f(W{}) with W an unsigned integer type of `bytes` bytes: gloo's templates only use
/// sizeof(T), so this moves any dtype of that element size.
template <typename F>
void with_word(size_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      f(uint8_t{});
      return;
    case 2:
      f(uint16_t{});
      return;
    case 4:
      f(uint32_t{});
      return;
    case 8:
      f(uint64_t{});
      return;
  }
  ANVIL_INTERNAL_ASSERT(false, str("gloo: no word type of ", bytes, " bytes"));
}

/// Gloo's TCP transport writes with writev(), so a peer that died would kill this process with
/// SIGPIPE instead of failing the op. Ignore SIGPIPE unless the program installed a handler.
void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL)
      ::signal(SIGPIPE, SIG_IGN);
  });
}

/// Whether gloo's event-loop thread runs under SCHED_BATCH: ANVIL_GLOO_LOOP_SCHED=batch (the
/// default) or other. gloo's loop only try-locks a pair when its socket has events; when a
/// caller thread holds that lock (posting a send or receive) it returns, and the level-triggered
/// epoll_wait reports the same event at once, so the loop spins. Woken by a peer's data, the
/// loop thread preempted a lock-holding caller on the same core and then spun for the rest of
/// its time slice: a 64 B all_reduce took ~4 ms instead of ~0.3 ms with each rank on one core,
/// and the same stalls hit unpinned runs whenever the scheduler stacked both threads on one
/// core. A SCHED_BATCH thread does not preempt on wakeup and keeps its fair CPU share.
bool loop_thread_batch() {
  const char* v = std::getenv("ANVIL_GLOO_LOOP_SCHED");
  if (!v || !*v || std::string(v) == "batch") return true;
  if (std::string(v) == "other") return false;
  throw Error("unknown ANVIL_GLOO_LOOP_SCHED", "gloo backend", "batch or other", v);
}

/// Runs `create` with the calling thread under SCHED_BATCH when `batch`, so the threads it
/// starts inherit that policy (glibc's default PTHREAD_INHERIT_SCHED), and restores the
/// caller's policy afterwards. A caller under any policy but SCHED_OTHER is left alone.
template <typename F>
auto with_loop_policy(bool batch, F&& create) {
  batch = batch && sched_getscheduler(0) == SCHED_OTHER;
  sched_param prio{};
  if (batch && sched_setscheduler(0, SCHED_BATCH, &prio) != 0) return create();
  struct Restore {
    bool on;
    ~Restore() {
      sched_param p{};
      if (on) sched_setscheduler(0, SCHED_OTHER, &p);
    }
  } restore{batch};
  return create();
}

/// One tcp device per (hostname, iface) for the whole process: its event loop serves every
/// group's pairs.
std::shared_ptr<gloo::transport::Device> shared_device(const GlooDeviceSpec& spec) {
  ignore_sigpipe();
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<gloo::transport::Device>> cache;
  std::lock_guard<std::mutex> lk(mu);
  const std::string key = spec.hostname + "|" + spec.iface;
  if (auto d = cache[key].lock()) return d;
  gloo::transport::tcp::attr attr;
  if (!spec.iface.empty())
    attr.iface = spec.iface;
  else
    attr.hostname = spec.hostname.empty() ? "127.0.0.1" : spec.hostname;
  const bool batch = loop_thread_batch();
  std::shared_ptr<gloo::transport::Device> d;
  try {
    d = with_loop_policy(batch, [&] { return gloo::transport::tcp::CreateDevice(attr); });
  } catch (const std::exception& e) {
    throw Error("cannot create the gloo TCP device", "gloo",
                spec.iface.empty() ? str("a usable address for host '", attr.hostname, "'")
                                   : str("a usable interface '", spec.iface, "'"),
                e.what());
  }
  cache[key] = d;
  return d;
}

bool is_loopback(const std::string& host) {
  return host.empty() || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

GlooDeviceSpec gloo_device_from_env(const std::string& master_addr) {
  for (const char* var : {"GLOO_SOCKET_IFNAME", "ANVIL_GLOO_IFNAME"})
    if (const char* v = std::getenv(var); v && *v) return {"", v};
  if (is_loopback(master_addr)) return {"127.0.0.1", ""};
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0 || !*host) return {"127.0.0.1", ""};
  return {host, ""};
}

GlooProcessGroup::GlooProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                                   std::vector<int> global_ranks, GroupOptions options,
                                   GlooDeviceSpec device)
    : HostProcessGroup(rank, size, std::move(global_ranks), options),
      store_(std::move(store)),
      device_spec_(std::move(device)) {
  if (!store_) throw Error("the gloo backend needs a store", "GlooProcessGroup", "a store", "null");
  init_chain_settings();
  device_ = shared_device(device_spec_);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(store_->timeout());
  GlooStore adapter(store_);
  try {
    ctx->connectFullMesh(adapter, device_);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("gloo rendezvous failed", str("gloo group (rank ", rank, " of ", size, ")"),
                "every rank connected", e.what());
  }
  context_ = ctx;
}

namespace {

/// A gloo all_reduce / reduce in place over `t` with anvil's reduce op, tag 0 and `timeout`.
template <class Options>
void set_reduction(Options& o, Tensor& t, ReduceOp op, Millis timeout) {
  with_word(t.element_size(), [&](auto w) {
    using W = decltype(w);
    o.template setOutput<W>(static_cast<W*>(t.data_ptr()), static_cast<size_t>(t.numel()));
  });
  const ReduceFn fn = reduce_fn(t.dtype(), op);
  o.setReduceFunction(
      [fn](void* out, const void* a, const void* b, size_t n) { fn(out, a, b, n); });
  o.setTag(0);
  o.setTimeout(timeout);
}

}  // namespace

GlooProcessGroup::~GlooProcessGroup() { stop_threads(); }

void GlooProcessGroup::run_all_reduce(Tensor& t, ReduceOp op, Millis timeout) {
  if (size() == 1) return;
  gloo::AllreduceOptions o(context_);
  set_reduction(o, t, op, timeout);
  gloo::allreduce(o);
}

void GlooProcessGroup::run_all_gather(Tensor& out, const Tensor& in, Millis timeout) {
  if (size() == 1) {
    out.reshape({in.numel()}).copy_from(in.reshape({in.numel()}));
    return;
  }
  gloo::AllgatherOptions o(context_);
  with_word(in.element_size(), [&](auto w) {
    using W = decltype(w);
    o.setInput<W>(static_cast<W*>(in.data_ptr()), static_cast<size_t>(in.numel()));
    o.setOutput<W>(static_cast<W*>(out.data_ptr()), static_cast<size_t>(out.numel()));
  });
  o.setTag(0);
  o.setTimeout(timeout);
  gloo::allgather(o);
}

void GlooProcessGroup::run_all_to_all(Tensor& out, const Tensor& in,
                                      const std::vector<int64_t>& out_counts,
                                      const std::vector<int64_t>& in_counts, Millis timeout) {
  if (size() == 1) {
    if (in.numel() > 0) out.reshape({out.numel()}).copy_from(in.reshape({in.numel()}));
    return;
  }
  gloo::AlltoallvOptions o(context_);
  with_word(in.element_size(), [&](auto w) {
    using W = decltype(w);
    o.setInput<W>(static_cast<W*>(in.data_ptr()), in_counts);
    o.setOutput<W>(static_cast<W*>(out.data_ptr()), out_counts);
  });
  o.setTag(0);
  o.setTimeout(timeout);
  gloo::alltoallv(o);
}

void GlooProcessGroup::run_reduce(Tensor& t, ReduceOp op, int root, Millis timeout) {
  if (size() == 1) return;
  gloo::ReduceOptions o(context_);
  set_reduction(o, t, op, timeout);
  o.setRoot(root);
  gloo::reduce(o);  // in place: the root's t gets the result, the others' t is scratch
}

void GlooProcessGroup::run_broadcast(Tensor& t, int src, Millis timeout) {
  if (size() == 1) return;
  if (use_chain_broadcast(static_cast<int64_t>(t.nbytes()), timeout)) {
    chain_broadcast(t, src);  // large messages: gloo_broadcast.cpp
    return;
  }
  gloo::BroadcastOptions o(context_);
  with_word(t.element_size(), [&](auto w) {
    using W = decltype(w);
    o.setOutput<W>(static_cast<W*>(t.data_ptr()), static_cast<size_t>(t.numel()));
  });
  o.setRoot(src);
  o.setTag(0);
  o.setTimeout(timeout);
  gloo::broadcast(o);
}

void GlooProcessGroup::run_barrier(Millis timeout) {
  if (size() == 1) return;
  gloo::BarrierOptions o(context_);
  o.setTag(0);
  o.setTimeout(timeout);
  gloo::barrier(o);
}

HostProcessGroup::P2PWaiter GlooProcessGroup::post_send(const Tensor& t, int dst, int tag) {
  std::shared_ptr<gloo::transport::UnboundBuffer> buf =
      context_->createUnboundBuffer(t.data_ptr(), t.nbytes());
  buf->send(dst, p2p_slot(tag));
  Tensor keep = t;  // the memory must live until the send completed
  return [buf, keep](Millis timeout) {
    int peer = -1;
    buf->waitSend(&peer, timeout);
    return peer;
  };
}

HostProcessGroup::P2PWaiter GlooProcessGroup::post_recv(Tensor& t, int src, int tag) {
  std::shared_ptr<gloo::transport::UnboundBuffer> buf =
      context_->createUnboundBuffer(t.data_ptr(), t.nbytes());
  buf->recv(src, p2p_slot(tag));
  Tensor keep = t;
  return [buf, keep](Millis timeout) {
    int peer = -1;
    buf->waitRecv(&peer, timeout);
    return peer;
  };
}

HostProcessGroup::P2PWaiter GlooProcessGroup::post_recv_any(Tensor& t, int tag) {
  std::vector<int> peers;
  for (int j = 0; j < size(); ++j)
    if (j != rank()) peers.push_back(j);
  std::shared_ptr<gloo::transport::UnboundBuffer> buf =
      context_->createUnboundBuffer(t.data_ptr(), t.nbytes());
  buf->recv(peers, p2p_slot(tag));  // the first matching send of any peer
  Tensor keep = t;
  return [buf, keep](Millis timeout) {
    int peer = -1;
    buf->waitRecv(&peer, timeout);
    return peer;
  };
}

std::shared_ptr<ProcessGroup> GlooProcessGroup::make_subgroup(const std::vector<int>& members,
                                                              const std::string& name) {
  const auto [my, globals] = member_ranks(members);
  std::shared_ptr<ProcessGroup> sub;
  if (my >= 0) {
    auto sub_store = std::make_shared<PrefixStore>(str("subgroup/", name), store_);
    sub = std::make_shared<GlooProcessGroup>(sub_store, my, static_cast<int>(members.size()),
                                             globals, options(), device_spec_);
  }
  // Every member of this group waits until the sub-group's members are connected, so no rank
  // leaves (and rank 0 never takes the store down) while others still rendezvous.
  store_barrier(*store_, str("subgroup/", name, "/created"), rank(), size(), store_->timeout());
  return sub;
}

}  // namespace anvil::dist
