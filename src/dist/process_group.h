// ProcessGroup: a communicator over a fixed set of ranks, and the one interface every backend
// (gloo, mpi, fake; nccl later) sits behind.
//
// Posting an op (all_reduce, ...) runs the argument checks of spec A on the caller's thread
// (defined, CPU, dense, dtype supported, reduce op valid for the dtype, sizes, split sums,
// divisibility, roots, peers): a bad call throws Error before anything is posted. Then the op is
// appended to the group's FIFO queue and a Work is returned. One progress thread per group runs
// the queue strictly in order (a Work::wait() without a bound runs its op on the waiting thread
// instead when the op is next and nothing runs) through the backend's run_* primitives, which see
// contiguous CPU tensors only: non-contiguous inputs are copied at post time, non-contiguous
// outputs get a contiguous buffer that is copied back before the Work completes. Point-to-point ops
// are posted to the engine at once (so crossed send/recv pairs never deadlock) and completed in
// order by a second thread. A failed collective (timeout, lost peer) leaves the group unusable:
// later ops fail at once with an Error quoting the first failure.
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

#include "core/tensor.h"
#include "dist/types.h"
#include "dist/work.h"

namespace anvil::dist {

/// Options of one process group.
struct GroupOptions {
  /// Timeout of each op unless the op sets its own.
  Millis timeout = kDefaultOpTimeout;
  /// Exchange a fingerprint before each collective and fail clearly on a mismatch.
  bool check_consistency = false;
};

/// A communicator over `size()` ranks. Thread-safe: any thread may post ops; they run in posting
/// order (ops posted concurrently from two threads are ordered by whoever posts first, which must
/// then be the same on every rank).
class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  /// `global_ranks[i]` = the world rank of member i (empty = 0..size-1).
  ProcessGroup(int rank, int size, std::vector<int> global_ranks, GroupOptions options);
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;
  /// Finishes queued ops (each bounded by its timeout), then stops the threads.
  virtual ~ProcessGroup();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  /// "gloo", "mpi", "fake".
  virtual std::string backend_name() const = 0;
  /// The name the GroupRegistry knows this group by ("0" for the world), used in messages.
  std::string name() const;
  void set_name(const std::string& name);
  Millis timeout() const { return options_.timeout; }
  const GroupOptions& options() const { return options_; }
  /// Ops posted so far (barriers and p2p included).
  uint64_t sequence_number() const;

  /// t <- reduce over ranks of t (in place). kAvg divides the sum by size().
  std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op, const OpOptions& opts = {});
  /// all_reduce of several tensors (any shapes, 0-size allowed) in one call per dtype.
  std::shared_ptr<Work> all_reduce_coalesced(std::vector<Tensor>& ts, ReduceOp op,
                                             const OpOptions& opts = {});
  /// out <- the ranks' `in` concatenated along dim 0 in rank order. `out` is [W*d0, ...] or
  /// [W, d0, ...].
  std::shared_ptr<Work> all_gather_into_tensor(Tensor& out, const Tensor& in,
                                               const OpOptions& opts = {});
  std::shared_ptr<Work> all_gather_into_tensor_coalesced(std::vector<Tensor>& outs,
                                                         const std::vector<Tensor>& ins,
                                                         const OpOptions& opts = {});
  /// out <- reduce over ranks of chunk rank() of `in` (in.size(0) divisible by W, out has
  /// in.numel()/W elements).
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor& out, const Tensor& in, ReduceOp op,
                                              const OpOptions& opts = {});
  std::shared_ptr<Work> reduce_scatter_tensor_coalesced(std::vector<Tensor>& outs,
                                                        const std::vector<Tensor>& ins, ReduceOp op,
                                                        const OpOptions& opts = {});
  /// Rows [off_j, off_j + in_splits[j]) of `in` go to rank j; rank j's block lands at the
  /// offset of out_splits[j] in `out`. Empty split lists mean equal splits (d0 / W).
  std::shared_ptr<Work> all_to_all_single(Tensor& out, const Tensor& in,
                                          const std::vector<int64_t>& out_splits,
                                          const std::vector<int64_t>& in_splits,
                                          const OpOptions& opts = {});
  /// t <- rank src's t.
  std::shared_ptr<Work> broadcast(Tensor& t, int src, const OpOptions& opts = {});
  std::shared_ptr<Work> barrier(const OpOptions& opts = {});
  /// Sends t to rank dst (group rank); matched by (peer, tag).
  std::shared_ptr<Work> send(const Tensor& t, int dst, int tag = 0, const OpOptions& opts = {});
  /// Receives into t from rank src.
  std::shared_ptr<Work> recv(Tensor& t, int src, int tag = 0, const OpOptions& opts = {});

  /// Builds the sub-group of members `ranks` (ranks of this group, strictly increasing, unique).
  /// Collective over every member of this group; returns null on ranks not in `ranks`.
  std::shared_ptr<ProcessGroup> new_subgroup(const std::vector<int>& ranks,
                                             const std::string& name);

  /// Stops the threads after the queue drained or `grace` passed; returns false (and leaves
  /// the threads running, detached) when ops were still in flight. Used at process exit.
  bool shutdown(Millis grace);

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
  virtual void run_broadcast(Tensor& t, int src, Millis timeout) = 0;
  virtual void run_barrier(Millis timeout) = 0;
  /// Point-to-point: posted on the caller's thread; the returned function blocks until the
  /// transfer is done (bounded by its argument) and returns the peer rank.
  using P2PWaiter = std::function<int(Millis)>;
  virtual P2PWaiter post_send(const Tensor& t, int dst, int tag) = 0;
  virtual P2PWaiter post_recv(Tensor& t, int src, int tag) = 0;
  /// Creates the sub-group (see new_subgroup); `members` are ranks of this group.
  virtual std::shared_ptr<ProcessGroup> make_subgroup(const std::vector<int>& members,
                                                      const std::string& name) = 0;
  /// Runs fn on the progress thread after everything queued before it and waits for it (for
  /// backends whose engine must not be entered from two threads, e.g. MPI communicator splits).
  void run_in_order(const std::function<void()>& fn, OpType kind);

  /// "gloo all_reduce #3 on group '0' (rank 1 of 2)".
  std::string where(OpType op, uint64_t seq) const;
  /// Waits for the queues to drain and joins the threads. Every backend's destructor calls it
  /// first, so no op runs while the backend's members are destroyed.
  void stop_threads() { shutdown(kWaitForever); }

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
                         const std::vector<int64_t>* in_rows = nullptr);
  Millis op_timeout(const OpOptions& opts) const;

  const int rank_, size_;
  const std::vector<int> global_ranks_;
  const GroupOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_, p2p_queue_;
  bool stop_ = false;
  int busy_ = 0;                 // jobs being run right now
  int running_collectives_ = 0;  // of which collectives
  uint64_t seq_ = 0;
  std::string name_ = "?";
  std::exception_ptr broken_;  // the first collective failure
  std::thread thread_, p2p_thread_;
};

}  // namespace anvil::dist
