// Functional collectives over the GroupRegistry and WorkRegistry.
#include "dist/functional.h"

#include <numeric>

#include "core/allocator.h"
#include "core/error.h"
#include "core/storage.h"
#include "dist/host_profile.h"
#include "dist/registry.h"

namespace anvil::dist::functional {

namespace {

std::shared_ptr<ProcessGroup> group_of(const std::string& name) {
  return GroupRegistry::instance().resolve(name);
}

void check_group_size(const ProcessGroup& pg, int64_t group_size, const char* op) {
  if (group_size != pg.size())
    throw Error("group_size argument does not match the group", str("dist::functional::", op),
                str(pg.size(), " (size of group '", pg.name(), "')"), std::to_string(group_size));
}

void track(const Tensor& t, const std::shared_ptr<Work>& w) {
  WorkRegistry::instance().register_work(t, w);
}

/// A new contiguous tensor of `sizes` on `device` (host memory zeroed; device memory left as
/// it is: the collective writes all of it).
Tensor new_tensor(const Shape& sizes, DType dtype, Device device) {
  if (device.is_cpu()) return Tensor::empty(sizes, dtype);
  int64_t n = 1;
  for (int64_t d : sizes) n *= d;
  auto st = Storage::allocate(static_cast<size_t>(n) * dtype_size(dtype), device, /*zero=*/false);
  return Tensor(std::move(st), dtype, sizes, Tensor::contiguous_strides(sizes), 0);
}

/// A fresh contiguous copy of t on t's device (the buffer an out-of-place op works on). A
/// device tensor is copied on its device, so it must be contiguous (host code cannot gather it).
Tensor fresh_copy(const Tensor& t) {
  ANVIL_CHECK(t.defined(), "dist::functional", "the input tensor is undefined", "a tensor",
              "undefined");
  if (t.device().is_cpu()) return t.clone();
  ANVIL_CHECK(t.is_contiguous(), "dist::functional",
              str("a functional collective copies its device input, which must be contiguous (",
                  t.device().str(), ")"),
              "a contiguous tensor", t.type_str());
  Tensor out = new_tensor(t.sizes(), t.dtype(), t.device());
  if (t.nbytes() > 0)
    device_allocator(t.device())
        .copy(out.data_ptr(), t.device(), t.data_ptr(), t.device(), t.nbytes());
  return out;
}

/// Host-side rearrangements (gather / scatter along a dim other than 0) read the tensor's
/// elements; a device tensor is refused with a clear Error.
void require_host_tensor(const Tensor& t, const char* where, const char* what) {
  if (!t.device().is_cpu())
    throw Error(str(what, " is done on the host and the tensor is on ", t.device().str(),
                    "; use dim 0 for device tensors"),
                where, "dim 0 (or a cpu tensor)", t.device().str());
}

}  // namespace

Tensor all_reduce(const Tensor& t, ReduceOp op, const std::string& group) {
  host_profile::Span span;
  auto pg = group_of(group);
  span.mark("functional all_reduce: group lookup");
  if (!t.defined() || t.device().is_cpu()) {
    Tensor out = fresh_copy(t);
    track(out, pg->all_reduce(out, op));
    return out;
  }
  // A device tensor: all_reduce_into, with no host synchronization (fresh_copy's device copy
  // would synchronize). nccl orders it after the caller's stream (here the legacy default
  // stream): an op of at most ANVIL_NCCL_CALLER_STREAM_BYTES runs on that stream itself, out
  // of place; a larger one copies its input there first, then reduces the copy in place on the
  // group's stream
  ANVIL_CHECK(t.is_contiguous(), "dist::functional::all_reduce",
              str("the input of a functional all_reduce on ", t.device().str(),
                  " must be contiguous (the op reads it as one device buffer)"),
              "a contiguous tensor", t.type_str());
  Tensor out = new_tensor(t.sizes(), t.dtype(), t.device());
  span.mark("functional all_reduce: output alloc");
  auto w = pg->all_reduce_into(out, t, op);
  span.mark("functional all_reduce: all_reduce_into");
  track(out, w);
  span.mark("functional all_reduce: track");
  return out;
}

Tensor all_reduce(const Tensor& t, const std::string& op, const std::string& group) {
  return all_reduce(t, reduce_op_from_name(op), group);
}

Tensor& all_reduce_(Tensor& t, ReduceOp op, const std::string& group) {
  auto pg = group_of(group);
  track(t, pg->all_reduce(t, op));
  return t;
}

std::vector<Tensor> all_reduce_coalesced(const std::vector<Tensor>& ts, ReduceOp op,
                                         const std::string& group) {
  auto pg = group_of(group);
  std::vector<Tensor> outs;
  for (const auto& t : ts) outs.push_back(fresh_copy(t));
  auto w = pg->all_reduce_coalesced(outs, op);
  for (const auto& o : outs) track(o, w);
  return outs;
}

std::vector<Tensor>& all_reduce_coalesced_(std::vector<Tensor>& ts, ReduceOp op,
                                           const std::string& group) {
  auto pg = group_of(group);
  auto w = pg->all_reduce_coalesced(ts, op);
  for (const auto& t : ts) track(t, w);
  return ts;
}

namespace {
Shape gathered_shape(const Tensor& t, int64_t w) {
  Shape s = t.sizes();
  if (s.empty()) return {w};
  s[0] *= w;
  return s;
}
}  // namespace

Tensor all_gather_into_tensor(const Tensor& t, int64_t group_size, const std::string& group) {
  auto pg = group_of(group);
  check_group_size(*pg, group_size, "all_gather_into_tensor");
  Tensor out = new_tensor(gathered_shape(t, group_size), t.dtype(), t.device());
  track(out, pg->all_gather_into_tensor(out, t));
  return out;
}

Tensor& all_gather_into_tensor_out(const Tensor& t, int64_t group_size, const std::string& group,
                                   Tensor& out) {
  auto pg = group_of(group);
  check_group_size(*pg, group_size, "all_gather_into_tensor_out");
  track(out, pg->all_gather_into_tensor(out, t));
  return out;
}

std::vector<Tensor> all_gather_into_tensor_coalesced(const std::vector<Tensor>& ts,
                                                     int64_t group_size, const std::string& group) {
  auto pg = group_of(group);
  check_group_size(*pg, group_size, "all_gather_into_tensor_coalesced");
  std::vector<Tensor> outs;
  for (const auto& t : ts)
    outs.push_back(new_tensor(gathered_shape(t, group_size), t.dtype(), t.device()));
  auto w = pg->all_gather_into_tensor_coalesced(outs, ts);
  for (const auto& o : outs) track(o, w);
  return outs;
}

namespace {
Shape scattered_shape(const Tensor& t, int64_t w) {
  Shape s = t.sizes();
  if (!s.empty() && s[0] % w == 0) s[0] /= w;
  return s;  // a bad shape is reported by the group's checks
}
}  // namespace

Tensor reduce_scatter_tensor(const Tensor& t, ReduceOp op, int64_t group_size,
                             const std::string& group) {
  auto pg = group_of(group);
  check_group_size(*pg, group_size, "reduce_scatter_tensor");
  Tensor out = new_tensor(scattered_shape(t, group_size), t.dtype(), t.device());
  track(out, pg->reduce_scatter_tensor(out, t, op));
  return out;
}

std::vector<Tensor> reduce_scatter_tensor_coalesced(const std::vector<Tensor>& ts, ReduceOp op,
                                                    int64_t group_size, const std::string& group) {
  auto pg = group_of(group);
  check_group_size(*pg, group_size, "reduce_scatter_tensor_coalesced");
  std::vector<Tensor> outs;
  for (const auto& t : ts)
    outs.push_back(new_tensor(scattered_shape(t, group_size), t.dtype(), t.device()));
  auto w = pg->reduce_scatter_tensor_coalesced(outs, ts, op);
  for (const auto& o : outs) track(o, w);
  return outs;
}

Tensor all_to_all_single(const Tensor& t, const std::optional<std::vector<int64_t>>& out_splits,
                         const std::optional<std::vector<int64_t>>& in_splits,
                         const std::string& group) {
  auto pg = group_of(group);
  ANVIL_CHECK(t.defined() && t.dim() >= 1, "dist::functional::all_to_all_single",
              "the input needs at least one dim", "dim >= 1",
              t.defined() ? t.type_str() : std::string("undefined"));
  Shape s = t.sizes();
  if (out_splits) s[0] = std::accumulate(out_splits->begin(), out_splits->end(), int64_t{0});
  Tensor out = new_tensor(s, t.dtype(), t.device());
  track(out, pg->all_to_all_single(out, t, out_splits.value_or(std::vector<int64_t>{}),
                                   in_splits.value_or(std::vector<int64_t>{})));
  return out;
}

Tensor broadcast(const Tensor& t, int64_t src, const std::string& group) {
  auto pg = group_of(group);
  Tensor out = fresh_copy(t);
  track(out, pg->broadcast(out, static_cast<int>(src)));
  return out;
}

Tensor& broadcast_(Tensor& t, int64_t src, const std::string& group) {
  auto pg = group_of(group);
  track(t, pg->broadcast(t, static_cast<int>(src)));
  return t;
}

Tensor permute_tensor(const Tensor& t, const std::vector<int64_t>& src_dst,
                      const std::string& group) {
  auto pg = group_of(group);
  const int64_t w = pg->size(), me = pg->rank();
  const std::string where = "dist::functional::permute_tensor";
  if (static_cast<int64_t>(src_dst.size()) != w)
    throw Error("src_dst needs one destination per rank", where, std::to_string(w),
                std::to_string(src_dst.size()));
  std::vector<bool> hit(static_cast<size_t>(w), false);
  for (int64_t d : src_dst) {
    if (d < 0 || d >= w || hit[static_cast<size_t>(d)])
      throw Error("src_dst is not a permutation of the group's ranks", where,
                  str("each of 0..", w - 1, " once"), std::to_string(d));
    hit[static_cast<size_t>(d)] = true;
  }
  Tensor in = t.dim() == 0 ? t.reshape({1}) : t;
  const int64_t d0 = in.size(0);
  std::vector<int64_t> in_splits(static_cast<size_t>(w), 0), out_splits(static_cast<size_t>(w), 0);
  in_splits[static_cast<size_t>(src_dst[static_cast<size_t>(me)])] = d0;
  for (int64_t s = 0; s < w; ++s)
    if (src_dst[static_cast<size_t>(s)] == me) out_splits[static_cast<size_t>(s)] = d0;
  Tensor out = new_tensor(in.sizes(), t.dtype(), t.device());
  track(out, pg->all_to_all_single(out, in, out_splits, in_splits));
  return t.dim() == 0 ? out.view({}) : out;
}

const Tensor& wait_tensor(const Tensor& t) {
  host_profile::Span span;
  WorkRegistry::instance().wait(t);
  span.mark("wait_tensor");
  return t;
}

std::string legacy_group_name(const std::string& tag, const std::vector<int64_t>& ranks,
                              int64_t group_size) {
  return GroupRegistry::instance().name_for_ranks(tag, ranks, group_size);
}

// ------------------------------------------------------------------------------------------
// AsyncTensor and the Python-level API

AsyncTensor::AsyncTensor(Tensor pending, std::function<Tensor(const Tensor&)> finish)
    : t_(std::move(pending)), finish_(std::move(finish)) {}

const Tensor& AsyncTensor::value() {
  if (!completed_) {
    wait_tensor(t_);
    if (finish_) t_ = finish_(t_);
    completed_ = true;
  }
  return t_;
}

namespace api {

AsyncTensor all_reduce(const Tensor& t, const std::string& op, const std::string& group) {
  return AsyncTensor(functional::all_reduce(t, op, group));
}

std::vector<AsyncTensor> all_reduce_coalesced(const std::vector<Tensor>& ts, const std::string& op,
                                              const std::string& group) {
  std::vector<AsyncTensor> out;
  for (auto& t : functional::all_reduce_coalesced(ts, reduce_op_from_name(op), group))
    out.emplace_back(t);
  return out;
}

AsyncTensor all_gather_tensor(const Tensor& t, int64_t gather_dim, const std::string& group) {
  auto pg = group_of(group);
  const int64_t w = pg->size();
  const int64_t d = t.dim() == 0 ? 0 : t.wrap_dim(gather_dim);
  if (d != 0)  // refused before anything is posted
    require_host_tensor(t, "dist::api::all_gather_tensor", "gathering along a dim other than 0");
  Tensor g = functional::all_gather_into_tensor(t, w, group);
  if (d == 0) return AsyncTensor(g);
  const int64_t d0 = t.size(0), sd = t.size(d);
  return AsyncTensor(g, [w, d, d0, sd](const Tensor& gathered) {
    Shape s = gathered.sizes();
    s[0] = d0;
    s[static_cast<size_t>(d)] = sd * w;
    Tensor out = Tensor::empty(s, gathered.dtype());
    for (int64_t j = 0; j < w; ++j)
      out.slice(d, j * sd, (j + 1) * sd).copy_from(gathered.slice(0, j * d0, (j + 1) * d0));
    return out;
  });
}

std::vector<AsyncTensor> all_gather_into_tensor_coalesced(const std::vector<Tensor>& ts,
                                                          const std::string& group) {
  auto pg = group_of(group);
  std::vector<AsyncTensor> out;
  for (auto& t : functional::all_gather_into_tensor_coalesced(ts, pg->size(), group))
    out.emplace_back(t);
  return out;
}

namespace {
/// t with its chunks along `dim` (W of them) stacked along dim 0, so that a dim-0
/// reduce_scatter scatters along `dim`.
Tensor chunks_to_front(const Tensor& t, int64_t dim, int64_t w, const std::string& where) {
  const int64_t d = t.wrap_dim(dim);
  if (d == 0) return t;
  require_host_tensor(t, where.c_str(), "scattering along a dim other than 0");
  if (t.size(d) % w != 0)
    throw Error(
        str("dim ", d, " of the input (", t.size(d), ") is not divisible by the group size ", w),
        where, str("a multiple of ", w), std::to_string(t.size(d)));
  const int64_t c = t.size(d) / w, d0 = t.size(0);
  Shape s = t.sizes();
  s[0] = d0 * w;
  s[static_cast<size_t>(d)] = c;
  Tensor y = Tensor::empty(s, t.dtype());
  for (int64_t j = 0; j < w; ++j)
    y.slice(0, j * d0, (j + 1) * d0).copy_from(t.slice(d, j * c, (j + 1) * c));
  return y;
}
}  // namespace

AsyncTensor reduce_scatter_tensor(const Tensor& t, const std::string& op, int64_t scatter_dim,
                                  const std::string& group) {
  auto pg = group_of(group);
  Tensor y = chunks_to_front(t, scatter_dim, pg->size(), "dist::api::reduce_scatter_tensor");
  return AsyncTensor(
      functional::reduce_scatter_tensor(y, reduce_op_from_name(op), pg->size(), group));
}

std::vector<AsyncTensor> reduce_scatter_tensor_coalesced(const std::vector<Tensor>& ts,
                                                         const std::string& op,
                                                         const std::vector<int64_t>& scatter_dims,
                                                         const std::string& group) {
  auto pg = group_of(group);
  const std::string where = "dist::api::reduce_scatter_tensor_coalesced";
  if (scatter_dims.size() != ts.size())
    throw Error("one scatter dim per input is needed", where, std::to_string(ts.size()),
                std::to_string(scatter_dims.size()));
  std::vector<Tensor> ys;
  for (size_t i = 0; i < ts.size(); ++i)
    ys.push_back(chunks_to_front(ts[i], scatter_dims[i], pg->size(), where));
  std::vector<AsyncTensor> out;
  for (auto& t :
       functional::reduce_scatter_tensor_coalesced(ys, reduce_op_from_name(op), pg->size(), group))
    out.emplace_back(t);
  return out;
}

AsyncTensor all_to_all_single(const Tensor& t,
                              const std::optional<std::vector<int64_t>>& out_splits,
                              const std::optional<std::vector<int64_t>>& in_splits,
                              const std::string& group) {
  return AsyncTensor(functional::all_to_all_single(t, out_splits, in_splits, group));
}

AsyncTensor broadcast(const Tensor& t, int64_t src, const std::string& group) {
  return AsyncTensor(functional::broadcast(t, src, group));
}

AsyncTensor permute_tensor(const Tensor& t, const std::vector<int64_t>& src_dst,
                           const std::string& group) {
  return AsyncTensor(functional::permute_tensor(t, src_dst, group));
}

}  // namespace api

}  // namespace anvil::dist::functional
