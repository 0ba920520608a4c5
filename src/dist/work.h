// Work: the handle of one posted operation. The progress thread completes it (successfully or
// with an exception); callers wait on it with an optional bound of their own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/types.h"

namespace anvil::dist {

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

  /// True once the op finished, successfully or not. Never throws, never blocks.
  bool is_completed() const { return done_.load(std::memory_order_acquire); }
  /// True once the op finished without error.
  bool is_success() const;
  /// The op's error once it failed (null otherwise).
  std::exception_ptr exception() const;

  /// Blocks until the op finished and rethrows its error. With `timeout` >= 0, gives up after
  /// that long with an Error naming the op and the timeout; the op itself stays in flight (it
  /// still ends by its own timeout) and a later wait() may succeed.
  bool wait(Millis timeout = kWaitForever);

  /// The op's output tensors (valid once completed; e.g. the reduced tensor).
  std::vector<Tensor> result() const;
  /// recv: the peer the data came from. Throws Error for other ops.
  int source_rank() const;

  // Used by the engine that runs the op.
  void set_result(std::vector<Tensor> outputs);
  void set_source_rank(int rank) { source_rank_ = rank; }
  /// Marks the op finished (error = null for success) and wakes every waiter.
  void finish(std::exception_ptr error);
  /// Set by the group: runs the op on the waiting thread if it is next in line (returns whether
  /// it did). wait() without a bound tries it before blocking.
  void set_inline_runner(std::function<bool()> runner) { inline_runner_ = std::move(runner); }

 private:
  OpType op_;
  uint64_t seq_;
  std::string where_;
  std::atomic<bool> done_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::exception_ptr error_;
  std::vector<Tensor> outputs_;
  int source_rank_ = -1;
  std::function<bool()> inline_runner_;
};

}  // namespace anvil::dist
