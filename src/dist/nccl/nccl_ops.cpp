// NcclProcessGroup's ops: each becomes a Launch (NCCL calls on the group's communicator and
// stream) posted by NcclProcessGroup::post. Arguments the interface already checked (device,
// shapes, splits, ranks) are not checked again; what NCCL adds is checked here, before the op
// takes a sequence number, so every rank refuses the same call the same way: contiguity, the
// dtypes and reduce ops NCCL reduces, and send / recv tags.
#include <cstdint>

#include "core/error.h"
#include "dist/nccl/nccl_launch.h"
#include "dist/reduce.h"

namespace anvil::dist {

using Launch = NcclProcessGroup::Launch;

namespace {

void require_contiguous(const Tensor& t, const std::string& where, const std::string& role) {
  if (!t.is_contiguous())
    throw Error(str("the nccl backend needs contiguous tensors, and the ", role,
                    " tensor is not (make a contiguous copy on the device first)"),
                where, "a contiguous tensor", t.type_str());
}

/// The NCCL type a reduction of `dt` runs in.
ncclDataType_t reduce_type(DType dt, const std::string& where) {
  switch (dt) {
    case DType::kBool:  // 0 / 1 bytes: or = max, and = min
    case DType::kUInt8:
      return ncclUint8;
    case DType::kInt8:
      return ncclInt8;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    default:
      throw Error(str("NCCL cannot reduce ", dtype_name(dt), " tensors"), where,
                  "bool, u8, i8, i32, i64, f16, bf16, f32 or f64 (all_gather, broadcast, "
                  "all_to_all and send / recv move any collective dtype)",
                  dtype_name(dt));
  }
}

/// The NCCL reduction of `op` on `dt` (the interface checked that op suits dt).
ncclRedOp_t reduce_op(DType dt, ReduceOp op, const std::string& where) {
  if (dt == DType::kBool) {
    if (op == ReduceOp::kSum || op == ReduceOp::kBor || op == ReduceOp::kMax) return ncclMax;
    if (op == ReduceOp::kProduct || op == ReduceOp::kBand || op == ReduceOp::kMin) return ncclMin;
  }
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kProduct:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    default:
      throw Error(str("NCCL has no bitwise reduction (", reduce_op_name(op), " on ",
                      dtype_name(dt), ")"),
                  where, "sum, avg, product, min or max (band / bor on bool)",
                  reduce_op_name(op));
  }
}

/// ncclAllReduce of `in` into `out` (the same tensor: in place).
Launch::Call all_reduce_call(const Tensor& out, const Tensor& in, ReduceOp op,
                             const std::string& where) {
  const ncclDataType_t type = reduce_type(in.dtype(), where);
  const ncclRedOp_t rop = reduce_op(in.dtype(), op, where);
  const void* src = in.data_ptr();
  void* dst = out.data_ptr();
  const size_t n = static_cast<size_t>(in.numel());
  return {"ncclAllReduce", [=](ncclComm_t c, cudaStream_t s) {
            return ncclAllReduce(src, dst, n, type, rop, c, s);
          }};
}

Launch::Call all_gather_call(const Tensor& out, const Tensor& in) {
  const void* src = in.data_ptr();
  void* dst = out.data_ptr();
  const size_t bytes = in.nbytes();  // moved as bytes: any dtype
  return {"ncclAllGather", [=](ncclComm_t c, cudaStream_t s) {
            return ncclAllGather(src, dst, bytes, ncclUint8, c, s);
          }};
}

Launch::Call reduce_scatter_call(const Tensor& out, const Tensor& in, ReduceOp op,
                                 const std::string& where) {
  const ncclDataType_t type = reduce_type(in.dtype(), where);
  const ncclRedOp_t rop = reduce_op(in.dtype(), op, where);
  const void* src = in.data_ptr();
  void* dst = out.data_ptr();
  const size_t n = static_cast<size_t>(out.numel());
  return {"ncclReduceScatter", [=](ncclComm_t c, cudaStream_t s) {
            return ncclReduceScatter(src, dst, n, type, rop, c, s);
          }};
}

}  // namespace

void Launch::run(nccl::NcclState& st, ncclComm_t comm, cudaStream_t stream,
                 nccl::Clock::time_point deadline, const std::string& where, bool direct) const {
  const std::vector<Call>& calls = direct && !direct_calls.empty() ? direct_calls : this->calls;
  if (before) {
    const cudaError_t e = before(stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      const std::string m = nccl::cuda_message(e);
      st.abort_locked(str(where, ": a device copy failed: ", m));
      throw Error("a device copy of the op failed; the group is unusable", where, "cudaSuccess",
                  m);
    }
  }
  if (!grouped) {
    for (const Call& c : calls) st.check(comm, c.fn(comm, stream), deadline, c.what, where);
    return;
  }
  if (calls.empty()) return;
  st.check(comm, ncclGroupStart(), deadline, "ncclGroupStart", where);
  ncclResult_t first = ncclSuccess;
  std::string what;
  for (const Call& c : calls) {
    const ncclResult_t r = c.fn(comm, stream);
    if (r != ncclSuccess && r != ncclInProgress) {
      first = r;
      what = c.what;
      break;
    }
  }
  const ncclResult_t end = ncclGroupEnd();  // always closes the group
  if (first != ncclSuccess) st.check(comm, first, deadline, what, where);
  st.check(comm, end, deadline, "ncclGroupEnd (the op's grouped NCCL calls)", where);
}

std::shared_ptr<Work> NcclProcessGroup::issue_all_reduce(Tensor& t, ReduceOp op,
                                                         const OpOptions& opts) {
  const std::string w = where(OpType::kAllReduce, 0);
  require_contiguous(t, w, "input");
  Launch l;
  Launch::Call c = all_reduce_call(t, t, op, w);  // checks dtype and op even when empty
  if (t.numel() > 0) {
    l.calls.push_back(std::move(c));
    l.one_shot = Launch::OneShotOp{t.data_ptr(), t.data_ptr(), t.numel(), t.dtype(), op};
  }
  return post(OpType::kAllReduce, opts, {t}, {}, -1, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_all_reduce_into(Tensor& out, const Tensor& in,
                                                              ReduceOp op,
                                                              const OpOptions& opts) {
  const std::string w = where(OpType::kAllReduce, 0);
  require_contiguous(in, w, "input");
  require_contiguous(out, w, "output");
  // On the group's stream: `in` copied into `out` on the caller's stream, then reduced in
  // place, so a write the caller queues on its stream after this call cannot race with the op
  // (ncclAllReduce(in, out) there would read `in` until the op completes). On the caller's
  // stream (a small op): ncclAllReduce(in, out), read in the caller's order, no copy.
  Launch l;
  Launch::Call c = all_reduce_call(out, out, op, w);  // checks dtype and op even when empty
  if (in.numel() > 0) {
    const void* src = in.data_ptr();
    void* dst = out.data_ptr();
    const size_t bytes = in.nbytes();
    l.on_caller = [=](cudaStream_t s) {
      return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
    };
    l.calls.push_back(std::move(c));
    l.direct_calls.push_back(all_reduce_call(out, in, op, w));
    l.one_shot = Launch::OneShotOp{src, dst, in.numel(), in.dtype(), op};
  }
  return post(OpType::kAllReduce, opts, {out}, {in}, -1, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_all_reduce_coalesced(std::vector<Tensor>& ts,
                                                                   ReduceOp op,
                                                                   const OpOptions& opts) {
  const std::string w = where(OpType::kAllReduceCoalesced, 0);
  Launch l;
  l.grouped = true;
  for (size_t i = 0; i < ts.size(); ++i) {
    require_contiguous(ts[i], w, str("input ", i));
    Launch::Call c = all_reduce_call(ts[i], ts[i], op, w);  // checks dtype and op when empty
    if (ts[i].numel() > 0) l.calls.push_back(std::move(c));
  }
  return post(OpType::kAllReduceCoalesced, opts, ts, {}, -1, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_all_gather(Tensor& out, const Tensor& in,
                                                         const OpOptions& opts) {
  const std::string w = where(OpType::kAllGather, 0);
  require_contiguous(in, w, "input");
  require_contiguous(out, w, "output");
  Launch l;
  if (in.numel() > 0) l.calls.push_back(all_gather_call(out, in));
  return post(OpType::kAllGather, opts, {out}, {in}, -1, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_all_gather_coalesced(
    std::vector<Tensor>& outs, const std::vector<Tensor>& ins, const OpOptions& opts) {
  const std::string w = where(OpType::kAllGatherCoalesced, 0);
  Launch l;
  l.grouped = true;
  for (size_t i = 0; i < ins.size(); ++i) {
    require_contiguous(ins[i], w, str("input ", i));
    require_contiguous(outs[i], w, str("output ", i));
    if (ins[i].numel() > 0) l.calls.push_back(all_gather_call(outs[i], ins[i]));
  }
  return post(OpType::kAllGatherCoalesced, opts, outs, ins, -1, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_reduce_scatter(Tensor& out, const Tensor& in,
                                                             ReduceOp op, const OpOptions& opts) {
  const std::string w = where(OpType::kReduceScatter, 0);
  require_contiguous(in, w, "input");
  require_contiguous(out, w, "output");
  Launch l;
  Launch::Call c = reduce_scatter_call(out, in, op, w);
  if (out.numel() > 0) l.calls.push_back(std::move(c));
  return post(OpType::kReduceScatter, opts, {out}, {in}, -1, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_reduce_scatter_coalesced(
    std::vector<Tensor>& outs, const std::vector<Tensor>& ins, ReduceOp op,
    const OpOptions& opts) {
  const std::string w = where(OpType::kReduceScatterCoalesced, 0);
  Launch l;
  l.grouped = true;
  for (size_t i = 0; i < ins.size(); ++i) {
    require_contiguous(ins[i], w, str("input ", i));
    require_contiguous(outs[i], w, str("output ", i));
    Launch::Call c = reduce_scatter_call(outs[i], ins[i], op, w);
    if (outs[i].numel() > 0) l.calls.push_back(std::move(c));
  }
  return post(OpType::kReduceScatterCoalesced, opts, outs, ins, -1, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_all_to_all(Tensor& out, const Tensor& in,
                                                         const AllToAllCounts& counts,
                                                         const OpOptions& opts) {
  const std::string w = where(OpType::kAllToAll, 0);
  require_contiguous(in, w, "input");
  require_contiguous(out, w, "output");
  const size_t me = static_cast<size_t>(rank());
  if (counts.in_counts[me] != counts.out_counts[me])
    throw Error("the block this rank sends itself must be as large as the block it receives "
                "from itself",
                w, str(counts.in_counts[me], " elements (input split of rank ", rank(), ")"),
                str(counts.out_counts[me], " elements (output split)"));
  const size_t esz = in.element_size();
  const char* src = static_cast<const char*>(in.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  Launch l;
  l.grouped = true;
  size_t in_off = 0, out_off = 0;
  for (int j = 0; j < size(); ++j) {
    const size_t ib = static_cast<size_t>(counts.in_counts[static_cast<size_t>(j)]) * esz;
    const size_t ob = static_cast<size_t>(counts.out_counts[static_cast<size_t>(j)]) * esz;
    const char* s = src + in_off;
    char* d = dst + out_off;
    // The rank's own block too is a send / receive of the group (to itself), as in c10d: NCCL
    // copies it in the same kernel as the peers' blocks; a device copy queued before the group
    // serialized it (all_to_all at 85-92 % of the raw floor at >= 64 MiB on 2 x H200).
    if (ib > 0)
      l.calls.push_back({str("ncclSend to rank ", j), [=](ncclComm_t c, cudaStream_t st) {
                           return ncclSend(s, ib, ncclUint8, j, c, st);
                         }});
    if (ob > 0)
      l.calls.push_back({str("ncclRecv from rank ", j), [=](ncclComm_t c, cudaStream_t st) {
                           return ncclRecv(d, ob, ncclUint8, j, c, st);
                         }});
    in_off += ib;
    out_off += ob;
  }
  return post(OpType::kAllToAll, opts, {out}, {in}, -1, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_broadcast(Tensor& t, int src,
                                                        const OpOptions& opts) {
  const std::string w = where(OpType::kBroadcast, 0);
  require_contiguous(t, w, "input");
  void* p = t.data_ptr();
  const size_t bytes = t.nbytes();
  Launch l;
  if (bytes > 0)
    l.calls.push_back({"ncclBroadcast", [=](ncclComm_t c, cudaStream_t s) {
                         return ncclBroadcast(p, p, bytes, ncclUint8, src, c, s);
                       }});
  return post(OpType::kBroadcast, opts, {t}, {}, -1, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_barrier(const OpOptions& opts) {
  nccl::NcclState* st = st_.get();
  Launch l;
  l.calls.push_back({"ncclAllReduce (barrier)", [st](ncclComm_t c, cudaStream_t s) {
                       // read when run (mu held): bind_device may have made the scratch again
                       float* buf = reinterpret_cast<float*>(st->scratch);
                       return ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, c, s);
                     }});
  return post(OpType::kBarrier, opts, {}, {}, -1, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_barrier_on(int device_index, const OpOptions& opts) {
  {
    std::lock_guard<std::mutex> lk(st_->mu);
    st_->bind_device(device_index, where(OpType::kBarrier, 0));
  }
  return issue_barrier(opts);
}

namespace {

void require_tag_zero(int tag, const std::string& where) {
  if (tag != 0)
    throw Error("NCCL has no message tags: send / recv of the nccl backend take tag 0 only, and "
                "pairs between two ranks match in the order they are posted",
                where, "tag 0", std::to_string(tag));
}

}  // namespace

std::shared_ptr<Work> NcclProcessGroup::issue_send(const Tensor& t, int dst, int tag,
                                                   const OpOptions& opts) {
  const std::string w = where(OpType::kSend, 0);
  require_tag_zero(tag, w);
  require_contiguous(t, w, "input");
  const void* p = t.data_ptr();
  const size_t bytes = t.nbytes();
  Launch l;  // an empty message moves nothing (its recv, of the same size, is empty too)
  if (bytes > 0)
    l.calls.push_back({str("ncclSend to rank ", dst), [=](ncclComm_t c, cudaStream_t s) {
                         return ncclSend(p, bytes, ncclUint8, dst, c, s);
                       }});
  return post(OpType::kSend, opts, {}, {t}, dst, l, Lane::kSend);
}

std::shared_ptr<Work> NcclProcessGroup::issue_recv(Tensor& t, int src, int tag,
                                                   const OpOptions& opts) {
  const std::string w = where(OpType::kRecv, 0);
  require_tag_zero(tag, w);
  require_contiguous(t, w, "output");
  void* p = t.data_ptr();
  const size_t bytes = t.nbytes();
  Launch l;
  if (bytes > 0)
    l.calls.push_back({str("ncclRecv from rank ", src), [=](ncclComm_t c, cudaStream_t s) {
                         return ncclRecv(p, bytes, ncclUint8, src, c, s);
                       }});
  return post(OpType::kRecv, opts, {t}, {}, src, l, Lane::kRecv);
}

// Rooted and list forms (the interface checked roots, list lengths, dtypes and shapes).

namespace {

/// A device copy of the block a rank keeps for itself, queued before the op's NCCL calls.
std::function<cudaError_t(cudaStream_t)> self_copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return {};
  return
      [=](cudaStream_t s) { return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s); };
}

Launch::Call send_call(const Tensor& t, int peer) {
  const void* p = t.data_ptr();
  const size_t bytes = t.nbytes();
  return {str("ncclSend to rank ", peer),
          [=](ncclComm_t c, cudaStream_t s) { return ncclSend(p, bytes, ncclUint8, peer, c, s); }};
}

Launch::Call recv_call(const Tensor& t, int peer) {
  void* p = t.data_ptr();
  const size_t bytes = t.nbytes();
  return {str("ncclRecv from rank ", peer),
          [=](ncclComm_t c, cudaStream_t s) { return ncclRecv(p, bytes, ncclUint8, peer, c, s); }};
}

/// ncclReduce of `n` elements of `in` into `out` on rank `root` (out is ignored elsewhere).
Launch::Call reduce_call(const Tensor& out, const Tensor& in, int64_t n, int root,
                         ncclDataType_t type, ncclRedOp_t rop) {
  const void* src = in.data_ptr();
  void* dst = out.data_ptr();
  const size_t count = static_cast<size_t>(n);
  return {str("ncclReduce to rank ", root), [=](ncclComm_t c, cudaStream_t s) {
            return ncclReduce(src, dst, count, type, rop, root, c, s);
          }};
}

void require_all_contiguous(const std::vector<Tensor>& ts, const std::string& where,
                            const std::string& role) {
  for (size_t j = 0; j < ts.size(); ++j) require_contiguous(ts[j], where, str(role, " ", j));
}

}  // namespace

std::shared_ptr<Work> NcclProcessGroup::issue_reduce(Tensor& t, ReduceOp op, int root,
                                                     const OpOptions& opts) {
  const std::string w = where(OpType::kReduce, 0);
  require_contiguous(t, w, "input");
  const ncclDataType_t type = reduce_type(t.dtype(), w);  // checked even when empty
  const ncclRedOp_t rop = reduce_op(t.dtype(), op, w);
  Launch l;
  // In place: NCCL writes the result on the root only (recvbuff is ignored elsewhere).
  if (t.numel() > 0) l.calls.push_back(reduce_call(t, t, t.numel(), root, type, rop));
  return post(OpType::kReduce, opts, {t}, {}, rank() == root ? -1 : root, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_gather(std::vector<Tensor>& outs, const Tensor& in,
                                                     int root, const OpOptions& opts) {
  const std::string w = where(OpType::kGather, 0);
  require_contiguous(in, w, "input");
  require_all_contiguous(outs, w, "output");
  Launch l;
  l.grouped = true;
  if (in.nbytes() > 0) {
    if (rank() == root) {
      l.before = self_copy(outs[static_cast<size_t>(root)].data_ptr(), in.data_ptr(), in.nbytes());
      for (int j = 0; j < size(); ++j)
        if (j != root) l.calls.push_back(recv_call(outs[static_cast<size_t>(j)], j));
    } else {
      l.calls.push_back(send_call(in, root));
    }
  }
  return post(OpType::kGather, opts, outs, {in}, rank() == root ? -1 : root, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_scatter(Tensor& out, const std::vector<Tensor>& ins,
                                                      int root, const OpOptions& opts) {
  const std::string w = where(OpType::kScatter, 0);
  require_contiguous(out, w, "output");
  require_all_contiguous(ins, w, "input");
  Launch l;
  l.grouped = true;
  if (out.nbytes() > 0) {
    if (rank() == root) {
      l.before = self_copy(out.data_ptr(), ins[static_cast<size_t>(root)].data_ptr(), out.nbytes());
      for (int j = 0; j < size(); ++j)
        if (j != root) l.calls.push_back(send_call(ins[static_cast<size_t>(j)], j));
    } else {
      l.calls.push_back(recv_call(out, root));
    }
  }
  return post(OpType::kScatter, opts, {out}, ins, rank() == root ? -1 : root, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_all_gather_list(
    std::vector<std::vector<Tensor>>& outs, const std::vector<Tensor>& ins, const OpOptions& opts) {
  const std::string w = where(OpType::kAllGatherList, 0);
  std::vector<Tensor> results;
  Launch l;
  l.grouped = true;
  for (size_t i = 0; i < ins.size(); ++i) {
    require_contiguous(ins[i], w, str("input ", i));
    require_all_contiguous(outs[i], w, str("output list ", i, ", tensor"));
    results.insert(results.end(), outs[i].begin(), outs[i].end());
    const size_t bytes = ins[i].nbytes();
    if (bytes == 0) continue;
    // Rank j broadcasts its input into every rank's outs[i][j] (its own included).
    for (int j = 0; j < size(); ++j) {
      const void* src = ins[i].data_ptr();
      void* dst = outs[i][static_cast<size_t>(j)].data_ptr();
      l.calls.push_back({str("ncclBroadcast from rank ", j), [=](ncclComm_t c, cudaStream_t s) {
                           return ncclBroadcast(src, dst, bytes, ncclUint8, j, c, s);
                         }});
    }
  }
  return post(OpType::kAllGatherList, opts, results, ins, -1, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_reduce_scatter_list(
    std::vector<Tensor>& outs, const std::vector<std::vector<Tensor>>& ins, ReduceOp op,
    const OpOptions& opts) {
  const std::string w = where(OpType::kReduceScatterList, 0);
  std::vector<Tensor> inputs;
  Launch l;
  l.grouped = true;
  for (size_t i = 0; i < outs.size(); ++i) {
    require_contiguous(outs[i], w, str("output ", i));
    require_all_contiguous(ins[i], w, str("input list ", i, ", tensor"));
    inputs.insert(inputs.end(), ins[i].begin(), ins[i].end());
    const ncclDataType_t type = reduce_type(outs[i].dtype(), w);
    const ncclRedOp_t rop = reduce_op(outs[i].dtype(), op, w);
    if (outs[i].numel() == 0) continue;
    // Block j of every rank is reduced onto rank j.
    for (int j = 0; j < size(); ++j)
      l.calls.push_back(
          reduce_call(outs[i], ins[i][static_cast<size_t>(j)], outs[i].numel(), j, type, rop));
  }
  return post(OpType::kReduceScatterList, opts, outs, inputs, -1, l);
}

std::shared_ptr<Work> NcclProcessGroup::issue_all_to_all_list(std::vector<Tensor>& outs,
                                                              const std::vector<Tensor>& ins,
                                                              const OpOptions& opts) {
  const std::string w = where(OpType::kAllToAllList, 0);
  require_all_contiguous(ins, w, "input");
  require_all_contiguous(outs, w, "output");
  Launch l;
  l.grouped = true;
  for (int j = 0; j < size(); ++j) {  // its own block included (issue_all_to_all says why)
    const size_t k = static_cast<size_t>(j);
    if (ins[k].nbytes() > 0) l.calls.push_back(send_call(ins[k], j));
    if (outs[k].nbytes() > 0) l.calls.push_back(recv_call(outs[k], j));
  }
  return post(OpType::kAllToAllList, opts, outs, ins, -1, l);
}

}  // namespace anvil::dist
