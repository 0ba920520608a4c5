// The one-shot all_reduce: small all_reduces of a group whose ranks share one host run as one
// kernel over peer memory instead of an NCCL call (ANVIL_NCCL_ONE_SHOT_BYTES, settings.h).
// NCCL's enqueue of one op costs ~10 us of host time on an H200 host, more than the whole op
// takes on the device; this kernel's launch costs ~2-3 us. The approach of torch's intra-node
// all-reduce and of vLLM's custom all-reduce: each rank maps every peer's buffer (CUDA IPC),
// pushes its block into slot `rank` of every buffer, publishes a sequence number there, waits
// for every peer's, and reduces its own buffer's slots in rank order — so every rank gets the
// same bits (one_shot_kernel.cu).
//
// Prepared with the group's device objects (the kernels loaded, the buffer allocated: nothing
// that could wait for the device once ops are in flight) and connected on the group's first
// eligible op, collectively: every rank publishes its host name and buffer handle in the
// group's store, opens the others' and publishes whether that worked; the one-shot path is used
// only when every rank could (else NCCL carries every op, on every rank alike). A peer that never arrives fails the op at its deadline like any op. A peer that dies
// mid-op: the kernel gives up at the op's deadline and the op fails naming the peer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/dtype.h"
#include "dist/store.h"
#include "dist/types.h"

namespace anvil::dist::nccl {

class OneShot {
 public:
  /// Whether an all_reduce of `bytes` of `dtype` with `op` may take the one-shot path with a
  /// limit of `limit` bytes (the same answer on every rank; a group of 1 or of more than
  /// kOneShotMaxRanks ranks prepares none).
  static bool eligible(DType dtype, ReduceOp op, size_t bytes, int64_t limit);

  /// This rank's part, on the current device: the kernels loaded, the buffer and the status
  /// word allocated. Never throws: a failure is kept and voted "no" by connect().
  static std::shared_ptr<OneShot> prepare(int rank, int world, int64_t limit);
  /// Collective over the group (every rank calls it at the same op, its device current): true
  /// when every rank mapped every peer's buffer; false on every rank when some rank could not
  /// (another host, no peer access, a process holding two ranks: its reason is in the store's
  /// vote). Throws Error naming the peer when one does not publish by `deadline` (`names`:
  /// each group rank's name for messages; the caller then aborts the group).
  bool connect(Store& store, std::chrono::steady_clock::time_point deadline,
               const std::vector<std::string>& names);
  ~OneShot();
  OneShot(const OneShot&) = delete;
  OneShot& operator=(const OneShot&) = delete;

  /// Queues one op on `stream` (out may be in); `*seq` receives its number.
  cudaError_t launch(const void* in, void* out, int64_t n, DType dtype, ReduceOp op,
                     Millis timeout, cudaStream_t stream, uint64_t* seq);
  /// Once op `seq`'s kernel finished: -1 when it completed, else the group rank whose block
  /// did not arrive in time (in this op or an earlier one: the kernel gave up at the deadline).
  int late_peer(uint64_t seq) const;
  /// The group was aborted: kernels still waiting give up (their ops are failed by the abort).
  void mark_aborted();

 private:
  OneShot() = default;
  int rank_ = 0, world_ = 1;
  int64_t slot_bytes_ = 0;
  std::string problem_;                 // why prepare() failed ("" when it did not)
  cudaIpcMemHandle_t handle_{};
  void* own_ = nullptr;                 // this rank's buffer (cudaMalloc)
  std::vector<void*> bufs_;             // every rank's, mapped here (own_ at rank_)
  unsigned long long* status_ = nullptr;  // host-mapped (cudaHostAlloc)
  unsigned long long* status_dev_ = nullptr;
  uint64_t seq_ = 0;
};

}  // namespace anvil::dist::nccl
