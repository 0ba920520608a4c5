// Process-wide settings of dist, read from the environment once per process (spec A.1.2): the
// first process group constructed triggers the read, and every later group uses the same values
// even when the environment changed meanwhile. A malformed value fails that construction with
// an Error naming the variable, its value and what it accepts (the read is then retried by the
// next construction: only a successful read is kept).
//
//   ANVIL_DIST_USE_FUTURE      0 / 1 (default 1): Work::get_future() returns a Future (0: null)
//   ANVIL_DIST_HEALTH_CHECK    0 / 1 (default 0): groups made by create_process_group (the world
//                              included) run the health check at construction (health_check.h)
//   ANVIL_DIST_TRACE           0 / 1 (default 0): record every op and wait (trace.h)
//   ANVIL_DIST_TRACE_DIR       directory of the trace files (default /tmp/anvil_dist_trace)
//   ANVIL_NCCL_BLOCKING_WAIT   nccl: the ops whose Work::wait_stream blocks the host: "none"
//                              (or 0, the default), "all" (or 1), or a comma list of op names
//                              (op_type_name: "all_reduce, send"; case and spaces are ignored).
//                              barrier always blocks (it is the host's synchronisation point).
//   ANVIL_NCCL_BLOCKING_COMM   nccl: 1 (default) a blocking communicator, 0 a non-blocking one
//   ANVIL_NCCL_CALLER_STREAM_BYTES
//                              nccl: collectives of at most this many bytes run on the caller's
//                              stream instead of the group's (default 65536; 0: none)
//   ANVIL_NCCL_ONE_SHOT_BYTES  nccl: an all_reduce of at most this many bytes that runs on the
//                              caller's stream runs as anvil's one-shot kernel over peer
//                              memory when every rank is on one host (nccl/one_shot.h; default
//                              8192; 0: always NCCL)
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dist/types.h"

namespace anvil::dist {

/// A set of op types (one bit per OpType value).
class OpTypeSet {
 public:
  OpTypeSet() = default;
  /// Every op type op_type_name() knows.
  static OpTypeSet all();
  bool contains(OpType op) const { return (bits_ >> static_cast<int>(op)) & 1u; }
  void insert(OpType op) { bits_ |= uint64_t{1} << static_cast<int>(op); }
  bool empty() const { return bits_ == 0; }
  bool operator==(const OpTypeSet& o) const { return bits_ == o.bits_; }
  /// The op names in OpType order, comma-separated ("barrier, send"); "" when empty.
  std::string names() const;

 private:
  uint64_t bits_ = 0;
};

/// Every OpType in enum order (the values op_type_name() names; new op types join on their own).
std::vector<OpType> all_op_types();

/// The settings above.
struct DistSettings {
  bool use_future = true;
  bool health_check = false;
  bool trace = false;
  std::string trace_dir = "/tmp/anvil_dist_trace";
  /// The ops whose wait_stream blocks the host on a device backend; always holds kBarrier.
  OpTypeSet blocking_wait;
  /// nccl: a blocking communicator (NCCL's own enqueue) instead of the non-blocking one whose
  /// ncclInProgress is polled: ~3-4x less host time per small op; a call that stays inside
  /// NCCL past its op's timeout ends the process (nccl_state.h).
  bool nccl_blocking_comm = true;
  /// nccl: a collective (not send / recv) moving at most this many bytes per rank runs on the
  /// caller's stream itself: no event to order the group's stream after it, no wait back, and
  /// an out-of-place all_reduce needs no copy of its input. Latency-bound ops lose nothing to
  /// overlap there; larger ones keep the group's stream (overlap with the caller's compute).
  /// (NCCL runs one communicator's ops in order: a small op queued after a large one holds the
  /// caller's stream until the large one is done.)
  int64_t nccl_caller_stream_bytes = 65536;
  /// nccl: the one-shot all_reduce's limit in bytes (0: never).
  int64_t nccl_one_shot_bytes = 8192;

  /// "ANVIL_DIST_USE_FUTURE=1 ANVIL_DIST_HEALTH_CHECK=0 ..." (every variable, as used).
  std::string describe() const;
};

/// Reads the settings through `getenv` (a variable that is unset or empty takes its default).
/// Throws Error naming the variable, the value and the accepted values on a malformed one.
DistSettings parse_dist_settings(const std::function<const char*(const char*)>& getenv);

/// The process's settings: read from the environment on the first call (thread-safe), the same
/// object afterwards. Throws the read's Error while the environment is malformed. With
/// ANVIL_DIST_DEBUG set (not 0) the first read prints describe() to stderr.
const DistSettings& dist_settings();

}  // namespace anvil::dist
