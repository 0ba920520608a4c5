// Compiled collectives on GPUs (issue 15, compiled TP graphs across 2 GPUs): the tensor-parallel
// fixtures compiled for cuda-sm90 run under `anvil launch -n 2 -- anvil run --backend nccl`, each
// rank on its GPU (cuda:LOCAL_RANK) with its all_reduce on NCCL ordered on the run's stream, and
// every rank's output matches the interpreter's (a 1-rank world's result times the world size,
// every rank feeding the same input; sp_block: against the CPU package on gloo). Needs 2 GPUs
// (ANVIL_REQUIRE_GPU=2 makes a skip a failure).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "../dist/compiled_util.h"
#include "../dist/dist_harness.h"
#include "common/check.h"
#include "core/npy.h"
#include "driver/compile.h"
#include "gpu/gpu_test_util.h"
#include "gpu/nccl_test_util.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

/// Same deterministic input on every rank.
Tensor input_of(const Shape& sizes) {
  std::vector<float> xv;
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  for (int64_t i = 0; i < n; ++i) xv.push_back(static_cast<float>(std::sin(0.37 * i)));
  return Tensor::from_vector(xv, sizes);
}

/// The CLI: the build's, else the one beside this test binary (gpu_bundle/bin on the GPU machine).
std::string cli() {
  if (fs::exists(ANVIL_CLI)) return ANVIL_CLI;
  return (fs::read_symlink("/proc/self/exe").parent_path() / "anvil").string();
}

/// Runs `pkg` on 2 ranks under `anvil launch` with `backend`; returns each rank's out0.
std::vector<Tensor> launch_two(const std::string& pkg, const std::string& backend,
                               const Tensor& x, const std::string& tag) {
  const fs::path dir = gpu_test::out_dir() / tag;
  fs::create_directories(dir);
  write_npy((dir / "x.npy").string(), x);
  bool timed_out = false;
  const auto r = dist::test::run_command(
      {cli(), "launch", "-n", "2", "--", cli(), "run", pkg, "-i", (dir / "x.npy").string(),
       "-o", (dir / "out").string(), "--backend", backend, "-q"},
      {{"ANVIL_DIST_TIMEOUT", "60"}, {"NCCL_NVLS_ENABLE", "0"},
       {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"}, {"NVSHMEM_DISABLE_NVLS", "1"}},
      std::chrono::milliseconds(120000), &timed_out);
  EXPECT_FALSE(timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<Tensor> outs;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string f = (dir / "out" / ("rank" + std::to_string(rank)) / "out0.npy").string();
    if (!fs::exists(f)) {
      ADD_FAILURE() << f << " missing\n" << r.output;
      return {};
    }
    outs.push_back(read_npy(f));
  }
  return outs;
}

TEST(CudaCollectives, TpMlpAllReduceOnTwoGpus) {
  ANVIL_REQUIRE_GPU();
  ANVIL_REQUIRE_TWO_GPUS();
  const Tensor x = input_of({4, 64});
  const auto got = launch_two(gpu_test::compile_cuda(gpu_test::fixture("tp_mlp_allreduce.pt2")),
                              "nccl", x, "tp_mlp_nccl");
  ASSERT_EQ(got.size(), 2u);
  const Tensor want = dist::test::world_scaled_reference("tp_mlp_allreduce", x, 2);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(::anvil::test::matches_reference(got[static_cast<size_t>(rank)], want))
        << "rank " << rank;
}

TEST(CudaCollectives, TpOverlapOnTwoGpusMatchesTheCpuPackageOnGloo) {
  // all_reduce(a(x)) + b(x), its wait placed after branch b's kernels: the GPU ranks on NCCL
  // against the CPU package on gloo (itself checked against the interpreter in test_dist)
  ANVIL_REQUIRE_GPU();
  ANVIL_REQUIRE_TWO_GPUS();
  const Tensor x = input_of({16, 64});
  const std::string pt2 = gpu_test::fixture("tp_overlap.pt2");
  driver::CompileOptions o;
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (gpu_test::out_dir() / "cache").string();
  const std::string cpu_pkg = (gpu_test::out_dir() / "tp_overlap_cpu.anvil").string();
  driver::compile_pt2(pt2, cpu_pkg, o);
  const auto want = launch_two(cpu_pkg, "gloo", x, "tp_overlap_gloo");
  const auto got = launch_two(gpu_test::compile_cuda(pt2), "nccl", x, "tp_overlap_nccl");
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  for (size_t rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(::anvil::test::matches_reference(got[rank], want[rank])) << "rank " << rank;
}

TEST(CudaCollectives, SpBlockOnTwoGpusMatchesTheCpuPackageOnGloo) {
  // sequence parallelism: a bucketed fp32 + bf16 all_gather (one grouped NCCL call), a bucketed
  // reduce_scatter pair, an all_to_all_single and a dependent all_gather, on NCCL against the CPU
  // package on gloo (itself checked against the interpreter in test_dist); both outputs
  ANVIL_REQUIRE_GPU();
  ANVIL_REQUIRE_TWO_GPUS();
  const Tensor x = input_of({4, 16});
  const std::string pt2 = gpu_test::fixture("sp_block.pt2");
  driver::CompileOptions o;
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (gpu_test::out_dir() / "cache").string();
  const std::string cpu_pkg = (gpu_test::out_dir() / "sp_block_cpu.anvil").string();
  driver::compile_pt2(pt2, cpu_pkg, o);
  const auto want = launch_two(cpu_pkg, "gloo", x, "sp_block_gloo");
  const auto got = launch_two(gpu_test::compile_cuda(pt2), "nccl", x, "sp_block_nccl");
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  for (size_t rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(::anvil::test::matches_reference(got[rank], want[rank])) << "rank " << rank;
    const std::string sub = "out/rank" + std::to_string(rank) + "/out1.npy";
    const fs::path g1 = gpu_test::out_dir() / "sp_block_nccl" / sub;
    const fs::path w1 = gpu_test::out_dir() / "sp_block_gloo" / sub;
    ASSERT_TRUE(fs::exists(g1) && fs::exists(w1)) << g1 << " / " << w1;
    EXPECT_TRUE(::anvil::test::matches_reference(read_npy(g1.string()), read_npy(w1.string())))
        << "rank " << rank << " output 1";
  }
}

}  // namespace
}  // namespace anvil
