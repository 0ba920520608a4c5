// Internals of the nccl backend (libanvil_nccl.so): the communicator state one group shares
// with the events of its ops, and the event a Work completes on. Not seen outside src/dist/nccl.
//
// Failure model: every op has a deadline (its timeout from posting). An op's event is polled
// (cudaEventQuery) by Work::wait and by the group's watchdog thread, which also polls
// ncclCommGetAsyncError. A deadline passed or an asynchronous NCCL error aborts the communicator
// (ncclCommAbort: NCCL's kernels stop waiting for the peer), fails every op in flight with an
// Error naming the op, the group, its sequence number and the ranks it waited on, and leaves the
// group unusable (later ops fail at once quoting the first failure). The communicator is
// non-blocking (ncclConfig_t::blocking = 0), so no NCCL call can hang the calling thread: a call
// returning ncclInProgress is polled until ready, bounded by the op's deadline.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "dist/settings.h"
#include "dist/store.h"
#include "dist/work.h"

namespace anvil::dist::nccl {

using Clock = std::chrono::steady_clock;

/// "cudaErrorNoDevice: no CUDA-capable device is detected".
std::string cuda_message(cudaError_t e);
/// "ncclRemoteError: remote process exited or there was a network error (NCCL: <last error>)".
std::string nccl_message(ncclResult_t r);

/// Makes `device` the calling thread's current CUDA device; throws Error when it cannot. Not
/// restored afterwards (as the CUDA backend does): a rank uses one GPU, and restoring a thread's
/// default device 0 would open a context on GPU 0 in every rank.
void use_device(int device);

class NcclEvent;

/// One direction of this rank's point-to-point traffic with one peer: a 2-rank communicator
/// that carries only that direction, and the stream its ops run on.
struct P2pLane {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

/// This rank's lanes to one peer: sends go on `send`, receives on `recv`.
struct P2pPeer {
  P2pLane send, recv;
};

/// One group's communicator, stream and failure state. Shared by the group and its events.
///
/// Point-to-point ops (send / recv) do not run on the group's communicator: NCCL runs the ops of
/// one communicator one after another on the device, so rank 0's send -> recv against rank 1's
/// send -> recv would have each send wait for a receive queued behind the other's send (a
/// deadlock once a message outgrows NCCL's buffers). As c10d gives p2p ops their own
/// communicator and stream, each pair of ranks gets two 2-rank communicators, one per direction,
/// each on its own stream: the messages of one direction match in posting order, and a send
/// never waits behind a receive. They are made, with their connections, by the pair's first
/// p2p op (ensure_p2p); like every op, a p2p op starts after the caller's stream and completes
/// on an event recorded on its lane's stream. Ops on different lanes are ordered only through
/// the caller's stream (wait / wait_stream), as in c10d.
struct NcclState {
  /// The group's GPU; moved only by bind_device before the group used it (barrier(device_ids)).
  std::atomic<int> device{0};
  int rank = 0, size = 1;
  std::vector<int> global_ranks;
  /// The ops whose wait_stream blocks the host: every op with GroupOptions::blocking_wait,
  /// else ANVIL_NCCL_BLOCKING_WAIT's list (settings.h; barrier always).
  OpTypeSet blocking_wait;
  bool blocking_comm = false;  // DistSettings::nccl_blocking_comm
  std::string comm_name;  // the group's name, for NCCL's logs
  ncclUniqueId id{};

  // --- guarded by mu: issuing ops, creating and aborting the communicator
  std::mutex mu;
  ncclComm_t comm = nullptr;
  bool aborted = false;
  cudaStream_t stream = nullptr;  // the group's internal stream (collectives)
  cudaEvent_t ready = nullptr;    // marks the caller's stream; the op's stream waits on it
  /// kScratchBytes on the device: the barrier all_reduces the float at 0; the p2p lanes' first
  /// message (connecting them) sends the byte at kWarmSendOffset, receives at kWarmRecvOffset.
  char* scratch = nullptr;
  static constexpr size_t kScratchBytes = 64, kWarmSendOffset = 16, kWarmRecvOffset = 32;
  std::map<int, P2pPeer> p2p;  // by peer (group rank); made by ensure_p2p
  /// The group used its GPU (an op posted, a communicator or a sub-group made): bind_device
  /// may no longer move it.
  bool device_used = false;
  std::atomic<uint64_t> seq{0};  // taken under mu; read without it
  std::string broken;  // the first failure (empty while usable)

  // --- guarded by pmu: ops in flight, watched until they pass or fail
  std::mutex pmu;
  std::condition_variable pcv;
  std::deque<std::shared_ptr<NcclEvent>> pending;
  bool stop_watchdog = false;
  std::thread watchdog;

  // --- guarded by emu: spare op events (cudaEventDisableTiming, on `device`). An op takes one
  // and its NcclEvent gives it back, so issuing a small op makes no cudaEventCreate and no
  // cudaEventDestroy. Its own lock: an NcclEvent may be dropped while pmu is held.
  std::mutex emu;
  std::vector<cudaEvent_t> spare_events;
  bool events_open = false;  // set by make_device_objects, cleared by release_device_objects
  static constexpr size_t kMaxSpareEvents = 1024;  // (b2b ops: hundreds in flight)
  /// A spare event, or a new one.
  cudaError_t take_event(cudaEvent_t* ev);
  /// Keeps `ev` for a later op (destroys it when the spares are full or released).
  void give_event(cudaEvent_t ev);

  /// Creates the communicator when there is none (mu held): ncclCommInitRankConfig, polled
  /// until ready or `deadline`. Throws Error (the communicator then aborted).
  void ensure_comm(Clock::time_point deadline, const std::string& where);
  /// The lanes to `peer`, made on first use (mu held, device set): both ranks of the pair make
  /// both communicators (unique ids from the lower rank through `store`, bounded by the store's
  /// timeout), lower-to-higher first, then connect each with a 1-byte message, so no later p2p
  /// op waits on its peer on the host. Throws Error (the group then aborted).
  P2pPeer& ensure_p2p(int peer, Store& store, Clock::time_point deadline, const std::string& where);
  /// Moves the group to cuda:`index` (mu held): its stream, event and scratch are made again
  /// there. Throws Error when the group already used another GPU (multi-device), or when
  /// cuda:`index` does not exist.
  void bind_device(int index, const std::string& where);
  /// Polls ncclCommGetAsyncError on `c` until it is no longer in progress (mu held); throws
  /// Error naming `what` on an error or when `deadline` passes.
  void wait_ready(ncclComm_t c, Clock::time_point deadline, const std::string& what,
                  const std::string& where);
  /// Checks the result of an NCCL call on communicator `c` (mu held): ncclInProgress is waited
  /// for (wait_ready), anything but success throws Error naming `what`.
  void check(ncclComm_t c, ncclResult_t r, Clock::time_point deadline, const std::string& what,
             const std::string& where);
  /// Aborts the communicator and marks the group unusable with `reason` (the first reason
  /// wins); every op in flight fails with it. Takes mu (abort_locked: mu already held).
  void abort(const std::string& reason);
  void abort_locked(const std::string& reason);
  /// The asynchronous error of the group's communicator or of a p2p lane as a message, or ""
  /// (none, or mu is busy now).
  std::string async_error();
  /// The other members, "rank 1 (world rank 1)" / "ranks 1, 2 (world ranks 3, 4)"; `peer` >= 0:
  /// that rank only.
  std::string peers(int peer) const;

  /// Watches `e` until it passes or fails. Wakes the watchdog only when nothing was pending
  /// (it sleeps long then; with ops in flight it polls every 10 ms anyway): waking it for each
  /// op made it scan every pending event per op, its cudaEventQuery calls contending with the
  /// issuing thread's CUDA calls, back-to-back small ops slower than synchronized ones.
  void add_pending(std::shared_ptr<NcclEvent> e);
  /// Polls every op in flight until they passed or failed, or `deadline`; true when none is
  /// left.
  bool drain(Clock::time_point deadline);
  void start_watchdog();
  void stop_watchdog_thread();
  /// Makes the stream, event and scratch buffer on `device` (mu held or not yet shared);
  /// throws Error. release_device_objects frees them and the p2p streams (never throws).
  void make_device_objects(const std::string& where);
  void release_device_objects();
};

/// The event an nccl op's Work completes on: recorded on the group's stream after the op. Keeps
/// the op's tensors alive until the device passed it.
class NcclEvent final : public DeviceEvent {
 public:
  /// `captured`: the op was recorded into a CUDA graph being captured, not run: it counts as
  /// passed on the host (nothing to watch; the graph's launches run it) and block_stream only
  /// adds the graph edge from the op to the caller's stream.
  NcclEvent(std::shared_ptr<NcclState> st, cudaEvent_t ev, std::string where,
            Clock::time_point deadline, Millis timeout, int peer, std::vector<Tensor> keep,
            bool blocking, bool captured = false);
  ~NcclEvent() override;

  /// True once passed; throws Error when the op failed (the group aborted, the deadline passed,
  /// an asynchronous NCCL error, a CUDA error), aborting the communicator first when this call
  /// found the failure.
  bool query() override;
  /// Polls query() (never cudaEventSynchronize: a dead peer would hang it).
  void synchronize() override;
  /// cudaStreamWaitEvent; for an op in the group's blocking-wait set, synchronize() instead.
  void block_stream(void* stream) override;
  std::string device() const override { return str("cuda:", st_->device.load()); }

  /// Called by NcclState::abort (pmu held): fails the op with `reason` unless it passed.
  void fail_if_pending(const std::string& reason);
  bool settled() const { return passed_ || !failed_.empty(); }

 private:
  std::shared_ptr<NcclState> st_;
  cudaEvent_t ev_;
  std::string where_;
  Clock::time_point deadline_;
  Millis timeout_;
  int peer_;
  std::vector<Tensor> keep_;
  bool blocking_;  // block_stream synchronizes the host
  bool captured_;  // recorded into a graph: the event is destroyed, never given back
  bool passed_ = false;  // guarded by st_->pmu, as failed_ and keep_
  std::string failed_;
};

}  // namespace anvil::dist::nccl
