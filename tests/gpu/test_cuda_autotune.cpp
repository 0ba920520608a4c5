// GEMM autotuning of CUDA packages on a GPU (label gpu; spec/process_group_and_gemm.md part B):
// the tuner poses each GEMM with the epilogue its package fuses (bias, relu, gelu tanh and erf),
// times CUTLASS candidates that apply it in their store, and the package calls the chosen kernel
// with that epilogue in place of cuBLASLt's (codegen/gemm/gemm_epilogue.h chosen_kernel_fuses).
// The gemm_epilogue fixtures (scripts/export_gemm_epilogue_cases.py) in bfloat16 and float16,
// compared with PyTorch's outputs; the manifest says which GEMM ran which kernel.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/check.h"
#include "core/npy.h"
#include "gpu/gpu_test_util.h"
#include "runtime/model.h"
#include "runtime/package.h"

namespace anvil {
namespace {

using namespace gpu_test;  // NOLINT: the suite's helpers

/// Compiles `pt2` for cuda-sm90 with the autotuner on (CUTLASS candidates only, the first
/// `max_candidates` of each problem: generation order) into out_dir()/name.anvil.
std::string compile_tuned(const std::string& pt2, const std::string& name, int max_candidates) {
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (out_dir() / "cache").string();
  o.gemm.mode = codegen::gemm::AutotuneMode::kFast;
  o.gemm.backends = {codegen::gemm::GemmBackend::kCutlass};
  o.gemm.max_profiled = max_candidates;
  const std::string pkg = (out_dir() / (name + ".anvil")).string();
  driver::compile_pt2(pt2, pkg, o);
  return pkg;
}

void expect_matches(const std::string& pkg, const std::string& stem) {
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model m = runtime::Model::load(pkg, mo);
  std::vector<Tensor> inputs;
  const std::vector<Tensor> host_in = read_set(stem, "in");
  ASSERT_EQ(host_in.size(), m.input_specs().size()) << stem;
  for (size_t i = 0; i < host_in.size(); ++i)
    inputs.push_back(host_in[i].to(m.input_specs()[i].dtype).to(Device::cuda(0)));
  const std::vector<Tensor> want = read_set(stem, "out");
  for (int rep = 0; rep < 2; ++rep) {  // the second run replays the captured graph
    const std::vector<Tensor> got = m.run(inputs);
    ASSERT_EQ(got.size(), want.size()) << stem;
    for (size_t i = 0; i < got.size(); ++i) {
      const Tensor h = got[i].to(Device::cpu());
      EXPECT_TRUE(::anvil::test::close(h.to(DType::kFloat32), want[i],
                                       ::anvil::test::tolerance_of(h.dtype())))
          << stem << " output " << i << " run " << rep;
    }
  }
}

class CudaAutotune : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaAutotune, ChosenCutlassKernelsApplyTheFusedEpilogues) {
  ANVIL_REQUIRE_GPU();
  const std::string stem = fixture("gemm_epilogue/gemm_epilogue_" + GetParam());
  const std::string pkg = compile_tuned(stem + ".pt2", "tuned_" + GetParam(), 1);
  expect_matches(pkg, stem);
  const auto mf = nlohmann::json::parse(runtime::Package::open(pkg)->manifest().json);
  // Every GEMM's epilogue stays fused (ten by cuBLASLt before; now the erf GELU too), and the
  // GEMMs CUTLASS can take with their epilogue (no residual, no batch dims, 16-byte aligned
  // rows: relu, gelu tanh, gelu erf, mm + bias, relu without bias, the 3-D input's bias) run it.
  std::multiset<std::string> by_cutlass;
  for (const auto& f : mf.at("gemm_epilogues")) {
    const std::string by = f.value("by", "");
    if (by.rfind("cutlass3x_sm90_", 0) == 0) {
      by_cutlass.insert(f.at("epilogue").get<std::string>());
      EXPECT_FALSE(f.at("residual").get<bool>()) << by;
      EXPECT_NE(by.find("_epi_tma"), std::string::npos) << by;
    } else {
      EXPECT_EQ(by, "cublaslt") << f.dump();
    }
  }
  EXPECT_EQ(mf.at("gemm_epilogues").size(), 11u) << mf.at("gemm_epilogues").dump();
  EXPECT_EQ(by_cutlass.count("ANVIL_EPILOGUE_BIAS_GELU_ERF"), 1u) << mf.at("gemm_epilogues").dump();
  EXPECT_EQ(by_cutlass.count("ANVIL_EPILOGUE_BIAS_RELU"), 1u);
  EXPECT_EQ(by_cutlass.count("ANVIL_EPILOGUE_RELU"), 1u);  // the linear without bias
  EXPECT_GE(by_cutlass.count("ANVIL_EPILOGUE_BIAS_GELU_TANH"), 1u);
  EXPECT_GE(by_cutlass.size(), 6u);
  // the manifest's tuning record: each tuned GEMM timed at least one candidate (spec B.5 case 4)
  int tuned = 0;
  for (const auto& s : mf.at("gemm").at("steps"))
    if (s.at("kernel").get<std::string>().rfind("cutlass3x_sm90_", 0) == 0) {
      EXPECT_GE(s.at("candidates").get<int>(), 1) << s.dump();
      ++tuned;
    }
  EXPECT_GE(tuned, 6) << mf.at("gemm").dump();
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaAutotune, ::testing::Values("bfloat16", "float16"));

}  // namespace
}  // namespace anvil
