// The one-shot all_reduce's host side (one_shot.h).
#include "dist/nccl/one_shot.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "dist/nccl/one_shot_kernel.h"
#include "dist/nccl/one_shot_record.h"

namespace anvil::dist::nccl {

namespace {

std::string host_name() {
  char h[256] = {};
  if (gethostname(h, sizeof(h) - 1) != 0) return "?";
  return h;
}

bool kernel_type(DType d, OneShotType* t) {
  switch (d) {
    case DType::kFloat32: *t = OneShotType::kF32; return true;
    case DType::kFloat16: *t = OneShotType::kF16; return true;
    case DType::kBFloat16: *t = OneShotType::kBF16; return true;
    case DType::kFloat64: *t = OneShotType::kF64; return true;
    case DType::kInt8: *t = OneShotType::kI8; return true;
    case DType::kUInt8: *t = OneShotType::kU8; return true;
    case DType::kInt32: *t = OneShotType::kI32; return true;
    case DType::kInt64: *t = OneShotType::kI64; return true;
    default: return false;
  }
}

bool kernel_op(ReduceOp op, DType d, OneShotOp* o) {
  switch (op) {
    case ReduceOp::kSum: *o = OneShotOp::kSum; return true;
    case ReduceOp::kProduct: *o = OneShotOp::kProduct; return true;
    case ReduceOp::kMin: *o = OneShotOp::kMin; return true;
    case ReduceOp::kMax: *o = OneShotOp::kMax; return true;
    case ReduceOp::kAvg:  // floating types only (NCCL's integer average truncates its own way)
      *o = OneShotOp::kAvg;
      return is_floating(d);
    default: return false;
  }
}

/// The store's value of `key`, waited for until `deadline`; Error naming `who` when it is late.
std::string await(Store& store, const std::string& key, std::chrono::steady_clock::time_point deadline,
                  const std::string& who) {
  const auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
  try {
    store.wait({key}, std::max(left, Millis(1)));
  } catch (const std::exception& e) {
    throw Error(str("timed out: the one-shot all_reduce's set-up did not hear from ", who,
                    " (a rank that died, hangs, or never posted this op): ", e.what()),
                "nccl one-shot all_reduce set-up");
  }
  return store.get(key);
}

}  // namespace

bool OneShot::eligible(DType dtype, ReduceOp op, size_t bytes, int64_t limit) {
  OneShotType t;
  OneShotOp o;
  return limit > 0 && bytes > 0 && bytes <= static_cast<size_t>(limit) &&
         kernel_type(dtype, &t) && kernel_op(op, dtype, &o);
}

std::shared_ptr<OneShot> OneShot::prepare(int rank, int world, int64_t limit) {
  std::shared_ptr<OneShot> os(new OneShot());
  os->rank_ = rank;
  os->world_ = world;
  os->slot_bytes_ = (limit + 255) / 256 * 256;
  os->bufs_.assign(static_cast<size_t>(world), nullptr);
  const size_t bytes = kOneShotDataOffset + 2 * static_cast<size_t>(world * os->slot_bytes_);
  // (zeroed on a stream of its own, complete before any peer can map it)
  cudaStream_t s = nullptr;
  cudaError_t e = preload_one_shot();
  if (e == cudaSuccess) e = cudaMalloc(&os->own_, bytes);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMemsetAsync(os->own_, 0, bytes, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e == cudaSuccess) e = cudaIpcGetMemHandle(&os->handle_, os->own_);
  if (e == cudaSuccess)
    e = cudaHostAlloc(reinterpret_cast<void**>(&os->status_), sizeof(unsigned long long),
                      cudaHostAllocMapped);
  if (e == cudaSuccess)
    e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&os->status_dev_), os->status_, 0);
  if (s) (void)cudaStreamDestroy(s);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    os->problem_ = str("its buffer could not be made: ", cudaGetErrorString(e));
  } else {
    *os->status_ = 0;
  }
  os->bufs_[static_cast<size_t>(rank)] = os->own_;
  return os;
}

bool OneShot::connect(Store& store, std::chrono::steady_clock::time_point deadline,
                      const std::vector<std::string>& names) {
  // Round 1: this rank's host, buffer handle, process and slot size ("" when prepare() failed).
  // Ranks with different limits (ANVIL_NCCL_ONE_SHOT_BYTES or the caller-stream limit set
  // apart) would lay out their buffers differently and disagree on which ops take this path.
  const OneShotRecord here{host_name(), hex_bytes(&handle_, sizeof(handle_)), getpid(), slot_bytes_};
  store.set(str("one_shot/handle/", rank_), problem_.empty() ? format_one_shot_record(here) : "");
  std::vector<std::string> theirs(static_cast<size_t>(world_));
  for (int p = 0; p < world_; ++p)
    theirs[static_cast<size_t>(p)] =
        await(store, str("one_shot/handle/", p), deadline, names[static_cast<size_t>(p)]);
  // Round 2: open the peers' buffers when every rank has one on this host, in another process.
  std::string problem;
  std::vector<std::string> handles(static_cast<size_t>(world_));
  for (int p = 0; p < world_ && problem.empty(); ++p)
    problem = check_one_shot_record(theirs[static_cast<size_t>(p)], here, p == rank_,
                                    names[static_cast<size_t>(p)], &handles[static_cast<size_t>(p)]);
  for (int p = 0; p < world_ && problem.empty(); ++p) {
    if (p == rank_) continue;
    cudaIpcMemHandle_t h{};
    void* mapped = nullptr;
    if (!unhex_bytes(handles[static_cast<size_t>(p)], &h, sizeof(h))) {
      problem = str("a malformed buffer handle from ", names[static_cast<size_t>(p)]);
    } else if (const cudaError_t e = cudaIpcOpenMemHandle(&mapped, h, cudaIpcMemLazyEnablePeerAccess);
               e != cudaSuccess) {
      (void)cudaGetLastError();
      problem = str("cannot map the buffer of ", names[static_cast<size_t>(p)], ": ",
                    cudaGetErrorString(e));
    } else {
      bufs_[static_cast<size_t>(p)] = mapped;
    }
  }
  store.set(str("one_shot/open/", rank_), problem.empty() ? "1" : problem);
  for (int p = 0; p < world_; ++p) {
    const std::string v =
        await(store, str("one_shot/open/", p), deadline, names[static_cast<size_t>(p)]);
    if (v != "1" && problem.empty()) problem = str("on ", names[static_cast<size_t>(p)], ": ", v);
  }
  return problem.empty();
}

OneShot::~OneShot() {
  for (size_t p = 0; p < bufs_.size(); ++p)
    if (bufs_[p] && static_cast<int>(p) != rank_) (void)cudaIpcCloseMemHandle(bufs_[p]);
  if (own_) (void)cudaFree(own_);
  if (status_) (void)cudaFreeHost(status_);
  (void)cudaGetLastError();
}

cudaError_t OneShot::launch(const void* in, void* out, int64_t n, DType dtype, ReduceOp op,
                            Millis timeout, cudaStream_t stream, uint64_t* seq) {
  OneShotArgs a{};
  if (!kernel_type(dtype, &a.type) || !kernel_op(op, dtype, &a.op)) return cudaErrorInvalidValue;
  for (int p = 0; p < world_; ++p) a.bufs[p] = bufs_[static_cast<size_t>(p)];
  a.in = in;
  a.out = out;
  a.n = n;
  a.rank = rank_;
  a.world = world_;
  a.seq = ++seq_;
  a.slot_bytes = slot_bytes_;
  a.timeout_ns = static_cast<int64_t>(timeout.count()) * 1000000;
  a.status = status_dev_;
  *seq = a.seq;
  return launch_one_shot(a, stream);
}

void OneShot::mark_aborted() {
  if (!status_) return;
  volatile unsigned long long* s = status_;
  if (*s == 0) *s = kOneShotAborted;
}

int OneShot::late_peer(uint64_t seq) const {
  if (!status_) return -1;
  const unsigned long long s = *static_cast<volatile unsigned long long*>(status_);
  if (s == 0 || s == kOneShotAborted || (s >> 8) > seq) return -1;
  return static_cast<int>(s & 255) - 1;
}

}  // namespace anvil::dist::nccl
