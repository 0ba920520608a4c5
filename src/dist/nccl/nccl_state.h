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
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "dist/settings.h"
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

/// One group's communicator, stream and failure state. Shared by the group and its events.
struct NcclState {
  int device = 0;
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
  cudaStream_t stream = nullptr;  // the group's internal stream
  cudaEvent_t ready = nullptr;    // marks the caller's stream; the internal stream waits on it
  float* barrier_buf = nullptr;   // one float on the device: barrier = all_reduce of it
  std::atomic<uint64_t> seq{0};  // taken under mu; read without it
  std::string broken;  // the first failure (empty while usable)

  // --- guarded by pmu: ops in flight, watched until they pass or fail
  std::mutex pmu;
  std::condition_variable pcv;
  std::deque<std::shared_ptr<NcclEvent>> pending;
  bool stop_watchdog = false;
  std::thread watchdog;

  /// Creates the communicator when there is none (mu held): ncclCommInitRankConfig, polled
  /// until ready or `deadline`. Throws Error (the communicator then aborted).
  void ensure_comm(Clock::time_point deadline, const std::string& where);
  /// Polls ncclCommGetAsyncError until the communicator is no longer in progress (mu held);
  /// throws Error naming `what` on an error or when `deadline` passes.
  void wait_ready(Clock::time_point deadline, const std::string& what, const std::string& where);
  /// Checks the result of an NCCL call on the communicator (mu held): ncclInProgress is waited
  /// for (wait_ready), anything but success throws Error naming `what`.
  void check(ncclResult_t r, Clock::time_point deadline, const std::string& what,
             const std::string& where);
  /// Aborts the communicator and marks the group unusable with `reason` (the first reason
  /// wins); every op in flight fails with it. Takes mu (abort_locked: mu already held).
  void abort(const std::string& reason);
  void abort_locked(const std::string& reason);
  /// The communicator's asynchronous error as a message, or "" (none, or mu is busy now).
  std::string async_error();
  /// The other members, "rank 1 (world rank 1)" / "ranks 1, 2 (world ranks 3, 4)"; `peer` >= 0:
  /// that rank only.
  std::string peers(int peer) const;

  void add_pending(std::shared_ptr<NcclEvent> e);
  /// Polls every op in flight until they passed or failed, or `deadline`; true when none is
  /// left.
  bool drain(Clock::time_point deadline);
  void start_watchdog();
  void stop_watchdog_thread();
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
  std::string device() const override { return str("cuda:", st_->device); }

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
  bool passed_ = false;  // guarded by st_->pmu, as failed_ and keep_
  std::string failed_;
};

}  // namespace anvil::dist::nccl
