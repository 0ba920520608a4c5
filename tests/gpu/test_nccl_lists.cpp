// The nccl backend's rooted and list forms on 2 GPUs (2 real processes, rank r on cuda:r):
// reduce to a root, gather, scatter, list all_gather, reduce_scatter over W inputs, all_to_all
// with per-peer sizes that differ, against exact host values; the argument errors of spec A.3
// #27-29 and #40, and receive from any source refused (#45). Skips with fewer than 2 GPUs
// (ANVIL_REQUIRE_GPU=2 makes that a failure).
#include "../dist/dist_check.h"
#include "../dist/dist_harness.h"
#include "gpu_test_util.h"
#include "nccl_test_util.h"

namespace anvil::dist::test {
namespace {

using namespace anvil::nccl_test;

std::vector<double> ramp_values(int64_t n, double base) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(base + static_cast<double>(i));
  return v;
}

/// The group-device tensor [n] of `dt` holding base + i.
Tensor gpu_ramp(const ProcessGroup& pg, int64_t n, double base, DType dt) {
  return on_gpu(host_of({n}, ramp_values(n, base), dt), pg);
}

DIST_WORKER(nccl_rooted_and_list_ops) {
  ProcessGroup& pg = *ctx.pg;
  ASSERT_EQ(pg.backend_name(), "nccl");
  const int r = ctx.rank, W = ctx.world;
  ASSERT_EQ(W, 2);

  // A.3 #25: reduce SUM to root 1; rank 0 keeps its data. AVG (f32) to root 0, MAX (i64).
  Tensor x = on_gpu(scaled({1, 2, 3}, r + 1, DType::kFloat32), pg);
  pg.reduce(x, ReduceOp::kSum, 1)->wait();
  EXPECT_TRUE(values_equal(on_host(x),
                           r == 1 ? std::vector<double>{3, 6, 9} : std::vector<double>{1, 2, 3}));
  Tensor a = on_gpu(scaled({2, 4}, r + 1, DType::kFloat32), pg);
  pg.reduce(a, ReduceOp::kAvg, 0)->wait();
  EXPECT_TRUE(
      values_equal(on_host(a), r == 0 ? std::vector<double>{3, 6} : std::vector<double>{4, 8}));
  Tensor m = gpu_ramp(pg, 3, 10.0 * r, DType::kInt64);
  pg.reduce(m, ReduceOp::kMax, 0)->wait();
  EXPECT_TRUE(values_equal(on_host(m), ramp_values(3, 10)));  // rank 1's own data is that too

  // A.3 #39: gather to root 1 (bf16).
  Tensor in = on_gpu(scaled({1, 2, 3}, r + 1, DType::kBFloat16), pg);
  std::vector<Tensor> outs;
  if (r == 1)
    for (int j = 0; j < W; ++j) outs.push_back(on_gpu(Tensor::zeros({3}, DType::kBFloat16), pg));
  auto g = pg.gather(outs, in, 1);
  g->wait();
  if (r == 1) {
    EXPECT_TRUE(values_equal(on_host(outs[0]), {1, 2, 3}));
    EXPECT_TRUE(values_equal(on_host(outs[1]), {2, 4, 6}));
  } else {
    EXPECT_TRUE(g->result().empty());
  }

  // A.3 #41: scatter from root 0 (i32).
  std::vector<Tensor> ins;
  if (r == 0) ins = {gpu_ramp(pg, 2, 5, DType::kInt32), gpu_ramp(pg, 2, 7, DType::kInt32)};
  Tensor out = on_gpu(Tensor::zeros({2}, DType::kInt32), pg);
  pg.scatter(out, ins, 0)->wait();
  EXPECT_TRUE(values_equal(on_host(out), ramp_values(2, r == 0 ? 5 : 7)));

  // A.3 #26: all_gather into W outputs (f16).
  std::vector<Tensor> ag;
  for (int j = 0; j < W; ++j) ag.push_back(on_gpu(Tensor::zeros({2}, DType::kFloat16), pg));
  pg.all_gather(ag, on_gpu(scaled({1, 2}, r + 1, DType::kFloat16), pg))->wait();
  EXPECT_TRUE(values_equal(on_host(ag[0]), {1, 2}));
  EXPECT_TRUE(values_equal(on_host(ag[1]), {2, 4}));

  // A.3 #36: reduce_scatter over W inputs, rank k's j-th holding k + j: rank r gets 1 + 2r.
  std::vector<Tensor> rs_in;
  for (int j = 0; j < W; ++j)
    rs_in.push_back(on_gpu(Tensor::full({4}, r + j, DType::kFloat32), pg));
  Tensor rs = on_gpu(Tensor::zeros({4}, DType::kFloat32), pg);
  pg.reduce_scatter(rs, rs_in, ReduceOp::kSum)->wait();
  EXPECT_TRUE(all_equal(on_host(rs), 1 + 2 * r));
  pg.reduce_scatter(rs, rs_in, ReduceOp::kAvg)->wait();
  EXPECT_TRUE(all_equal(on_host(rs), 0.5 + r));

  // A.3 #35: all_to_all, rank r sends rank j (r+1)(j+1) elements 1000 r + 10 j + i.
  std::vector<Tensor> a_in, a_out;
  for (int j = 0; j < W; ++j) {
    a_in.push_back(gpu_ramp(pg, (r + 1) * (j + 1), 1000.0 * r + 10 * j, DType::kInt64));
    a_out.push_back(on_gpu(Tensor::full({(j + 1) * (r + 1)}, -1, DType::kInt64), pg));
  }
  pg.all_to_all(a_out, a_in)->wait();
  for (int j = 0; j < W; ++j)
    EXPECT_TRUE(
        values_equal(on_host(a_out[j]), ramp_values((j + 1) * (r + 1), 1000.0 * j + 10 * r)))
        << "block from rank " << j;

  // Errors, all before posting (the sequence number does not move).
  const uint64_t seq = pg.sequence_number();
  std::vector<Tensor> one{ag[0]};
  EXPECT_TRUE(throws_error([&] { pg.all_gather(one, ag[0]); },  // A.3 #27
                           {"not valid for the number of participants"}));
  std::vector<Tensor> odd{ag[0], on_gpu(Tensor::zeros({3}, DType::kFloat16), pg)};
  EXPECT_TRUE(throws_error([&] { pg.all_gather(odd, ag[0]); },  // A.3 #28
                           {"tensor operand counts must be same"}));
  if (r == 0) {  // A.3 #29: outputs on the other GPU
    std::vector<Tensor> other{Tensor::zeros({2}, DType::kFloat16).to(Device::cuda(1)),
                              Tensor::zeros({2}, DType::kFloat16).to(Device::cuda(1))};
    EXPECT_TRUE(throws_error([&] { pg.all_gather(other, ag[0]); },
                             {"is on cuda:1, not on the group's device cuda:0"}));
  }
  if (r == 0) {  // A.3 #35's device mix: one all_to_all output on the other GPU
    std::vector<Tensor> mixed = a_out;
    mixed[1] = Tensor::zeros(a_out[1].sizes(), DType::kInt64).to(Device::cuda(1));
    EXPECT_TRUE(
        throws_error([&] { pg.all_to_all(mixed, a_in); },
                     {"the output 1 tensor is on cuda:1, not on the group's device cuda:0"}));
  }
  std::vector<Tensor> none;
  EXPECT_TRUE(throws_error([&] { pg.gather(none, in, 2); }, {"root rank 2 is outside the group"}));
  Tensor t = on_gpu(Tensor::zeros({1}, DType::kFloat32), pg);
  EXPECT_TRUE(throws_error([&] { pg.recv_any_source(t); },  // A.3 #45
                           {"backend nccl does not support recv_any_source"}));
  EXPECT_EQ(pg.sequence_number(), seq);
  Tensor last = on_gpu(scaled({1}, r + 1, DType::kFloat32), pg);
  pg.all_reduce(last, ReduceOp::kSum)->wait();
  EXPECT_TRUE(values_equal(on_host(last), {3}));
}

TEST(Nccl2Gpu, RootedAndListFormsAndTheirErrors) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_rooted_and_list_ops");
  EXPECT_TRUE(r.ok()) << r.all_output();
}

}  // namespace
}  // namespace anvil::dist::test
