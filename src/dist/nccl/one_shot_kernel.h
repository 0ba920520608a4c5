// The one-shot all_reduce's kernel (one_shot_kernel.cu, compiled by nvcc): the interface the
// host side (one_shot.h) launches it through. Kept free of anvil's headers so nvcc compiles
// only this.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace anvil::dist::nccl {

inline constexpr int kOneShotMaxRanks = 8;
/// Each rank's buffer: the flags first ([2 parities][kOneShotMaxRanks] uint64: the sequence
/// number of the op whose block that rank last pushed here), then the data
/// ([2 parities][world][slot_bytes]).
inline constexpr size_t kOneShotDataOffset = 256;

inline constexpr unsigned long long kOneShotAborted = ~0ull;

enum class OneShotType : int32_t { kF32, kF16, kBF16, kF64, kI8, kU8, kI32, kI64 };
enum class OneShotOp : int32_t { kSum, kAvg, kProduct, kMin, kMax };

struct OneShotArgs {
  void* bufs[kOneShotMaxRanks];  // every rank's buffer, mapped in this process (ours included)
  const void* in;
  void* out;
  int64_t n;  // elements
  OneShotType type;
  OneShotOp op;
  int32_t rank, world;
  uint64_t seq;  // 1, 2, ...: the op's number among the group's one-shot ops (same on every rank)
  int64_t slot_bytes;
  int64_t timeout_ns;  // a peer's block not seen by then: the kernel gives up, *status says so
  /// Host-mapped: set once to (seq << 8 | peer + 1) by the first op that timed out, or to
  /// kOneShotAborted by the host when the group is aborted; a waiting kernel that sees it set
  /// gives up.
  unsigned long long* status;
};

/// Queues the kernel on `stream` (one block): pushes `in` into slot `rank` of every rank's
/// buffer, publishes the op's sequence number there, waits for every peer's, and reduces the
/// slots of its own buffer into `out` in rank order (every rank gets the same bits).
cudaError_t launch_one_shot(const OneShotArgs& args, cudaStream_t stream);
/// Loads every instantiation of the kernel on the current device now. (With CUDA's lazy
/// loading a kernel's first launch loads it, which waits for the whole device: with a send in
/// flight whose receive the peer posts after its own all_reduce, both ranks would wait forever.)
cudaError_t preload_one_shot();

}  // namespace anvil::dist::nccl
