// Small shared vocabulary of dist: reduce ops, collective kinds, per-op options.
#pragma once

#include <chrono>
#include <string>

#include "dist/store.h"

namespace anvil::dist {

/// Element-wise reduction of all_reduce / reduce_scatter. kAvg = kSum / group size (floating
/// dtypes only); the bitwise ops take integer and bool dtypes only.
enum class ReduceOp { kSum, kAvg, kProduct, kMin, kMax, kBand, kBor, kBxor };

/// "sum", "avg", "product", "min", "max", "band", "bor", "bxor".
const char* reduce_op_name(ReduceOp op);
/// Parses the names above (case-insensitive; "prod"/"mean" are not accepted); throws Error
/// listing the valid names otherwise.
ReduceOp reduce_op_from_name(const std::string& name);

/// The kind of a posted operation (for messages, Work and the consistency check).
enum class OpType {
  kAllReduce,
  kAllReduceCoalesced,
  kAllGather,
  kAllGatherCoalesced,
  kReduceScatter,
  kReduceScatterCoalesced,
  kAllToAll,
  kBroadcast,
  kBarrier,
  kSend,
  kRecv,
  kReduce,
  kGather,
  kScatter,
  kAllGatherList,
  kReduceScatterList,
  kAllToAllList,
  kRecvAnySource,
};

/// "all_reduce", "all_gather_into_tensor", ...
const char* op_type_name(OpType op);

/// Default timeout of a collective when neither the op nor the group sets one.
inline constexpr Millis kDefaultOpTimeout{300000};
/// Work::wait without a bound of its own (the op's timeout still ends it).
inline constexpr Millis kWaitForever{-1};

/// Per-operation options. A zero timeout means "the group's timeout".
struct OpOptions {
  Millis timeout{0};
  /// The caller's stream (a device stream handle, e.g. a cudaStream_t; null: none): a device
  /// backend starts the op after the work queued on it so far. Host backends ignore it (their
  /// tensors are host memory, ready when the op is posted).
  void* stream = nullptr;
};

}  // namespace anvil::dist
