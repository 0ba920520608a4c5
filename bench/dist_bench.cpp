// dist_bench: latency and bus bandwidth of anvil's collectives, one process per rank.
//   anvil launch -n 2 -- dist_bench gloo          (torchrun environment)
//   mpirun -n 2 dist_bench mpi
// Prints, on rank 0, one line per (op, size): "op bytes latency_us busbw_GBps". Sizes are the
// message sizes of nccl-tests: all_reduce and broadcast move `bytes` per rank; all_gather's
// output is `bytes` (each rank contributes bytes / W). Bus bandwidth follows nccl-tests:
// all_reduce 2(W-1)/W x bytes/t, all_gather (W-1)/W x bytes/t, broadcast bytes/t.
// `dist_bench BACKEND bucket` measures what bucketing trades instead (bucket_mode below).
// `dist_bench launch N CMD...` starts N ranks of CMD like `anvil launch -n N -- CMD...` (the
// same dist::launch), so the bench needs no other binary. bench/dist_bench.sh runs this and
// torch.distributed side by side.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "dist/launcher.h"
#include "dist/process_group.h"
#include "dist/world.h"

using namespace anvil;
using Clock = std::chrono::steady_clock;

namespace {

/// Seconds per op of `iters` back-to-back synchronous ops (after `warmup`), all ranks aligned
/// by a barrier first.
template <typename Fn>
double time_op(dist::ProcessGroup& pg, int warmup, int iters, Fn&& op) {
  for (int i = 0; i < warmup; ++i) op();
  pg.barrier()->wait();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) op();
  return std::chrono::duration<double>(Clock::now() - t0).count() / iters;
}

/// Iterations for a message of `bytes`: about 0.1-0.4 s of work per cell, at least 10 (fewer
/// made the large cells swing by +-10 % between runs on a shared 2-core machine).
int iters_for(int64_t bytes) {
  if (bytes <= 65536) return 400;
  if (bytes <= (1 << 20)) return 100;
  if (bytes <= (4 << 20)) return 40;
  if (bytes <= (16 << 20)) return 20;
  return 10;
}

/// `dist_bench BACKEND bucket`: what the compiler's bucketing trades. For k = 4 fp32 tensors
/// of `bytes` each, 4 all_reduces posted back to back then waited (the unbucketed program) vs
/// one all_reduce_coalesced of the 4 (the bucketed one). Prints on rank 0, per size:
///   "bucket4 bytes separate_us coalesced_us".
int bucket_mode(dist::ProcessGroup& pg) {
  for (int64_t bytes : {4096, 32768, 131072, 262144, 524288, 1 << 20, 2 << 20, 4 << 20}) {
    std::vector<Tensor> ts;
    for (int i = 0; i < 4; ++i) ts.push_back(Tensor::full({bytes / 4}, 1, DType::kFloat32));
    const int iters = bytes <= 262144 ? 200 : bytes <= (2 << 20) ? 40 : 15;
    const double sep = time_op(pg, 2, iters, [&] {
      std::vector<std::shared_ptr<dist::Work>> ws;
      for (auto& t : ts) ws.push_back(pg.all_reduce(t, dist::ReduceOp::kSum));
      for (auto& w : ws) w->wait();
    });
    const double coal =
        time_op(pg, 2, iters, [&] { pg.all_reduce_coalesced(ts, dist::ReduceOp::kSum)->wait(); });
    if (pg.rank() == 0) {
      std::printf("bucket4 %lld %.2f %.2f\n", static_cast<long long>(bytes), sep * 1e6,
                  coal * 1e6);
      std::fflush(stdout);
    }
  }
  pg.barrier()->wait();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 3 && std::string(argv[1]) == "launch") {
      dist::LaunchOptions o;
      o.nproc_per_node = std::stoi(argv[2]);
      o.command.assign(argv + 3, argv + argc);
      return dist::launch(o);
    }
    const std::string backend = argc > 1 ? argv[1] : "gloo";
    const std::string only = argc > 2 ? argv[2] : "";
    auto pg = dist::init_world_from_env(backend);
    const int W = pg->size();
    if (only == "bucket") return bucket_mode(*pg);
    const std::vector<int64_t> sizes = {8,      64,      512,     4096,     32768,
                                        262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    for (const std::string op : {"all_reduce", "all_gather", "broadcast"}) {
      if (!only.empty() && only != op) continue;
      for (int64_t bytes : sizes) {
        const int64_t n = std::max<int64_t>(1, bytes / 4);
        Tensor buf = Tensor::full({n}, 1, DType::kFloat32);
        Tensor in = Tensor::full({std::max<int64_t>(1, n / W)}, 1, DType::kFloat32);
        Tensor out = Tensor::empty({in.numel() * W}, DType::kFloat32);
        const int iters = iters_for(bytes);
        double t = 0, factor = 1;
        if (op == "all_reduce") {
          t = time_op(*pg, 2, iters, [&] { pg->all_reduce(buf, dist::ReduceOp::kSum)->wait(); });
          factor = 2.0 * (W - 1) / W;
        } else if (op == "all_gather") {
          t = time_op(*pg, 2, iters, [&] { pg->all_gather_into_tensor(out, in)->wait(); });
          factor = static_cast<double>(W - 1) / W;
        } else {
          t = time_op(*pg, 2, iters, [&] { pg->broadcast(buf, 0)->wait(); });
        }
        if (pg->rank() == 0) {
          std::printf("%s %lld %.2f %.4f\n", op.c_str(), static_cast<long long>(bytes), t * 1e6,
                      factor * static_cast<double>(bytes) / t / 1e9);
          std::fflush(stdout);
        }
      }
    }
    pg->barrier()->wait();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_bench: %s\n", e.what());
    return 1;
  }
}
