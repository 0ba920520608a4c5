// HostProcessGroup's rooted and list forms (reduce, gather, scatter, list all_gather /
// reduce_scatter / all_to_all) and receive-from-any: bodies for the progress thread over the
// backend's run_* primitives. The interface checked the arguments (roots, list lengths, dtypes,
// shapes) already.
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

/// The 1-d contiguous form of a contiguous tensor.
Tensor flat(const Tensor& t) { return t.reshape({t.numel()}); }

/// A buffer for the side of a rooted all_to_all that moves nothing (every count zero): one
/// element, so no engine sees a null pointer.
Tensor placeholder(DType dt) { return Tensor::empty({1}, dt); }

/// `ts` packed one after the other into a new 1-d tensor of `dt` (`total` elements).
Tensor pack(const std::vector<Tensor>& ts, int64_t total, DType dt) {
  Tensor f = Tensor::empty({std::max<int64_t>(total, 1)}, dt);
  int64_t off = 0;
  for (const Tensor& t : ts) {
    if (t.numel() > 0) flat_part(f, off, t.sizes()).copy_from(t);
    off += t.numel();
  }
  return f;
}

/// Copies consecutive parts of the 1-d `f` into `ts`.
void unpack(const Tensor& f, std::vector<Tensor>& ts) {
  int64_t off = 0;
  for (Tensor& t : ts) {
    if (t.numel() > 0) t.copy_from(flat_part(f, off, t.sizes()));
    off += t.numel();
  }
}

std::string shapes_desc(const std::vector<Tensor>& ts) {
  std::string s = "[";
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + detail::tensor_desc(ts[i]);
  return s + "]";
}

}  // namespace

void HostProcessGroup::run_reduce(Tensor& t, ReduceOp op, int, Millis timeout) {
  run_all_reduce(t, op, timeout);
}

HostProcessGroup::P2PWaiter HostProcessGroup::post_recv_any(Tensor&, int) {
  throw Error(str("backend ", backend_name(), " does not support recv_any_source"),
              where(OpType::kRecvAnySource, 0),
              "a backend with receive from any source (gloo, mpi)", backend_name());
}

std::shared_ptr<Work> HostProcessGroup::issue_reduce(Tensor& t, ReduceOp op, int root,
                                                     const OpOptions& opts) {
  const bool is_root = rank() == root;
  // Non-roots reduce a copy: the engine may use their buffer as scratch, and t stays unchanged.
  Tensor buf = is_root ? contiguous_buffer(t) : t.contiguous().clone();
  const std::string desc =
      str("reduce ", detail::tensor_desc(t), " ", reduce_op_name(op), " root ", root);
  return post(OpType::kReduce, opts, {t},
              [this, t, buf, op, root, is_root, desc](Work& wk, Millis to) mutable {
                check_consistency(wk, desc, to);
                if (buf.numel() == 0) return;
                run_reduce(buf, engine_op(buf.dtype(), op), root, to);
                if (!is_root) return;
                if (op == ReduceOp::kAvg) divide_inplace(buf, size());
                copy_back(t, buf);
              });
}

std::shared_ptr<Work> HostProcessGroup::issue_gather(std::vector<Tensor>& outs, const Tensor& in,
                                                     int root, const OpOptions& opts) {
  const bool is_root = rank() == root;
  const int64_t n = in.numel(), W = size();
  Tensor in_c = contiguous_buffer(in);
  std::vector<Tensor> targets = outs;
  const std::string desc = str("gather ", detail::tensor_desc(in), " root ", root);
  return post(OpType::kGather, opts, outs,
              [this, in_c, targets, root, is_root, n, W, desc](Work& wk, Millis to) mutable {
                check_consistency(wk, desc, to);
                if (n == 0) return;
                // Every rank sends its block to the root only; the root receives one from each.
                std::vector<int64_t> in_counts(W, 0), out_counts(W, is_root ? n : 0);
                in_counts[static_cast<size_t>(root)] = n;
                Tensor dst =
                    is_root ? Tensor::empty({W * n}, in_c.dtype()) : placeholder(in_c.dtype());
                run_all_to_all(dst, flat(in_c), out_counts, in_counts, to);
                if (is_root) unpack(dst, targets);
              });
}

std::shared_ptr<Work> HostProcessGroup::issue_scatter(Tensor& out, const std::vector<Tensor>& ins,
                                                      int root, const OpOptions& opts) {
  const bool is_root = rank() == root;
  const int64_t n = out.numel(), W = size();
  Tensor out_buf = output_buffer(out);
  std::vector<Tensor> sources = ins;
  const std::string desc = str("scatter ", detail::tensor_desc(out), " root ", root);
  return post(
      OpType::kScatter, opts, {out},
      [this, out, out_buf, sources, root, is_root, n, W, desc](Work& wk, Millis to) mutable {
        check_consistency(wk, desc, to);
        if (n == 0) return;
        // The root sends block j to rank j; every rank receives one block, from the root.
        std::vector<int64_t> in_counts(W, is_root ? n : 0), out_counts(W, 0);
        out_counts[static_cast<size_t>(root)] = n;
        Tensor src = is_root ? pack(sources, W * n, out_buf.dtype()) : placeholder(out_buf.dtype());
        Tensor dst = flat(out_buf);
        run_all_to_all(dst, src, out_counts, in_counts, to);
        copy_back(out, out_buf);
      });
}

std::shared_ptr<Work> HostProcessGroup::issue_all_gather_list(
    std::vector<std::vector<Tensor>>& outs, const std::vector<Tensor>& ins, const OpOptions& opts) {
  std::vector<Tensor> in_c, results;
  for (const Tensor& in : ins) in_c.push_back(contiguous_buffer(in));
  for (const auto& list : outs) results.insert(results.end(), list.begin(), list.end());
  std::vector<std::vector<Tensor>> targets = outs;
  const std::string desc = str("all_gather ", shapes_desc(ins));
  return post(OpType::kAllGatherList, opts, results,
              [this, in_c, targets, desc](Work& wk, Millis to) mutable {
                check_consistency(wk, desc, to);
                for (size_t i = 0; i < in_c.size(); ++i) {
                  const int64_t n = in_c[i].numel();
                  if (n == 0) continue;
                  Tensor dst = Tensor::empty({size() * n}, in_c[i].dtype());
                  run_all_gather(dst, flat(in_c[i]), to);
                  unpack(dst, targets[i]);
                }
              });
}

std::shared_ptr<Work> HostProcessGroup::issue_reduce_scatter_list(
    std::vector<Tensor>& outs, const std::vector<std::vector<Tensor>>& ins, ReduceOp op,
    const OpOptions& opts) {
  std::vector<Tensor> targets = outs;
  std::vector<std::vector<Tensor>> sources = ins;
  const std::string desc = str("reduce_scatter ", shapes_desc(outs), " ", reduce_op_name(op));
  return post(OpType::kReduceScatterList, opts, outs,
              [this, targets, sources, op, desc](Work& wk, Millis to) mutable {
                check_consistency(wk, desc, to);
                for (size_t i = 0; i < targets.size(); ++i) {
                  const int64_t m = targets[i].numel();
                  if (m == 0) continue;
                  const DType dt = targets[i].dtype();
                  Tensor src = pack(sources[i], size() * m, dt);
                  Tensor dst = Tensor::empty({m}, dt);
                  run_reduce_scatter(dst, src, engine_op(dt, op), to);
                  if (op == ReduceOp::kAvg) divide_inplace(dst, size());
                  targets[i].copy_from(dst.view(targets[i].sizes()));
                }
              });
}

std::shared_ptr<Work> HostProcessGroup::issue_all_to_all_list(std::vector<Tensor>& outs,
                                                              const std::vector<Tensor>& ins,
                                                              const OpOptions& opts) {
  std::vector<int64_t> in_counts, out_counts;
  int64_t in_total = 0, out_total = 0;
  for (const Tensor& t : ins) in_total += in_counts.emplace_back(t.numel());
  for (const Tensor& t : outs) out_total += out_counts.emplace_back(t.numel());
  const DType dt = ins[0].dtype();
  Tensor src = pack(ins, in_total, dt);  // packed now: the caller may reuse its inputs
  std::vector<Tensor> targets = outs;
  const std::string desc = str("all_to_all ", dtype_name(dt));
  return post(OpType::kAllToAllList, opts, outs,
              [this, src, targets, in_counts, out_counts, out_total, dt, desc](Work& wk,
                                                                               Millis to) mutable {
                // The consistency check compares the element-count matrix across ranks.
                check_consistency(wk, desc, to, &out_counts, &in_counts, "elements");
                Tensor dst = Tensor::empty({std::max<int64_t>(out_total, 1)}, dt);
                run_all_to_all(dst, src, out_counts, in_counts, to);
                unpack(dst, targets);
              });
}

std::shared_ptr<Work> HostProcessGroup::issue_recv_any_source(Tensor& t, int tag,
                                                              const OpOptions& opts) {
  Tensor buf = output_buffer(t);
  return post_recv_work(OpType::kRecvAnySource, t, buf, post_recv_any(buf, tag), opts);
}

}  // namespace anvil::dist
