// Functional collectives (spec/collectives.md §2.3-2.5): the `_c10d_functional` ops as C++
// functions over group names. A functional op returns a NEW tensor whose Work is registered in
// the WorkRegistry by storage; wait_tensor(t) waits for it (a no-op when nothing is pending).
// The `_` forms work in place and return their argument. AsyncTensor plays the role of the
// Python-level AsyncCollectiveTensor: it waits on first use.
//
// Non-contiguous inputs are made contiguous internally; the input is never modified by an
// out-of-place op. Device tensors (a group on a GPU, e.g. nccl) get their outputs on the same
// device; an out-of-place op copies its input on the device (complete on return), except
// all_reduce, which posts ProcessGroup::all_reduce_into with no host synchronization: nccl
// runs an op of at most ANVIL_NCCL_CALLER_STREAM_BYTES on the caller's stream (the legacy
// default stream here) out of place, and copies a larger one's input there first, so a write
// queued there after the call is ordered after the op's read, as c10d's clone on the current
// stream. A
// device input must be contiguous, and the api forms' gather / scatter along a dim other than 0 (a
// host-side rearrangement) take cpu tensors only. wait_tensor blocks the host until the op
// completed (the spec allows ordering a stream instead, as c10d does; that measured no faster
// here, and a host wait raises a failure at the wait). Arguments are checked before anything is
// posted (unknown group: an Error naming it; group_size != the group's size; splits;
// divisibility; dtype/op).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/process_group.h"
#include "dist/types.h"

namespace anvil::dist::functional {

/// all_reduce: a new tensor = reduce over ranks of t.
Tensor all_reduce(const Tensor& t, ReduceOp op, const std::string& group);
Tensor all_reduce(const Tensor& t, const std::string& op, const std::string& group);
/// In place; returns t.
Tensor& all_reduce_(Tensor& t, ReduceOp op, const std::string& group);
/// One output per input (shapes may differ, 0-size allowed), one call per dtype.
std::vector<Tensor> all_reduce_coalesced(const std::vector<Tensor>& ts, ReduceOp op,
                                         const std::string& group);
std::vector<Tensor>& all_reduce_coalesced_(std::vector<Tensor>& ts, ReduceOp op,
                                           const std::string& group);
/// [W*d0, ...]: the ranks' inputs concatenated along dim 0 in rank order.
Tensor all_gather_into_tensor(const Tensor& t, int64_t group_size, const std::string& group);
/// Writes into `out` ([W*d0, ...]) and returns it.
Tensor& all_gather_into_tensor_out(const Tensor& t, int64_t group_size, const std::string& group,
                                   Tensor& out);
std::vector<Tensor> all_gather_into_tensor_coalesced(const std::vector<Tensor>& ts,
                                                     int64_t group_size, const std::string& group);
/// [d0/W, ...]: rank r gets the reduction of chunk r.
Tensor reduce_scatter_tensor(const Tensor& t, ReduceOp op, int64_t group_size,
                             const std::string& group);
std::vector<Tensor> reduce_scatter_tensor_coalesced(const std::vector<Tensor>& ts, ReduceOp op,
                                                    int64_t group_size, const std::string& group);
/// dim 0 = sum of out_splits (nullopt: equal splits d0/W on both sides).
Tensor all_to_all_single(const Tensor& t, const std::optional<std::vector<int64_t>>& out_splits,
                         const std::optional<std::vector<int64_t>>& in_splits,
                         const std::string& group);
/// A new tensor holding rank src's t.
Tensor broadcast(const Tensor& t, int64_t src, const std::string& group);
Tensor& broadcast_(Tensor& t, int64_t src, const std::string& group);
/// src_dst[i] = the rank that rank i sends its tensor to (a permutation); returns what this
/// rank receives (from the s with src_dst[s] == rank).
Tensor permute_tensor(const Tensor& t, const std::vector<int64_t>& src_dst,
                      const std::string& group);
/// Waits for the collective that produces t's storage (no-op when none); returns t.
const Tensor& wait_tensor(const Tensor& t);

/// The registered name of the legacy (tag, ranks, group_size) group (see GroupRegistry).
std::string legacy_group_name(const std::string& tag, const std::vector<int64_t>& ranks,
                              int64_t group_size);

/// A functional result that waits on first use (the AsyncCollectiveTensor of §2.4).
class AsyncTensor {
 public:
  /// `finish` (optional) transforms the waited tensor once (e.g. a gather along dim != 0).
  explicit AsyncTensor(Tensor pending, std::function<Tensor(const Tensor&)> finish = nullptr);
  /// False until the first use.
  bool completed() const { return completed_; }
  /// Waits (first call only) and returns the value.
  const Tensor& value();

 private:
  Tensor t_;
  std::function<Tensor(const Tensor&)> finish_;
  bool completed_ = false;
};

/// The Python-level API: each returns AsyncTensor(s).
namespace api {
AsyncTensor all_reduce(const Tensor& t, const std::string& op, const std::string& group);
std::vector<AsyncTensor> all_reduce_coalesced(const std::vector<Tensor>& ts, const std::string& op,
                                              const std::string& group);
/// Gathers along `gather_dim` (dim 0 natively; other dims by rearranging after the wait).
AsyncTensor all_gather_tensor(const Tensor& t, int64_t gather_dim, const std::string& group);
std::vector<AsyncTensor> all_gather_into_tensor_coalesced(const std::vector<Tensor>& ts,
                                                          const std::string& group);
/// Scatters along `scatter_dim` (dim 0 natively; other dims are moved to the front first).
AsyncTensor reduce_scatter_tensor(const Tensor& t, const std::string& op, int64_t scatter_dim,
                                  const std::string& group);
std::vector<AsyncTensor> reduce_scatter_tensor_coalesced(const std::vector<Tensor>& ts,
                                                         const std::string& op,
                                                         const std::vector<int64_t>& scatter_dims,
                                                         const std::string& group);
AsyncTensor all_to_all_single(const Tensor& t,
                              const std::optional<std::vector<int64_t>>& out_splits,
                              const std::optional<std::vector<int64_t>>& in_splits,
                              const std::string& group);
AsyncTensor broadcast(const Tensor& t, int64_t src, const std::string& group);
AsyncTensor permute_tensor(const Tensor& t, const std::vector<int64_t>& src_dst,
                           const std::string& group);
}  // namespace api

}  // namespace anvil::dist::functional
