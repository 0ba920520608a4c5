// CUDA graphs and queued runs (runtime/model_graph.cpp, Model::enqueue): a capturable package's
// runs are captured on a shape's second run and replayed after; replays must give exactly what
// plain runs give, across shapes, inputs, constant updates and swaps, and queued runs must give
// what synchronous ones give. Label gpu: skips without a GPU (ANVIL_REQUIRE_GPU=1: fails).
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "codegen/harness.h"
#include "common/check.h"
#include "gpu/gpu_test_util.h"
#include "runtime/model.h"

namespace anvil {
namespace {

using namespace gpu_test;  // NOLINT: the suite's helpers

runtime::Model load_on_gpu(const std::string& pkg, bool graphs, int runners = 1) {
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  mo.cuda_graphs = graphs;
  mo.num_runners = runners;
  return runtime::Model::load(pkg, mo);
}

Tensor on_gpu(const Shape& sizes, uint64_t seed) {
  return testing::random_tensor(sizes, DType::kFloat32, seed).to(Device::cuda(0));
}

void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor x = a[i].to(Device::cpu()), y = b[i].to(Device::cpu());
    ASSERT_EQ(x.sizes(), y.sizes()) << what << " output " << i;
    // the same kernels and cuBLASLt algorithms on the same data: bit for bit
    EXPECT_EQ(x.to_doubles(), y.to_doubles()) << what << " output " << i;
  }
}

TEST(CudaGraphs, ReplaysMatchPlainRunsAcrossShapesAndInputs) {
  ANVIL_REQUIRE_GPU();
  const std::string pkg = compile_cuda(fixture("mlp_dynbatch.pt2"));  // batch s77 in [1, 64]
  const runtime::Model graphed = load_on_gpu(pkg, true), plain = load_on_gpu(pkg, false);
  EXPECT_TRUE(graphed.uses_cuda_graphs());
  EXPECT_FALSE(plain.uses_cuda_graphs());
  uint64_t seed = 1;
  // each batch size: a warm-up run, the capture, then replays with new data each time; batch
  // sizes come back after others (their graph is reused, not captured again)
  for (int64_t batch : {4, 17, 4, 64, 1, 17}) {
    for (int rep = 0; rep < 4; ++rep) {
      const Tensor x = on_gpu({batch, 256}, seed++);
      expect_same(graphed.run({x}), plain.run({x}), "replay");
    }
  }
  // the PyTorch reference, through the graph
  const Tensor x = read_npy(fixture("mlp_dynbatch.in0.npy")).to(Device::cuda(0));
  const Tensor want = read_npy(fixture("mlp_dynbatch.out0.npy"));
  for (int rep = 0; rep < 3; ++rep)
    EXPECT_TRUE(::anvil::test::matches_reference(graphed.run({x})[0].to(Device::cpu()), want));
}

TEST(CudaGraphs, ConstantUpdatesAndSwapsAreSeenByReplays) {
  ANVIL_REQUIRE_GPU();
  const std::string pkg = compile_cuda(fixture("mlp_small.pt2"));
  runtime::Model m = load_on_gpu(pkg, true);
  ASSERT_TRUE(m.uses_cuda_graphs());
  const Tensor x = read_npy(fixture("mlp_small.in0.npy")).to(Device::cuda(0));
  for (int rep = 0; rep < 3; ++rep) m.run({x});  // captured and replayed
  const Tensor before = m.run({x})[0].to(Device::cpu());
  // zero every constant in place: the next replay must not read the old weights
  std::map<std::string, Tensor> zeros, original;
  for (const auto& c : m.constant_specs()) {
    zeros[c.name] = Tensor::zeros(c.sizes, c.dtype);
    original[c.name] = m.constant(c.name);
  }
  m.update_constants(zeros, /*inactive=*/false);
  for (int rep = 0; rep < 3; ++rep)
    for (double v : m.run({x})[0].to(Device::cpu()).to_doubles()) ASSERT_EQ(v, 0.0);
  // the original values through the inactive set and a swap
  m.update_constants(original, /*inactive=*/true);
  m.swap_constants();
  for (int rep = 0; rep < 3; ++rep)
    expect_same({m.run({x})[0]}, {before}, "after the swap back");
}

TEST(CudaGraphs, PackagesWithHostStepsOrHostReadsRunPlainly) {
  ANVIL_REQUIRE_GPU();
  // ops_reductions_more's sort / topk are host steps; aot_63 reads an item on the host. (small_cnn
  // was the first example until its pooling became a CUDA kernel: it now runs as a graph.)
  for (const char* f : {"aot/ops_reductions_more.pt2", "aot/aot_63_item_check.pt2"}) {
    const runtime::Model m = load_on_gpu(compile_cuda(fixture(f)), true);
    EXPECT_FALSE(m.uses_cuda_graphs()) << f;
  }
}

TEST(CudaGraphs, AConvNetWithPoolingRunsAsAGraph) {
  ANVIL_REQUIRE_GPU();
  // small_cnn: cuDNN convolutions and the pooling kernels, no host step
  const runtime::Model m = load_on_gpu(compile_cuda(fixture("small_cnn.pt2")), true);
  EXPECT_TRUE(m.uses_cuda_graphs());
}

TEST(CudaGraphs, QueuedRunsGiveWhatSynchronousRunsGive) {
  ANVIL_REQUIRE_GPU();
  const std::string pkg = compile_cuda(fixture("mlp_dynbatch.pt2"));
  for (bool graphs : {true, false}) {
    const runtime::Model m = load_on_gpu(pkg, graphs, /*runners=*/2);
    std::vector<Tensor> xs;
    std::vector<std::vector<Tensor>> queued;
    for (int i = 0; i < 12; ++i) {
      xs.push_back(on_gpu({i % 3 == 0 ? 8 : 33, 256}, 100 + static_cast<uint64_t>(i)));
      queued.push_back(m.enqueue({xs.back()}));
    }
    m.synchronize();
    for (size_t i = 0; i < xs.size(); ++i) expect_same(queued[i], m.run({xs[i]}), "enqueue");
  }
}

}  // namespace
}  // namespace anvil
