// ProcessGroup: a communicator over a fixed set of ranks, and the one interface every backend
// (gloo, mpi, fake, nccl) sits behind. Callers, the registries, functional collectives,
// the interpreter and the runtime use only this interface.
//
// Every op first runs the argument checks of spec A on the caller's thread (defined, on the
// group's device, dense, dtype supported, reduce op valid for the dtype, sizes, split sums,
// divisibility, roots, peers): a bad call throws Error before the backend sees it, whatever the
// backend. Then the backend's issue_* entry point posts the op and returns its Work, which
// completes on the host (host backends) or on a device event (device backends; see work.h).
// OpOptions::stream names the caller's stream: a device backend orders the op after the work
// queued on it, and the caller's Work::wait_stream(stream) orders later work after the op.
//
// The host backends (gloo, mpi, fake) share one queued engine, HostProcessGroup
// (host_process_group.h: FIFO queue, progress threads, consistency check, run_* primitives on
// contiguous CPU tensors); nothing outside src/dist needs to know it exists.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
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
  // Device backends (nccl) only; host backends ignore these.
  /// The GPU of this rank: -1 = LOCAL_RANK when the environment sets it, else the group rank.
  int device_index = -1;
  /// Create the communicator with the group instead of on its first op (ANVIL_NCCL_EAGER_INIT).
  bool eager_init = false;
  /// Work::wait_stream blocks the host until the op completed, for every op of this group, so a
  /// failure or timeout is raised there (c10d's TORCH_NCCL_BLOCKING_WAIT). Off: the ops listed
  /// by ANVIL_NCCL_BLOCKING_WAIT block (settings.h; barrier always); the others only make the
  /// stream wait, and the group's watchdog aborts a communicator whose op timed out.
  bool blocking_wait = false;
  /// Run the health check (health_check.h) when create_process_group makes the group; also
  /// on with ANVIL_DIST_HEALTH_CHECK=1 (settings.h).
  bool health_check = false;
};

/// A communicator over `size()` ranks. Thread-safe: any thread may post ops; they run in posting
/// order (ops posted concurrently from two threads are ordered by whoever posts first, which must
/// then be the same on every rank). The nccl backend keeps that order among its collectives and
/// among the messages of one direction between two ranks, but runs send / recv on streams of
/// their own: an op that needs an earlier one's result waits on its Work (nccl_process_group.h).
/// "rank 1 (world rank 3)" for `peer` >= 0, else every member but `rank`: "ranks 0, 2 (world
/// ranks 0, 5)", or "no other rank" (ProcessGroup::peers; the nccl backend's messages).
std::string peer_names(int rank, int size, const std::vector<int>& global_ranks, int peer);

class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  /// `global_ranks[i]` = the world rank of member i (empty = 0..size-1). Throws Error on an
  /// invalid rank, size or timeout, and on a malformed setting in the environment (the
  /// process's settings are read by the first group constructed: settings.h).
  ProcessGroup(int rank, int size, std::vector<int> global_ranks, GroupOptions options);
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;
  /// With ANVIL_DIST_TRACE=1 writes the trace file (trace.h); backends drain their ops first.
  virtual ~ProcessGroup();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  /// The members an op of this rank waits on, for messages: "rank 1 (world rank 3)" for
  /// `peer` >= 0, else every other member, "ranks 0, 2 (world ranks 0, 5)" ("no other rank").
  std::string peers(int peer = -1) const;
  /// "gloo", "mpi", "fake", "nccl".
  virtual std::string backend_name() const = 0;
  /// Where the group's tensors live: the CPU for host backends, one GPU for a device backend.
  /// The checks refuse a tensor elsewhere with an Error naming both devices.
  virtual Device device() const { return Device::cpu(); }
  /// The name the GroupRegistry knows this group by ("0" for the world), used in messages.
  std::string name() const;
  void set_name(const std::string& name);
  Millis timeout() const { return options_.timeout; }
  const GroupOptions& options() const { return options_; }
  /// Ops posted so far (barriers and p2p included).
  virtual uint64_t sequence_number() const = 0;

  /// t <- reduce over ranks of t (in place). kAvg divides the sum by size().
  std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op, const OpOptions& opts = {});
  /// out <- reduce over ranks of `in`, out of place (`in` untouched; `out` has its dtype and
  /// shape; the same tensor for both is the in-place all_reduce). What the functional
  /// all_reduce of a device tensor posts: nccl reads `in` in the caller's stream order
  /// (OpOptions::stream; a small op runs there out of place, a larger one copies `in` there
  /// first; no host synchronization), the default copies it complete on return.
  std::shared_ptr<Work> all_reduce_into(Tensor& out, const Tensor& in, ReduceOp op,
                                        const OpOptions& opts = {});
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
  /// A barrier on a chosen GPU (c10d's barrier(device_ids)): `device_ids` holds at most one id
  /// (one GPU per rank); empty = barrier(opts). A device backend runs the barrier on
  /// cuda:<id>: a group that has not used its GPU yet (no op posted, no communicator) moves to
  /// that GPU, so its later ops must use it; a group already bound to another GPU refuses with an
  /// Error naming both (multi-device groups are not supported). Host backends refuse any id.
  std::shared_ptr<Work> barrier(const std::vector<int>& device_ids, const OpOptions& opts = {});
  /// Sends t to rank dst (group rank); matched by (peer, tag).
  std::shared_ptr<Work> send(const Tensor& t, int dst, int tag = 0, const OpOptions& opts = {});
  /// Receives into t from rank src.
  std::shared_ptr<Work> recv(Tensor& t, int src, int tag = 0, const OpOptions& opts = {});

  // Rooted and list forms (spec A.2). Lists hold one tensor per rank of the group; every
  // argument error (a root outside [0, W), a list of the wrong length, a tensor whose dtype or
  // shape differs) is an Error raised here, before anything is posted.
  /// t on rank `root` <- reduce over ranks of t. The other ranks' t is left unchanged.
  std::shared_ptr<Work> reduce(Tensor& t, ReduceOp op, int root, const OpOptions& opts = {});
  /// On `root`: outs[j] <- rank j's `in` (W tensors of in's dtype and shape). The other ranks
  /// pass an empty `outs`. Work::result() is outs on the root and empty elsewhere.
  std::shared_ptr<Work> gather(std::vector<Tensor>& outs, const Tensor& in, int root,
                               const OpOptions& opts = {});
  /// out <- ins[rank()] of rank `root` (on the root: W tensors of out's dtype and shape; the
  /// other ranks pass an empty `ins`).
  std::shared_ptr<Work> scatter(Tensor& out, const std::vector<Tensor>& ins, int root,
                                const OpOptions& opts = {});
  /// outs[j] <- rank j's `in` (W tensors of in's dtype and shape).
  std::shared_ptr<Work> all_gather(std::vector<Tensor>& outs, const Tensor& in,
                                   const OpOptions& opts = {});
  /// Several list all_gathers in one call: outs[i][j] <- rank j's ins[i].
  std::shared_ptr<Work> all_gather(std::vector<std::vector<Tensor>>& outs,
                                   const std::vector<Tensor>& ins, const OpOptions& opts = {});
  /// out <- reduce over ranks of their ins[rank()] (W tensors of out's dtype and shape).
  std::shared_ptr<Work> reduce_scatter(Tensor& out, const std::vector<Tensor>& ins, ReduceOp op,
                                       const OpOptions& opts = {});
  /// Several list reduce_scatters in one call: outs[i] <- reduce over ranks of ins[i][rank()].
  std::shared_ptr<Work> reduce_scatter(std::vector<Tensor>& outs,
                                       const std::vector<std::vector<Tensor>>& ins, ReduceOp op,
                                       const OpOptions& opts = {});
  /// outs[j] <- rank j's ins[rank()]. Per-peer tensors may differ in shape: what rank i sends
  /// rank j must have as many elements as rank j's outs[i]. One dtype throughout.
  std::shared_ptr<Work> all_to_all(std::vector<Tensor>& outs, const std::vector<Tensor>& ins,
                                   const OpOptions& opts = {});
  /// Receives into t from whichever rank's send with `tag` matches first; Work::source_rank()
  /// names it. Backends whose engine needs the peer (nccl, fake) refuse it with an Error.
  std::shared_ptr<Work> recv_any_source(Tensor& t, int tag = 0, const OpOptions& opts = {});

  /// Builds the sub-group of members `ranks` (ranks of this group, strictly increasing, unique).
  /// Collective over every member of this group; returns null on ranks not in `ranks`.
  std::shared_ptr<ProcessGroup> new_subgroup(const std::vector<int>& ranks,
                                             const std::string& name);

  /// Stops the backend's work after what was posted finished or `grace` passed; returns false
  /// when ops were still in flight. Used at process exit.
  virtual bool shutdown(Millis grace) = 0;

 protected:
  /// Counts of all_to_all_single, in elements per rank (their prefix sums are the offsets), and
  /// rows per rank (the split sizes, equal splits made explicit).
  struct AllToAllCounts {
    std::vector<int64_t> out_counts, in_counts, out_rows, in_rows;
  };

  // The backend's entry points, called by the ops above once their arguments passed the checks
  // (tensors defined and on device(), outputs not self-overlapping, dtypes and reduce op valid,
  // shapes, splits and ranks consistent; send / recv: a peer other than this rank, tag >= 0).
  // Each posts the op and returns its Work; errors of the op itself go to the Work.
  virtual std::shared_ptr<Work> issue_all_reduce(Tensor& t, ReduceOp op, const OpOptions& opts) = 0;
  /// `out` and `in` distinct tensors of one dtype and shape. The default copies `in` into `out`
  /// (complete on return), then issue_all_reduce(out).
  virtual std::shared_ptr<Work> issue_all_reduce_into(Tensor& out, const Tensor& in, ReduceOp op,
                                                      const OpOptions& opts);
  virtual std::shared_ptr<Work> issue_all_reduce_coalesced(std::vector<Tensor>& ts, ReduceOp op,
                                                           const OpOptions& opts) = 0;
  virtual std::shared_ptr<Work> issue_all_gather(Tensor& out, const Tensor& in,
                                                 const OpOptions& opts) = 0;
  virtual std::shared_ptr<Work> issue_all_gather_coalesced(std::vector<Tensor>& outs,
                                                           const std::vector<Tensor>& ins,
                                                           const OpOptions& opts) = 0;
  virtual std::shared_ptr<Work> issue_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op,
                                                     const OpOptions& opts) = 0;
  virtual std::shared_ptr<Work> issue_reduce_scatter_coalesced(std::vector<Tensor>& outs,
                                                               const std::vector<Tensor>& ins,
                                                               ReduceOp op,
                                                               const OpOptions& opts) = 0;
  virtual std::shared_ptr<Work> issue_all_to_all(Tensor& out, const Tensor& in,
                                                 const AllToAllCounts& counts,
                                                 const OpOptions& opts) = 0;
  virtual std::shared_ptr<Work> issue_broadcast(Tensor& t, int src, const OpOptions& opts) = 0;
  virtual std::shared_ptr<Work> issue_barrier(const OpOptions& opts) = 0;
  virtual std::shared_ptr<Work> issue_send(const Tensor& t, int dst, int tag,
                                           const OpOptions& opts) = 0;
  virtual std::shared_ptr<Work> issue_recv(Tensor& t, int src, int tag, const OpOptions& opts) = 0;
  // Rooted / list forms and receive-from-any: the default refuses the op with an Error naming
  // the backend (the host engine and nccl implement them). Arguments as checked above; list
  // forms get nested lists (the single forms are one-element outer lists).
  virtual std::shared_ptr<Work> issue_reduce(Tensor& t, ReduceOp op, int root,
                                             const OpOptions& opts);
  virtual std::shared_ptr<Work> issue_gather(std::vector<Tensor>& outs, const Tensor& in, int root,
                                             const OpOptions& opts);
  virtual std::shared_ptr<Work> issue_scatter(Tensor& out, const std::vector<Tensor>& ins, int root,
                                              const OpOptions& opts);
  virtual std::shared_ptr<Work> issue_all_gather_list(std::vector<std::vector<Tensor>>& outs,
                                                      const std::vector<Tensor>& ins,
                                                      const OpOptions& opts);
  virtual std::shared_ptr<Work> issue_reduce_scatter_list(
      std::vector<Tensor>& outs, const std::vector<std::vector<Tensor>>& ins, ReduceOp op,
      const OpOptions& opts);
  virtual std::shared_ptr<Work> issue_all_to_all_list(std::vector<Tensor>& outs,
                                                      const std::vector<Tensor>& ins,
                                                      const OpOptions& opts);
  virtual std::shared_ptr<Work> issue_recv_any_source(Tensor& t, int tag, const OpOptions& opts);
  /// barrier(device_ids) with one id (>= 0, checked): the default refuses it (a host backend's
  /// barrier runs on the CPU); a device backend binds the group to that device as documented
  /// there, then runs its barrier.
  virtual std::shared_ptr<Work> issue_barrier_on(int device_index, const OpOptions& opts);
  /// Creates the sub-group (see new_subgroup, which checked `members`: ranks of this group).
  virtual std::shared_ptr<ProcessGroup> make_subgroup(const std::vector<int>& members,
                                                      const std::string& name) = 0;

  /// This rank's index among `members` (ranks of this group; -1 when not one of them) and the
  /// members' world ranks: what make_subgroup builds a sub-group from.
  std::pair<int, std::vector<int>> member_ranks(const std::vector<int>& members) const;
  /// "gloo all_reduce #3 on group '0' (rank 1 of 2)" (seq 0: no number).
  std::string where(OpType op, uint64_t seq) const;
  /// The op's timeout: its own, or the group's when it sets none. Throws Error when negative.
  Millis op_timeout(const OpOptions& opts) const;
  /// Tracing (trace_on()): publishes the record of the op `w` (inputs, outputs, root or peer)
  /// and attaches it to `w`. Every op above calls it after its issue_* returned.
  bool trace_on() const { return trace_; }
  void trace_op(Work& w, const std::vector<const Tensor*>& ins,
                const std::vector<const Tensor*>& outs, int peer = -1) const;

 private:
  /// The tensor checks of spec A for this group (defined, on device(), collective dtype).
  void check_tensor(const Tensor& t, const std::string& where, const std::string& role) const;
  void check_output(const Tensor& t, const std::string& where, const std::string& role) const;

  const int rank_, size_;
  const std::vector<int> global_ranks_;
  const GroupOptions options_;
  const bool trace_;  // ANVIL_DIST_TRACE
  mutable std::mutex name_mu_;
  std::string name_ = "?";
  /// where(op, 0) per op type, built on first use (guarded by name_mu_; set_name clears it)
  mutable std::array<std::string, static_cast<size_t>(OpType::kRecvAnySource) + 1> where_cache_;
};

}  // namespace anvil::dist
