// nccl_bench: anvil's nccl backend (through the ProcessGroup interface) and the raw-NCCL floor,
// one process per GPU, nccl-tests style. bench/nccl_bench.sh runs both and torch.distributed
// (bench/nccl_bench_torch.py) and prints them side by side.
//   nccl_bench [OPTIONS]          anvil's nccl backend: starts 2 ranks of itself (cuda:0, cuda:1)
//   nccl_bench --raw [OPTIONS]    the floor: raw NCCL calls on cudaMalloc'd buffers, same cells
//   nccl_bench launch N CMD...    starts N ranks of CMD with the torchrun environment
//   (dist::launch)
// OPTIONS: --max-bytes B (largest message, default 1 GiB), --ops a,b (default all five),
//          --ranks N (default 2; every rank needs its own GPU).
// Run under a launcher (RANK set) the process is one rank and does not start others.
//
// Cells: all_reduce (sum, in place), all_gather (into tensor), reduce_scatter (tensor, sum),
// all_to_all (single, equal splits), broadcast (root 0, in place); fp32 and bf16; sizes 8 B to
// 1 GiB in powers of 8. `bytes` follows nccl-tests: all_reduce / broadcast / all_to_all: the
// buffer of each rank; all_gather: the output (each rank sends bytes / W); reduce_scatter: the
// input (each rank receives bytes / W). algbw = bytes / t; busbw = algbw x 2(W-1)/W (all_reduce),
// x (W-1)/W (all_gather, reduce_scatter, all_to_all), x 1 (broadcast).
// Modes: `sync` (each call followed by a synchronize of the caller's stream: the per-call
// latency a program that consumes the result on the host sees) and `b2b` (N calls queued on the
// stream, one synchronize at the end: nccl-tests' figure). anvil's ops run on the caller's stream
// through OpOptions::stream and Work::wait_stream. Also `functional_all_reduce` 8 B fp32:
// dist::functional::all_reduce + wait_tensor, with a device synchronize per call (sync) or N
// calls, N waits, one synchronize (b2b).
// Rank 0 prints one line per cell on stdout:
//   ENGINE OP DTYPE BYTES MODE TIME_US ALGBW_GBPS BUSBW_GBPS
// ENGINE is "anvil" or "floor". Before timing, anvil's side checks one small fp32 call of each op
// (and the functional all_reduce) against exact values; a mismatch is printed on stderr, the
// timings still run, and the exit status is 3. Exit status 2 (with a message naming what is
// missing) when the machine has fewer GPUs than ranks, 1 on any other error.
#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/storage.h"
#include "dist/functional.h"
#include "dist/launcher.h"
#include "dist/process_group.h"
#include "dist/tcp_store.h"
#include "dist/world.h"
#include "runtime/device_backend.h"

using namespace anvil;
using Clock = std::chrono::steady_clock;

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) {
    std::string msg = std::string(what) + " failed: " + ncclGetErrorString(r);
    if (const char* last = ncclGetLastError(nullptr); last && *last)
      msg += std::string(" (") + last + ")";
    throw std::runtime_error(msg);
  }
}

/// Thrown when the machine cannot run the bench (too few GPUs): exit status 2.
struct NoGpus : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws NoGpus unless `ranks` CUDA devices are visible.
void require_gpus(int ranks) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    throw NoGpus("needs " + std::to_string(ranks) + " CUDA GPUs (one per rank), but " +
                 "cudaGetDeviceCount failed: " + cudaGetErrorName(e) + " (" +
                 cudaGetErrorString(e) + "): no GPU or no driver on this machine");
  if (n < ranks)
    throw NoGpus("needs " + std::to_string(ranks) + " CUDA GPUs (one per rank), this " +
                 "machine has " + std::to_string(n));
}

struct Options {
  bool raw = false;
  int ranks = 2;
  int64_t max_bytes = int64_t{1} << 30;
  std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                  "broadcast"};
};

/// `v` as an integer >= `lo`, or an Error naming the option.
int64_t integer(const std::string& opt, const std::string& v, int64_t lo) {
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || x < lo)
    throw std::runtime_error(opt + " expects an integer >= " + std::to_string(lo) + ", got '" + v +
                             "'");
  return x;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--raw") {
      o.raw = true;
    } else if (a == "--ranks") {
      o.ranks = static_cast<int>(integer(a, value(), 1));
    } else if (a == "--max-bytes") {
      o.max_bytes = integer(a, value(), 8);
    } else if (a == "--ops") {
      o.ops.clear();
      std::stringstream ss(value());
      for (std::string op; std::getline(ss, op, ',');) {
        if (op != "all_reduce" && op != "all_gather" && op != "reduce_scatter" &&
            op != "all_to_all" && op != "broadcast")
          throw std::runtime_error("unknown op '" + op +
                                   "' (expected all_reduce, all_gather, reduce_scatter, "
                                   "all_to_all, broadcast)");
        o.ops.push_back(op);
      }
    } else {
      throw std::runtime_error("unknown argument '" + a +
                               "' (expected --raw, --ranks N, --max-bytes B, --ops a,b, or "
                               "launch N CMD...)");
    }
  }
  return o;
}

std::vector<int64_t> sizes(int64_t max_bytes) {
  std::vector<int64_t> v;
  for (int64_t b = 8; b <= max_bytes && b <= (int64_t{1} << 30); b *= 8) v.push_back(b);
  return v;
}

/// Timed calls per cell: about the same wall time for small and large messages, few at 1 GiB.
int iters_for(int64_t bytes) {
  if (bytes <= (int64_t{1} << 20)) return 200;
  if (bytes <= (int64_t{16} << 20)) return 50;
  if (bytes <= (int64_t{128} << 20)) return 20;
  return 8;
}
int warmup_for(int64_t bytes) { return bytes >= (int64_t{128} << 20) ? 2 : 5; }

double bus_factor(const std::string& op, int w) {
  if (op == "all_reduce") return 2.0 * (w - 1) / w;
  if (op == "broadcast") return 1.0;
  return static_cast<double>(w - 1) / w;
}

void print_cell(const char* engine, const std::string& op, const char* dtype, int64_t bytes,
                const char* mode, double seconds, int w) {
  const double algbw = static_cast<double>(bytes) / seconds / 1e9;
  std::printf("%s %s %s %lld %s %.3f %.4f %.4f\n", engine, op.c_str(), dtype,
              static_cast<long long>(bytes), mode, seconds * 1e6, algbw, algbw * bus_factor(op, w));
  std::fflush(stdout);
}

/// NCCL_BENCH_PIN=c0,c1,...: local rank i runs its calling thread on CPU ci from here on (after
/// the communicator's set-up, so NCCL's own threads keep their placement). Unset: not pinned.
void pin_from_env(int local_rank) {
  const char* v = std::getenv("NCCL_BENCH_PIN");
  if (!v || !*v) return;
  std::vector<int> cpus;
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ',');)
    cpus.push_back(static_cast<int>(integer("NCCL_BENCH_PIN", item.c_str(), 0)));
  if (local_rank >= static_cast<int>(cpus.size()))
    throw std::runtime_error("NCCL_BENCH_PIN names " + std::to_string(cpus.size()) +
                             " CPUs, local rank " + std::to_string(local_rank) + " has none");
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus[static_cast<size_t>(local_rank)], &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    throw std::runtime_error("NCCL_BENCH_PIN: cannot pin local rank " + std::to_string(local_rank) +
                             " to CPU " + std::to_string(cpus[static_cast<size_t>(local_rank)]));
}

/// Seconds per call: `sync` runs call + synchronize `iters` times; `b2b` runs `iters` calls then
/// one synchronize. `align` lines the ranks up before the clock starts.
double time_calls(int warmup, int iters, bool b2b, const std::function<void()>& call,
                  const std::function<void()>& sync, const std::function<void()>& align) {
  for (int i = 0; i < warmup; ++i) {
    call();
    sync();
  }
  align();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    call();
    if (!b2b) sync();
  }
  if (b2b) sync();
  return std::chrono::duration<double>(Clock::now() - t0).count() / iters;
}

// ---- anvil: the ProcessGroup interface --------------------------------------------------------

/// One small fp32 call of each op against exact values (small integers, exact in fp32): figures
/// of an op that returns wrong data mean nothing. Prints each mismatch on stderr (rank, op, index,
/// value, expected) and returns false when there was one.
bool check_anvil(dist::ProcessGroup& pg, cudaStream_t stream, const dist::OpOptions& opts,
                 const std::vector<std::string>& ops) {
  const int w = pg.size(), r = pg.rank();
  const int64_t k = 4;  // elements per rank block
  auto dev = [&](const std::vector<float>& v) {
    return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}).to(pg.device());
  };
  auto host = [&](const Tensor& t) {
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const Tensor h = t.to(Device::cpu());
    return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
  };
  const float tri = static_cast<float>(w * (w + 1) / 2);  // sum over ranks q of q + 1
  bool ok = true;
  for (const std::string& op : ops) {
    std::vector<float> got, want;
    if (op == "all_reduce") {  // rank q holds q + 1
      Tensor t = dev(std::vector<float>(k * w, static_cast<float>(r + 1)));
      pg.all_reduce(t, dist::ReduceOp::kSum, opts)->wait_stream(stream);
      got = host(t);
      want.assign(k * w, tri);
    } else if (op == "all_gather") {  // block j of the output = rank j's q + 1
      Tensor in = dev(std::vector<float>(k, static_cast<float>(r + 1)));
      Tensor out = dev(std::vector<float>(k * w, 0.f));
      pg.all_gather_into_tensor(out, in, opts)->wait_stream(stream);
      got = host(out);
      for (int j = 0; j < w; ++j) want.insert(want.end(), k, static_cast<float>(j + 1));
    } else if (op == "reduce_scatter") {  // rank q's block j = (q + 1)(j + 1)
      std::vector<float> v;
      for (int j = 0; j < w; ++j) v.insert(v.end(), k, static_cast<float>((r + 1) * (j + 1)));
      Tensor in = dev(v);
      Tensor out = dev(std::vector<float>(k, 0.f));
      pg.reduce_scatter_tensor(out, in, dist::ReduceOp::kSum, opts)->wait_stream(stream);
      got = host(out);
      want.assign(k, tri * static_cast<float>(r + 1));
    } else if (op == "all_to_all") {  // rank q's block j = 10 q + j goes to rank j
      std::vector<float> v;
      for (int j = 0; j < w; ++j) v.insert(v.end(), k, static_cast<float>(10 * r + j));
      Tensor in = dev(v);
      Tensor out = dev(std::vector<float>(k * w, 0.f));
      pg.all_to_all_single(out, in, {}, {}, opts)->wait_stream(stream);
      got = host(out);
      for (int j = 0; j < w; ++j) want.insert(want.end(), k, static_cast<float>(10 * j + r));
    } else {  // broadcast from rank 0 (q + 1 = 1)
      Tensor t = dev(std::vector<float>(k, static_cast<float>(r + 1)));
      pg.broadcast(t, 0, opts)->wait_stream(stream);
      got = host(t);
      want.assign(k, 1.f);
    }
    for (size_t i = 0; i < want.size(); ++i) {
      if (i < got.size() && got[i] == want[i]) continue;
      std::fprintf(stderr, "nccl_bench: rank %d: %s fp32 check: element %zu is %g, expected %g\n",
                   r, op.c_str(), i, i < got.size() ? static_cast<double>(got[i]) : -1.0,
                   static_cast<double>(want[i]));
      ok = false;
      break;
    }
  }
  {  // the functional all_reduce: a new tensor, the input untouched
    Tensor x = dev(std::vector<float>(2, static_cast<float>(r + 1)));
    const Tensor y = dist::functional::all_reduce(x, dist::ReduceOp::kSum, "0");
    dist::functional::wait_tensor(y);
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const std::vector<float> got = host(y), in = host(x);
    if (got != std::vector<float>(2, tri) ||
        in != std::vector<float>(2, static_cast<float>(r + 1))) {
      std::fprintf(stderr,
                   "nccl_bench: rank %d: functional all_reduce check: got {%g, %g} "
                   "(input now {%g, %g}), expected {%g, %g} (input {%d, %d})\n",
                   r, static_cast<double>(got.at(0)), static_cast<double>(got.at(1)),
                   static_cast<double>(in.at(0)), static_cast<double>(in.at(1)),
                   static_cast<double>(tri), static_cast<double>(tri), r + 1, r + 1);
      ok = false;
    }
  }
  return ok;
}

int run_anvil(const Options& o) {
  const dist::WorldEnv env = dist::read_world_env();
  require_gpus(env.local_world_size);
  cuda_check(cudaSetDevice(env.local_rank), "cudaSetDevice");
  runtime::device_backend(Device::Type::kCUDA);  // loads libanvil_cuda.so: device tensors
  auto pg = dist::init_world_from_env("nccl");
  const int w = pg->size();
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  dist::OpOptions opts;
  opts.stream = stream;
  auto sync = [&] { cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); };
  auto align = [&] { pg->barrier()->wait(); };
  const bool checked = check_anvil(*pg, stream, opts, o.ops);
  pin_from_env(env.local_rank);
  auto on_gpu = [&](int64_t n, DType dt) {
    return Tensor::full({std::max<int64_t>(n, 1)}, 1, dt).to(pg->device());
  };
  for (const std::string& op : o.ops) {
    for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
      const char* dname = dt == DType::kFloat32 ? "fp32" : "bf16";
      const int64_t esize = dt == DType::kFloat32 ? 4 : 2;
      for (int64_t bytes : sizes(o.max_bytes)) {
        const int64_t n = bytes / esize;
        if (n % w != 0) continue;  // not divisible over the ranks (8 B fp32 on 4 ranks)
        Tensor a, b;
        std::function<void()> call;
        if (op == "all_reduce") {
          a = on_gpu(n, dt);
          call = [&] { pg->all_reduce(a, dist::ReduceOp::kSum, opts)->wait_stream(stream); };
        } else if (op == "all_gather") {
          a = on_gpu(n / w, dt);
          b = on_gpu(n, dt);
          call = [&] { pg->all_gather_into_tensor(b, a, opts)->wait_stream(stream); };
        } else if (op == "reduce_scatter") {
          a = on_gpu(n, dt);
          b = on_gpu(n / w, dt);
          call = [&] {
            pg->reduce_scatter_tensor(b, a, dist::ReduceOp::kSum, opts)->wait_stream(stream);
          };
        } else if (op == "all_to_all") {
          a = on_gpu(n, dt);
          b = on_gpu(n, dt);
          call = [&] { pg->all_to_all_single(b, a, {}, {}, opts)->wait_stream(stream); };
        } else {
          a = on_gpu(n, dt);
          call = [&] { pg->broadcast(a, 0, opts)->wait_stream(stream); };
        }
        for (bool b2b : {false, true}) {
          const double t = time_calls(warmup_for(bytes), iters_for(bytes), b2b, call, sync, align);
          if (pg->rank() == 0) print_cell("anvil", op, dname, bytes, b2b ? "b2b" : "sync", t, w);
        }
      }
    }
  }
  // functional all_reduce + wait_tensor, 8 B fp32, on the legacy default stream (functional ops
  // take no stream): a device synchronize after each (sync), or N ops, N waits, one (b2b).
  {
    Tensor x = on_gpu(2, DType::kFloat32);
    auto dsync = [] { cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); };
    const int iters = iters_for(8);
    double fn_parts[3] = {0, 0, 0};  // post, wait_tensor, synchronize (the sync cell)
    for (bool b2b : {false, true}) {
      for (int i = 0; i < warmup_for(8); ++i)
        dist::functional::wait_tensor(dist::functional::all_reduce(x, dist::ReduceOp::kSum, "0"));
      dsync();
      align();
      const auto t0 = Clock::now();
      if (b2b) {
        std::vector<Tensor> outs;
        for (int i = 0; i < iters; ++i)
          outs.push_back(dist::functional::all_reduce(x, dist::ReduceOp::kSum, "0"));
        for (const Tensor& t : outs) dist::functional::wait_tensor(t);
        dsync();
      } else {
        for (int i = 0; i < iters; ++i) {
          const auto a = Clock::now();
          Tensor y = dist::functional::all_reduce(x, dist::ReduceOp::kSum, "0");
          const auto b = Clock::now();
          dist::functional::wait_tensor(y);
          const auto c = Clock::now();
          dsync();
          const auto d = Clock::now();
          fn_parts[0] += std::chrono::duration<double>(b - a).count();
          fn_parts[1] += std::chrono::duration<double>(c - b).count();
          fn_parts[2] += std::chrono::duration<double>(d - c).count();
        }
      }
      const double t = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
      if (pg->rank() == 0)
        print_cell("anvil", "functional_all_reduce", "fp32", 8, b2b ? "b2b" : "sync", t, w);
    }
    // the synchronized functional cell's time per call, in its three steps (each rank's own:
    // rank 0 prints; a late peer shows in the synchronize)
    if (pg->rank() == 0) {
      const char* names[3] = {"part_fn_post", "part_fn_wait_tensor", "part_fn_dsync"};
      for (int k = 0; k < 3; ++k)
        print_cell("anvil", names[k], "fp32", 8, "sync", fn_parts[k] / iters, w);
    }
    // NCCL_BENCH_PARTS=1: where the functional all_reduce's time goes, 8 B fp32, each part
    // alone (sync: a device synchronize after each call; b2b: one at the end):
    //   part_alloc          an 8 B device tensor made and dropped (the functional op's output)
    //   part_ar_legacy      pg->all_reduce with no stream (the legacy default stream), host wait
    //   part_ar_into_legacy pg->all_reduce_into into a tensor made once, no stream, host wait
    //   part_ar_stream      pg->all_reduce on the bench's stream, host wait (not wait_stream)
    //   part_ar_stream_ssync   the same, the bench's stream synchronized (not the device)
    //   part_ar_stream_wait_dsync  pg->all_reduce on the bench's stream, wait_stream, device
    //                       synchronize (the all_reduce cell with the functional cell's sync)
    //   part_ar_into_nowait all_reduce_into with no stream, no wait (the Work dropped; its
    //                       event stays pending in the group until the device passed it)
    const char* parts = std::getenv("NCCL_BENCH_PARTS");
    if (parts && std::string(parts) == "1") {
      Tensor out = on_gpu(2, DType::kFloat32);
      dist::OpOptions none;
      struct Cell {
        const char* name;
        std::function<void()> call;
        std::function<void()> sync;  // after each call (sync) or the last (b2b)
      };
      const std::vector<Cell> cells = {
          {"part_alloc", [&] { (void)Storage::allocate(8, pg->device(), /*zero=*/false); }, dsync},
          {"part_ar_legacy", [&] { pg->all_reduce(x, dist::ReduceOp::kSum, none)->wait(); }, dsync},
          {"part_ar_into_legacy",
           [&] { pg->all_reduce_into(out, x, dist::ReduceOp::kSum, none)->wait(); }, dsync},
          {"part_ar_stream", [&] { pg->all_reduce(x, dist::ReduceOp::kSum, opts)->wait(); }, dsync},
          {"part_ar_stream_ssync", [&] { pg->all_reduce(x, dist::ReduceOp::kSum, opts)->wait(); },
           sync},
          {"part_ar_stream_wait_dsync",
           [&] { pg->all_reduce(x, dist::ReduceOp::kSum, opts)->wait_stream(stream); }, dsync},
          {"part_ar_into_nowait",
           [&] { (void)pg->all_reduce_into(out, x, dist::ReduceOp::kSum, none); }, dsync}};
      for (const Cell& c : cells)
        for (bool b2b : {false, true}) {
          const double t = time_calls(warmup_for(8), iters, b2b, c.call, c.sync, align);
          if (pg->rank() == 0) print_cell("anvil", c.name, "fp32", 8, b2b ? "b2b" : "sync", t, w);
        }
    }
  }
  pg->barrier()->wait();
  cuda_check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  if (!checked) {
    std::fprintf(stderr,
                 "nccl_bench: an op of anvil's nccl backend returned wrong values (above): "
                 "its figures are not meaningful\n");
    return 3;
  }
  return 0;
}

// ---- the floor: raw NCCL ----------------------------------------------------------------------

/// Device memory freed on scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(int64_t bytes) {
    cuda_check(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))), "cudaMalloc");
    cuda_check(cudaMemset(p, 0, static_cast<size_t>(std::max<int64_t>(bytes, 1))), "cudaMemset");
  }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

int run_raw(const Options& o) {
  const dist::WorldEnv env = dist::read_world_env();
  require_gpus(env.local_world_size);
  cuda_check(cudaSetDevice(env.local_rank), "cudaSetDevice");
  const int rank = env.rank, w = env.world_size;
  if (env.master_addr.empty() || env.master_port < 0)
    throw std::runtime_error(
        "--raw: MASTER_ADDR / MASTER_PORT not set (run it "
        "without RANK set, or under a launcher)");
  // the unique id through a TCP store hosted by rank 0 (as the nccl backend does)
  dist::TCPStore store(env.master_addr, env.master_port, rank == 0, std::chrono::seconds(60));
  ncclUniqueId id;
  if (rank == 0) {
    nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    store.set("nccl_bench/id", std::string(reinterpret_cast<const char*>(&id), sizeof id));
  } else {
    const std::string s = store.get("nccl_bench/id");
    if (s.size() != sizeof id)
      throw std::runtime_error("--raw: the unique id from rank 0 has " + std::to_string(s.size()) +
                               " bytes, expected " + std::to_string(sizeof id));
    std::copy(s.begin(), s.end(), reinterpret_cast<char*>(&id));
  }
  ncclComm_t comm = nullptr;
  nccl_check(ncclCommInitRank(&comm, w, id, rank), "ncclCommInitRank");
  pin_from_env(env.local_rank);
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  auto sync = [&] { cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); };
  DeviceBuffer one(4);
  auto align = [&] {
    nccl_check(ncclAllReduce(one.p, one.p, 1, ncclFloat32, ncclSum, comm, stream),
               "ncclAllReduce (align)");
    sync();
  };
  for (const std::string& op : o.ops) {
    for (ncclDataType_t dt : {ncclFloat32, ncclBfloat16}) {
      const char* dname = dt == ncclFloat32 ? "fp32" : "bf16";
      const int64_t esize = dt == ncclFloat32 ? 4 : 2;
      for (int64_t bytes : sizes(o.max_bytes)) {
        const int64_t n = bytes / esize;
        if (n % w != 0) continue;
        const size_t chunk = static_cast<size_t>(n / w);  // elements per rank block
        DeviceBuffer a(bytes), b(op == "all_reduce" || op == "broadcast" ? 0 : bytes);
        std::function<void()> call;
        if (op == "all_reduce") {
          call = [&] {
            nccl_check(ncclAllReduce(a.p, a.p, static_cast<size_t>(n), dt, ncclSum, comm, stream),
                       "ncclAllReduce");
          };
        } else if (op == "all_gather") {
          call = [&] {
            nccl_check(ncclAllGather(a.p, b.p, chunk, dt, comm, stream), "ncclAllGather");
          };
        } else if (op == "reduce_scatter") {
          call = [&] {
            nccl_check(ncclReduceScatter(a.p, b.p, chunk, dt, ncclSum, comm, stream),
                       "ncclReduceScatter");
          };
        } else if (op == "all_to_all") {
          call = [&] {
            nccl_check(ncclGroupStart(), "ncclGroupStart");
            for (int j = 0; j < w; ++j) {
              const size_t off = static_cast<size_t>(j) * chunk * static_cast<size_t>(esize);
              nccl_check(ncclSend(static_cast<char*>(a.p) + off, chunk, dt, j, comm, stream),
                         "ncclSend");
              nccl_check(ncclRecv(static_cast<char*>(b.p) + off, chunk, dt, j, comm, stream),
                         "ncclRecv");
            }
            nccl_check(ncclGroupEnd(), "ncclGroupEnd");
          };
        } else {
          call = [&] {
            nccl_check(ncclBroadcast(a.p, a.p, static_cast<size_t>(n), dt, 0, comm, stream),
                       "ncclBroadcast");
          };
        }
        for (bool b2b : {false, true}) {
          const double t = time_calls(warmup_for(bytes), iters_for(bytes), b2b, call, sync, align);
          if (rank == 0) print_cell("floor", op, dname, bytes, b2b ? "b2b" : "sync", t, w);
        }
      }
    }
  }
  align();
  nccl_check(ncclCommDestroy(comm), "ncclCommDestroy");
  cuda_check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return 0;
}

/// This binary's own path (for starting the ranks).
std::string self_path(const char* argv0) {
  std::vector<char> buf(PATH_MAX + 1, '\0');
  const ssize_t len = readlink("/proc/self/exe", buf.data(), PATH_MAX);
  return len > 0 ? std::string(buf.data(), static_cast<size_t>(len)) : std::string(argv0);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::string(argv[1]) == "launch") {
      if (argc < 4) throw std::runtime_error("launch: expected launch N CMD...");
      dist::LaunchOptions lo;
      lo.nproc_per_node = static_cast<int>(integer("launch N", argv[2], 1));
      lo.command.assign(argv + 3, argv + argc);
      return dist::launch(lo);
    }
    const Options o = parse(argc, argv);
    if (std::getenv("RANK") == nullptr) {
      // not under a launcher: check the GPUs here (a clear message, no ranks started), then
      // start o.ranks ranks of this binary with the same arguments
      require_gpus(o.ranks);
      setenv("ANVIL_DIST_TIMEOUT", "120", 0);  // a lost peer fails in 2 minutes, never hangs
      dist::LaunchOptions lo;
      lo.nproc_per_node = o.ranks;
      lo.command.push_back(self_path(argv[0]));
      lo.command.insert(lo.command.end(), argv + 1, argv + argc);
      return dist::launch(lo);
    }
    return o.raw ? run_raw(o) : run_anvil(o);
  } catch (const NoGpus& e) {
    std::fprintf(stderr, "nccl_bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_bench: %s\n", e.what());
    return 1;
  }
}
