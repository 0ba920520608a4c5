// The nccl backend's one-shot all_reduce (src/dist/nccl/one_shot.h) on 2 GPUs, 2 processes: the
// small all_reduces on the caller's stream run as anvil's kernel over peer memory (the trace
// names the engine of each op), against exact values: sizes around the limit, byte counts that
// are not a multiple of 4, an input not 16-byte aligned, in place and out of place (the input
// untouched), thousands of ops queued back to back with no wait between them (the two parities
// of slots reused while peers run ahead), every dtype and reduce op of the kernel, and the
// same worker with ANVIL_NCCL_ONE_SHOT_BYTES=0 (every op through NCCL, no "one_shot" in the
// trace). The dead-peer tests of test_nccl.cpp run their small all_reduce through this path.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "../dist/dist_check.h"
#include "../dist/dist_harness.h"
#include "dist/trace.h"
#include "gpu_test_util.h"
#include "nccl_test_util.h"

namespace anvil::dist::test {
namespace {

using namespace anvil::nccl_test;

/// How many ops of the trace ran on the one-shot engine.
int one_shot_ops() {
  const std::string json = trace_json();
  int n = 0;
  for (size_t at = json.find("\"engine\": \"one_shot\""); at != std::string::npos;
       at = json.find("\"engine\": \"one_shot\"", at + 1))
    ++n;
  return n;
}

/// (i % 7 + 1) * (r + 1) for i < n: exact in every dtype here.
Tensor ramp(int64_t n, int r, DType dt) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(double(i % 7 + 1) * (r + 1));
  return host_of({n}, v, dt);
}

/// The sum over 2 ranks of ramp(): 3 * (i % 7 + 1).
std::vector<double> ramp_sum(int64_t n) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(3.0 * (i % 7 + 1));
  return v;
}

DIST_WORKER(nccl_one_shot) {
  ProcessGroup& pg = *ctx.pg;
  const int r = ctx.rank;
  const char* env = std::getenv("ANVIL_NCCL_ONE_SHOT_BYTES");
  const bool on = !(env && std::string(env) == "0");
  int eligible = 0;  // ops that take the one-shot path when it is on
  // sizes: 1 element; 3 bytes; 4100 bytes; 8192 (the default limit: one-shot); 8196 (NCCL)
  struct Size {
    int64_t n;
    DType dt;
    bool small;
  };
  for (const Size s : {Size{1, DType::kFloat32, true}, Size{3, DType::kInt8, true},
                       Size{1025, DType::kFloat32, true}, Size{2048, DType::kFloat32, true},
                       Size{2049, DType::kFloat32, false}, Size{5, DType::kFloat16, true}}) {
    Tensor t = on_gpu(ramp(s.n, r, s.dt), pg);
    pg.all_reduce(t, ReduceOp::kSum)->wait();
    EXPECT_TRUE(values_equal(on_host(t), ramp_sum(s.n))) << s.n << " " << dtype_name(s.dt);
    eligible += s.small;
  }
  // an input 2 bytes past a 16-byte boundary, in place: the element before it untouched
  {
    Tensor whole = on_gpu(ramp(10, r, DType::kFloat16), pg);
    Tensor part = whole.slice(0, 1, 10);
    pg.all_reduce(part, ReduceOp::kSum)->wait();
    std::vector<double> want = ramp_sum(10);
    want[0] = 1.0 * (r + 1);
    EXPECT_TRUE(values_equal(on_host(whole), want));
    ++eligible;
  }
  // out of place: the input keeps its values
  {
    Tensor in = on_gpu(ramp(33, r, DType::kBFloat16), pg);
    Tensor out = on_gpu(Tensor::zeros({33}, DType::kBFloat16), pg);
    pg.all_reduce_into(out, in, ReduceOp::kMax)->wait();
    std::vector<double> want;
    for (int64_t i = 0; i < 33; ++i) want.push_back(2.0 * (i % 7 + 1));
    EXPECT_TRUE(values_equal(on_host(out), want));
    EXPECT_TRUE(values_equal(on_host(in), [&] {
      std::vector<double> v;
      for (int64_t i = 0; i < 33; ++i) v.push_back(double(i % 7 + 1) * (r + 1));
      return v;
    }()));
    ++eligible;
  }
  // every dtype and reduce op of the kernel
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                   DType::kInt8, DType::kUInt8, DType::kInt32, DType::kInt64}) {
    std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin,
                                 ReduceOp::kMax};
    if (is_floating(dt)) ops.push_back(ReduceOp::kAvg);
    for (ReduceOp op : ops) {
      Tensor t = on_gpu(scaled({1, 2, 3}, r + 1, dt), pg);  // rank 0: k, rank 1: 2k
      pg.all_reduce(t, op)->wait();
      std::vector<double> want;
      for (double k : {1.0, 2.0, 3.0})
        want.push_back(op == ReduceOp::kSum       ? 3 * k
                       : op == ReduceOp::kProduct ? 2 * k * k
                       : op == ReduceOp::kMin     ? k
                       : op == ReduceOp::kMax     ? 2 * k
                                                  : 1.5 * k);
      EXPECT_TRUE(values_equal(on_host(t), want)) << dtype_name(dt) << " " << reduce_op_name(op);
      ++eligible;
    }
  }
  // 4000 ops queued back to back, no wait between them; inputs of 100 values, fresh outputs
  {
    std::vector<Tensor> ins, outs;
    for (int j = 0; j < 100; ++j)
      ins.push_back(on_gpu(Tensor::full({6}, j + r, DType::kFloat32), pg));
    std::shared_ptr<Work> last;
    for (int i = 0; i < 4000; ++i) {
      outs.push_back(on_gpu(Tensor::zeros({6}, DType::kFloat32), pg));
      last = pg.all_reduce_into(outs.back(), ins[static_cast<size_t>(i % 100)], ReduceOp::kSum);
    }
    last->wait();
    int bad = 0;
    for (int i = 0; i < 4000; ++i) {
      const Tensor h = on_host(outs[static_cast<size_t>(i)]);
      const float* v = static_cast<const float*>(h.data_ptr());
      for (int e = 0; e < 6; ++e) bad += v[e] != float(2 * (i % 100) + 1);
    }
    EXPECT_EQ(bad, 0) << "elements of 4000 back-to-back all_reduces with a wrong sum";
    eligible += 4000;
  }
  EXPECT_EQ(one_shot_ops(), on ? eligible : 0) << "ops the trace shows on the one-shot engine";
  pg.barrier()->wait();
}

const std::map<std::string, std::string> kTrace = {{"ANVIL_DIST_TRACE", "1"},
                                                  {"ANVIL_DIST_TRACE_DIR", "/tmp/anvil_one_shot"}};

TEST(Nccl2Gpu, OneShotAllReduceMatchesExactValues) {
  ANVIL_REQUIRE_TWO_GPUS();
  const auto r = run_nccl_job("nccl_one_shot", kTrace);
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(Nccl2Gpu, OneShotOffRunsEveryAllReduceThroughNccl) {
  ANVIL_REQUIRE_TWO_GPUS();
  auto env = kTrace;
  env["ANVIL_NCCL_ONE_SHOT_BYTES"] = "0";
  const auto r = run_nccl_job("nccl_one_shot", env);
  EXPECT_TRUE(r.ok()) << r.all_output();
}

}  // namespace
}  // namespace anvil::dist::test
