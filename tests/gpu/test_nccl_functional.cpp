// Functional collectives (dist/functional.h) on GPU tensors with the nccl backend, 2 ranks on 2
// GPUs: outputs on the input's GPU, exact values, inputs untouched by out-of-place ops,
// wait_tensor and AsyncTensor, and the host-only rearrangements refused for device tensors.
#include "../dist/dist_check.h"
#include "../dist/dist_harness.h"
#include "core/allocator.h"
#include "dist/functional.h"
#include "nccl_test_util.h"

namespace anvil::dist::test {
namespace {

namespace F = ::anvil::dist::functional;
using namespace anvil::nccl_test;

DIST_WORKER(nccl_functional) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank;
  const Device gpu = Device::cuda(r);
  // all_reduce: a new tensor on the GPU; the input keeps its values
  Tensor x = on_gpu(scaled({1, 2, 3}, r + 1, DType::kFloat32), pg);
  Tensor y = F::all_reduce(x, "sum", "0");
  EXPECT_EQ(y.device(), gpu);
  EXPECT_NE(y.storage(), x.storage());
  F::wait_tensor(y);
  EXPECT_TRUE(values_equal(on_host(y), {3, 6, 9}));
  EXPECT_TRUE(values_equal(on_host(x), {r + 1.0, 2 * (r + 1.0), 3 * (r + 1.0)}));
  // the input may be written on the caller's stream right after the call: the op's copy of it
  // is queued there first (4 M floats, so the op is still in flight when the zeroing runs); a
  // small op (4 K floats, at most ANVIL_NCCL_CALLER_STREAM_BYTES) runs on the caller's stream
  // itself and reads the input before anything queued there later
  for (const int64_t n : {int64_t{1} << 22, int64_t{1} << 12}) {
    Tensor big = on_gpu(Tensor::full({n}, r + 1, DType::kFloat32), pg);
    Tensor sum = F::all_reduce(big, "sum", "0");
    device_allocator(gpu).zero(gpu.index, big.data_ptr(), big.nbytes());
    F::wait_tensor(sum);
    const Tensor h = on_host(sum);
    const float* v = static_cast<const float*>(h.data_ptr());
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += v[i] != 3.0f;
    EXPECT_EQ(bad, 0) << "elements of the sum that saw the input's later zeroing (" << n
                      << " elements)";
  }
  // in place
  Tensor z = on_gpu(scaled({1, 2}, r + 1, DType::kBFloat16), pg);
  F::wait_tensor(F::all_reduce_(z, ReduceOp::kMax, "0"));
  EXPECT_TRUE(values_equal(on_host(z), {2, 4}));
  // coalesced
  auto outs = F::all_reduce_coalesced({on_gpu(scaled({1}, r + 1, DType::kInt64), pg),
                                       on_gpu(scaled({1, 1}, r + 1, DType::kFloat64), pg)},
                                      ReduceOp::kProduct, "0");
  for (auto& o : outs) F::wait_tensor(o);
  EXPECT_TRUE(values_equal(on_host(outs[0]), {2}));
  EXPECT_TRUE(values_equal(on_host(outs[1]), {2, 2}));
  // all_gather_into_tensor / reduce_scatter_tensor / all_to_all_single / broadcast
  Tensor g = F::all_gather_into_tensor(on_gpu(host_of({2}, {10.0 * r, 10.0 * r + 1},
                                                      DType::kInt32), pg),
                                       2, "0");
  EXPECT_EQ(g.device(), gpu);
  F::wait_tensor(g);
  EXPECT_TRUE(values_equal(on_host(g), {0, 1, 10, 11}));
  Tensor rs = F::reduce_scatter_tensor(on_gpu(scaled({1, 2, 3, 4}, r + 1, DType::kFloat16), pg),
                                       ReduceOp::kAvg, 2, "0");
  EXPECT_EQ(rs.device(), gpu);
  F::wait_tensor(rs);
  EXPECT_TRUE(values_equal(on_host(rs), {1.5 * (2 * r + 1), 1.5 * (2 * r + 2)}));
  const A2aCase c = a2a_case(2, r);
  Tensor a2a = F::all_to_all_single(on_gpu(host_of({c.in_rows, 2}, c.in_values, DType::kFloat32),
                                           pg),
                                    c.out_splits, c.in_splits, "0");
  EXPECT_EQ(a2a.device(), gpu);
  F::wait_tensor(a2a);
  EXPECT_TRUE(values_equal(on_host(a2a), c.expected));
  Tensor b = F::broadcast(on_gpu(scaled({5, 6}, r + 1, DType::kUInt8), pg), 0, "0");
  F::wait_tensor(b);
  EXPECT_TRUE(values_equal(on_host(b), {5, 6}));
  // permute_tensor: rank i sends to 1 - i (a swap)
  Tensor p = F::permute_tensor(on_gpu(scaled({7}, r + 1, DType::kFloat32), pg), {1, 0}, "0");
  F::wait_tensor(p);
  EXPECT_TRUE(values_equal(on_host(p), {7.0 * (2 - r)}));
  // the Python-level API: waits on first use
  F::AsyncTensor at = F::api::all_reduce(on_gpu(scaled({1, 2}, r + 1, DType::kFloat32), pg),
                                         "avg", "0");
  EXPECT_FALSE(at.completed());
  EXPECT_TRUE(values_equal(on_host(at.value()), {1.5, 3}));
  EXPECT_TRUE(at.completed());
  // gathering along dim 1 rearranges on the host: refused for a device tensor, before posting
  Tensor m = on_gpu(Tensor::full({2, 2}, 1, DType::kFloat32), pg);
  EXPECT_TRUE(throws_error([&] { F::api::all_gather_tensor(m, 1, "0"); },
                           {"gathering along a dim other than 0", str("cuda:", r)}));
  // a non-contiguous device input of an out-of-place op is refused clearly
  Tensor wide = on_gpu(Tensor::full({4, 2}, 1, DType::kFloat32), pg);
  EXPECT_TRUE(throws_error([&] { F::all_reduce(wide.as_strided({4}, {2}, 0), "sum", "0"); },
                           {"must be contiguous"}));
  // the group is still aligned
  Tensor last = F::all_reduce(on_gpu(scaled({1}, r + 1, DType::kFloat32), pg), "sum", "0");
  F::wait_tensor(last);
  EXPECT_TRUE(values_equal(on_host(last), {3}));
}

TEST(Nccl2Gpu, FunctionalCollectivesOnGpuTensors) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_functional");
  EXPECT_TRUE(r.ok()) << r.all_output();
}

// The same with every op on the group's stream (none on the caller's) and a non-blocking
// communicator: the other side of each setting.
TEST(Nccl2Gpu, FunctionalCollectivesOnTheGroupStreamAndANonBlockingComm) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_functional", {{"ANVIL_NCCL_CALLER_STREAM_BYTES", "0"},
                                                  {"ANVIL_NCCL_BLOCKING_COMM", "0"}});
  EXPECT_TRUE(r.ok()) << r.all_output();
}

}  // namespace
}  // namespace anvil::dist::test
