// The gloo backend's broadcast of large messages: a chunked chain over a second full mesh of
// gloo TCP pairs in synchronous mode.
//
// gloo's own broadcast posts one unbound-buffer send per peer on the root. On its (asynchronous)
// pairs the payload past the first socket buffer is written by the device's event-loop thread,
// and every receiver's payload is read by its event-loop thread, woken through epoll for each
// batch of bytes: two extra threads per rank hand every large message on, and on a loaded
// machine each of their wakeups waits for a core (see docs/design_notes.md). A synchronous
// pair is out of the event loop: the op's own thread writes with a blocking writev and reads
// with a blocking recv, so a large message crosses the socket with one thread at each end.
//
// The chain: ranks in order from the root (position p = (rank - root) mod W); the rank at p
// receives each chunk from p - 1 and passes it on to p + 1 before it reads the next one, so the
// root sends every byte once whatever W is, and the chunks of one message are in flight on
// every link at once. No cycle of blocking calls exists (each link carries data one way), so
// the chain cannot deadlock; a dead or late peer ends the blocking call after the socket
// timeout, which is the group's op timeout (use_chain_broadcast keeps ops with another timeout
// on gloo's broadcast).
#include <gloo/rendezvous/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/error.h"
#include "dist/gloo/gloo_process_group.h"
#include "dist/gloo/gloo_store.h"

namespace anvil::dist {

namespace {

/// The buffer slot of the chain's messages (the sync mesh carries nothing else).
constexpr int kChainSlot = 1;

/// Socket timeouts beyond this are not set reliably (gloo converts the timeout into a timeval);
/// groups with a longer op timeout keep gloo's broadcast.
constexpr Millis kMaxSyncTimeout{24LL * 3600 * 1000};

/// Parses a byte count from `var`: a non-negative integer, or "off" when `off_ok` (returns
/// INT64_MAX); unset or empty returns `fallback`.
int64_t env_bytes(const char* var, int64_t fallback, bool off_ok, int64_t min_value) {
  const char* v = std::getenv(var);
  if (!v || !*v) return fallback;
  const std::string s(v);
  if (off_ok && s == "off") return std::numeric_limits<int64_t>::max();
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n < min_value)
    throw Error(str("bad ", var), "gloo backend",
                str("an integer byte count >= ", min_value, off_ok ? " or 'off'" : ""), s);
  return n;
}

}  // namespace

void GlooProcessGroup::init_chain_settings() {
  chain_min_ = env_bytes("ANVIL_GLOO_BCAST_CHAIN_MIN", kGlooChainBroadcastMin, true, 0);
  chain_chunk_ = env_bytes("ANVIL_GLOO_BCAST_CHUNK", kGlooChainBroadcastChunk, false, 1);
}

bool GlooProcessGroup::use_chain_broadcast(int64_t nbytes, Millis timeout) const {
  return size() > 1 && nbytes > 0 && nbytes >= chain_min_ && timeout == options().timeout &&
         timeout > Millis{0} && timeout <= kMaxSyncTimeout;
}

void GlooProcessGroup::chain_broadcast(Tensor& t, int src) {
  if (!sync_context_) {
    // Connected here, on the first large broadcast, by every rank of the group at the same
    // point: the broadcast is a collective, so each rank reaches it with the same size.
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank(), size());
    ctx->setTimeout(options().timeout);
    GlooStore adapter(std::make_shared<PrefixStore>("chain_bcast", store_));
    try {
      ctx->connectFullMesh(adapter, device_);
      for (int j = 0; j < size(); ++j)
        if (j != rank()) ctx->getPair(j)->setSync(true, false);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error("gloo rendezvous of the broadcast mesh failed",
                  str("gloo group (rank ", rank(), " of ", size(), ")"),
                  "every rank connected", e.what());
    }
    sync_context_ = ctx;
  }
  const int W = size();
  const int pos = (rank() - src + W) % W;
  const int prev = (rank() - 1 + W) % W;
  const int next = (rank() + 1) % W;
  const bool receives = pos > 0;
  const bool forwards = pos < W - 1;
  auto* data = static_cast<char*>(t.data_ptr());
  const size_t nbytes = t.nbytes();
  // One buffer per link over the whole tensor: a chunk's message carries its offset.
  std::unique_ptr<gloo::transport::Buffer> in, out;
  if (receives) in = sync_context_->getPair(prev)->createRecvBuffer(kChainSlot, data, nbytes);
  if (forwards) out = sync_context_->getPair(next)->createSendBuffer(kChainSlot, data, nbytes);
  const size_t chunk = static_cast<size_t>(chain_chunk_);
  for (size_t off = 0; off < nbytes; off += chunk) {
    const size_t len = std::min(chunk, nbytes - off);
    if (receives) in->waitRecv();  // reads exactly one message: this chunk
    if (forwards) {
      out->send(off, len, off);  // a blocking write on a synchronous pair
      out->waitSend();
    }
  }
}

}  // namespace anvil::dist
