// ProcessGroup: the interface's own part — identity, names, and every op's argument checks
// (spec A) before the backend's issue_* entry point sees it.
#include "dist/process_group.h"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <numeric>
#include <tuple>

#include "core/allocator.h"
#include "core/error.h"
#include "dist/checks.h"
#include "dist/host_profile.h"
#include "dist/reduce.h"
#include "dist/settings.h"
#include "dist/trace.h"

namespace anvil::dist {

std::string peer_names(int rank, int size, const std::vector<int>& global_ranks, int peer) {
  auto world = [&](int r) { return global_ranks.at(static_cast<size_t>(r)); };
  if (peer >= 0 && peer < size) return str("rank ", peer, " (world rank ", world(peer), ")");
  std::string r, g;
  int n = 0;
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    r += (n ? ", " : "") + std::to_string(i);
    g += (n ? ", " : "") + std::to_string(world(i));
    ++n;
  }
  if (n == 0) return "no other rank";
  return str(n == 1 ? "rank " : "ranks ", r, n == 1 ? " (world rank " : " (world ranks ", g, ")");
}

std::string ProcessGroup::peers(int peer) const {
  return peer_names(rank_, size_, global_ranks_, peer);
}

ProcessGroup::ProcessGroup(int rank, int size, std::vector<int> global_ranks, GroupOptions options)
    : rank_(rank),
      size_(size),
      global_ranks_([&] {
        if (!global_ranks.empty()) return global_ranks;
        std::vector<int> r(static_cast<size_t>(std::max(size, 0)));
        std::iota(r.begin(), r.end(), 0);
        return r;
      }()),
      options_(options),
      trace_(dist_settings().trace) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error("invalid rank / group size", "ProcessGroup", "0 <= rank < size, size >= 1",
                str("rank ", rank, ", size ", size));
  if (static_cast<int>(global_ranks_.size()) != size)
    throw Error("global rank list does not match the group size", "ProcessGroup",
                std::to_string(size), std::to_string(global_ranks_.size()));
  if (options_.timeout.count() <= 0)
    throw Error("group timeout must be positive", "ProcessGroup", "> 0 ms",
                str(options_.timeout.count(), " ms"));
}

ProcessGroup::~ProcessGroup() {
  if (!trace_) return;
  try {
    write_trace();
  } catch (const std::exception& e) {
    std::cerr << "anvil dist: warning: the trace was not written: " << e.what() << "\n";
  }
}

namespace {

std::vector<const Tensor*> ptrs(const std::vector<Tensor>& ts) {
  std::vector<const Tensor*> r;
  for (const Tensor& t : ts) r.push_back(&t);
  return r;
}

std::vector<const Tensor*> ptrs(const std::vector<std::vector<Tensor>>& lists) {
  std::vector<const Tensor*> r;
  for (const auto& ts : lists)
    for (const Tensor& t : ts) r.push_back(&t);
  return r;
}

}  // namespace

void ProcessGroup::trace_op(Work& w, const std::vector<const Tensor*>& ins,
                            const std::vector<const Tensor*>& outs, int peer) const {
  auto rec = std::make_unique<OpTrace>();
  rec->op = op_type_name(w.op());
  rec->backend = backend_name();
  rec->group = name();
  rec->rank = rank_;
  rec->size = size_;
  rec->global_rank = global_ranks_[static_cast<size_t>(rank_)];
  rec->peer = peer;
  rec->seq = w.seq();
  for (const Tensor* t : ins) rec->in_sizes.push_back(t->sizes());
  for (const Tensor* t : outs) rec->out_sizes.push_back(t->sizes());
  const Tensor* first = !ins.empty() ? ins[0] : !outs.empty() ? outs[0] : nullptr;
  if (first) rec->dtype = dtype_name(first->dtype());
  rec->posted_ns = w.posted_ns();
  w.attach_trace(trace_publish(std::move(rec)));
}

std::string ProcessGroup::name() const {
  std::lock_guard<std::mutex> lk(name_mu_);
  return name_;
}

void ProcessGroup::set_name(const std::string& name) {
  std::lock_guard<std::mutex> lk(name_mu_);
  name_ = name;
  for (std::string& w : where_cache_) w.clear();
}

std::string ProcessGroup::where(OpType op, uint64_t seq) const {
  // Built up to three times per op: the text without the number is kept per op type (an
  // 8 B NCCL all_reduce takes ~10 us, and building this text took a few tenths of one)
  std::lock_guard<std::mutex> lk(name_mu_);
  const auto i = static_cast<size_t>(op);
  ANVIL_INTERNAL_ASSERT(i < where_cache_.size(), "ProcessGroup::where: an unknown op type");
  std::string& cached = where_cache_[i];
  if (cached.empty()) {
    cached = backend_name();
    cached += ' ';
    cached += op_type_name(op);
    cached += " on group '";
    cached += name_;
    cached += "' (rank ";
    cached += std::to_string(rank_);
    cached += " of ";
    cached += std::to_string(size_);
    cached += ')';
  }
  if (!seq) return cached;
  // "<backend> <op>" #seq " on group ..."
  const size_t at = cached.find(" on group '");
  std::string w;
  w.reserve(cached.size() + 22);
  w.append(cached, 0, at);
  w += " #";
  w += std::to_string(seq);
  w.append(cached, at, std::string::npos);
  return w;
}

Millis ProcessGroup::op_timeout(const OpOptions& opts) const {
  if (opts.timeout.count() < 0)
    throw Error("op timeout must not be negative", "ProcessGroup", ">= 0 ms (0 = group timeout)",
                str(opts.timeout.count(), " ms"));
  return opts.timeout.count() > 0 ? opts.timeout : options_.timeout;
}

void ProcessGroup::check_tensor(const Tensor& t, const std::string& where,
                                const std::string& role) const {
  detail::check_tensor(t, device(), where, role);
}

void ProcessGroup::check_output(const Tensor& t, const std::string& where,
                                const std::string& role) const {
  detail::check_output(t, device(), where, role);
}

std::shared_ptr<Work> ProcessGroup::all_reduce(Tensor& t, ReduceOp op, const OpOptions& opts) {
  host_profile::Span span;
  const std::string w = where(OpType::kAllReduce, 0);
  check_output(t, w, "input");
  check_reduce_op(t.dtype(), op, w);
  span.mark("pg all_reduce: checks");
  auto work = issue_all_reduce(t, op, opts);
  span.mark("pg all_reduce: issue (backend)");
  if (trace_) trace_op(*work, {&t}, {&t});
  return work;
}

std::shared_ptr<Work> ProcessGroup::all_reduce_into(Tensor& out, const Tensor& in, ReduceOp op,
                                                   const OpOptions& opts) {
  // one tensor for both (the same elements in the same order: a dim of size 1 may have any
  // stride): in place
  const auto same_view = [&] {
    if (!out.defined() || !in.defined() || out.dtype() != in.dtype() ||
        out.sizes() != in.sizes() || out.data_ptr() != in.data_ptr())
      return false;
    for (size_t d = 0; d < out.sizes().size(); ++d)
      if (out.sizes()[d] > 1 && out.strides()[d] != in.strides()[d]) return false;
    return true;
  };
  host_profile::Span span;
  if (same_view()) return all_reduce(out, op, opts);
  const std::string w = where(OpType::kAllReduce, 0);
  check_tensor(in, w, "input");
  check_output(out, w, "output");
  detail::check_like(out, in, w, "output");
  check_reduce_op(in.dtype(), op, w);
  if (out.numel() > 0) {
    // The bytes each view spans, by address: two tensors may share memory through two storages
    // (each wrapping one caller's buffer: a DLPack import, a compiled run's descriptor)
    auto span = [](const Tensor& t) {
      int64_t lo = 0, hi = 0;
      for (size_t d = 0; d < t.sizes().size(); ++d)
        (t.strides()[d] < 0 ? lo : hi) += (t.sizes()[d] - 1) * t.strides()[d];
      const int64_t e = static_cast<int64_t>(dtype_size(t.dtype()));
      const auto p = reinterpret_cast<uintptr_t>(t.data_ptr());
      return std::pair<uintptr_t, uintptr_t>{p - static_cast<uintptr_t>(-lo * e),
                                             p + static_cast<uintptr_t>((hi + 1) * e)};
    };
    const auto [olo, ohi] = span(out);
    const auto [ilo, ihi] = span(in);
    const uintptr_t base = std::min(olo, ilo);
    if (olo < ihi && ilo < ohi)
      throw Error("the output of an out-of-place all_reduce overlaps its input", w,
                  "separate memory (or one tensor for both: in place)",
                  str("bytes [", olo - base, ", ", ohi - base, ") and [", ilo - base, ", ",
                      ihi - base, ") of one memory (from the lower start)"));
  }
  span.mark("pg all_reduce_into: checks");
  auto work = issue_all_reduce_into(out, in, op, opts);
  span.mark("pg all_reduce_into: issue (backend)");
  if (trace_) trace_op(*work, {&in}, {&out});
  return work;
}

std::shared_ptr<Work> ProcessGroup::issue_all_reduce_into(Tensor& out, const Tensor& in,
                                                          ReduceOp op, const OpOptions& opts) {
  if (out.device().is_cpu()) {
    out.copy_from(in);
  } else if (in.numel() > 0) {
    if (!out.is_contiguous() || !in.is_contiguous())
      throw Error("an out-of-place all_reduce of device tensors copies its input first, which "
                  "needs both contiguous",
                  where(OpType::kAllReduce, 0), "contiguous tensors",
                  str(in.type_str(), " -> ", out.type_str()));
    device_allocator(out.device())
        .copy(out.data_ptr(), out.device(), in.data_ptr(), in.device(), in.nbytes());
  }
  return issue_all_reduce(out, op, opts);
}

std::shared_ptr<Work> ProcessGroup::all_reduce_coalesced(std::vector<Tensor>& ts, ReduceOp op,
                                                         const OpOptions& opts) {
  const std::string w = where(OpType::kAllReduceCoalesced, 0);
  for (size_t i = 0; i < ts.size(); ++i) {
    check_output(ts[i], w, str("input ", i));
    check_reduce_op(ts[i].dtype(), op, w);
  }
  auto work = issue_all_reduce_coalesced(ts, op, opts);
  if (trace_) trace_op(*work, ptrs(ts), ptrs(ts));
  return work;
}

std::shared_ptr<Work> ProcessGroup::all_gather_into_tensor(Tensor& out, const Tensor& in,
                                                           const OpOptions& opts) {
  const std::string w = where(OpType::kAllGather, 0);
  check_tensor(in, w, "input");
  check_output(out, w, "output");
  detail::check_all_gather(out, in, size_, w);
  auto work = issue_all_gather(out, in, opts);
  if (trace_) trace_op(*work, {&in}, {&out});
  return work;
}

std::shared_ptr<Work> ProcessGroup::all_gather_into_tensor_coalesced(std::vector<Tensor>& outs,
                                                                     const std::vector<Tensor>& ins,
                                                                     const OpOptions& opts) {
  const std::string w = where(OpType::kAllGatherCoalesced, 0);
  detail::check_list_sizes(outs.size(), ins.size(), w);
  for (size_t i = 0; i < ins.size(); ++i) {
    check_tensor(ins[i], w, str("input ", i));
    check_output(outs[i], w, str("output ", i));
    detail::check_all_gather(outs[i], ins[i], size_, w);
  }
  auto work = issue_all_gather_coalesced(outs, ins, opts);
  if (trace_) trace_op(*work, ptrs(ins), ptrs(outs));
  return work;
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor(Tensor& out, const Tensor& in,
                                                          ReduceOp op, const OpOptions& opts) {
  const std::string w = where(OpType::kReduceScatter, 0);
  check_tensor(in, w, "input");
  check_output(out, w, "output");
  detail::check_reduce_scatter(out, in, size_, w);
  check_reduce_op(in.dtype(), op, w);
  auto work = issue_reduce_scatter(out, in, op, opts);
  if (trace_) trace_op(*work, {&in}, {&out});
  return work;
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor_coalesced(std::vector<Tensor>& outs,
                                                                    const std::vector<Tensor>& ins,
                                                                    ReduceOp op,
                                                                    const OpOptions& opts) {
  const std::string w = where(OpType::kReduceScatterCoalesced, 0);
  detail::check_list_sizes(outs.size(), ins.size(), w);
  for (size_t i = 0; i < ins.size(); ++i) {
    check_tensor(ins[i], w, str("input ", i));
    check_output(outs[i], w, str("output ", i));
    detail::check_reduce_scatter(outs[i], ins[i], size_, w);
    check_reduce_op(ins[i].dtype(), op, w);
  }
  auto work = issue_reduce_scatter_coalesced(outs, ins, op, opts);
  if (trace_) trace_op(*work, ptrs(ins), ptrs(outs));
  return work;
}

std::shared_ptr<Work> ProcessGroup::all_to_all_single(Tensor& out, const Tensor& in,
                                                      const std::vector<int64_t>& out_splits,
                                                      const std::vector<int64_t>& in_splits,
                                                      const OpOptions& opts) {
  const std::string w = where(OpType::kAllToAll, 0);
  check_tensor(in, w, "input");
  check_output(out, w, "output");
  AllToAllCounts c;
  std::tie(c.out_counts, c.in_counts) =
      detail::check_all_to_all(out, in, out_splits, in_splits, size_, w);
  const int64_t row = in.dim() > 0 && in.size(0) > 0 ? in.numel() / in.size(0) : 1;
  c.out_rows.resize(c.out_counts.size());
  c.in_rows.resize(c.in_counts.size());
  for (size_t j = 0; j < c.out_counts.size(); ++j) {
    c.out_rows[j] = row ? c.out_counts[j] / row : 0;
    c.in_rows[j] = row ? c.in_counts[j] / row : 0;
  }
  auto work = issue_all_to_all(out, in, c, opts);
  if (trace_) trace_op(*work, {&in}, {&out});
  return work;
}

std::shared_ptr<Work> ProcessGroup::broadcast(Tensor& t, int src, const OpOptions& opts) {
  const std::string w = where(OpType::kBroadcast, 0);
  check_output(t, w, "input");
  detail::check_rank(src, size_, w, "src");
  auto work = issue_broadcast(t, src, opts);
  if (trace_) trace_op(*work, {&t}, {&t}, src);
  return work;
}

std::shared_ptr<Work> ProcessGroup::barrier(const OpOptions& opts) {
  auto work = issue_barrier(opts);
  if (trace_) trace_op(*work, {}, {});
  return work;
}

std::shared_ptr<Work> ProcessGroup::barrier(const std::vector<int>& device_ids,
                                            const OpOptions& opts) {
  if (device_ids.empty()) return barrier(opts);
  const std::string w = where(OpType::kBarrier, 0);
  if (device_ids.size() != 1)
    throw Error("barrier takes at most one device id (one GPU per rank)", w, "0 or 1 device ids",
                std::to_string(device_ids.size()));
  if (device_ids[0] < 0)
    throw Error("the barrier's device id must be non-negative", w, ">= 0",
                std::to_string(device_ids[0]));
  auto work = issue_barrier_on(device_ids[0], opts);
  if (trace_) trace_op(*work, {}, {});
  return work;
}

std::shared_ptr<Work> ProcessGroup::send(const Tensor& t, int dst, int tag, const OpOptions& opts) {
  const std::string w = where(OpType::kSend, 0);
  check_tensor(t, w, "input");
  detail::check_rank(dst, size_, w, "dst");
  if (dst == rank_) throw Error("cannot send to self", w, "a peer rank", std::to_string(dst));
  if (tag < 0) throw Error("tag must be non-negative", w, ">= 0", std::to_string(tag));
  auto work = issue_send(t, dst, tag, opts);
  if (trace_) trace_op(*work, {&t}, {}, dst);
  return work;
}

std::shared_ptr<Work> ProcessGroup::recv(Tensor& t, int src, int tag, const OpOptions& opts) {
  const std::string w = where(OpType::kRecv, 0);
  check_output(t, w, "output");
  detail::check_rank(src, size_, w, "src");
  if (src == rank_) throw Error("cannot receive from self", w, "a peer rank", std::to_string(src));
  if (tag < 0) throw Error("tag must be non-negative", w, ">= 0", std::to_string(tag));
  auto work = issue_recv(t, src, tag, opts);
  if (trace_) trace_op(*work, {}, {&t}, src);
  return work;
}

std::shared_ptr<Work> ProcessGroup::reduce(Tensor& t, ReduceOp op, int root,
                                           const OpOptions& opts) {
  const std::string w = where(OpType::kReduce, 0);
  check_output(t, w, "input");
  detail::check_rank(root, size_, w, "root");
  check_reduce_op(t.dtype(), op, w);
  auto work = issue_reduce(t, op, root, opts);
  if (trace_) trace_op(*work, {&t}, {&t}, root);
  return work;
}

std::shared_ptr<Work> ProcessGroup::gather(std::vector<Tensor>& outs, const Tensor& in, int root,
                                           const OpOptions& opts) {
  const std::string w = where(OpType::kGather, 0);
  check_tensor(in, w, "input");
  detail::check_rank(root, size_, w, "root");
  if (rank_ == root) {
    detail::check_per_rank_list(outs.size(), size_, "root's output list of gather", w);
    for (size_t j = 0; j < outs.size(); ++j) {
      check_output(outs[j], w, str("output ", j));
      detail::check_like(outs[j], in, w, str("output ", j));
    }
  } else if (!outs.empty()) {
    throw Error(str("gather takes an empty output list on a rank other than the root (", root, ")"),
                w, "0 tensors", str(outs.size(), " tensors"));
  }
  auto work = issue_gather(outs, in, root, opts);
  if (trace_) trace_op(*work, {&in}, ptrs(outs), root);
  return work;
}

std::shared_ptr<Work> ProcessGroup::scatter(Tensor& out, const std::vector<Tensor>& ins, int root,
                                            const OpOptions& opts) {
  const std::string w = where(OpType::kScatter, 0);
  check_output(out, w, "output");
  detail::check_rank(root, size_, w, "root");
  if (rank_ == root) {
    detail::check_per_rank_list(ins.size(), size_, "root's input list of scatter", w);
    for (size_t j = 0; j < ins.size(); ++j) {
      check_tensor(ins[j], w, str("input ", j));
      detail::check_like(ins[j], out, w, str("input ", j));
    }
  } else if (!ins.empty()) {
    throw Error(str("scatter takes an empty input list on a rank other than the root (", root, ")"),
                w, "0 tensors", str(ins.size(), " tensors"));
  }
  auto work = issue_scatter(out, ins, root, opts);
  if (trace_) trace_op(*work, ptrs(ins), {&out}, root);
  return work;
}

std::shared_ptr<Work> ProcessGroup::all_gather(std::vector<Tensor>& outs, const Tensor& in,
                                               const OpOptions& opts) {
  std::vector<std::vector<Tensor>> nested{outs};
  return all_gather(nested, std::vector<Tensor>{in}, opts);
}

std::shared_ptr<Work> ProcessGroup::all_gather(std::vector<std::vector<Tensor>>& outs,
                                               const std::vector<Tensor>& ins,
                                               const OpOptions& opts) {
  const std::string w = where(OpType::kAllGatherList, 0);
  detail::check_list_sizes(outs.size(), ins.size(), w);
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string in_role = ins.size() == 1 ? "input" : str("input ", i);
    check_tensor(ins[i], w, in_role);
    detail::check_per_rank_list(outs[i].size(), size_, "output list of all_gather", w);
    for (size_t j = 0; j < outs[i].size(); ++j) {
      const std::string role = ins.size() == 1 ? str("output ", j) : str("output ", i, "/", j);
      check_output(outs[i][j], w, role);
      detail::check_like(outs[i][j], ins[i], w, role);
    }
  }
  auto work = issue_all_gather_list(outs, ins, opts);
  if (trace_) trace_op(*work, ptrs(ins), ptrs(outs));
  return work;
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(Tensor& out, const std::vector<Tensor>& ins,
                                                   ReduceOp op, const OpOptions& opts) {
  std::vector<Tensor> outs{out};
  return reduce_scatter(outs, std::vector<std::vector<Tensor>>{ins}, op, opts);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(std::vector<Tensor>& outs,
                                                   const std::vector<std::vector<Tensor>>& ins,
                                                   ReduceOp op, const OpOptions& opts) {
  const std::string w = where(OpType::kReduceScatterList, 0);
  if (outs.size() != ins.size())
    throw Error(
        "Tensor input/output list for reduce_scatter must have same size (one input "
        "list per output)",
        w, str(outs.size(), " input lists"), str(ins.size(), " input lists"));
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string out_role = outs.size() == 1 ? "output" : str("output ", i);
    check_output(outs[i], w, out_role);
    check_reduce_op(outs[i].dtype(), op, w);
    detail::check_per_rank_list(ins[i].size(), size_, "input list of reduce_scatter", w);
    for (size_t j = 0; j < ins[i].size(); ++j) {
      const std::string role = outs.size() == 1 ? str("input ", j) : str("input ", i, "/", j);
      check_tensor(ins[i][j], w, role);
      detail::check_like(ins[i][j], outs[i], w, role);
    }
  }
  auto work = issue_reduce_scatter_list(outs, ins, op, opts);
  if (trace_) trace_op(*work, ptrs(ins), ptrs(outs));
  return work;
}

std::shared_ptr<Work> ProcessGroup::all_to_all(std::vector<Tensor>& outs,
                                               const std::vector<Tensor>& ins,
                                               const OpOptions& opts) {
  const std::string w = where(OpType::kAllToAllList, 0);
  detail::check_per_rank_list(ins.size(), size_, "input list of all_to_all", w);
  detail::check_per_rank_list(outs.size(), size_, "output list of all_to_all", w);
  for (size_t j = 0; j < ins.size(); ++j) {
    check_tensor(ins[j], w, str("input ", j));
    check_output(outs[j], w, str("output ", j));
    detail::check_same_dtype(outs[j], ins[0], w);
    detail::check_same_dtype(ins[j], ins[0], w);
  }
  const size_t me = static_cast<size_t>(rank_);
  if (ins[me].numel() != outs[me].numel())
    throw Error(str("all_to_all: the tensor this rank sends itself (input ", rank_,
                    ") must have as many elements as the one it receives (output ", rank_, ")"),
                w, str(ins[me].numel(), " elements"), str(outs[me].numel(), " elements"));
  auto work = issue_all_to_all_list(outs, ins, opts);
  if (trace_) trace_op(*work, ptrs(ins), ptrs(outs));
  return work;
}

std::shared_ptr<Work> ProcessGroup::recv_any_source(Tensor& t, int tag, const OpOptions& opts) {
  const std::string w = where(OpType::kRecvAnySource, 0);
  check_output(t, w, "output");
  if (tag < 0) throw Error("tag must be non-negative", w, ">= 0", std::to_string(tag));
  if (size_ == 1)
    throw Error("recv_any_source needs a peer, and the group has one rank", w,
                "a group of 2 or more ranks", "1 rank");
  auto work = issue_recv_any_source(t, tag, opts);
  if (trace_) trace_op(*work, {}, {&t});
  return work;
}

namespace {
[[noreturn]] void unsupported(const std::string& backend, OpType op, const std::string& where,
                              const char* why) {
  throw Error(str("backend ", backend, " does not support ", op_type_name(op), why), where,
              "a backend that implements it (gloo, mpi)", backend);
}
}  // namespace

std::shared_ptr<Work> ProcessGroup::issue_reduce(Tensor&, ReduceOp, int, const OpOptions&) {
  unsupported(backend_name(), OpType::kReduce, where(OpType::kReduce, 0), "");
}
std::shared_ptr<Work> ProcessGroup::issue_gather(std::vector<Tensor>&, const Tensor&, int,
                                                 const OpOptions&) {
  unsupported(backend_name(), OpType::kGather, where(OpType::kGather, 0), "");
}
std::shared_ptr<Work> ProcessGroup::issue_scatter(Tensor&, const std::vector<Tensor>&, int,
                                                  const OpOptions&) {
  unsupported(backend_name(), OpType::kScatter, where(OpType::kScatter, 0), "");
}
std::shared_ptr<Work> ProcessGroup::issue_all_gather_list(std::vector<std::vector<Tensor>>&,
                                                          const std::vector<Tensor>&,
                                                          const OpOptions&) {
  unsupported(backend_name(), OpType::kAllGatherList, where(OpType::kAllGatherList, 0), "");
}
std::shared_ptr<Work> ProcessGroup::issue_reduce_scatter_list(
    std::vector<Tensor>&, const std::vector<std::vector<Tensor>>&, ReduceOp, const OpOptions&) {
  unsupported(backend_name(), OpType::kReduceScatterList, where(OpType::kReduceScatterList, 0), "");
}
std::shared_ptr<Work> ProcessGroup::issue_all_to_all_list(std::vector<Tensor>&,
                                                          const std::vector<Tensor>&,
                                                          const OpOptions&) {
  unsupported(backend_name(), OpType::kAllToAllList, where(OpType::kAllToAllList, 0), "");
}
std::shared_ptr<Work> ProcessGroup::issue_recv_any_source(Tensor&, int, const OpOptions&) {
  unsupported(backend_name(), OpType::kRecvAnySource, where(OpType::kRecvAnySource, 0),
              " (its engine matches a receive with one given peer: use recv(t, src))");
}

std::shared_ptr<Work> ProcessGroup::issue_barrier_on(int device_index, const OpOptions&) {
  const Device d = device();
  throw Error(str("backend ", backend_name(), " runs its barrier on ", d.str(),
                  "; device_ids choose the GPU of a device backend's barrier (nccl)"),
              where(OpType::kBarrier, 0),
              str("no device ids (the group's device is ", d.str(), ")"),
              str("device_ids = [", device_index, "]"));
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_subgroup(const std::vector<int>& ranks,
                                                         const std::string& name) {
  const std::string w = str("new_subgroup '", name, "' of group '", this->name(), "'");
  if (ranks.empty())
    throw Error("a group needs at least one rank", w, "a non-empty rank list", "[]");
  for (size_t i = 0; i < ranks.size(); ++i) {
    detail::check_rank(ranks[i], size_, w, "member");
    if (i > 0 && ranks[i] <= ranks[i - 1])
      throw Error("group ranks must be strictly increasing (sorted, no duplicates)", w,
                  "increasing ranks", str(ranks[i - 1], " then ", ranks[i]));
  }
  auto pg = make_subgroup(ranks, name);
  if (pg) pg->set_name(name);
  return pg;
}

std::pair<int, std::vector<int>> ProcessGroup::member_ranks(const std::vector<int>& members) const {
  int my = -1;
  std::vector<int> globals;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == rank()) my = static_cast<int>(i);
    globals.push_back(global_ranks()[static_cast<size_t>(members[i])]);
  }
  return {my, globals};
}

}  // namespace anvil::dist
