// MpiProcessGroup: the mpi backend's primitives, MPI init/finalize and the timeout watchdog.
#include "dist/mpi/mpi_process_group.h"

// The C API only: keep MPI's deprecated C++ bindings (and libmpi_cxx) out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "dist/reduce.h"
#include "dist/registry.h"

namespace anvil::dist {

struct MpiProcessGroup::Comm {
  MPI_Comm comm = MPI_COMM_NULL;
};

namespace {

using Clock = std::chrono::steady_clock;

/// Set once any MPI call of this process failed. MPI leaves a communicator in an undefined state
/// after an error in a collective: the peers may still be blocked in it, and MPI_Finalize /
/// MPI_Comm_free can then block forever (seen with Open MPI 4.1 when one rank's all_reduce failed
/// with MPI_ERR_TRUNCATE while the others waited). Such a process aborts the job at exit instead.
std::atomic<bool> g_mpi_failed{false};
/// The world group's op timeout (ms); it also bounds MPI_Finalize at exit (0: unbounded).
std::atomic<int64_t> g_finalize_timeout_ms{0};

/// Ends the whole MPI job with exit code 3: MPI_Abort, and _Exit after 2 s in case MPI_Abort
/// blocks (seen with Open MPI 4.1 when a peer already left the collective with an error).
[[noreturn]] void abort_job() {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    std::fprintf(stderr, "anvil dist: MPI_Abort did not end the process; exiting\n");
    std::_Exit(3);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

/// Throws Error when an MPI call failed.
void check(int rc, const char* call, const std::string& where) {
  if (rc == MPI_SUCCESS) return;
  g_mpi_failed = true;
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw Error(str(call, " failed: ", std::string(msg, static_cast<size_t>(len))), where);
}

/// MPI_Init_thread(MULTIPLE) once; MPI_Finalize at exit.
void ensure_mpi() {
  static std::once_flag once;
  std::call_once(once, [] {
    int inited = 0;
    MPI_Initialized(&inited);
    int provided = 0;
    if (!inited) {
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      add_exit_hook([] {
        int fin = 0;
        MPI_Finalized(&fin);
        if (fin) return;
        if (g_mpi_failed) {
          std::fprintf(stderr,
                       "anvil dist: an MPI operation of this rank failed earlier; aborting the "
                       "job (MPI_Abort) instead of MPI_Finalize, which could block on the "
                       "peers\n");
          std::fflush(stderr);
          abort_job();
        }
        // MPI_Finalize waits for every rank: a peer that aborted can leave it blocked (Open MPI
        // 4.1 does not kill ranks already in MPI_Finalize), so it gets the op timeout too.
        if (const int64_t ms = g_finalize_timeout_ms.load(); ms > 0)
          std::thread([ms] {
            std::this_thread::sleep_for(std::chrono::milliseconds(ms));
            std::fprintf(stderr,
                         "anvil dist: MPI_Finalize did not complete within %lld ms (a peer "
                         "failed or left); exiting with status 3\n",
                         static_cast<long long>(ms));
            std::fflush(stderr);
            std::_Exit(3);
          }).detach();
        MPI_Finalize();
      });
    } else {
      MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_MULTIPLE)
      throw Error("the MPI library does not support MPI_THREAD_MULTIPLE", "dist mpi backend",
                  "MPI_THREAD_MULTIPLE", str("thread level ", provided));
  });
}

/// Aborts the MPI job when an op outlives its timeout (MPI cannot cancel a blocking call).
class Watchdog {
 public:
  static Watchdog& instance() {
    static Watchdog* w = new Watchdog();  // its thread runs until the process ends
    return *w;
  }
  uint64_t begin(std::string what, Millis timeout) {
    std::lock_guard<std::mutex> lk(mu_);
    const uint64_t id = ++next_;
    running_[id] = {Clock::now() + timeout, std::move(what), timeout};
    if (!started_) {
      started_ = true;
      std::thread([this] { loop(); }).detach();
    }
    // No wake-up per op: the loop checks every 50 ms, far below any timeout, and waking it on
    // every post made it compete with the ranks' busy-polling MPI calls on small machines.
    return id;
  }
  void end(uint64_t id) {
    std::lock_guard<std::mutex> lk(mu_);
    running_.erase(id);
  }

 private:
  struct Entry {
    Clock::time_point deadline;
    std::string what;
    Millis timeout;
  };
  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
      cv_.wait_for(lk, Millis(50));
      const auto now = Clock::now();
      for (const auto& [id, e] : running_) {
        if (now < e.deadline) continue;
        std::fprintf(stderr,
                     "anvil dist: %s did not complete within %lld ms; MPI cannot cancel a "
                     "blocking collective, aborting the job (MPI_Abort)\n",
                     e.what.c_str(), static_cast<long long>(e.timeout.count()));
        std::fflush(stderr);
        abort_job();
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> running_;
  uint64_t next_ = 0;
  bool started_ = false;
};

/// Registers a running op with the watchdog for its lifetime.
class Watched {
 public:
  Watched(std::string what, Millis timeout)
      : id_(Watchdog::instance().begin(std::move(what), timeout)) {}
  ~Watched() { Watchdog::instance().end(id_); }

 private:
  uint64_t id_;
};

/// MPI user reduction for 16-bit floats: inout = in (op) inout.
template <int DT, int OP>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_fn(static_cast<DType>(DT), static_cast<ReduceOp>(OP))(inout, in, inout,
                                                               static_cast<size_t>(*len));
}

/// The 2-byte datatypes of f16 / bf16 (distinct, so user ops are per dtype).
MPI_Datatype half_type(DType dt) {
  static MPI_Datatype types[2] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL};
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto& t : types) {
      MPI_Type_contiguous(2, MPI_BYTE, &t);
      MPI_Type_commit(&t);
    }
  });
  return types[dt == DType::kFloat16 ? 0 : 1];
}

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::kBool:
      return MPI_C_BOOL;
    case DType::kUInt8:
      return MPI_UINT8_T;
    case DType::kInt8:
      return MPI_INT8_T;
    case DType::kInt16:
      return MPI_INT16_T;
    case DType::kUInt16:
      return MPI_UINT16_T;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kFloat64:
      return MPI_DOUBLE;
    case DType::kFloat16:
    case DType::kBFloat16:
      return half_type(dt);
    default:
      break;
  }
  throw Error("dtype not supported by the mpi backend", "dist mpi", "a collective dtype",
              dtype_name(dt));
}

template <int DT>
MPI_Op half_mpi_op(ReduceOp op) {
  static MPI_Op ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  static std::once_flag once;
  std::call_once(once, [] {
    MPI_Op_create(&half_op<DT, static_cast<int>(ReduceOp::kSum)>, 1, &ops[0]);
    MPI_Op_create(&half_op<DT, static_cast<int>(ReduceOp::kProduct)>, 1, &ops[1]);
    MPI_Op_create(&half_op<DT, static_cast<int>(ReduceOp::kMin)>, 1, &ops[2]);
    MPI_Op_create(&half_op<DT, static_cast<int>(ReduceOp::kMax)>, 1, &ops[3]);
  });
  switch (op) {
    case ReduceOp::kSum:
      return ops[0];
    case ReduceOp::kProduct:
      return ops[1];
    case ReduceOp::kMin:
      return ops[2];
    default:
      return ops[3];
  }
}

MPI_Op mpi_op(DType dt, ReduceOp op) {
  if (dt == DType::kFloat16) return half_mpi_op<static_cast<int>(DType::kFloat16)>(op);
  if (dt == DType::kBFloat16) return half_mpi_op<static_cast<int>(DType::kBFloat16)>(op);
  if (dt == DType::kBool) {
    switch (op) {
      case ReduceOp::kMax:
      case ReduceOp::kBor:
        return MPI_LOR;
      case ReduceOp::kBxor:
        return MPI_LXOR;
      default:
        return MPI_LAND;  // min, band
    }
  }
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kProduct:
      return MPI_PROD;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kBand:
      return MPI_BAND;
    case ReduceOp::kBor:
      return MPI_BOR;
    case ReduceOp::kBxor:
      return MPI_BXOR;
    case ReduceOp::kAvg:
      break;
  }
  ANVIL_INTERNAL_ASSERT(false, "mpi_op called with avg");
  return MPI_OP_NULL;
}

/// A count that MPI's int arguments can hold.
int as_count(int64_t n, const std::string& where) {
  if (n > INT_MAX)
    throw Error("message too large for one MPI call", where, str("<= ", INT_MAX, " elements/bytes"),
                std::to_string(n));
  return static_cast<int>(n);
}

/// Polls a request until done or the timeout; returns its status.
MPI_Status poll_request(MPI_Request& req, Millis timeout, const std::string& where) {
  const auto deadline = Clock::now() + timeout;
  MPI_Status st{};
  int flag = 0;
  auto pause = std::chrono::microseconds(1);
  while (true) {
    check(MPI_Test(&req, &flag, &st), "MPI_Test", where);
    if (flag) return st;
    if (Clock::now() >= deadline)
      throw Error(str("did not complete within ", timeout.count(), " ms"), where,
                  "the peer to post the matching operation", "no match");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
}

}  // namespace

std::shared_ptr<ProcessGroup> make_mpi_world(int rank, int size, GroupOptions options) {
  ensure_mpi();
  g_finalize_timeout_ms = static_cast<int64_t>(options.timeout.count());
  auto comm = std::make_unique<MpiProcessGroup::Comm>();
  check(MPI_Comm_dup(MPI_COMM_WORLD, &comm->comm), "MPI_Comm_dup", "dist mpi world");
  MPI_Comm_set_errhandler(comm->comm, MPI_ERRORS_RETURN);
  int r = 0, s = 0;
  MPI_Comm_rank(comm->comm, &r);
  MPI_Comm_size(comm->comm, &s);
  if ((rank >= 0 && rank != r) || (size >= 0 && size != s))
    throw Error("rank/size disagree with MPI's", "dist mpi world",
                str("rank ", r, " of ", s, " (from MPI)"), str("rank ", rank, " of ", size));
  return std::make_shared<MpiProcessGroup>(std::move(comm), r, s, std::vector<int>{}, options);
}

MpiProcessGroup::MpiProcessGroup(std::unique_ptr<Comm> comm, int rank, int size,
                                 std::vector<int> global_ranks, GroupOptions options)
    : HostProcessGroup(rank, size, std::move(global_ranks), options), comm_(std::move(comm)) {}

MpiProcessGroup::~MpiProcessGroup() {
  stop_threads();
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && !g_mpi_failed && comm_ && comm_->comm != MPI_COMM_NULL) MPI_Comm_free(&comm_->comm);
}

namespace {
/// Bytes per MPI call of all_reduce and broadcast: larger messages go in pieces of this size
/// (ANVIL_MPI_CHUNK_BYTES; default 4 MiB). Open MPI's shared-memory all_reduce loses most of its
/// bandwidth on single messages beyond ~16 MiB, and pieces also lift the 2^31 count limit.
int64_t chunk_bytes() {
  static const int64_t v = [] {
    const char* e = std::getenv("ANVIL_MPI_CHUNK_BYTES");
    const long long x = e ? std::atoll(e) : 0;
    return x > 0 ? static_cast<int64_t>(x) : int64_t{4} << 20;
  }();
  return v;
}
}  // namespace

void MpiProcessGroup::run_all_reduce(Tensor& t, ReduceOp op, Millis timeout) {
  const std::string w = where(OpType::kAllReduce, 0);
  Watched guard(str(w, " (waiting on ", peers(), ")"), timeout);
  const int64_t es = static_cast<int64_t>(t.element_size());
  const int64_t n = t.numel(), step = std::max<int64_t>(1, chunk_bytes() / es);
  char* p = static_cast<char*>(t.data_ptr());
  for (int64_t off = 0; off < n; off += step)
    check(MPI_Allreduce(MPI_IN_PLACE, p + off * es, as_count(std::min(step, n - off), w),
                        mpi_type(t.dtype()), mpi_op(t.dtype(), op), comm_->comm),
          "MPI_Allreduce", w);
}

void MpiProcessGroup::run_all_gather(Tensor& out, const Tensor& in, Millis timeout) {
  const std::string w = where(OpType::kAllGather, 0);
  Watched guard(str(w, " (waiting on ", peers(), ")"), timeout);
  const int n = as_count(static_cast<int64_t>(in.nbytes()), w);
  check(MPI_Allgather(in.data_ptr(), n, MPI_BYTE, out.data_ptr(), n, MPI_BYTE, comm_->comm),
        "MPI_Allgather", w);
}

void MpiProcessGroup::run_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op,
                                         Millis timeout) {
  const std::string w = where(OpType::kReduceScatter, 0);
  Watched guard(str(w, " (waiting on ", peers(), ")"), timeout);
  check(MPI_Reduce_scatter_block(in.data_ptr(), out.data_ptr(), as_count(out.numel(), w),
                                 mpi_type(in.dtype()), mpi_op(in.dtype(), op), comm_->comm),
        "MPI_Reduce_scatter_block", w);
}

void MpiProcessGroup::run_all_to_all(Tensor& out, const Tensor& in,
                                     const std::vector<int64_t>& out_counts,
                                     const std::vector<int64_t>& in_counts, Millis timeout) {
  const std::string w = where(OpType::kAllToAll, 0);
  const int64_t es = static_cast<int64_t>(in.element_size());
  std::vector<int> sc(in_counts.size()), sd(in_counts.size()), rc(out_counts.size()),
      rd(out_counts.size());
  int64_t so = 0, ro = 0;
  for (size_t j = 0; j < in_counts.size(); ++j) {
    sc[j] = as_count(in_counts[j] * es, w);
    sd[j] = as_count(so, w);
    so += in_counts[j] * es;
    rc[j] = as_count(out_counts[j] * es, w);
    rd[j] = as_count(ro, w);
    ro += out_counts[j] * es;
  }
  Watched guard(str(w, " (waiting on ", peers(), ")"), timeout);
  check(MPI_Alltoallv(in.data_ptr(), sc.data(), sd.data(), MPI_BYTE, out.data_ptr(), rc.data(),
                      rd.data(), MPI_BYTE, comm_->comm),
        "MPI_Alltoallv", w);
}

void MpiProcessGroup::run_reduce(Tensor& t, ReduceOp op, int root, Millis timeout) {
  const std::string w = where(OpType::kReduce, 0);
  Watched guard(str(w, " (waiting on ", peers(), ")"), timeout);
  const int64_t es = static_cast<int64_t>(t.element_size());
  const int64_t n = t.numel(), step = std::max<int64_t>(1, chunk_bytes() / es);
  char* p = static_cast<char*>(t.data_ptr());
  const bool is_root = rank() == root;
  for (int64_t off = 0; off < n; off += step) {
    void* chunk = p + off * es;
    // The root reduces in place; the others only send (their receive buffer is unused).
    check(MPI_Reduce(is_root ? MPI_IN_PLACE : chunk, is_root ? chunk : nullptr,
                     as_count(std::min(step, n - off), w), mpi_type(t.dtype()),
                     mpi_op(t.dtype(), op), root, comm_->comm),
          "MPI_Reduce", w);
  }
}

void MpiProcessGroup::run_broadcast(Tensor& t, int src, Millis timeout) {
  const std::string w = where(OpType::kBroadcast, 0);
  Watched guard(str(w, " (waiting on ", peers(), ")"), timeout);
  const int64_t n = static_cast<int64_t>(t.nbytes()), step = chunk_bytes();
  char* p = static_cast<char*>(t.data_ptr());
  for (int64_t off = 0; off < n; off += step)
    check(MPI_Bcast(p + off, as_count(std::min(step, n - off), w), MPI_BYTE, src, comm_->comm),
          "MPI_Bcast", w);
}

void MpiProcessGroup::run_barrier(Millis timeout) {
  const std::string w = where(OpType::kBarrier, 0);
  Watched guard(str(w, " (waiting on ", peers(), ")"), timeout);
  check(MPI_Barrier(comm_->comm), "MPI_Barrier", w);
}

namespace {
int check_tag(int tag, const std::string& where) {
  if (tag > 32767)
    throw Error("tag too large for MPI", where, "0 <= tag <= 32767 (MPI_TAG_UB minimum)",
                std::to_string(tag));
  return tag;
}
}  // namespace

HostProcessGroup::P2PWaiter MpiProcessGroup::post_send(const Tensor& t, int dst, int tag) {
  const std::string w = where(OpType::kSend, 0);
  auto req = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  check(MPI_Isend(t.data_ptr(), as_count(static_cast<int64_t>(t.nbytes()), w), MPI_BYTE, dst,
                  check_tag(tag, w), comm_->comm, req.get()),
        "MPI_Isend", w);
  Tensor keep = t;
  return [req, keep, dst, w = str(w, " (waiting on ", peers(dst), ")")](Millis timeout) {
    poll_request(*req, timeout, w);
    return dst;
  };
}

HostProcessGroup::P2PWaiter MpiProcessGroup::post_recv(Tensor& t, int src, int tag) {
  const std::string w = where(OpType::kRecv, 0);
  auto req = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  check(MPI_Irecv(t.data_ptr(), as_count(static_cast<int64_t>(t.nbytes()), w), MPI_BYTE, src,
                  check_tag(tag, w), comm_->comm, req.get()),
        "MPI_Irecv", w);
  Tensor keep = t;
  return [req, keep, w = str(w, " (waiting on ", peers(src), ")")](Millis timeout) {
    const MPI_Status st = poll_request(*req, timeout, w);
    return st.MPI_SOURCE;
  };
}

HostProcessGroup::P2PWaiter MpiProcessGroup::post_recv_any(Tensor& t, int tag) {
  const std::string w = where(OpType::kRecvAnySource, 0);
  auto req = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  check(MPI_Irecv(t.data_ptr(), as_count(static_cast<int64_t>(t.nbytes()), w), MPI_BYTE,
                  MPI_ANY_SOURCE, check_tag(tag, w), comm_->comm, req.get()),
        "MPI_Irecv (any source)", w);
  Tensor keep = t;
  return [req, keep, w](Millis timeout) {
    const MPI_Status st = poll_request(*req, timeout, w);
    return st.MPI_SOURCE;
  };
}

std::shared_ptr<ProcessGroup> MpiProcessGroup::make_subgroup(const std::vector<int>& members,
                                                             const std::string& name) {
  const auto [my, globals] = member_ranks(members);
  auto comm = std::make_unique<Comm>();
  const std::string w = str("mpi new_subgroup '", name, "'");
  // MPI_Comm_split is collective over this group's communicator: run it in queue order.
  // (color and key as plain locals: clang 14 cannot capture a structured binding)
  const int color = my >= 0 ? 0 : MPI_UNDEFINED, key = my >= 0 ? my : 0;
  run_in_order(
      [&] { check(MPI_Comm_split(comm_->comm, color, key, &comm->comm), "MPI_Comm_split", w); },
      OpType::kBarrier);
  if (my < 0 || comm->comm == MPI_COMM_NULL) return nullptr;
  MPI_Comm_set_errhandler(comm->comm, MPI_ERRORS_RETURN);
  return std::make_shared<MpiProcessGroup>(std::move(comm), my, static_cast<int>(members.size()),
                                           globals, options());
}

}  // namespace anvil::dist
