// ProcessGroup: the interface's own part — identity, names, and every op's argument checks
// (spec A) before the backend's issue_* entry point sees it.
#include "dist/process_group.h"

#include <iostream>
#include <numeric>
#include <tuple>

#include "core/error.h"
#include "dist/checks.h"
#include "dist/reduce.h"
#include "dist/settings.h"
#include "dist/trace.h"

namespace anvil::dist {

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
}

std::string ProcessGroup::where(OpType op, uint64_t seq) const {
  return str(backend_name(), " ", op_type_name(op), seq ? str(" #", seq) : std::string(),
             " on group '", name(), "' (rank ", rank_, " of ", size_, ")");
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
  const std::string w = where(OpType::kAllReduce, 0);
  check_output(t, w, "input");
  check_reduce_op(t.dtype(), op, w);
  auto work = issue_all_reduce(t, op, opts);
  if (trace_) trace_op(*work, {&t}, {&t});
  return work;
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
