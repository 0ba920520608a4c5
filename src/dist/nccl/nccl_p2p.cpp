// NcclState's device objects (stream, event, scratch), moving a group to another GPU before it
// used its own (barrier(device_ids)), and the p2p lanes of send / recv (nccl_state.h).
#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>

#include "core/error.h"
#include "dist/nccl/nccl_state.h"
#include "dist/nccl/one_shot.h"
#include "dist/nccl/one_shot_kernel.h"

namespace anvil::dist::nccl {

namespace {

/// Throws Error naming `what` on `device` when `e` is not cudaSuccess.
void cuda_check(cudaError_t e, const std::string& what, int device, const std::string& where) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw Error(str("the nccl backend cannot ", what, " on cuda:", device), where, "cudaSuccess",
              cuda_message(e));
}

}  // namespace

void NcclState::make_device_objects(const std::string& where) {
  const int d = device;
  use_device(d);
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "create its stream", d,
             where);
  cuda_check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "create an event", d, where);
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&scratch), kScratchBytes),
             "allocate its scratch buffer", d, where);
  cuda_check(cudaMemset(scratch, 0, kScratchBytes), "clear its scratch buffer", d, where);
  // the one-shot all_reduce's part on this device (connected by the first op that takes it)
  one_shot.reset();
  one_shot_tried = false;
  if (one_shot_bytes > 0 && size >= 2 && size <= kOneShotMaxRanks)
    one_shot = OneShot::prepare(rank, size, one_shot_bytes);
  std::lock_guard<std::mutex> lk(emu);
  events_open = true;
}

void NcclState::release_device_objects() {
  (void)cudaSetDevice(device);
  one_shot.reset();  // (ops in flight keep it through their events)
  for (auto& [peer, lanes] : p2p)
    for (P2pLane* l : {&lanes.send, &lanes.recv})
      if (l->stream) {
        (void)cudaStreamDestroy(l->stream);
        l->stream = nullptr;
      }
  if (scratch) (void)cudaFree(scratch);
  if (ready) (void)cudaEventDestroy(ready);
  if (stream) (void)cudaStreamDestroy(stream);
  scratch = nullptr;
  ready = nullptr;
  stream = nullptr;
  std::lock_guard<std::mutex> lk(emu);
  for (cudaEvent_t e : spare_events) (void)cudaEventDestroy(e);
  spare_events.clear();
  events_open = false;  // events given back later are destroyed
}

void NcclState::bind_device(int index, const std::string& where) {
  const int now = device;
  if (index == now) return;
  if (device_used)
    throw Error(str("the nccl group already runs on cuda:", now,
                    " (it posted ops, made its communicator or a sub-group there); a barrier on "
                    "cuda:",
                    index, " would make it span two GPUs: multi-device groups are not supported"),
                where, str("cuda:", now), str("cuda:", index));
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) (void)cudaGetLastError();
  if (e != cudaSuccess || index >= count)
    throw Error(str("the barrier's device cuda:", index, " does not exist (this machine has ",
                    e == cudaSuccess ? count : 0, " GPU(s))"),
                where, str("a device index below ", count), std::to_string(index));
  release_device_objects();
  device = index;
  try {
    make_device_objects(where);
  } catch (const std::exception& ex) {
    release_device_objects();
    std::lock_guard<std::mutex> lk(amu);
    if (broken.empty())
      broken = str(where, ": moving the group to cuda:", index, " failed: ", ex.what());
    throw;
  }
}

P2pPeer& NcclState::ensure_p2p(int peer, Store& store, Clock::time_point deadline,
                               const std::string& where) {
  P2pPeer& pp = p2p[peer];
  if (pp.send.comm && pp.recv.comm) return pp;
  const EnqueueMark mark(*this, creation_deadline(deadline), where);  // (store waits too)
  const int lo = std::min(rank, peer), hi = std::max(rank, peer);
  const bool low = rank == lo;
  const int me = low ? 0 : 1, other = 1 - me;  // ranks in the pair's communicators
  // The lower-to-higher lane is the lower rank's send lane and the higher rank's receive lane.
  P2pLane& up = low ? pp.send : pp.recv;
  P2pLane& down = low ? pp.recv : pp.send;
  const std::string what =
      str("making the p2p communicators with ", peers(peer),
          " (the pair's first send / recv makes them: the peer takes part with its first send / "
          "recv to this rank)");
  auto fail = [&](const std::string& why, const std::string& expected, const std::string& actual) {
    abort_locked(str(where, ": ", what, " failed: ", why));
    throw Error(str(what, " failed: ", why, "; the group is unusable"), where, expected, actual);
  };

  // The unique ids, lower-to-higher first, made by the lower rank and read through the store.
  ncclUniqueId ids[2];
  // Keyed by this group's own unique id too, so a later group on the same store (the world made
  // again, say) never reads this one's ids.
  const size_t group_key =
      std::hash<std::string_view>{}(std::string_view(id.internal, sizeof(id.internal)));
  const std::string key = str("nccl/p2p/", std::hex, group_key, std::dec, "/", lo, "-", hi);
  if (low) {
    for (ncclUniqueId& u : ids) {
      const ncclResult_t r = ncclGetUniqueId(&u);
      if (r != ncclSuccess) fail("ncclGetUniqueId failed", "ncclSuccess", nccl_message(r));
    }
    store.set(key, std::string(reinterpret_cast<const char*>(ids), sizeof(ids)));
  } else {
    std::string bytes;
    try {
      bytes = store.get(key);
    } catch (const std::exception& e) {
      fail(str("rank ", lo, " never published the pair's unique ids: ", e.what()),
           "the unique ids in the store", "none");
    }
    if (bytes.size() != sizeof(ids))
      fail("the pair's unique ids in the store have the wrong size", std::to_string(sizeof(ids)),
           std::to_string(bytes.size()));
    std::memcpy(ids, bytes.data(), sizeof(ids));
  }

  const int d = device;
  for (P2pLane* l : {&up, &down})
    if (!l->stream) {
      const cudaError_t e = cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fail(str("creating a p2p stream on cuda:", d), "cudaSuccess", cuda_message(e));
      }
    }

  // Both communicators, lower-to-higher first on both ranks (a blocking communicator's creation
  // waits for the peer's), then polled until ready.
  const std::string names[2] = {str(comm_name, " p2p ", lo, "->", hi),
                                str(comm_name, " p2p ", hi, "->", lo)};
  P2pLane* lanes[2] = {&up, &down};
  ncclConfig_t cfgs[2] = {NCCL_CONFIG_INITIALIZER, NCCL_CONFIG_INITIALIZER};  // live until ready
  for (int i = 0; i < 2; ++i) {
    cfgs[i].blocking = blocking_comm ? 1 : 0;
    cfgs[i].commName = names[i].c_str();
    const ncclResult_t r = ncclCommInitRankConfig(&lanes[i]->comm, 2, ids[i], me, &cfgs[i]);
    if (r != ncclSuccess && r != ncclInProgress) {
      lanes[i]->comm = nullptr;  // not made: nothing to abort
      fail(str("ncclCommInitRankConfig (", names[i], ")"), "ncclSuccess", nccl_message(r));
    }
    if (!add_handle(lanes[i]->comm)) {
      lanes[i]->comm = nullptr;  // aborted by add_handle
      fail("the group was aborted while its p2p communicators were made", "a usable group",
           broken_reason());
    }
  }
  for (P2pLane* l : lanes) wait_ready(l->comm, deadline, what, where);

  // One byte each way connects the lanes now, while both ranks are here: NCCL connects a peer
  // on its first message, and that waits for the peer's side on the host, so a later send
  // posted while the peer's thread waits elsewhere could not connect.
  char* send_byte = scratch + kWarmSendOffset;
  char* recv_byte = scratch + kWarmRecvOffset;
  for (int i = 0; i < 2; ++i) {
    P2pLane& l = *lanes[i];
    const bool sending = &l == &pp.send;
    const ncclResult_t r = sending ? ncclSend(send_byte, 1, ncclUint8, other, l.comm, l.stream)
                                   : ncclRecv(recv_byte, 1, ncclUint8, other, l.comm, l.stream);
    check(l.comm, r, deadline, str("connecting the ", names[i], " lane (", what, ")"), where);
  }
  return pp;
}

}  // namespace anvil::dist::nccl
