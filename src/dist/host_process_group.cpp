// HostProcessGroup: queues, progress threads, shutdown and the consistency check.
// The ops' bodies are in host_process_group_ops.cpp.
#include "dist/host_process_group.h"

#include <chrono>
#include <cstdlib>

#include "core/error.h"
#include "dist/checks.h"

namespace anvil::dist {

namespace {

/// A cross-rank disagreement found by the consistency check: reported, but it leaves the group
/// usable (every rank saw the same fingerprints and failed the same op).
class ConsistencyError : public Error {
 public:
  using Error::Error;
};

}  // namespace

HostProcessGroup::HostProcessGroup(int rank, int size, std::vector<int> global_ranks,
                                   GroupOptions options)
    : ProcessGroup(rank, size, std::move(global_ranks), options) {}

HostProcessGroup::~HostProcessGroup() { stop_threads(); }

uint64_t HostProcessGroup::sequence_number() const {
  std::lock_guard<std::mutex> lk(mu_);
  return seq_;
}

std::shared_ptr<Work> HostProcessGroup::post(OpType op, const OpOptions& opts,
                                             std::vector<Tensor> outputs, Body body, bool p2p) {
  const Millis timeout = op_timeout(opts);
  std::lock_guard<std::mutex> lk(mu_);
  const uint64_t seq = ++seq_;
  const std::string w = where(op, seq);
  if (stop_) throw Error("the process group was shut down", w, "a live group", "shut down");
  auto work = std::make_shared<Work>(op, seq, w);
  work->set_result(std::move(outputs));
  if (!p2p) {
    // A caller that waits without a bound runs the op itself when it is next in line: this
    // saves two thread hand-offs per op (it matters on machines with few cores).
    std::weak_ptr<ProcessGroup> self = weak_from_this();
    const Work* raw = work.get();
    work->set_inline_runner([self, raw] {
      auto pg = std::static_pointer_cast<HostProcessGroup>(self.lock());
      return pg && pg->run_inline(raw);
    });
  }
  (p2p ? p2p_queue_ : queue_).push_back(Job{work, std::move(body), timeout});
  std::thread& th = p2p ? p2p_thread_ : thread_;
  if (!th.joinable()) th = std::thread([this, p2p] { progress_loop(p2p); });
  cv_.notify_all();
  return work;
}

void HostProcessGroup::progress_loop(bool p2p) {
  std::deque<Job>& q = p2p ? p2p_queue_ : queue_;
  std::unique_lock<std::mutex> lk(mu_);
  // A collective waits until no other collective runs (a waiter may be running one inline).
  auto ready = [&] { return !q.empty() && (p2p || running_collectives_ == 0); };
  static const Millis::rep grace_us = [] {
    const char* v = std::getenv("ANVIL_INLINE_GRACE_US");
    return v ? std::atol(v) : 50;
  }();
  while (true) {
    cv_.wait(lk, [&] { return ready() || (stop_ && q.empty()); });
    if (!ready()) return;  // stop_ and drained
    if (!p2p && grace_us > 0 && !stop_) {
      // A caller that waits right after posting runs the op itself (run_inline), which saves
      // two thread hand-offs; give it that chance before taking the job here.
      const Work* head = q.front().work.get();
      cv_.wait_for(lk, std::chrono::microseconds(grace_us),
                   [&] { return stop_ || q.empty() || q.front().work.get() != head; });
      if (!ready() || q.front().work.get() != head) continue;
    }
    Job job = std::move(q.front());
    q.pop_front();
    run_job(job, p2p, lk);
  }
}

void HostProcessGroup::run_job(Job& job, bool p2p, std::unique_lock<std::mutex>& lk) {
  ++busy_;
  if (!p2p) ++running_collectives_;
  const std::exception_ptr broken = p2p ? nullptr : broken_;
  lk.unlock();
  std::exception_ptr err;
  bool breaks = false;
  const Millis budget = p2p ? Millis(0) : diagnosis_budget(job.timeout);
  if (broken) {
    err = std::make_exception_ptr(Error("the group is unusable after an earlier failure",
                                        job.work->where(), "a healthy group", message_of(broken)));
  } else {
    try {
      job.work->mark_started();
      job.body(*job.work, job.timeout - budget);
    } catch (const ConsistencyError&) {
      err = std::current_exception();
    } catch (const Error& e) {
      err = std::current_exception();
      breaks = true;
    } catch (const std::exception& e) {
      err = std::make_exception_ptr(Error(str("backend failure: ", e.what()), job.work->where()));
      breaks = true;
    } catch (...) {
      err =
          std::make_exception_ptr(Error("backend failure (unknown exception)", job.work->where()));
      breaks = true;
    }
  }
  if (breaks && budget.count() > 0) {
    if (const std::string note = diagnose_failure(*job.work, budget); !note.empty()) {
      try {
        std::rethrow_exception(err);
      } catch (const Error& e) {
        err = std::make_exception_ptr(
            Error(str(e.what_part(), "; ", note), e.where(), e.expected(), e.actual()));
      } catch (...) {
      }
    }
  }
  lk.lock();
  if (breaks && !p2p && !broken_) broken_ = err;
  lk.unlock();
  job.work->finish(err);
  lk.lock();
  --busy_;
  if (!p2p) --running_collectives_;
  cv_.notify_all();
}

bool HostProcessGroup::run_inline(const Work* work) {
  std::unique_lock<std::mutex> lk(mu_);
  // Only the queue's head, and only when no other collective runs: FIFO order is kept.
  if (queue_.empty() || queue_.front().work.get() != work || running_collectives_ > 0) return false;
  Job job = std::move(queue_.front());
  queue_.pop_front();
  run_job(job, false, lk);
  return true;
}

bool HostProcessGroup::shutdown(Millis grace) {
  std::unique_lock<std::mutex> lk(mu_);
  stop_ = true;
  cv_.notify_all();
  bool drained = true;
  if (grace.count() >= 0)
    drained =
        cv_.wait_for(lk, grace, [&] { return queue_.empty() && p2p_queue_.empty() && busy_ == 0; });
  lk.unlock();
  for (std::thread* th : {&thread_, &p2p_thread_}) {
    if (!th->joinable() || th->get_id() == std::this_thread::get_id()) continue;
    if (drained)
      th->join();
    else
      th->detach();
  }
  return drained;
}

void HostProcessGroup::run_in_order(const std::function<void()>& fn, OpType kind) {
  auto work = post(kind, {}, {}, [fn](Work&, Millis) { fn(); });
  work->wait();
}

void HostProcessGroup::check_consistency(const Work& work, const std::string& desc, Millis timeout,
                                         const std::vector<int64_t>* out_rows,
                                         const std::vector<int64_t>* in_rows, const char* unit) {
  if (!options().check_consistency || size() == 1) return;
  const int64_t fb = detail::kFingerprintBytes;
  Tensor mine = detail::encode_fingerprint(desc);
  Tensor all = Tensor::empty({size() * fb}, DType::kUInt8);
  run_all_gather(all, mine, timeout);
  const uint8_t* p = all.data<uint8_t>();
  uint64_t my_hash = 0;
  detail::decode_fingerprint(mine.data<uint8_t>(), my_hash);
  for (int j = 0; j < size(); ++j) {
    uint64_t h = 0;
    const std::string other = detail::decode_fingerprint(p + j * fb, h);
    if (h != my_hash)
      throw ConsistencyError(str("collective mismatch across ranks: rank ", rank(), " called '",
                                 desc, "' but rank ", j, " called '", other, "'"),
                             work.where(), str("rank ", j, " to call '", desc, "'"),
                             str("'", other, "'"));
  }
  if (!out_rows || !in_rows) return;
  // all_to_all: every rank checks the whole matrix (so all ranks fail together): what rank i
  // expects from rank j must be what rank j sends to rank i.
  const int64_t W = size();
  std::vector<int64_t> mine_rows = *in_rows;
  mine_rows.insert(mine_rows.end(), out_rows->begin(), out_rows->end());
  Tensor every = Tensor::empty({W * 2 * W}, DType::kInt64);
  run_all_gather(every, Tensor::from_vector(mine_rows), timeout);
  const int64_t* e = every.data<int64_t>();
  for (int64_t i = 0; i < W; ++i)
    for (int64_t j = 0; j < W; ++j) {
      const int64_t expects = e[i * 2 * W + W + j], sends = e[j * 2 * W + i];
      if (expects != sends)
        throw ConsistencyError(str("all_to_all split sizes disagree: rank ", i, " expects ",
                                   expects, " ", unit, " from rank ", j, ", which sends ", sends),
                               work.where(),
                               str(expects, " ", unit, " from rank ", j, " to rank ", i),
                               str(sends, " ", unit));
    }
}

void HostProcessGroup::run_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op,
                                          Millis timeout) {
  // Generic form: all_reduce a copy, keep this rank's chunk.
  Tensor tmp = in.clone();
  run_all_reduce(tmp, op, timeout);
  const int64_t n = out.numel();
  out.reshape({n}).copy_from(tmp.reshape({tmp.numel()}).slice(0, rank() * n, (rank() + 1) * n));
}

}  // namespace anvil::dist
