// GEMM autotuning of CUDA packages with a symbolic M on a GPU (label gpu; issue 16 deliver 4,
// driver/gemm_buckets.h): one choice per bucket of M's range among cuBLASLt and CUTLASS
// candidates, the epilogue posed as the package fuses it, the package dispatching on M's
// run-time value; results compared with the interpreter at M in every bucket. A symbolic K
// keeps cuBLASLt with a warning (spec B.5 case 5).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "gpu/gpu_test_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/model.h"
#include "runtime/package.h"

namespace anvil {
namespace {

using namespace gpu_test;  // NOLINT: the suite's helpers
using codegen::gemm::GemmBackend;

Tensor random_f16(Shape sizes, int seed) {
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::vector<float> v(static_cast<size_t>(shape_numel(sizes)));
  for (float& x : v) x = static_cast<float>(gen() / 2147483648.0 - 1.0);
  return Tensor::from_vector(v, sizes).to(DType::kFloat16);
}

driver::CompileReport compile(const ir::Graph& g, const std::string& pkg) {
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (out_dir() / "cache").string();
  o.gemm.mode = codegen::gemm::AutotuneMode::kFast;
  o.gemm.backends = {GemmBackend::kCutlass, GemmBackend::kCublasLt};
  o.gemm.max_profiled = 2;
  return driver::compile_graph(g, pkg, o);
}

// x[s0, 64] @ w[64, 128] + bias, relu; s0 in [1, 300]: buckets {1}, [2, 8], [9, 32],
// [33, 128], [129, 300].
TEST(CudaGemmBuckets, ASymbolicMIsTunedPerBucketAndMatchesInEveryBucket) {
  ANVIL_REQUIRE_GPU();
  const auto g = ir::parse_graph(R"(graph {
  symbols {
    s0 in [1, 300]
  }
  inputs {
    %x: f16[s0, 64] = user_input
    %w: f16[128, 64] = user_input
    %bias: f16[128] = user_input
  }
  %l: f16[s0, 128] = aten.linear.default(input=%x, weight=%w, bias=%bias)
  %y: f16[s0, 128] = aten.relu.default(self=%l)
  outputs {
    user_output %y
  }
})");
  const std::string pkg = (out_dir() / "buckets.anvil").string();
  const driver::CompileReport r = compile(*g, pkg);
  EXPECT_EQ(r.gemms_bucketed, 1) << ::testing::PrintToString(r.tune_warnings);
  EXPECT_EQ(r.gemms_tuned, 5) << ::testing::PrintToString(r.tune_lines);
  const auto mf = nlohmann::json::parse(runtime::Package::open(pkg)->manifest().json);
  const auto& step = mf.at("gemm").at("steps").at(0);
  // every bucket timed; the step dispatches unless cuBLASLt won them all
  if (step.at("kernel") == "per bucket") {
    ASSERT_EQ(step.at("buckets").size(), 5u) << step.dump();
    EXPECT_EQ(step["buckets"][4].at("m_max").get<int>(), 300) << step.dump();
  }
  const Tensor w = random_f16({128, 64}, 2), bias = random_f16({128}, 3);
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model model = runtime::Model::load(pkg, mo);
  interp::Interpreter ref(*g);
  for (int64_t m : {1, 5, 20, 77, 128, 129, 300}) {
    const Tensor x = random_f16({m, 64}, static_cast<int>(m));
    const auto want = ref.run({x, w, bias});
    const auto got = model.run({x.to(Device::cuda(0)), w.to(Device::cuda(0)),
                                bias.to(Device::cuda(0))});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(::anvil::test::matches_reference(got[0].to(Device::cpu()), want[0]))
        << "m = " << m << "\n" << step.dump();
  }
}

// Spec B.5 case 5: a symbolic K: no candidates, cuBLASLt with a warning, correct results.
TEST(CudaGemmBuckets, Case5_ASymbolicKKeepsCublasLtWithAWarning) {
  ANVIL_REQUIRE_GPU();
  const auto g = ir::parse_graph(R"(graph {
  symbols {
    s0 in [1, 512]
  }
  inputs {
    %a: f16[128, s0] = user_input
    %b: f16[s0, 16] = user_input
  }
  %m: f16[128, 16] = aten.mm.default(self=%a, mat2=%b)
  outputs {
    user_output %m
  }
})");
  const std::string pkg = (out_dir() / "case5.anvil").string();
  const driver::CompileReport r = compile(*g, pkg);
  EXPECT_EQ(r.gemms_tuned, 0);
  EXPECT_EQ(r.gemm_candidates_timed, 0);
  bool warned = false;
  for (const auto& w : r.tune_warnings) warned |= w.find("dynamic sizes") != std::string::npos;
  EXPECT_TRUE(warned) << ::testing::PrintToString(r.tune_warnings);
  const auto mf = nlohmann::json::parse(runtime::Package::open(pkg)->manifest().json);
  EXPECT_EQ(mf.at("gemm").at("steps").at(0).at("kernel").get<std::string>(), "default");
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model model = runtime::Model::load(pkg, mo);
  interp::Interpreter ref(*g);
  for (int64_t k : {1, 77}) {
    const Tensor a = random_f16({128, k}, 1), b = random_f16({k, 16}, 2);
    const auto got = model.run({a.to(Device::cuda(0)), b.to(Device::cuda(0))});
    EXPECT_TRUE(::anvil::test::matches_reference(got[0].to(Device::cpu()), ref.run({a, b})[0]))
        << "k = " << k;
  }
}

}  // namespace
}  // namespace anvil
