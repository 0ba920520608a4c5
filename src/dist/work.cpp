// Work (host and event completion), reduce-op and op-type names.
#include "dist/work.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <thread>

#include "core/error.h"
#include "dist/host_profile.h"
#include "dist/settings.h"

namespace anvil::dist {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kProduct:
      return "product";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kBand:
      return "band";
    case ReduceOp::kBor:
      return "bor";
    case ReduceOp::kBxor:
      return "bxor";
  }
  return "?";
}

ReduceOp reduce_op_from_name(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProduct, ReduceOp::kMin,
                      ReduceOp::kMax, ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor})
    if (n == reduce_op_name(op)) return op;
  throw Error(str("unknown reduce op '", name, "'"), "dist::reduce_op_from_name",
              "one of sum, avg, product, min, max, band, bor, bxor", name);
}

const char* op_type_name(OpType op) {
  switch (op) {
    case OpType::kAllReduce:
      return "all_reduce";
    case OpType::kAllReduceCoalesced:
      return "all_reduce_coalesced";
    case OpType::kAllGather:
      return "all_gather_into_tensor";
    case OpType::kAllGatherCoalesced:
      return "all_gather_into_tensor_coalesced";
    case OpType::kReduceScatter:
      return "reduce_scatter_tensor";
    case OpType::kReduceScatterCoalesced:
      return "reduce_scatter_tensor_coalesced";
    case OpType::kAllToAll:
      return "all_to_all_single";
    case OpType::kBroadcast:
      return "broadcast";
    case OpType::kBarrier:
      return "barrier";
    case OpType::kSend:
      return "send";
    case OpType::kRecv:
      return "recv";
    case OpType::kReduce:
      return "reduce";
    case OpType::kGather:
      return "gather";
    case OpType::kScatter:
      return "scatter";
    case OpType::kAllGatherList:
      return "all_gather";
    case OpType::kReduceScatterList:
      return "reduce_scatter";
    case OpType::kAllToAllList:
      return "all_to_all";
    case OpType::kRecvAnySource:
      return "recv_any_source";
  }
  return "?";
}

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

namespace {

Error timed_out(Millis timeout, const std::string& where) {
  return Error(str("Work.wait timed out after ", timeout.count(),
                   " ms; the operation is still in flight (it ends by its own timeout)"),
               where, str("completion within ", timeout.count(), " ms"), "not completed");
}

}  // namespace

Work::Work(OpType op, uint64_t seq, std::string where)
    : op_(op),
      seq_(seq),
      where_(std::move(where)),
      use_future_(dist_settings().use_future),
      traced_(dist_settings().trace),
      posted_ns_(traced_ ? trace_now_ns() : 0) {}

bool Work::is_completed() const {
  if (!done_.load(std::memory_order_acquire)) return false;
  if (fired_.load(std::memory_order_acquire)) return true;  // a host op, or a passed event
  std::shared_ptr<DeviceEvent> ev;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!event_ || fired_.load()) return true;
    ev = event_;
  }
  try {
    if (!ev->query()) return false;
    fired_.store(true);
    note_end(nullptr);
  } catch (...) {
    device_failure(std::current_exception());
  }
  return true;
}

bool Work::is_success() const {
  if (!is_completed()) return false;
  std::lock_guard<std::mutex> lk(mu_);
  return !error_;
}

std::exception_ptr Work::exception() const {
  is_completed();  // a device op: polls its event, which may record a device error
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

bool Work::completes_on_event() const {
  std::lock_guard<std::mutex> lk(mu_);
  return event_ != nullptr;
}

std::exception_ptr Work::device_failure(const std::exception_ptr& e) const {
  std::lock_guard<std::mutex> lk(mu_);
  if (!error_)
    error_ = std::make_exception_ptr(
        Error(str("the operation failed on ", event_->device(), ": ", message_of(e)), where_));
  fired_.store(true);
  note_end(error_);
  return error_;
}

void Work::wait_host(Millis timeout) {
  if (timeout.count() < 0 && inline_runner_ && !done_.load(std::memory_order_acquire))
    inline_runner_();
  std::unique_lock<std::mutex> lk(mu_);
  auto done = [&] { return done_.load(std::memory_order_acquire); };
  if (timeout.count() < 0)
    cv_.wait(lk, done);
  else if (!cv_.wait_for(lk, timeout, done))
    throw timed_out(timeout, where_);
  if (error_) std::rethrow_exception(error_);
}

bool Work::wait(Millis timeout) {
  const OpTrace* rec = traced_ ? trace_.load() : nullptr;
  if (!rec) return wait_untraced(timeout);
  const int64_t t0 = trace_now_ns();
  try {
    wait_untraced(timeout);
  } catch (...) {
    trace_add_wait(rec, t0, trace_now_ns(), message_of(std::current_exception()));
    throw;
  }
  trace_add_wait(rec, t0, trace_now_ns(), "");
  return true;
}

bool Work::wait_untraced(Millis timeout) {
  const auto start = std::chrono::steady_clock::now();
  wait_host(timeout);
  std::shared_ptr<DeviceEvent> ev;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (error_) std::rethrow_exception(error_);
    if (!event_ || fired_.load()) return true;  // a host op is complete with its host part
    ev = event_;
  }
  bool passed = false;
  try {
    if (timeout.count() < 0) {
      ev->synchronize();
      passed = true;
    } else {
      const auto deadline = start + timeout;
      while (!(passed = ev->query()) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  } catch (...) {
    std::rethrow_exception(device_failure(std::current_exception()));
  }
  if (!passed) throw timed_out(timeout, where_);
  fired_.store(true);
  note_end(nullptr);
  return true;
}

void Work::wait_stream(void* stream, Millis timeout) {
  const OpTrace* rec = traced_ ? trace_.load() : nullptr;
  if (!rec) {
    host_profile::Span span;
    wait_stream_untraced(stream, timeout);
    span.mark("Work::wait_stream");
    return;
  }
  const int64_t t0 = trace_now_ns();
  try {
    wait_stream_untraced(stream, timeout);
  } catch (...) {
    trace_add_wait(rec, t0, trace_now_ns(), message_of(std::current_exception()));
    throw;
  }
  trace_add_wait(rec, t0, trace_now_ns(), "");
}

void Work::wait_stream_untraced(void* stream, Millis timeout) {
  if (!stream) {  // no stream to order: the host is the consumer
    wait_untraced(timeout);
    return;
  }
  wait_host(timeout);  // a host op: that is the whole op
  std::shared_ptr<DeviceEvent> ev;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (error_) std::rethrow_exception(error_);
    if (!event_ || fired_.load()) return;
    ev = event_;
  }
  try {
    ev->block_stream(stream);
  } catch (...) {
    std::rethrow_exception(device_failure(std::current_exception()));
  }
}

std::vector<Tensor> Work::result() const {
  std::lock_guard<std::mutex> lk(mu_);
  return outputs_;
}

int Work::source_rank() const {
  if (op_ != OpType::kRecv && op_ != OpType::kRecvAnySource)
    throw Error("source_rank() may only be called on the Work of a recv", where_,
                "a recv or recv_any_source", op_type_name(op_));
  return source_rank_;
}

void Work::set_result(std::vector<Tensor> outputs) {
  std::lock_guard<std::mutex> lk(mu_);
  outputs_ = std::move(outputs);
}

void Work::finish_on(std::shared_ptr<DeviceEvent> event) {
  ANVIL_INTERNAL_ASSERT(event != nullptr, "Work::finish_on without an event");
  std::shared_ptr<Future> f;
  std::vector<Tensor> value;
  {
    std::lock_guard<std::mutex> lk(mu_);
    event_ = std::move(event);
    done_.store(true, std::memory_order_release);
    if ((f = future_)) value = outputs_;
  }
  cv_.notify_all();
  if (f) f->mark_completed(std::move(value));  // stream semantics (future.h)
}

void Work::finish(std::exception_ptr error) {
  std::shared_ptr<Future> f;
  std::vector<Tensor> value;
  {
    std::lock_guard<std::mutex> lk(mu_);
    error_ = error;
    fired_.store(true, std::memory_order_release);  // no event to wait for
    done_.store(true, std::memory_order_release);
    if ((f = future_) && !error) value = outputs_;
  }
  note_end(error);
  cv_.notify_all();
  if (f) {
    if (error)
      f->set_error(error);
    else
      f->mark_completed(std::move(value));
  }
}

std::shared_ptr<Future> Work::get_future() {
  if (!use_future_) return nullptr;
  std::shared_ptr<Future> f;
  std::exception_ptr err;
  std::vector<Tensor> value;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (future_) return future_;
    f = future_ = std::make_shared<Future>(where_);
    if (!done_.load()) return f;  // finish / finish_on complete it
    // Complete already: a host op's outcome, or a device op's host part (stream semantics).
    err = event_ ? nullptr : error_;
    if (!err) value = outputs_;
  }
  if (err)
    f->set_error(err);
  else
    f->mark_completed(std::move(value));
  return f;
}

void Work::mark_started(const char* engine) {
  if (!traced_) return;
  const int64_t t = trace_now_ns();
  engine_.store(engine);
  started_ns_.store(t);
  if (OpTrace* rec = trace_.load()) {
    rec->engine.store(engine);
    rec->started_ns.store(t);
  }
}

void Work::note_end(const std::exception_ptr& error) const {
  if (!traced_) return;
  int64_t expected = -1;
  ended_ns_.compare_exchange_strong(expected, trace_now_ns());  // the first sighting counts
  if (OpTrace* rec = trace_.load()) {
    rec->ended_ns.store(ended_ns_.load());
    if (error) trace_set_error(rec, message_of(error));
  }
}

void Work::attach_trace(OpTrace* rec) {
  if (!traced_ || !rec) return;
  // Published before the times are copied: a time set concurrently reaches the record either
  // through trace_ (the setter sees it) or through the copy below (this sees the time).
  trace_.store(rec);
  if (const char* e = engine_.load()) rec->engine.store(e);
  if (const int64_t t = started_ns_.load(); t >= 0) rec->started_ns.store(t);
  if (const int64_t t = ended_ns_.load(); t >= 0) rec->ended_ns.store(t);
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lk(mu_);
    err = error_;
  }
  if (err) trace_set_error(rec, message_of(err));
}

}  // namespace anvil::dist
