// The per-op trace (spec A.1.10's comms logger): with ANVIL_DIST_TRACE=1 every op posted through
// a ProcessGroup and every wait on its Work is recorded, process-wide, and written as one JSON
// array to "<ANVIL_DIST_TRACE_DIR>/rank<r>.json" (r = this process's world rank) when a group
// is destroyed, at exit, and on write_trace(). Each write rewrites the whole file (through a
// temporary and a rename, so a reader never sees half a file).
//
// An op record: {"kind": "op", "op": "all_reduce", "backend", "group", "rank", "size",
// "global_rank", "seq", "dtype" ("f32"), "in_sizes": [[4]], "out_sizes": [[4]], "peer" (root / peer or
// -1), "posted_ns", "started_ns", "ended_ns", "status": "ok" | "error" | "pending", "error"}.
// A wait record: {"kind": "wait", "op", "group", "seq", "start_ns", "end_ns", "status", "error"}.
// Times are nanoseconds relative to the process's first record; started_ns is when the group's
// engine began running the op (host backends) or queued it on the device (nccl), ended_ns when
// the op was seen complete (null while unknown). Records are kept until the process ends (up to
// kMaxTraceRecords; later ones are dropped with one warning).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace anvil::dist {

/// Records kept at most (ops and waits together).
inline constexpr size_t kMaxTraceRecords = size_t{1} << 20;

/// Monotonic nanoseconds (steady clock), the time base of the trace.
int64_t trace_now_ns();

/// One op's record. Its static fields are set before it is published; the times are set by the
/// Work as the op runs, `error` under the trace's lock (trace_set_error).
struct OpTrace {
  std::string op, backend, group, dtype;
  int rank = 0, size = 1, global_rank = 0, peer = -1;
  uint64_t seq = 0;
  std::vector<std::vector<int64_t>> in_sizes, out_sizes;
  int64_t posted_ns = 0;
  std::atomic<int64_t> started_ns{-1}, ended_ns{-1};
  /// The path the backend took, when it has several (a string literal: "one_shot"); null: its
  /// only one. Written in the JSON as "engine" when set.
  std::atomic<const char*> engine{nullptr};
  std::string error;  // guarded by the trace's lock
};

/// Publishes `rec` (fields filled) and returns the trace's pointer to it (valid for the whole
/// process), or null when the trace is full.
OpTrace* trace_publish(std::unique_ptr<OpTrace> rec);
/// Records the op's failure.
void trace_set_error(OpTrace* rec, const std::string& error);
/// Records one wait on the op (`error` empty: it returned normally).
void trace_add_wait(const OpTrace* rec, int64_t start_ns, int64_t end_ns, const std::string& error);
/// Writes the trace file now (creating the directory) and returns its path; "" when nothing was
/// recorded. Throws Error when the file cannot be written.
std::string write_trace();
/// The trace as the file holds it (a JSON array), for tests and tools.
std::string trace_json();

}  // namespace anvil::dist
