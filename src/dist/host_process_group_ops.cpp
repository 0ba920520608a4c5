// HostProcessGroup ops (the interface checked their arguments already): a body for the progress
// thread that runs the backend primitive on contiguous buffers and copies results back.
#include <map>

#include "core/error.h"
#include "dist/checks.h"
#include "dist/host_buffers.h"
#include "dist/host_process_group.h"
#include "dist/reduce.h"

namespace anvil::dist {

using detail::contiguous_buffer;
using detail::copy_back;
using detail::flat_part;
using detail::output_buffer;

namespace {

/// Indices of `ts` grouped by dtype, in order of first appearance.
std::vector<std::vector<size_t>> by_dtype(const std::vector<Tensor>& ts) {
  std::vector<std::vector<size_t>> groups;
  std::map<DType, size_t> slot;
  for (size_t i = 0; i < ts.size(); ++i) {
    auto [it, fresh] = slot.emplace(ts[i].dtype(), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  return groups;
}
std::string list_desc(const std::vector<Tensor>& ts) {
  std::string s = "[";
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + detail::tensor_desc(ts[i]);
  return s + "]";
}

}  // namespace

std::shared_ptr<Work> HostProcessGroup::issue_all_reduce(Tensor& t, ReduceOp op,
                                                         const OpOptions& opts) {
  Tensor buf = contiguous_buffer(t);
  const std::string desc = str("all_reduce ", detail::tensor_desc(t), " ", reduce_op_name(op));
  return post(OpType::kAllReduce, opts, {t}, [this, t, buf, op, desc](Work& wk, Millis to) mutable {
    check_consistency(wk, desc, to);
    if (buf.numel() > 0) {
      run_all_reduce(buf, engine_op(buf.dtype(), op), to);
      if (op == ReduceOp::kAvg) divide_inplace(buf, size());
    }
    copy_back(t, buf);
  });
}

std::shared_ptr<Work> HostProcessGroup::issue_all_reduce_coalesced(std::vector<Tensor>& ts,
                                                                   ReduceOp op,
                                                                   const OpOptions& opts) {
  const std::string desc = str("all_reduce_coalesced ", list_desc(ts), " ", reduce_op_name(op));
  std::vector<Tensor> targets = ts;
  return post(OpType::kAllReduceCoalesced, opts, ts,
              [this, targets, op, desc](Work& wk, Millis to) mutable {
                check_consistency(wk, desc, to);
                for (const auto& group : by_dtype(targets)) {
                  int64_t total = 0;
                  for (size_t i : group) total += targets[i].numel();
                  if (total == 0) continue;
                  const DType dt = targets[group[0]].dtype();
                  Tensor flat = Tensor::empty({total}, dt);
                  int64_t off = 0;
                  for (size_t i : group) {
                    flat_part(flat, off, targets[i].sizes()).copy_from(targets[i]);
                    off += targets[i].numel();
                  }
                  run_all_reduce(flat, engine_op(dt, op), to);
                  if (op == ReduceOp::kAvg) divide_inplace(flat, size());
                  off = 0;
                  for (size_t i : group) {
                    targets[i].copy_from(flat_part(flat, off, targets[i].sizes()));
                    off += targets[i].numel();
                  }
                }
              });
}

std::shared_ptr<Work> HostProcessGroup::issue_all_gather(Tensor& out, const Tensor& in,
                                                         const OpOptions& opts) {
  Tensor in_c = contiguous_buffer(in), out_buf = output_buffer(out);
  const std::string desc = str("all_gather_into_tensor ", detail::tensor_desc(in));
  return post(OpType::kAllGather, opts, {out},
              [this, out, in_c, out_buf, desc](Work& wk, Millis to) mutable {
                check_consistency(wk, desc, to);
                if (in_c.numel() > 0) run_all_gather(out_buf, in_c, to);
                copy_back(out, out_buf);
              });
}

std::shared_ptr<Work> HostProcessGroup::issue_all_gather_coalesced(std::vector<Tensor>& outs,
                                                                   const std::vector<Tensor>& ins,
                                                                   const OpOptions& opts) {
  std::vector<Tensor> in_c;
  for (const Tensor& in : ins) in_c.push_back(contiguous_buffer(in));
  const std::string desc = str("all_gather_into_tensor_coalesced ", list_desc(ins));
  std::vector<Tensor> targets = outs;
  return post(
      OpType::kAllGatherCoalesced, opts, outs,
      [this, targets, in_c, desc](Work& wk, Millis to) mutable {
        check_consistency(wk, desc, to);
        const int64_t W = size();
        for (const auto& group : by_dtype(in_c)) {
          int64_t total = 0;
          for (size_t i : group) total += in_c[i].numel();
          if (total == 0) continue;
          const DType dt = in_c[group[0]].dtype();
          Tensor flat_in = Tensor::empty({total}, dt);
          Tensor flat_out = Tensor::empty({W * total}, dt);
          int64_t off = 0;
          for (size_t i : group) {
            flat_part(flat_in, off, in_c[i].sizes()).copy_from(in_c[i]);
            off += in_c[i].numel();
          }
          run_all_gather(flat_out, flat_in, to);
          off = 0;
          for (size_t i : group) {
            const int64_t n = in_c[i].numel();
            Tensor dst = targets[i].reshape({W, n});  // a view when contiguous
            for (int64_t j = 0; j < W; ++j)
              dst.select(0, j).copy_from(flat_out.slice(0, j * total + off, j * total + off + n));
            if (!targets[i].is_contiguous()) targets[i].copy_from(dst.view(targets[i].sizes()));
            off += n;
          }
        }
      });
}

std::shared_ptr<Work> HostProcessGroup::issue_reduce_scatter(Tensor& out, const Tensor& in,
                                                             ReduceOp op, const OpOptions& opts) {
  Tensor in_c = contiguous_buffer(in), out_buf = output_buffer(out);
  const std::string desc =
      str("reduce_scatter_tensor ", detail::tensor_desc(in), " ", reduce_op_name(op));
  return post(OpType::kReduceScatter, opts, {out},
              [this, out, in_c, out_buf, op, desc](Work& wk, Millis to) mutable {
                check_consistency(wk, desc, to);
                if (out_buf.numel() > 0) {
                  run_reduce_scatter(out_buf, in_c, engine_op(in_c.dtype(), op), to);
                  if (op == ReduceOp::kAvg) divide_inplace(out_buf, size());
                }
                copy_back(out, out_buf);
              });
}

std::shared_ptr<Work> HostProcessGroup::issue_reduce_scatter_coalesced(
    std::vector<Tensor>& outs, const std::vector<Tensor>& ins, ReduceOp op, const OpOptions& opts) {
  std::vector<Tensor> in_c;
  for (const Tensor& in : ins) in_c.push_back(contiguous_buffer(in));
  const std::string desc =
      str("reduce_scatter_tensor_coalesced ", list_desc(ins), " ", reduce_op_name(op));
  std::vector<Tensor> targets = outs;
  return post(
      OpType::kReduceScatterCoalesced, opts, outs,
      [this, targets, in_c, op, desc](Work& wk, Millis to) mutable {
        check_consistency(wk, desc, to);
        const int64_t W = size();
        for (const auto& group : by_dtype(in_c)) {
          int64_t total = 0;  // elements of all outputs of this dtype
          for (size_t i : group) total += in_c[i].numel() / W;
          if (total == 0) continue;
          const DType dt = in_c[group[0]].dtype();
          Tensor flat_in = Tensor::empty({W * total}, dt);
          Tensor flat_out = Tensor::empty({total}, dt);
          // Rank j's block of flat_in holds chunk j of every input, in order.
          int64_t off = 0;
          for (size_t i : group) {
            const int64_t m = in_c[i].numel() / W;
            Tensor src = in_c[i].reshape({W, m});
            for (int64_t j = 0; j < W; ++j)
              flat_in.slice(0, j * total + off, j * total + off + m).copy_from(src.select(0, j));
            off += m;
          }
          run_reduce_scatter(flat_out, flat_in, engine_op(dt, op), to);
          if (op == ReduceOp::kAvg) divide_inplace(flat_out, size());
          off = 0;
          for (size_t i : group) {
            targets[i].copy_from(flat_part(flat_out, off, targets[i].sizes()));
            off += targets[i].numel();
          }
        }
      });
}

std::shared_ptr<Work> HostProcessGroup::issue_all_to_all(Tensor& out, const Tensor& in,
                                                         const AllToAllCounts& counts,
                                                         const OpOptions& opts) {
  Tensor in_c = contiguous_buffer(in), out_buf = output_buffer(out);
  const Shape row_shape(in.sizes().begin() + 1, in.sizes().end());
  const std::string desc =
      str("all_to_all_single ", dtype_name(in.dtype()), " rows ", shape_str(row_shape));
  return post(OpType::kAllToAll, opts, {out},
              [this, out, in_c, out_buf, counts, desc](Work& wk, Millis to) mutable {
                check_consistency(wk, desc, to, &counts.out_rows, &counts.in_rows);
                run_all_to_all(out_buf, in_c, counts.out_counts, counts.in_counts, to);
                copy_back(out, out_buf);
              });
}

std::shared_ptr<Work> HostProcessGroup::issue_broadcast(Tensor& t, int src, const OpOptions& opts) {
  Tensor buf = contiguous_buffer(t);
  const std::string desc = str("broadcast ", detail::tensor_desc(t), " src ", src);
  return post(OpType::kBroadcast, opts, {t},
              [this, t, buf, src, desc](Work& wk, Millis to) mutable {
                check_consistency(wk, desc, to);
                if (buf.numel() > 0) run_broadcast(buf, src, to);
                copy_back(t, buf);
              });
}

std::shared_ptr<Work> HostProcessGroup::issue_barrier(const OpOptions& opts) {
  return post(OpType::kBarrier, opts, {}, [this](Work& wk, Millis to) {
    check_consistency(wk, "barrier", to);
    run_barrier(to);
  });
}

std::shared_ptr<Work> HostProcessGroup::issue_send(const Tensor& t, int dst, int tag,
                                                   const OpOptions& opts) {
  Tensor buf = t.contiguous();
  P2PWaiter waiter = post_send(buf, dst, tag);
  return post(
      OpType::kSend, opts, {t},
      [waiter, buf](Work& wk, Millis to) { wk.set_source_rank(waiter(to)); }, true);
}

std::shared_ptr<Work> HostProcessGroup::issue_recv(Tensor& t, int src, int tag,
                                                   const OpOptions& opts) {
  Tensor buf = output_buffer(t);
  return post_recv_work(OpType::kRecv, t, buf, post_recv(buf, src, tag), opts);
}

std::shared_ptr<Work> HostProcessGroup::post_recv_work(OpType op, Tensor& t, Tensor buf,
                                                       P2PWaiter waiter, const OpOptions& opts) {
  return post(
      op, opts, {t},
      [waiter, t, buf](Work& wk, Millis to) mutable {
        wk.set_source_rank(waiter(to));
        copy_back(t, buf);
      },
      true);
}

}  // namespace anvil::dist
