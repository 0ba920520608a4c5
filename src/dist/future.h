// Future: the completion of one posted op as a value (its output tensors) or an error, with
// completion callbacks (c10d's Work::getFuture; spec A.1.8). Work::get_future() hands it out
// (null when ANVIL_DIST_USE_FUTURE=0).
//
// A host op's future completes when the op finished, with Work::result() or the op's error. A
// device op's future completes when its host part is done (the op is queued on the device:
// stream semantics, as c10d's CUDA futures): a failure found later on the device reaches the
// caller through the Work (wait, is_success), not through the future.
//
// Callbacks run exactly once: on the thread that completes the future (a host op: the group's
// progress thread, or a thread waiting on the op), or at once on the registering thread when the
// future is already complete. They must be short and must not wait on later ops of the same
// group (the progress thread runs them). An exception thrown by a callback is reported on stderr
// and otherwise ignored.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/types.h"

namespace anvil::dist {

class Future {
 public:
  using Callback = std::function<void(Future&)>;
  /// `where` names the op for messages (the Work's where()).
  explicit Future(std::string where);
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;

  /// True once a value or an error is set. Never blocks.
  bool completed() const;
  /// Blocks until completed (bounded by `timeout` when >= 0: an Error naming the op after it),
  /// then rethrows the error, if any.
  void wait(Millis timeout = kWaitForever);
  /// wait(), then the value: the op's output tensors (empty for ops without outputs).
  std::vector<Tensor> value();
  /// The error once completed with one (null otherwise).
  std::exception_ptr error() const;
  /// Runs `fn(*this)` once the future is complete (at once when it already is).
  void add_callback(Callback fn);
  const std::string& where() const { return where_; }

  // Used by Work. The first completion wins; later ones are ignored.
  void mark_completed(std::vector<Tensor> value);
  void set_error(std::exception_ptr error);

 private:
  void complete(std::vector<Tensor> value, std::exception_ptr error);

  std::string where_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<Tensor> value_;
  std::exception_ptr error_;
  std::vector<Callback> callbacks_;
};

}  // namespace anvil::dist
