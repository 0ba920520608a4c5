// The nccl backend: collectives on CUDA tensors of one GPU per rank through NCCL. Built into its
// own library, libanvil_nccl.so (with NCCL and the CUDA runtime), which anvil_dist loads only
// when an nccl group is created (dist/nccl_backend.h).
//
// - Rendezvous: rank 0 of the group makes the ncclUniqueId and publishes it in the group's store
//   when the group is created; the others read it there (bounded by the store's timeout, so a
//   missing rank 0 fails the construction). The communicator itself (ncclCommInitRankConfig,
//   blocking unless ANVIL_NCCL_BLOCKING_COMM=0) is created on the group's first op, or at
//   construction with eager_init.
//   Sub-groups get a unique id of their own through the store (a PrefixStore per sub-group).
// - Streams: each group has an internal non-blocking stream for its collectives; send / recv run
//   on p2p lanes, a 2-rank communicator and stream per peer and direction (nccl_state.h), so
//   crossed sends and receives between two ranks never wait on each other. An op first makes
//   its stream wait for the caller's stream (OpOptions::stream; none: the legacy default
//   stream) and runs there; a collective of at most ANVIL_NCCL_CALLER_STREAM_BYTES runs on the
//   caller's stream itself. Its Work completes on a CUDA event recorded after it:
//   Work::wait_stream(s) makes `s` wait for that event (the host does not wait), Work::wait()
//   polls it.
// - Device: one GPU per rank, chosen at construction (GroupOptions::device_index, LOCAL_RANK,
//   the rank). barrier(device_ids = {d}) before the group used its GPU moves it to cuda:d (the
//   communicator is made there); afterwards, a barrier on another GPU is a multi-device Error.
// - Failures: see nccl_state.h (timeouts, asynchronous errors, abort; never a hang).
// - Ops: every op of the interface on contiguous tensors of the group's GPU. Reductions take
//   bool, u8, i8, i32, i64, f16, bf16, f32, f64 with sum, avg (ncclAvg), product, min, max;
//   the bitwise ops on integers and reductions of i16/u16 are refused (NCCL has none). Data
//   movement (all_gather, all_to_all, broadcast, send/recv) moves bytes, any collective dtype.
//   NCCL has no message tags: send / recv refuse a tag other than 0 (pairs match by order).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "dist/store.h"

namespace anvil::dist {

namespace nccl {
struct NcclState;
}

class NcclProcessGroup final : public ProcessGroup {
 public:
  /// Checks the GPU (options.device_index, see GroupOptions) and exchanges the unique id
  /// through `store` (keys under the store's namespace: give each group its own PrefixStore).
  /// Throws Error: no CUDA device, a device index out of range, rank 0's id not published in
  /// time, or (eager_init) the communicator not created within the group's timeout.
  NcclProcessGroup(std::shared_ptr<Store> store, int rank, int size, std::vector<int> global_ranks,
                   GroupOptions options);
  /// Drains the ops in flight (bounded by the group's timeout), then releases the communicator
  /// (ncclCommAbort: see shutdown) and the group's stream.
  ~NcclProcessGroup() override;

  std::string backend_name() const override { return "nccl"; }
  Device device() const override;
  uint64_t sequence_number() const override;
  bool shutdown(Millis grace) override;

  /// The NCCL calls of one op (nccl_launch.h; internal to src/dist/nccl).
  struct Launch;

 protected:
  std::shared_ptr<Work> issue_all_reduce(Tensor& t, ReduceOp op, const OpOptions& opts) override;
  std::shared_ptr<Work> issue_all_reduce_into(Tensor& out, const Tensor& in, ReduceOp op,
                                              const OpOptions& opts) override;
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
  std::shared_ptr<Work> issue_barrier_on(int device_index, const OpOptions& opts) override;
  std::shared_ptr<Work> issue_send(const Tensor& t, int dst, int tag,
                                   const OpOptions& opts) override;
  std::shared_ptr<Work> issue_recv(Tensor& t, int src, int tag, const OpOptions& opts) override;
  // Rooted and list forms (nccl_ops.cpp): ncclReduce; gather / scatter and list all_to_all as
  // grouped ncclSend / ncclRecv (the block to itself a device copy); list all_gather as W grouped
  // ncclBroadcasts and list reduce_scatter as W grouped ncclReduces (one per root), so no
  // staging buffer. recv_any_source stays refused (ncclRecv needs its peer).
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
  std::shared_ptr<ProcessGroup> make_subgroup(const std::vector<int>& members,
                                              const std::string& name) override;

 private:
  /// Where an op runs: the group's communicator and stream, or this rank's send / receive lane
  /// to the op's peer.
  enum class Lane { kGroup, kSend, kRecv };
  /// Posts one op: next sequence number, communicator, stream ordering, `launch`, the event.
  /// Errors after the sequence number was taken go to the Work (and break the group).
  std::shared_ptr<Work> post(OpType op, const OpOptions& opts, std::vector<Tensor> outputs,
                             std::vector<Tensor> inputs, int peer, const Launch& launch,
                             Lane lane = Lane::kGroup);
  /// The group's one-shot all_reduce, made on its first eligible op (mu held, device set;
  /// nccl/one_shot.h): true when this op takes it. Throws Error (the group then aborted) when
  /// a peer does not join the set-up by `deadline`.
  bool one_shot_ready(std::chrono::steady_clock::time_point deadline, const std::string& where);

  std::shared_ptr<Store> store_;
  std::shared_ptr<nccl::NcclState> st_;
};

}  // namespace anvil::dist
