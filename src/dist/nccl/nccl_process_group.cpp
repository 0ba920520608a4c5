// NcclProcessGroup: construction (GPU check, unique id through the store), posting an op,
// sub-groups, shutdown, and the library's entry point (dist/nccl_backend.h).
#include "dist/nccl/nccl_process_group.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "dist/nccl/nccl_launch.h"
#include "dist/nccl/nccl_state.h"
#include "dist/nccl/one_shot.h"
#include "dist/host_profile.h"
#include "dist/nccl_backend.h"
#include "dist/settings.h"

namespace anvil::dist {

using nccl::Clock;
using nccl::cuda_message;
using nccl::use_device;
using nccl::nccl_message;

namespace {

constexpr const char* kIdKey = "nccl/unique_id";

/// The GPU of this rank: the option, else LOCAL_RANK, else the group rank; checked against the
/// GPUs present.
int pick_device(const GroupOptions& o, int rank, const std::string& where) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    throw Error("the nccl backend needs a CUDA GPU, and none is usable here", where,
                "a CUDA device", e != cudaSuccess ? cuda_message(e) : std::string("0 devices"));
  }
  int device = o.device_index;
  const char* local = std::getenv("LOCAL_RANK");
  if (device < 0 && local && *local) device = std::atoi(local);
  if (device < 0) device = rank;
  if (device >= count)
    throw Error(str("cuda:", device, " does not exist (this machine has ", count,
                    " GPU(s)); one GPU per rank: set GroupOptions::device_index or LOCAL_RANK"),
                where, str("a device index below ", count), std::to_string(device));
  return device;
}

}  // namespace

NcclProcessGroup::NcclProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                                   std::vector<int> global_ranks, GroupOptions options)
    : ProcessGroup(rank, size, std::move(global_ranks), options),
      store_(std::move(store)),
      st_(std::make_shared<nccl::NcclState>()) {
  const std::string w = str("nccl group (rank ", rank, " of ", size, ")");
  ANVIL_CHECK(store_ != nullptr, w, "the nccl backend rendezvous through a store", "a store",
              "null");
  st_->device = pick_device(options, rank, w);
  st_->rank = rank;
  st_->size = size;
  st_->global_ranks = this->global_ranks();
  st_->blocking_wait = options.blocking_wait ? OpTypeSet::all() : dist_settings().blocking_wait;
  st_->blocking_comm = dist_settings().nccl_blocking_comm;
  st_->caller_stream_bytes = dist_settings().nccl_caller_stream_bytes;
  // The one-shot limit in effect: an all_reduce takes it only on the caller's stream, so never
  // above that limit, nor when all_reduce's wait blocks (it then keeps the group's stream).
  st_->one_shot_bytes =
      st_->blocking_wait.contains(OpType::kAllReduce)
          ? 0
          : std::min(dist_settings().nccl_one_shot_bytes, st_->caller_stream_bytes);
  st_->group_timeout = options.timeout;
  // NVLink multicast (NVLS) stays off unless the user asked for it explicitly.
  ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  // A blocking communicator connects its peers when it is made, not in an op's enqueue (where
  // a dead peer would hold the calling thread: nccl_state.h), unless the user chose otherwise.
  if (st_->blocking_comm) ::setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);

  // The unique id: made by rank 0, read by the others (bounded by the store's timeout).
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&st_->id);
    if (r != ncclSuccess)
      throw Error("ncclGetUniqueId failed", w, "ncclSuccess", nccl_message(r));
    store_->set(kIdKey, std::string(st_->id.internal, sizeof(st_->id.internal)));
  } else {
    std::string id;
    try {
      id = store_->get(kIdKey);
    } catch (const Error& e) {
      throw Error(str("rank 0 of the nccl group never published its unique id (is rank 0 "
                      "alive and creating the same group?): ",
                      e.what()),
                  w, "the unique id in the store", "none");
    }
    if (id.size() != sizeof(st_->id.internal))
      throw Error("the nccl unique id in the store has the wrong size", w,
                  std::to_string(sizeof(st_->id.internal)), std::to_string(id.size()));
    std::memcpy(st_->id.internal, id.data(), id.size());
  }

  try {
    st_->make_device_objects(w);
  } catch (...) {
    st_->release_device_objects();
    throw;
  }
  st_->start_watchdog();
  if (options.eager_init) {
    try {
      std::lock_guard<std::mutex> lk(st_->mu);
      use_device(st_->device);
      st_->device_used = true;
      st_->ensure_comm(Clock::now() + options.timeout, w);
    } catch (...) {
      shutdown(Millis(0));
      throw;
    }
  }
}

NcclProcessGroup::~NcclProcessGroup() {
  shutdown(timeout());  // never throws
  std::lock_guard<std::mutex> lk(st_->mu);
  st_->release_device_objects();
}

Device NcclProcessGroup::device() const { return Device::cuda(st_->device); }

uint64_t NcclProcessGroup::sequence_number() const { return st_->seq.load(); }

bool NcclProcessGroup::shutdown(Millis grace) {
  const bool drained = st_->drain(Clock::now() + grace);
  st_->stop_watchdog_thread();
  // (a thread stuck inside NCCL holding mu would otherwise hang the shutdown: the watchdog,
  // which ends the process then, is already stopped)
  std::unique_lock<std::mutex> lk = st_->lock_unless_stuck(str("shutting group '", name(),
                                                               "' down"));
  bool has_comm = st_->comm != nullptr;
  for (const auto& [peer, lanes] : st_->p2p)
    has_comm = has_comm || lanes.send.comm || lanes.recv.comm;
  if (has_comm) {
    // Released with ncclCommAbort even after a full drain: ncclCommFinalize / ncclCommDestroy
    // are intra-node collectives, and ranks may shut their groups down in different orders (at
    // exit the registry's order is not the same on every rank), which could hang. With nothing
    // in flight, abort only frees the communicator's resources.
    st_->abort_locked(drained ? std::string("the group was shut down")
                              : str("group '", name(), "' was shut down with ops in flight"));
  }
  {
    std::lock_guard<std::mutex> alk(st_->amu);
    if (st_->broken.empty()) st_->broken = "the group was shut down";
  }
  return drained;
}

bool NcclProcessGroup::one_shot_ready(std::chrono::steady_clock::time_point deadline,
                                      const std::string& where) {
  if (st_->one_shot_tried) return st_->one_shot != nullptr;
  std::vector<std::string> names;
  for (int p = 0; p < size(); ++p) names.push_back(st_->peers(p));
  try {
    st_->one_shot_tried = true;
    if (!st_->one_shot || !st_->one_shot->connect(*store_, deadline, names))
      st_->one_shot.reset();  // (every rank alike: the vote's outcome)
  } catch (const std::exception& e) {
    st_->abort_locked(str(where, " failed: ", e.what()));
    throw Error(str(e.what(), "; the NCCL communicator was aborted and the group is unusable"),
                where);
  }
  return st_->one_shot != nullptr;
}

std::shared_ptr<Work> NcclProcessGroup::post(OpType op, const OpOptions& opts,
                                             std::vector<Tensor> outputs,
                                             std::vector<Tensor> inputs, int peer,
                                             const Launch& launch, Lane lane) {
  host_profile::Span span;
  const Millis timeout = op_timeout(opts);
  std::lock_guard<std::mutex> lk(st_->mu);
  const uint64_t seq = ++st_->seq;
  auto work = std::make_shared<Work>(op, seq, where(op, seq));
  const std::string& w = work->where();
  span.mark("nccl post: lock, Work");
  try {
    if (std::string b = st_->broken_reason(); !b.empty())
      throw Error(str("the nccl group is unusable after an earlier failure: ", b), w);
    const auto deadline = Clock::now() + timeout;
    span.mark("nccl post: broken check");
    st_->comm_name = name();
    use_device(st_->device);
    st_->device_used = true;
    ncclComm_t comm = nullptr;
    cudaStream_t stream = st_->stream;
    if (lane == Lane::kGroup) {
      st_->ensure_comm(deadline, w);
      comm = st_->comm;
    } else {
      nccl::P2pPeer& p = st_->ensure_p2p(peer, *store_, deadline, w);
      const nccl::P2pLane& l = lane == Lane::kSend ? p.send : p.recv;
      comm = l.comm;
      stream = l.stream;
    }
    auto cuda = [&](cudaError_t e, const std::string& what) {
      if (e == cudaSuccess) return;
      (void)cudaGetLastError();
      const std::string m = cuda_message(e);
      st_->abort_locked(str(w, ": ", what, " failed: ", m));
      throw Error(str(what, " failed; the group is unusable"), w, "cudaSuccess", m);
    };
    // The op starts after the work queued so far on the caller's stream (none given: on the
    // legacy default stream).
    cudaStream_t caller = opts.stream ? static_cast<cudaStream_t>(opts.stream) : cudaStreamLegacy;
    // Captured into a CUDA graph (the caller's stream is capturing, e.g. a compiled run being
    // recorded): the event record / waits become the graph's edges and the NCCL calls its nodes;
    // the host has nothing to watch, since the op runs when the graph is launched.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (opts.stream)
      cuda(cudaStreamIsCapturing(caller, &capture), "asking whether the caller's stream captures");
    const bool captured = capture == cudaStreamCaptureStatusActive;
    span.mark("nccl post: device, comm, capture check");
    if (captured && st_->blocking_wait.contains(op))
      throw Error(str(op_type_name(op), " cannot be captured into a CUDA graph: its wait blocks "
                                        "the host (the blocking-wait set, and barrier always)"),
                  w, "an op outside ANVIL_NCCL_BLOCKING_WAIT", op_type_name(op));
    // A small collective runs on the caller's stream itself (settings.h): already ordered
    // after the caller's work, and an out-of-place form reads its input in the caller's order.
    size_t bytes = 0;  // the op's largest tensor
    for (const auto* ts : {&outputs, &inputs})
      for (const Tensor& t : *ts) bytes = std::max(bytes, t.nbytes());
    const bool direct = lane == Lane::kGroup && st_->caller_stream_bytes > 0 &&
                        bytes <= static_cast<size_t>(st_->caller_stream_bytes) &&
                        !st_->blocking_wait.contains(op);
    // Small enough, on one host: anvil's one-shot kernel instead of NCCL (one_shot.h). Only
    // for ops with no stream (the legacy default stream: the functional collectives): the
    // kernels of one group must run in posting order on each rank (their slots and flags are
    // reused every other op), which one stream gives and NCCL does for its own ops.
    const bool one_shot = direct && !opts.stream && !captured && launch.one_shot &&
                          nccl::OneShot::eligible(launch.one_shot->dtype, launch.one_shot->op,
                                                  bytes, st_->one_shot_bytes) &&
                          one_shot_ready(deadline, w);
    if (direct) {
      stream = caller;
    } else {
      if (launch.on_caller) cuda(launch.on_caller(caller), "queueing the op's input copy");
      cuda(cudaEventRecord(st_->ready, caller),
           opts.stream ? "recording the caller's stream (is it a stream of the group's GPU?)"
                       : "recording the default stream");
      cuda(cudaStreamWaitEvent(stream, st_->ready, 0), "ordering after the caller's stream");
    }
    uint64_t one_shot_seq = 0;
    work->mark_started(one_shot ? "one_shot" : nullptr);  // the trace's start: queued
    span.mark("nccl post: order after the caller");
    {
      // (a blocking call still inside NCCL kStuckGrace after the deadline ends the process:
      // nccl_state.h)
      const nccl::EnqueueMark mark(*st_, deadline, w);
      if (one_shot) {
        const auto& o = *launch.one_shot;
        cuda(st_->one_shot->launch(o.in, o.out, o.n, o.dtype, o.op, timeout, stream, &one_shot_seq),
             "launching the one-shot all_reduce");
      } else {
        launch.run(*st_, comm, stream, deadline, w, direct);
      }
    }
    span.mark("nccl post: NCCL enqueue");
    cudaEvent_t ev = nullptr;
    cuda(st_->take_event(&ev), "creating the op's event");
    const cudaError_t rec = cudaEventRecord(ev, stream);
    if (rec != cudaSuccess) (void)cudaEventDestroy(ev);
    cuda(rec, "recording the op's event");
    span.mark("nccl post: event record");
    std::vector<Tensor> keep = std::move(inputs);
    keep.insert(keep.end(), outputs.begin(), outputs.end());
    auto event = std::make_shared<nccl::NcclEvent>(st_, ev, w, deadline, timeout, peer,
                                                   std::move(keep),
                                                   st_->blocking_wait.contains(op), captured);
    if (one_shot_seq) event->watch_one_shot(st_->one_shot, one_shot_seq);
    if (!captured) st_->add_pending(event);
    span.mark("nccl post: event object, pending");
    work->set_result(std::move(outputs));
    if (op == OpType::kRecv) work->set_source_rank(peer);
    work->finish_on(std::move(event));
    span.mark("nccl post: finish_on");
  } catch (...) {
    work->finish(std::current_exception());
  }
  return work;
}

std::shared_ptr<ProcessGroup> NcclProcessGroup::make_subgroup(const std::vector<int>& members,
                                                              const std::string& name) {
  const auto [my, globals] = member_ranks(members);
  std::shared_ptr<ProcessGroup> sub;
  if (my >= 0) {
    GroupOptions o = options();
    {
      std::lock_guard<std::mutex> lk(st_->mu);
      st_->device_used = true;  // the sub-group is on it: the GPU can no longer move
    }
    o.device_index = st_->device;  // the sub-group uses this rank's GPU
    auto sub_store = std::make_shared<PrefixStore>(str("subgroup/", name), store_);
    sub = std::make_shared<NcclProcessGroup>(sub_store, my, static_cast<int>(members.size()),
                                             globals, o);
  }
  // Every member of this group waits until the sub-group's members read their unique id, so
  // no rank leaves (and rank 0 never takes the store down) while others still rendezvous.
  store_barrier(*store_, str("subgroup/", name, "/created"), rank(), size(), store_->timeout());
  return sub;
}

}  // namespace anvil::dist

/// The library's entry point (dist/nccl_backend.h).
extern "C" __attribute__((visibility("default"))) void anvil_nccl_create_group(
    anvil::dist::NcclGroupArgs* args) {
  using anvil::Error;
  if (!args || args->abi != anvil::dist::kNcclBackendAbi)
    throw Error("libanvil_nccl.so was built for another anvil (backend ABI mismatch); rebuild",
                "dist::create_process_group(\"nccl\")",
                std::to_string(anvil::dist::kNcclBackendAbi),
                args ? std::to_string(args->abi) : std::string("null"));
  args->group = std::make_shared<anvil::dist::NcclProcessGroup>(
      args->store, args->rank, args->size, args->global_ranks, args->options);
}
