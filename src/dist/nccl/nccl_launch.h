// The NCCL calls of one op, as NcclProcessGroup::post runs them (internal to src/dist/nccl).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dist/nccl/nccl_process_group.h"
#include "dist/nccl/nccl_state.h"

namespace anvil::dist {

struct NcclProcessGroup::Launch {
  /// One NCCL call on the op's communicator and stream; `what` names it in messages.
  struct Call {
    std::string what;
    std::function<ncclResult_t(ncclComm_t comm, cudaStream_t stream)> fn;
  };
  std::vector<Call> calls;
  /// Between ncclGroupStart / ncclGroupEnd (coalesced ops, all_to_all's sends and receives).
  bool grouped = false;
  /// Queued on the op's stream before the calls (gather's / scatter's block to itself); may be
  /// empty.
  std::function<cudaError_t(cudaStream_t stream)> before;
  /// Queued on the caller's stream before the op's stream is ordered after it (all_reduce_into's
  /// copy of its input: ordered before anything the caller queues later, as c10d's clone on
  /// the current stream); may be empty.
  std::function<cudaError_t(cudaStream_t caller)> on_caller;
  /// The calls instead of `calls` (and without `on_caller`) when the op runs on the caller's
  /// stream itself (a small op, settings.h); empty: `calls` there too. all_reduce_into's
  /// out-of-place ncclAllReduce(in, out): in the caller's order, its input needs no copy.
  std::vector<Call> direct_calls;
  /// An all_reduce the one-shot kernel may run instead when the op runs on the caller's stream
  /// (nccl/one_shot.h; `in` may be `out`).
  struct OneShotOp {
    const void* in;
    void* out;
    int64_t n;
    DType dtype;
    ReduceOp op;
  };
  std::optional<OneShotOp> one_shot;

  /// Runs the calls (`direct`: on the caller's stream, direct_calls when given) on `comm` and
  /// `stream` (the group's, a p2p lane's or the caller's) with mu held and the device set;
  /// throws Error after aborting the group when a call fails or does not complete its enqueue
  /// by `deadline`.
  void run(nccl::NcclState& st, ncclComm_t comm, cudaStream_t stream,
           nccl::Clock::time_point deadline, const std::string& where, bool direct) const;
};

}  // namespace anvil::dist
