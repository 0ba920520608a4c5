// Work, reduce-op and op-type names.
#include "dist/work.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

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
  }
  return "?";
}

Work::Work(OpType op, uint64_t seq, std::string where)
    : op_(op), seq_(seq), where_(std::move(where)) {}

bool Work::is_success() const {
  std::lock_guard<std::mutex> lk(mu_);
  return done_.load() && !error_;
}

std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

bool Work::wait(Millis timeout) {
  if (timeout.count() < 0 && inline_runner_ && !is_completed()) inline_runner_();
  std::unique_lock<std::mutex> lk(mu_);
  auto done = [&] { return done_.load(std::memory_order_acquire); };
  if (timeout.count() < 0) {
    cv_.wait(lk, done);
  } else if (!cv_.wait_for(lk, timeout, done)) {
    throw Error(str("Work.wait timed out after ", timeout.count(),
                    " ms; the operation is still in flight (it ends by its own timeout)"),
                where_, str("completion within ", timeout.count(), " ms"), "not completed");
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

std::vector<Tensor> Work::result() const {
  std::lock_guard<std::mutex> lk(mu_);
  return outputs_;
}

int Work::source_rank() const {
  if (op_ != OpType::kRecv)
    throw Error("source_rank() may only be called on the Work of a recv", where_, "a recv",
                op_type_name(op_));
  return source_rank_;
}

void Work::set_result(std::vector<Tensor> outputs) {
  std::lock_guard<std::mutex> lk(mu_);
  outputs_ = std::move(outputs);
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

}  // namespace anvil::dist
