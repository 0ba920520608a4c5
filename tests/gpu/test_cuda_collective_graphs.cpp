// Spec collectives case 64 on 2 GPUs: a compiled run holding an NCCL all_reduce captured as a
// CUDA graph and replayed. y = x * x; all_reduce(y); silu(x) * y for n in {1024, 2048, 4096}
// (one package, a symbolic n: one graph per shape), five runs each: the first plain, the second
// captured, the rest replays. Every output matches the eager formula and the plain run bit for
// bit, and the group's sequence number rises by 2 per shape, not 5: the replays ran the
// all_reduce from the graph, without the host issuing it again.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "../dist/dist_harness.h"
#include "driver/compile.h"
#include "gpu/gpu_test_util.h"
#include "gpu/nccl_test_util.h"
#include "ir/parser.h"
#include "runtime/model.h"

namespace anvil::dist::test {
namespace {

namespace fs = std::filesystem;
using namespace anvil::nccl_test;

constexpr const char* kCase64 = R"(graph {
  symbols {
    s0 in [1, 8192]
  }
  inputs {
    %x: f32[s0] = user_input
  }
  %y: f32[s0] = aten.mul.Tensor(self=%x, other=%x)
  %ar: f32[s0] = _c10d_functional.all_reduce.default(input=%y, reduce_op="sum", group_name="0")
  %w: f32[s0] = _c10d_functional.wait_tensor.default(tensor=%ar)
  %sx: f32[s0] = aten.silu.default(self=%x)
  %o: f32[s0] = aten.mul.Tensor(self=%sx, other=%w)
  outputs {
    user_output %o
  }
}
)";

double x_of(int rank, int64_t i) { return std::sin(0.01 * static_cast<double>(i) + rank); }

DIST_WORKER(nccl_graph_replays) {
  runtime::ModelOptions mo;
  mo.device = Device::cuda(ctx.rank);
  runtime::Model model = runtime::Model::load(std::getenv("ANVIL_TEST_PACKAGE"), mo);
  ASSERT_TRUE(model.uses_cuda_graphs()) << "a package with collectives runs as CUDA graphs";
  for (int64_t n : {1024, 2048, 4096}) {
    std::vector<float> xv(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) xv[static_cast<size_t>(i)] = static_cast<float>(x_of(ctx.rank, i));
    const Tensor x = Tensor::from_vector(xv, {n}).to(mo.device);
    const uint64_t seq0 = ctx.pg->sequence_number();
    Tensor first;
    for (int run = 0; run < 5; ++run) {
      const Tensor got = model.run({x})[0].to(Device::cpu());
      if (run == 0) first = got;
      double worst = 0;
      for (int64_t i = 0; i < n; ++i) {
        double sum = 0;  // all_reduce(x * x) over the ranks, in fp32 as the GPU adds
        for (int k = 0; k < ctx.world; ++k) {
          const float xk = static_cast<float>(x_of(k, i));
          sum += static_cast<double>(xk * xk);
        }
        const double xi = xv[static_cast<size_t>(i)];
        const double want = xi / (1 + std::exp(-xi)) * sum;
        worst = std::max(worst, std::fabs(got.item_at(i) - want) / std::max(1.0, std::fabs(want)));
        ASSERT_EQ(got.item_at(i), first.item_at(i)) << "n " << n << " run " << run << " at " << i;
      }
      EXPECT_LE(worst, 1e-5) << "n " << n << " run " << run;
    }
    EXPECT_EQ(ctx.pg->sequence_number(), seq0 + 2)
        << "n " << n << ": the plain run and the capture issue the all_reduce; replays do not";
  }
}

TEST(CudaCollectiveGraphs, Case64_AllReduceCapturedAndReplayedOnTwoGpus) {
  ANVIL_REQUIRE_GPU();
  ANVIL_REQUIRE_TWO_GPUS();
  const fs::path dir = gpu_test::out_dir() / "case64";
  fs::create_directories(dir);
  const std::string pkg = (dir / "case64.anvil").string();
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (gpu_test::out_dir() / "cache").string();
  driver::compile_graph(*ir::parse_graph(kCase64), pkg, o);
  const auto r = run_nccl_job("nccl_graph_replays", {{"ANVIL_TEST_PACKAGE", pkg}});
  EXPECT_TRUE(r.ok()) << r.all_output();
}

}  // namespace
}  // namespace anvil::dist::test
