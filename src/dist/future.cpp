// Future: value or error, waiters and callbacks.
#include "dist/future.h"

#include <iostream>

#include "core/error.h"

namespace anvil::dist {

namespace {

void run_callback(const Future::Callback& fn, Future& f) {
  try {
    fn(f);
  } catch (const std::exception& e) {
    std::cerr << "anvil dist: warning: a Future callback of " << f.where() << " threw: " << e.what()
              << "\n";
  } catch (...) {
    std::cerr << "anvil dist: warning: a Future callback of " << f.where()
              << " threw an unknown exception\n";
  }
}

}  // namespace

Future::Future(std::string where) : where_(std::move(where)) {}

bool Future::completed() const {
  std::lock_guard<std::mutex> lk(mu_);
  return done_;
}

void Future::wait(Millis timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (timeout.count() < 0) {
    cv_.wait(lk, [&] { return done_; });
  } else if (!cv_.wait_for(lk, timeout, [&] { return done_; })) {
    throw Error(str("Future.wait timed out after ", timeout.count(), " ms"), where_,
                str("completion within ", timeout.count(), " ms"), "not completed");
  }
  if (error_) std::rethrow_exception(error_);
}

std::vector<Tensor> Future::value() {
  wait();
  std::lock_guard<std::mutex> lk(mu_);
  return value_;
}

std::exception_ptr Future::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

void Future::add_callback(Callback fn) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!done_) {
      callbacks_.push_back(std::move(fn));
      return;
    }
  }
  run_callback(fn, *this);
}

void Future::mark_completed(std::vector<Tensor> value) { complete(std::move(value), nullptr); }

void Future::set_error(std::exception_ptr error) {
  ANVIL_INTERNAL_ASSERT(error != nullptr, "Future::set_error without an error");
  complete({}, std::move(error));
}

void Future::complete(std::vector<Tensor> value, std::exception_ptr error) {
  std::vector<Callback> cbs;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (done_) return;
    done_ = true;
    value_ = std::move(value);
    error_ = std::move(error);
    cbs.swap(callbacks_);
  }
  cv_.notify_all();
  for (const Callback& fn : cbs) run_callback(fn, *this);
}

}  // namespace anvil::dist
