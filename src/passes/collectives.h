// Collectives in the loop-kernel program (spec/collectives.md §3). A collective is two steps:
// an issue step (ExternStep, target "_c10d_functional.<op>": all_reduce, broadcast,
// all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single) and a wait step (target
// "_c10d_functional.wait_tensor"), both carrying the attribute "coll" = the collective's id and
// "group" = the group name (resolved at run time). An issue step may hold several tensors (a
// bucket: one coalesced all_reduce, all_gather or reduce_scatter); its inputs and outputs are
// views of buffers (in-place collectives list the same view in both). The wait step lists the same views, so the memory
// planner keeps every buffer of the collective alive from its issue to its wait.
#pragma once

#include <string>

#include "passes/loop_ir.h"

namespace anvil::passes {

inline constexpr const char* kCollectivePrefix = "_c10d_functional.";
inline constexpr const char* kCollectiveWaitTarget = "_c10d_functional.wait_tensor";

/// True for the issue step of a collective.
bool is_collective_issue(const ExternStep& e);
/// True for the wait step of a collective.
bool is_collective_wait(const ExternStep& e);
/// The "coll" attribute (the collective's id), or -1.
int collective_id(const ExternStep& e);
/// A string attribute of a collective step ("group", "reduce_op"), or "".
std::string collective_attr(const ExternStep& e, const std::string& name);

/// Options of the collective scheduling pass.
struct CollectiveScheduleOptions {
  /// Issue each collective as early as its inputs allow and wait as late as its first reader
  /// allows (kept only when the planned peak memory does not grow).
  bool reorder = true;
  /// Merge all_reduces (same group, reduce op and dtype), all_gather_into_tensors (same group
  /// and group size) or reduce_scatter_tensors (same group, reduce op and group size) whose
  /// issues follow each other with no other collective step in between into one coalesced issue
  /// per op (a gather / scatter bucket may mix dtypes).
  bool bucket = true;
  /// Largest tensor (bytes) that joins a bucket, and largest bucket. Measured with
  /// `DIST_BENCH_MODE=bucket bench/dist_bench.sh` (4 all_reduces vs one coalesced call, gloo, 2
  /// ranks): coalescing wins 3-4x up to 128 KiB per tensor, 1.3x at 512 KiB, and loses from
  /// 1 MiB (0.75-1.05x: the copies into and out of the flat buffer cost more than the calls).
  int64_t bucket_max_tensor_bytes = int64_t{512} << 10;
  int64_t bucket_max_bytes = int64_t{2} << 20;
};

/// `base` with the environment's overrides: ANVIL_COLLECTIVE_REORDER=0|1 and
/// ANVIL_COLLECTIVE_BUCKET=0|1 (so `anvil compile` and benchmarks can switch the passes).
CollectiveScheduleOptions collective_options_from_env(CollectiveScheduleOptions base);

/// What the pass did (tests and `anvil inspect`).
struct CollectiveScheduleStats {
  int collectives = 0;  // issue steps after bucketing
  int bucketed = 0;     // collectives merged into another's issue
  int moved = 0;        // steps moved by the reordering
  bool reorder_kept = false;
};

/// Reorders and buckets the collective steps of a scheduled program, then plans its memory
/// (detail::plan_memory): runs every variant (bucket + reorder, reorder, bucket, none) enabled
/// by `options` and keeps the first whose planned peak is not above the unchanged program's.
/// Collective issue steps never change their relative order, so every rank issues the same
/// collectives in the same order.
CollectiveScheduleStats schedule_collectives(Program& program,
                                             const CollectiveScheduleOptions& options);

}  // namespace anvil::passes
