// NcclState and NcclEvent (nccl_state.h): communicator creation, failure detection, abort.
#include "dist/nccl/nccl_state.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "dist/nccl/one_shot.h"
#include "dist/process_group.h"

namespace anvil::dist::nccl {

namespace {

const char* nccl_result_name(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult";
  }
}

/// Sleeps a little longer the longer a poll has gone on (spins first: most ops finish fast).
/// Between polls of something that usually completes within microseconds (an NCCL enqueue of a
/// non-blocking communicator, a small op's event): spin (yielding) for the first 200 us since
/// `start`, then sleep. A sleep costs far more than asked (the timer's slack: ~50 us on Linux),
/// so sleeping early added ~80 us to every small op.
void backoff(Clock::time_point start, int round) {
  const auto waited = Clock::now() - start;
  if (waited < std::chrono::microseconds(200))
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(round < 100000 ? 20 : 200));
}

}  // namespace

std::string cuda_message(cudaError_t e) {
  return str(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

std::string nccl_message(ncclResult_t r) {
  std::string m = str(nccl_result_name(r), " (", static_cast<int>(r), "): ", ncclGetErrorString(r));
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) m += str(" (NCCL: ", last, ")");
  return m;
}

void use_device(int device) {
  const cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(str("cannot make cuda:", device, " the current device"), "nccl backend",
                "cudaSuccess", cuda_message(e));
  }
}

// ------------------------------------------------------------------------------------------
// NcclState

void NcclState::ensure_comm(Clock::time_point deadline, const std::string& where) {
  if (comm) return;
  const EnqueueMark mark(*this, creation_deadline(deadline), where);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  // Blocking by default (NCCL's own enqueue; a call that stays inside NCCL past its deadline
  // ends the process, as the header comment says); ANVIL_NCCL_BLOCKING_COMM=0: non-blocking,
  // ncclInProgress polled until the op's deadline (settings.h).
  cfg.blocking = blocking_comm ? 1 : 0;
  cfg.commName = comm_name.c_str();
  const ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) {
    comm = nullptr;  // not made: nothing to abort
    const std::string m = nccl_message(r);
    abort_locked(str(where, ": creating the NCCL communicator failed: ", m));
    throw Error("creating the NCCL communicator failed", where, "ncclSuccess", m);
  }
  if (!add_handle(comm)) {
    comm = nullptr;
    throw Error(str("the nccl group was aborted while its communicator was made: ",
                    broken_reason()),
                where);
  }
  wait_ready(comm, deadline,
             str("creating the NCCL communicator (every rank of the group takes part; waiting on ",
                 peers(-1), ")"),
             where);
}

void NcclState::wait_ready(ncclComm_t c, Clock::time_point deadline, const std::string& what,
                           const std::string& where) {
  const auto start = Clock::now();
  for (int round = 0;; ++round) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(c, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      const std::string m = nccl_message(state);
      abort_locked(str(where, ": ", what, " failed: ", m));
      throw Error(str(what, " failed (the op's peers: ", peers(-1),
                      "); the NCCL communicator was aborted and the group is unusable"),
                  where, "ncclSuccess", m);
    }
    if (Clock::now() > deadline) {
      abort_locked(str(where, ": ", what, " timed out"));
      throw Error(str(what, " timed out (the op's timeout passed; the op's peers: ", peers(-1),
                      "); the NCCL communicator was aborted and the group is unusable"),
                  where, "completion within the op's timeout", "still in progress");
    }
    backoff(start, round);
  }
}

void NcclState::check(ncclComm_t c, ncclResult_t r, Clock::time_point deadline,
                      const std::string& what, const std::string& where) {
  if (r == ncclSuccess) return;
  if (r == ncclInProgress) {
    wait_ready(c, deadline, what, where);
    return;
  }
  const std::string m = nccl_message(r);
  abort_locked(str(where, ": ", what, " failed: ", m));
  throw Error(str(what, " failed (the op's peers: ", peers(-1),
                  "); the NCCL communicator was aborted and the group is unusable"),
              where, "ncclSuccess", m);
}

namespace {

/// Aborts every communicator in `comms` (all on cuda:`device`) at once. One at a time could hang:
/// ncclCommAbort sets its communicator's abort flag, then frees its pinned host memory, and
/// cuMemFreeHost waits for the whole device, so aborting the group's idle communicator while a
/// p2p lane's receive still waits for its peer (its flag not yet set) never returned (seen on
/// 2 x H200). Each abort runs on its own thread, so every flag is set before any free waits.
void abort_all(const std::vector<ncclComm_t>& comms, int device) {
  auto one = [device](ncclComm_t c) {
    (void)cudaSetDevice(device);  // on the group's device, whichever thread found the failure
    (void)ncclCommAbort(c);
  };
  std::vector<std::thread> others;
  for (size_t i = 1; i < comms.size(); ++i) others.emplace_back(one, comms[i]);
  if (!comms.empty()) one(comms[0]);
  for (std::thread& t : others) t.join();
}

}  // namespace

bool NcclState::add_handle(ncclComm_t c) {
  {
    std::lock_guard<std::mutex> lk(amu);
    if (!handles_aborted) {
      handles.push_back(c);
      return true;
    }
  }
  abort_all({c}, device);  // the group was aborted while this one was being made
  return false;
}

Clock::time_point NcclState::creation_deadline(Clock::time_point op_deadline) const {
  return std::max(op_deadline, Clock::now() + group_timeout);
}

std::string NcclState::broken_reason() {
  std::lock_guard<std::mutex> lk(amu);
  return broken;
}

std::string NcclState::stuck_enqueue() {
  if (!blocking_comm) return "";  // a non-blocking call returns; its poll keeps the deadline
  std::lock_guard<std::mutex> lk(amu);
  if (!enqueue_where || Clock::now() <= enqueue_deadline + kStuckGrace) return "";
  return *enqueue_where;
}

namespace {

/// Records `reason` as the group's failure (the first wins) and takes the communicators to
/// abort (none when an earlier abort took them).
std::vector<ncclComm_t> take_handles(NcclState& st, const std::string& reason) {
  std::lock_guard<std::mutex> lk(st.amu);
  if (st.broken.empty()) st.broken = reason;
  std::vector<ncclComm_t> comms;
  if (!st.handles_aborted) comms.swap(st.handles);
  st.handles_aborted = true;
  return comms;
}

/// After the abort: fails every op in flight that was not seen passed before it, without asking
/// its event (an aborted op's kernels exit and the events after them fire, so an op cut short
/// would read as passed), and stops watching them.
void fail_pending(NcclState& st) {
  std::deque<std::shared_ptr<NcclEvent>> failing;
  const std::string why = str("aborted with its group: ", st.broken_reason());
  {
    std::lock_guard<std::mutex> lk(st.pmu);
    failing.swap(st.pending);
    for (auto& e : failing) e->fail_unless_passed(why);
  }
  st.pcv.notify_all();
}

}  // namespace

std::unique_lock<std::mutex> NcclState::lock_unless_stuck(const std::string& reason) {
  const auto start = Clock::now();
  for (int round = 0;; ++round) {
    std::unique_lock<std::mutex> lk(mu, std::try_to_lock);
    if (lk.owns_lock()) return lk;
    // A thread holds mu issuing an op: wait for it, unless its NCCL call is past the op's
    // deadline (waiting on a dead or hung peer). ncclCommAbort from here while that thread is
    // inside NCCL frees memory the call still uses (heap corruption seen on 2 x H200), so the
    // process ends with the reason instead, as c10d's watchdog ends it.
    const std::string stuck = stuck_enqueue();
    if (!stuck.empty()) {
      std::fprintf(stderr,
                   "anvil nccl: %s; the thread issuing %s is inside NCCL past the op's timeout "
                   "(a blocking communicator's call waiting on a peer; ANVIL_NCCL_BLOCKING_COMM=0 "
                   "makes such calls abortable): ending the process (exit status 1) rather than "
                   "hang\n",
                   reason.c_str(), stuck.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
    backoff(start, round);
  }
}

void NcclState::abort(const std::string& reason) {
  std::unique_lock<std::mutex> lk = lock_unless_stuck(reason);
  abort_locked(reason);
}

void NcclState::abort_locked(const std::string& reason) {
  const std::vector<ncclComm_t> comms = take_handles(*this, reason);
  {
    // The thread holding mu handles this failure itself: its NCCL call (if any) returned.
    std::lock_guard<std::mutex> lk(amu);
    enqueue_where = nullptr;
    enqueue_deadline = {};
  }
  {
    std::lock_guard<std::mutex> lk(pmu);
    for (auto& e : pending) e->note_if_passed();  // ops the device passed keep their success
  }
  if (one_shot) one_shot->mark_aborted();  // one-shot kernels stop waiting for peers
  abort_all(comms, device);  // NCCL's kernels stop waiting for peers
  comm = nullptr;
  for (auto& [peer, lanes] : p2p) lanes.send.comm = lanes.recv.comm = nullptr;
  fail_pending(*this);
}

std::string NcclState::async_error() {
  std::unique_lock<std::mutex> lk(mu, std::try_to_lock);
  if (!lk.owns_lock()) return "";
  std::lock_guard<std::mutex> alk(amu);  // (no abort of the handles while they are asked)
  if (handles_aborted) return "";
  auto error_of = [](ncclComm_t c) -> std::string {
    ncclResult_t state = ncclSuccess;
    if (!c || ncclCommGetAsyncError(c, &state) != ncclSuccess) return "";
    if (state == ncclSuccess || state == ncclInProgress) return "";
    return nccl_message(state);
  };
  std::string e = error_of(comm);
  for (auto& [peer, lanes] : p2p) {
    if (!e.empty()) break;
    for (P2pLane* l : {&lanes.send, &lanes.recv})
      if (e.empty()) {
        e = error_of(l->comm);
        if (!e.empty())
          e = str("on the ", l == &lanes.send ? "send" : "receive", " lane to ", peers(peer), ": ",
                  e);
      }
  }
  return e;
}

std::string NcclState::peers(int peer) const {
  return dist::peer_names(rank, size, global_ranks, peer);
}

void NcclState::add_pending(std::shared_ptr<NcclEvent> e) {
  bool was_idle = false;
  {
    std::lock_guard<std::mutex> lk(pmu);
    was_idle = pending.empty();
    pending.push_back(std::move(e));
  }
  if (was_idle) pcv.notify_all();
}

cudaError_t NcclState::take_event(cudaEvent_t* ev) {
  {
    std::lock_guard<std::mutex> lk(emu);
    if (!spare_events.empty()) {
      *ev = spare_events.back();
      spare_events.pop_back();
      return cudaSuccess;
    }
  }
  return cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
}

void NcclState::give_event(cudaEvent_t ev) {
  {
    std::lock_guard<std::mutex> lk(emu);
    if (events_open && spare_events.size() < kMaxSpareEvents) {
      spare_events.push_back(ev);
      return;
    }
  }
  (void)cudaEventDestroy(ev);
}

bool NcclState::drain(Clock::time_point deadline) {
  const auto start = Clock::now();
  for (int round = 0;; ++round) {
    std::vector<std::shared_ptr<NcclEvent>> snap;
    {
      std::lock_guard<std::mutex> lk(pmu);
      snap.assign(pending.begin(), pending.end());
    }
    for (auto& e : snap) {
      try {
        e->query();
      } catch (const std::exception&) {  // the op failed: settled
      }
    }
    {
      std::lock_guard<std::mutex> lk(pmu);
      std::erase_if(pending, [](const std::shared_ptr<NcclEvent>& e) { return e->settled(); });
      if (pending.empty()) return true;
    }
    if (Clock::now() > deadline) return false;
    backoff(start, round);
  }
}

void NcclState::start_watchdog() {
  watchdog = std::thread([this] {
    int current = device;
    (void)cudaSetDevice(current);  // else this thread's CUDA calls would open a context on GPU 0
    std::unique_lock<std::mutex> lk(pmu);
    while (!stop_watchdog) {
      pcv.wait_for(lk, std::chrono::milliseconds(pending.empty() ? 200 : 10));
      if (stop_watchdog) continue;
      if (!enqueue_idle.load(std::memory_order_relaxed)) {
        lk.unlock();
        const std::string stuck = stuck_enqueue();
        if (!stuck.empty())
          abort(str(stuck, " failed: timed out inside NCCL (the op's timeout passed while ",
                    "issuing it, waiting on ", peers(-1),
                    ": a rank that died, hangs, or never posted this op); the NCCL communicator ",
                    "was aborted and the group is unusable"));
        lk.lock();
      }
      if (stop_watchdog || pending.empty()) continue;
      if (device != current) (void)cudaSetDevice(current = device);  // bind_device moved it
      std::vector<std::shared_ptr<NcclEvent>> snap(pending.begin(), pending.end());
      lk.unlock();
      for (auto& e : snap) {
        try {
          e->query();  // a passed deadline or an asynchronous error aborts the communicator
        } catch (const std::exception&) {
        }
      }
      snap.clear();  // the tensors of passed ops are released outside the lock
      lk.lock();
      std::erase_if(pending, [](const std::shared_ptr<NcclEvent>& e) { return e->settled(); });
    }
  });
}

void NcclState::stop_watchdog_thread() {
  {
    std::lock_guard<std::mutex> lk(pmu);
    stop_watchdog = true;
  }
  pcv.notify_all();
  if (watchdog.joinable()) watchdog.join();
}

// ------------------------------------------------------------------------------------------
// EnqueueMark

EnqueueMark::EnqueueMark(NcclState& st, Clock::time_point deadline, const std::string& where)
    : st_(st) {
  std::lock_guard<std::mutex> lk(st_.amu);
  st_.enqueue_deadline = deadline;
  st_.enqueue_where = &where;
  st_.enqueue_idle.store(false, std::memory_order_relaxed);
}

EnqueueMark::~EnqueueMark() {
  std::lock_guard<std::mutex> lk(st_.amu);
  st_.enqueue_deadline = {};
  st_.enqueue_where = nullptr;
  st_.enqueue_idle.store(true, std::memory_order_relaxed);
}

// ------------------------------------------------------------------------------------------
// NcclEvent

NcclEvent::NcclEvent(std::shared_ptr<NcclState> st, cudaEvent_t ev, std::string where,
                     Clock::time_point deadline, Millis timeout, int peer, std::vector<Tensor> keep,
                     bool blocking, bool captured)
    : st_(std::move(st)),
      ev_(ev),
      where_(std::move(where)),
      deadline_(deadline),
      timeout_(timeout),
      peer_(peer),
      keep_(captured ? std::vector<Tensor>{} : std::move(keep)),
      blocking_(blocking),
      captured_(captured),
      passed_(captured) {}

NcclEvent::~NcclEvent() {
  if (captured_)
    (void)cudaEventDestroy(ev_);
  else
    st_->give_event(ev_);  // (a re-record later does not disturb waits already queued on it)
}

void NcclEvent::fail_unless_passed(const std::string& reason) {
  if (!passed_ && failed_.empty()) failed_ = reason;
}

void NcclEvent::note_if_passed() {
  if (passed_ || !failed_.empty()) return;
  if (cudaEventQuery(ev_) == cudaSuccess)
    passed_ = !one_shot_ || one_shot_->late_peer(one_shot_seq_) < 0;  // else failed by the abort
  else
    (void)cudaGetLastError();
}

bool NcclEvent::query() {
  std::string why;
  std::vector<Tensor> release;  // dropped after the lock
  {
    std::lock_guard<std::mutex> lk(st_->pmu);
    if (passed_) return true;
    if (!failed_.empty()) throw Error(failed_, where_);
    const cudaError_t r = cudaEventQuery(ev_);
    // the one-shot kernel gave up on a peer at the deadline: failed as a passed deadline
    const int late = r == cudaSuccess && one_shot_ ? one_shot_->late_peer(one_shot_seq_) : -1;
    if (r == cudaSuccess && late < 0) {
      passed_ = true;
      release.swap(keep_);
      return true;
    }
    if (late < 0 && r != cudaErrorNotReady) {
      (void)cudaGetLastError();
      why = str("a CUDA error while waiting for the op: ", cuda_message(r));
    } else if (late >= 0 || Clock::now() > deadline_) {
      why = str("timed out: the op did not complete within ", timeout_.count(),
                " ms, waiting on ", st_->peers(late >= 0 ? late : peer_),
                " (a rank that died, hangs, or never posted this op)");
    }
  }
  // NCCL's asynchronous error once the op has had a millisecond: a wait polling a small op
  // spins here, and ncclCommGetAsyncError under the group's locks would slow every round.
  if (why.empty() && Clock::now() - (deadline_ - timeout_) > std::chrono::milliseconds(1)) {
    const std::string a = st_->async_error();
    if (!a.empty())
      why = str("NCCL reported an asynchronous error (a peer failed or exited; waiting on ",
                st_->peers(peer_), "): ", a);
  }
  if (why.empty()) return false;
  why += "; the NCCL communicator was aborted and the group is unusable";
  std::string msg;
  {
    // Claimed before the abort, so this op reports its own reason, not "the group failed".
    std::lock_guard<std::mutex> lk(st_->pmu);
    if (passed_) return true;
    if (failed_.empty()) failed_ = why;
    msg = failed_;
  }
  st_->abort(str(where_, " failed: ", why));
  throw Error(msg, where_);
}

void NcclEvent::synchronize() {
  const auto start = Clock::now();
  for (int round = 0;; ++round) {
    if (query()) return;
    backoff(start, round);
  }
}

void NcclEvent::block_stream(void* stream) {
  if (blocking_) {
    synchronize();
    return;
  }
  {
    std::lock_guard<std::mutex> lk(st_->pmu);
    if (!failed_.empty()) throw Error(failed_, where_);
  }
  const cudaError_t e = cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), ev_, 0);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error("cannot make the caller's stream wait for the op", where_, "cudaSuccess",
                cuda_message(e));
  }
}

}  // namespace anvil::dist::nccl
