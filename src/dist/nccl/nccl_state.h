// Internals of the nccl backend (libanvil_nccl.so): the communicator state one group shares
// with the events of its ops, and the event a Work completes on. Not seen outside src/dist/nccl.
//
// Failure model: every op has a deadline (its timeout from posting). An op's event is polled
// (cudaEventQuery) by Work::wait and by the group's watchdog thread, which also polls
// ncclCommGetAsyncError. A deadline passed or an asynchronous NCCL error aborts the communicator
// (ncclCommAbort: NCCL's kernels stop waiting for the peer), fails every op in flight with an
// Error naming the op, the group, its sequence number and the ranks it waited on, and leaves the
// group unusable (later ops fail at once quoting the first failure).
//
// The communicator is blocking by default (NCCL's own enqueue, as c10d's: about 3x less host
// time per small op than a non-blocking one, whose every group end hands the launch to a new
// thread). A blocking call could wait on a peer where NCCL connects lazily (a first op), so the
// group has NCCL make its collectives' connections when the communicator is created
// (NCCL_RUNTIME_CONNECT=0 unless the user set it): a collective's enqueue then waits on no peer,
// and a dead peer fails the op through its event's deadline as above. NCCL still connects
// send / recv on first use, so the first all_to_all, gather or scatter of a group can wait on a
// peer. Should a call stay inside NCCL kStuckGrace past its deadline while holding `mu`
// (EnqueueMark; communicator creation is given the group's timeout), the watchdog ends the
// process with the op, group and peers named (never a hang; ncclCommAbort from another thread
// while a call is inside NCCL corrupted the heap on 2 x H200).
// ANVIL_NCCL_BLOCKING_COMM=0 makes it non-blocking (ncclConfig_t::blocking = 0): no NCCL call
// can then wait, a call returning ncclInProgress being polled until ready or its deadline.
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
class OneShot;

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
  bool blocking_comm = true;  // DistSettings::nccl_blocking_comm
  int64_t caller_stream_bytes = 0;  // DistSettings::nccl_caller_stream_bytes
  int64_t one_shot_bytes = 0;  // the one-shot limit in effect (NcclProcessGroup's constructor)
  /// The one-shot all_reduce (one_shot.h; guarded by mu): made on the first eligible op; null
  /// before and when the group cannot use it (one_shot_tried tells which).
  std::shared_ptr<OneShot> one_shot;
  bool one_shot_tried = false;
  Millis group_timeout{0};  // GroupOptions::timeout: creating communicators may take that long
  std::string comm_name;  // the group's name, for NCCL's logs
  ncclUniqueId id{};

  // --- guarded by mu: issuing ops, creating and aborting the communicator
  std::mutex mu;
  ncclComm_t comm = nullptr;  // (its handle also in `handles`, which an abort empties)
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

  // --- guarded by amu (never held across an NCCL call but ncclCommGetAsyncError): the failure
  // and the work in progress under mu, readable while a thread holds mu inside NCCL.
  std::mutex amu;
  std::vector<ncclComm_t> handles;  // every communicator made and not yet aborted
  bool handles_aborted = false;     // the group's communicators were aborted (it is unusable)
  std::string broken;               // the first failure (empty while usable)
  /// The NCCL work in progress under mu (EnqueueMark): its deadline ({} when none) and the op.
  Clock::time_point enqueue_deadline{};
  const std::string* enqueue_where = nullptr;
  std::atomic<bool> enqueue_idle{true};  // no EnqueueMark (read by the watchdog without amu)
  /// How long past its deadline a blocking communicator's call may stay inside NCCL (an error
  /// return then still fails the op normally) before the watchdog ends the process.
  static constexpr std::chrono::seconds kStuckGrace{5};

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
  /// wins); every op in flight fails with it. abort_locked: mu already held. abort: takes mu;
  /// when the thread holding it is inside NCCL past its op's deadline (stuck_enqueue), ends the
  /// process with `reason` (see the header comment).
  void abort(const std::string& reason);
  void abort_locked(const std::string& reason);
  /// Takes mu; when the thread holding it stays inside NCCL past its op's deadline
  /// (stuck_enqueue), ends the process naming `reason` and that op instead of waiting forever.
  std::unique_lock<std::mutex> lock_unless_stuck(const std::string& reason);
  /// The deadline of making a communicator for an op due by `op_deadline`: it waits on every
  /// peer (and the store), so the later of that and the group's timeout from now.
  Clock::time_point creation_deadline(Clock::time_point op_deadline) const;
  /// The group's first failure, or "" while usable.
  std::string broken_reason();
  /// Records a communicator just made (its abort goes through `handles`); false when the group
  /// was aborted meanwhile (the communicator is then aborted and must not be used).
  bool add_handle(ncclComm_t c);
  /// The op whose NCCL call under mu is kStuckGrace past its deadline on a blocking
  /// communicator, or "" (none).
  std::string stuck_enqueue();
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

/// Marks the NCCL work a thread does under `mu` (enqueueing an op's calls: the op's deadline;
/// creating communicators: creation_deadline) so that abort() and the watchdog can tell a call
/// stuck on a peer from one that will return (nccl_state.h's header comment).
class EnqueueMark {
 public:
  EnqueueMark(NcclState& st, Clock::time_point deadline, const std::string& where);
  ~EnqueueMark();
  EnqueueMark(const EnqueueMark&) = delete;
  EnqueueMark& operator=(const EnqueueMark&) = delete;

 private:
  NcclState& st_;
};

/// The event an nccl op's Work completes on: recorded on the op's stream (the group's, a p2p
/// lane's or the caller's) after the op. Keeps
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

  /// Called by NcclState::abort before the abort (pmu held): records that the op passed when its
  /// event says so.
  void note_if_passed();
  /// Called by NcclState::abort after the abort (pmu held): fails the op with `reason` unless
  /// it was seen passed before (its event is not asked: see fail_pending).
  void fail_unless_passed(const std::string& reason);
  bool settled() const { return passed_ || !failed_.empty(); }
  /// The op is the one-shot all_reduce #`seq` (one_shot.h): once its event passed, the kernel
  /// may still report that it gave up on a peer, and the op then fails.
  void watch_one_shot(std::shared_ptr<const OneShot> os, uint64_t seq) {
    one_shot_ = std::move(os);
    one_shot_seq_ = seq;
  }

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
  std::shared_ptr<const OneShot> one_shot_;  // set before the event is shared (watch_one_shot)
  uint64_t one_shot_seq_ = 0;
  bool passed_ = false;  // guarded by st_->pmu, as failed_ and keep_
  std::string failed_;
};

}  // namespace anvil::dist::nccl
