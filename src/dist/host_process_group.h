// HostProcessGroup: the queued host engine that the host backends (gloo, mpi, fake) share
// beneath the ProcessGroup interface. Internal to src/dist: callers see a ProcessGroup.
//
// Posting an op (after the interface's argument checks) appends it to the group's FIFO queue and
// returns a Work that completes on the host (Work::finish). One progress thread per group runs
// the queue strictly in order (a Work::wait() without a bound runs its op on the waiting thread
// instead when the op is next and nothing runs) through the backend's run_* primitives, which see
// contiguous CPU tensors only: non-contiguous inputs are copied at post time, non-contiguous
// outputs get a contiguous buffer that is copied back before the Work completes. Point-to-point ops
// are posted to the engine at once (so crossed send/recv pairs never deadlock) and completed in
// order by a second thread. A failed collective (timeout, lost peer) leaves the group unusable:
// later ops fail at once with an Error quoting the first failure. OpOptions::stream is ignored:
// host tensors are ready when posted, and a stream-wait on a host Work blocks the host.
//
// Options (also from the environment at init_world): a timeout per group and per op, and a
// consistency check (ANVIL_DIST_DEBUG=1) that exchanges a fingerprint of each collective (kind,
// dtype, shape, reduce op, root, splits) first and raises a clear Error naming the ranks when
// they disagree, instead of undefined behaviour.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/process_group.h"

namespace anvil::dist {

/// The queued host engine: a ProcessGroup on CPU tensors whose ops run, in posting order, on a
/// progress thread through the backend's synchronous run_* primitives.
class HostProcessGroup : public ProcessGroup {
 public:
  HostProcessGroup(int rank, int size, std::vector<int> global_ranks, GroupOptions options);
  /// Finishes queued ops (each bounded by its timeout), then stops the threads.
  ~HostProcessGroup() override;

  uint64_t sequence_number() const override;
  /// Stops the threads after the queue drained or `grace` passed; returns false (and leaves
  /// the threads running, detached) when ops were still in flight.
  bool shutdown(Millis grace) override;

 protected:
  // Backend primitives: run on the progress thread, synchronous, on contiguous CPU tensors that
  // passed the checks; they throw (anything) on failure. `op` is never kAvg, and for bool
  // tensors only kMax (or), kMin (and), kBand, kBor, kBxor.
  virtual void run_all_reduce(Tensor& t, ReduceOp op, Millis timeout) = 0;
  /// out.numel() == size() * in.numel(), same dtype.
  virtual void run_all_gather(Tensor& out, const Tensor& in, Millis timeout) = 0;
  /// in.numel() == size() * out.numel(), same dtype.
  virtual void run_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op, Millis timeout);
  /// Counts in elements, one per rank; offsets are their prefix sums.
  virtual void run_all_to_all(Tensor& out, const Tensor& in, const std::vector<int64_t>& out_counts,
                              const std::vector<int64_t>& in_counts, Millis timeout) = 0;
  /// t on `root` <- the reduction (other ranks' t: scratch). Default: run_all_reduce.
  virtual void run_reduce(Tensor& t, ReduceOp op, int root, Millis timeout);
  virtual void run_broadcast(Tensor& t, int src, Millis timeout) = 0;
  virtual void run_barrier(Millis timeout) = 0;
  /// Point-to-point: posted on the caller's thread; the returned function blocks until the
  /// transfer is done (bounded by its argument) and returns the peer rank.
  using P2PWaiter = std::function<int(Millis)>;
  virtual P2PWaiter post_send(const Tensor& t, int dst, int tag) = 0;
  virtual P2PWaiter post_recv(Tensor& t, int src, int tag) = 0;
  /// Receive from any peer (the waiter returns the sender). Default: refused with an Error.
  virtual P2PWaiter post_recv_any(Tensor& t, int tag);
  /// Time kept back from a collective's timeout to name the peers behind its failure
  /// (diagnose_failure): the op itself gets the rest, so the error still comes within the
  /// timeout. Default 0: the op gets the whole timeout and no diagnosis runs.
  virtual Millis diagnosis_budget(Millis timeout) const { return Millis(0); }
  /// Called on the progress thread once collective `work` failed (timeout, lost peer), at most
  /// `budget` long: text naming the peers likely behind the failure, appended to its Error
  /// ("" adds nothing).
  virtual std::string diagnose_failure(const Work& work, Millis budget) { return ""; }
  /// Runs fn on the progress thread after everything queued before it and waits for it (for
  /// backends whose engine must not be entered from two threads, e.g. MPI communicator splits).
  void run_in_order(const std::function<void()>& fn, OpType kind);
  /// Waits for the queues to drain and joins the threads. Every backend's destructor calls it
  /// first, so no op runs while the backend's members are destroyed.
  void stop_threads() { shutdown(kWaitForever); }

  // The interface's entry points, implemented once for every host backend
  // (host_process_group_ops.cpp): a body for the progress thread around the run_* primitives.
  std::shared_ptr<Work> issue_all_reduce(Tensor& t, ReduceOp op, const OpOptions& opts) override;
  std::shared_ptr<Work> issue_all_reduce_coalesced(std::vector<Tensor>& ts, ReduceOp op,
                                                   const OpOptions& opts) override;
  std::shared_ptr<Work> issue_all_gather(Tensor& out, const Tensor& in,
                                         const OpOptions& opts) override;
  std::shared_ptr<Work> issue_all_gather_coalesced(std::vector<Tensor>& outs,
                                                   const std::vector<Tensor>& ins,
                                                   const OpOptions& opts) override;
  std::shared_ptr<Work> issue_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op,
                                             const OpOptions& opts) override;
  std::shared_ptr<Work> issue_reduce_scatter_coalesced(std::vector<Tensor>& outs,
                                                       const std::vector<Tensor>& ins, ReduceOp op,
                                                       const OpOptions& opts) override;
  std::shared_ptr<Work> issue_all_to_all(Tensor& out, const Tensor& in,
                                         const AllToAllCounts& counts,
                                         const OpOptions& opts) override;
  std::shared_ptr<Work> issue_broadcast(Tensor& t, int src, const OpOptions& opts) override;
  std::shared_ptr<Work> issue_barrier(const OpOptions& opts) override;
  std::shared_ptr<Work> issue_send(const Tensor& t, int dst, int tag,
                                   const OpOptions& opts) override;
  std::shared_ptr<Work> issue_recv(Tensor& t, int src, int tag, const OpOptions& opts) override;
  // Rooted and list forms (host_process_group_lists.cpp): gather and scatter move their blocks
  // through run_all_to_all (counts zero but to / from the root), the list forms pack the lists
  // into one flat buffer for run_all_gather / run_reduce_scatter / run_all_to_all.
  std::shared_ptr<Work> issue_reduce(Tensor& t, ReduceOp op, int root,
                                     const OpOptions& opts) override;
  std::shared_ptr<Work> issue_gather(std::vector<Tensor>& outs, const Tensor& in, int root,
                                     const OpOptions& opts) override;
  std::shared_ptr<Work> issue_scatter(Tensor& out, const std::vector<Tensor>& ins, int root,
                                      const OpOptions& opts) override;
  std::shared_ptr<Work> issue_all_gather_list(std::vector<std::vector<Tensor>>& outs,
                                              const std::vector<Tensor>& ins,
                                              const OpOptions& opts) override;
  std::shared_ptr<Work> issue_reduce_scatter_list(std::vector<Tensor>& outs,
                                                  const std::vector<std::vector<Tensor>>& ins,
                                                  ReduceOp op, const OpOptions& opts) override;
  std::shared_ptr<Work> issue_all_to_all_list(std::vector<Tensor>& outs,
                                              const std::vector<Tensor>& ins,
                                              const OpOptions& opts) override;
  std::shared_ptr<Work> issue_recv_any_source(Tensor& t, int tag, const OpOptions& opts) override;

 private:
  /// Runs one op on a progress thread (may throw); gets the op's Work and timeout.
  using Body = std::function<void(Work& work, Millis timeout)>;
  struct Job {
    std::shared_ptr<Work> work;
    Body body;
    Millis timeout;
  };
  /// Creates the op's Work (next sequence number) and appends it to the collective queue or
  /// the p2p queue, starting the threads on first use. `outputs` become Work::result().
  std::shared_ptr<Work> post(OpType op, const OpOptions& opts, std::vector<Tensor> outputs,
                             Body body, bool p2p = false);
  /// A receive into `t` through `buf` (its contiguous stand-in) on the p2p queue: the Work
  /// reports the sender the waiter returns and copies `buf` back into `t`.
  std::shared_ptr<Work> post_recv_work(OpType op, Tensor& t, Tensor buf, P2PWaiter waiter,
                                       const OpOptions& opts);
  void progress_loop(bool p2p);
  /// Runs one dequeued job (lk held on entry and on return) and completes its Work.
  void run_job(Job& job, bool p2p, std::unique_lock<std::mutex>& lk);
  /// Runs `work`'s job on the calling thread when it is the head of the collective queue and
  /// no collective is running; false otherwise (the progress thread will run it).
  bool run_inline(const Work* work);
  /// When check_consistency is on: exchanges a fingerprint of this op (`desc`: its kind, dtypes,
  /// shapes, reduce op, root) and, for all_to_all, the split sizes; throws an Error naming both
  /// ranks on the first disagreement. The group stays usable after such an error.
  void check_consistency(const Work& work, const std::string& desc, Millis timeout,
                         const std::vector<int64_t>* out_rows = nullptr,
                         const std::vector<int64_t>* in_rows = nullptr, const char* unit = "rows");

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_, p2p_queue_;
  bool stop_ = false;
  int busy_ = 0;                 // jobs being run right now
  int running_collectives_ = 0;  // of which collectives
  uint64_t seq_ = 0;
  std::exception_ptr broken_;  // the first collective failure
  std::thread thread_, p2p_thread_;
};

}  // namespace anvil::dist
