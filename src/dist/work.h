// Work: the handle of one posted operation, and DeviceEvent, the device point a Work may
// complete on.
//
// A host op (gloo, mpi, fake: the queued host engine) completes when the engine's thread has run
// it: finish(error). A device op completes in two steps: the engine queues it on a device stream
// and calls finish_on(event) (that is the host part), and the op is complete when the device
// passes the event. wait() blocks the host until the op is complete either way; wait_stream(s)
// makes a device stream wait instead: for a device op it queues a wait for the event on `s` and
// returns without blocking the host; a host op has no event, so the host waits (as wait()).
//
// get_future() hands out the op's Future (future.h: its value and completion callbacks; null
// when ANVIL_DIST_USE_FUTURE=0). With ANVIL_DIST_TRACE=1 the Work keeps its op's trace record
// (trace.h) current: when the engine started it, when it was seen complete, every wait.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/future.h"
#include "dist/trace.h"
#include "dist/types.h"

namespace anvil::dist {

/// A point in a device's queue of work that a Work completes on (a CUDA event recorded after
/// the op's kernels, say). A device backend implements it; Work calls it. Each call may throw
/// (the device's error: an asynchronous failure of the op), which becomes the op's error.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  /// True once the device has passed the event. Never blocks.
  virtual bool query() = 0;
  /// Blocks the calling thread until the device has passed the event.
  virtual void synchronize() = 0;
  /// Makes `stream` (the device's stream handle, e.g. a cudaStream_t) wait for the event: work
  /// queued on it afterwards starts once the device passed the event. Returns at once.
  virtual void block_stream(void* stream) = 0;
  /// The device the event is on ("cuda:0"), for messages.
  virtual std::string device() const = 0;
};

/// The message of an exception (what() of a std::exception, else "unknown error").
std::string message_of(const std::exception_ptr& e);

/// One posted collective or point-to-point operation.
class Work {
 public:
  /// `where` names the op for messages: "gloo all_reduce #3 on group '0' (rank 1 of 2)".
  Work(OpType op, uint64_t seq, std::string where);
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  virtual ~Work() = default;

  /// Sequence number of the op in its group (1 = first op posted).
  uint64_t seq() const { return seq_; }
  const std::string& where() const { return where_; }

  /// True once the op finished, successfully or not (a device op: once the device passed its
  /// event; a device error then is the op's error). Never throws, never blocks.
  bool is_completed() const;
  /// True once the op finished without error.
  bool is_success() const;
  /// The op's error once it failed (null otherwise).
  std::exception_ptr exception() const;
  /// True when the op completes on a device event (known once the host part is done).
  bool completes_on_event() const;

  /// Blocks until the op finished and rethrows its error. With `timeout` >= 0, gives up after
  /// that long with an Error naming the op and the timeout; the op itself stays in flight (it
  /// still ends by its own timeout) and a later wait() may succeed.
  bool wait(Millis timeout = kWaitForever);
  /// Makes `stream` wait for the op rather than the host, where the op allows it. A device op:
  /// waits (bounded by `timeout`) for its host part only, rethrows an error known by then, and
  /// queues a wait for its event on `stream`; the host does not wait for the device. A host op,
  /// or a null `stream` (no stream: the host consumes the result): the same as wait(timeout).
  void wait_stream(void* stream, Millis timeout = kWaitForever);

  /// The op's output tensors (valid once completed; e.g. the reduced tensor).
  std::vector<Tensor> result() const;
  /// recv / recv_any_source: the peer the data came from. Throws Error for other ops.
  int source_rank() const;
  /// The op's Future (the same object on every call), or null when futures are off
  /// (ANVIL_DIST_USE_FUTURE=0).
  std::shared_ptr<Future> get_future();
  OpType op() const { return op_; }

  // Used by the engine that runs the op.
  void set_result(std::vector<Tensor> outputs);
  void set_source_rank(int rank) { source_rank_ = rank; }
  /// Marks the op finished (error = null for success) and wakes every waiter.
  void finish(std::exception_ptr error);
  /// Marks the host part of a device op done: the op is queued on the device and complete when
  /// the device passes `event` (not null). Wakes every waiter of the host part.
  void finish_on(std::shared_ptr<DeviceEvent> event);
  /// Set by the group: runs the op on the waiting thread if it is next in line (returns whether
  /// it did). wait() without a bound tries it before blocking.
  void set_inline_runner(std::function<bool()> runner) { inline_runner_ = std::move(runner); }
  /// The engine began running the op (for the trace; optional). `engine` (a string literal)
  /// names the path the backend took when it has several ("one_shot": nccl/one_shot.h).
  void mark_started(const char* engine = nullptr);
  /// Set by the ProcessGroup when tracing: the op's record (published, its posted_ns set from
  /// posted_ns()), kept current from now on.
  void attach_trace(OpTrace* rec);
  /// When the Work was made (trace_now_ns; 0 unless tracing).
  int64_t posted_ns() const { return posted_ns_; }

 private:
  /// Waits for the host part (bounded by `timeout`), then rethrows its error.
  void wait_host(Millis timeout);
  /// Records a device error of the event (first error wins) and returns it.
  std::exception_ptr device_failure(const std::exception_ptr& e) const;
  bool wait_untraced(Millis timeout);
  void wait_stream_untraced(void* stream, Millis timeout);
  /// The op was seen complete (`error`: its failure): the trace's end time and status.
  void note_end(const std::exception_ptr& error) const;

  OpType op_;
  uint64_t seq_;
  std::string where_;
  std::atomic<bool> done_{false};           // the host part is done
  mutable std::atomic<bool> fired_{false};  // nothing left on a device: no event, or it passed
  mutable std::mutex mu_;
  std::condition_variable cv_;
  mutable std::exception_ptr error_;
  std::shared_ptr<DeviceEvent> event_;  // null for host ops
  std::vector<Tensor> outputs_;
  int source_rank_ = -1;
  std::function<bool()> inline_runner_;
  const bool use_future_;  // the process's settings (dist_settings)
  const bool traced_;
  const int64_t posted_ns_;         // traced_ only
  std::shared_ptr<Future> future_;  // made on the first get_future()
  mutable std::atomic<int64_t> started_ns_{-1}, ended_ns_{-1};  // traced_ only
  std::atomic<const char*> engine_{nullptr};                     // traced_ only
  std::atomic<OpTrace*> trace_{nullptr};
};

}  // namespace anvil::dist
