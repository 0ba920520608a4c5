// GEMM autotuning of CUDA packages on a GPU (label gpu; spec/process_group_and_gemm.md part B):
// the tuner poses each GEMM with the epilogue its package fuses (bias, relu, gelu tanh and erf),
// times CUTLASS candidates that apply it in their store, and the package calls the chosen kernel
// with that epilogue in place of cuBLASLt's (codegen/gemm/gemm_epilogue.h chosen_kernel_fuses).
// The gemm_epilogue fixtures (scripts/export_gemm_epilogue_cases.py) in bfloat16 and float16,
// compared with PyTorch's outputs; the manifest says which GEMM ran which kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "common/check.h"
#include "core/npy.h"
#include "gpu/gpu_test_util.h"
#include "ir/parser.h"
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

/// The fp16 graph out = a[M, K] @ b[K, N] (M symbolic "s0" when `dynamic`).
std::string mm_graph(int64_t m, int64_t k, int64_t n, bool dynamic) {
  const std::string ms = dynamic ? "s0" : std::to_string(m);
  const std::string sym = dynamic ? "  symbols {\n    s0 in [1, 512]\n  }\n" : "";
  return "graph {\n" + sym + "  inputs {\n    %a: f16[" + ms + ", " + std::to_string(k) +
         "] = user_input\n    %b: f16[" + std::to_string(k) + ", " + std::to_string(n) +
         "] = user_input\n  }\n  %m: f16[" + ms + ", " + std::to_string(n) +
         "] = aten.mm.default(self=%a, mat2=%b)\n  outputs {\n    user_output %m\n  }\n}\n";
}

/// Tunes `graph` for cuda-sm90 with `backends`, runs it on cuda:0 at m rows and checks the
/// product against a double-precision one; returns the compile report and the manifest.
std::pair<driver::CompileReport, nlohmann::json> tune_and_check(
    const std::string& graph, const std::string& name, int64_t m, int64_t k, int64_t n,
    const std::vector<codegen::gemm::GemmBackend>& backends, int jobs) {
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (out_dir() / "cache").string();
  o.gemm.mode = codegen::gemm::AutotuneMode::kFast;
  o.gemm.backends = backends;
  o.gemm.jobs = jobs;
  const std::string pkg = (out_dir() / (name + ".anvil")).string();
  const auto g = ir::parse_graph(graph);
  const driver::CompileReport r = driver::compile_graph(*g, pkg, o);
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model model = runtime::Model::load(pkg, mo);
  Tensor a = Tensor::empty({m, k}, DType::kFloat32), b = Tensor::empty({k, n}, DType::kFloat32);
  float* ap = a.data<float>();
  float* bp = b.data<float>();
  for (int64_t i = 0; i < m * k; ++i) ap[i] = static_cast<float>((i * 7 % 17) - 8) / 8.f;
  for (int64_t i = 0; i < k * n; ++i) bp[i] = static_cast<float>((i * 5 % 13) - 6) / 4.f;
  const auto out = model.run({a.to(DType::kFloat16).to(Device::cuda(0)),
                              b.to(DType::kFloat16).to(Device::cuda(0))});
  EXPECT_EQ(out.size(), 1u);
  if (!out.empty()) {
    const Tensor got = out[0].to(Device::cpu()).to(DType::kFloat32);
    const float* gp = got.data<float>();
    int bad = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t q = 0; q < k; ++q) want += double(ap[i * k + q]) * bp[q * n + j];
        if (std::fabs(gp[i * n + j] - want) > 2e-3 * std::max(1.0, std::fabs(want))) ++bad;
      }
    EXPECT_EQ(bad, 0) << name;
  }
  return {r, nlohmann::json::parse(runtime::Package::open(pkg)->manifest().json)};
}

// Spec B.5 case 4: mm 128x16 @ 16x128 fp16, CUTLASS only, static, sm90: at least one CUTLASS
// candidate is benchmarked and chosen; the result is close.
TEST(CudaAutotuneSpec, Case4_StaticMmBenchmarksCutlassCandidates) {
  ANVIL_REQUIRE_GPU();
  const auto [r, mf] = tune_and_check(mm_graph(128, 16, 128, false), "case4", 128, 16, 128,
                                      {codegen::gemm::GemmBackend::kCutlass}, 0);
  EXPECT_EQ(r.gemms_tuned, 1) << ::testing::PrintToString(r.tune_lines);
  EXPECT_GE(r.gemm_candidates_timed, 1);
  const auto& step = mf.at("gemm").at("steps").at(0);
  const std::string kernel = step.at("kernel").get<std::string>();
  EXPECT_EQ(kernel.rfind("cutlass3x_sm90_tensorop_gemm_f16_f16_f32_", 0), 0u)
      << step.dump();
  EXPECT_GT(step.at("time_us").get<double>(), 0.0);
}

// Spec B.5 case 5 (a dynamic N or K keeps cuBLASLt with a warning) and a dynamic M tuned per
// bucket of its range: tests/gpu/test_cuda_gemm_buckets.cpp.

// Spec B.5 case 3: mm 100x10 @ 10x100 fp16 (rows of 20 bytes: the cp.async kernels), CUTLASS and
// cuBLASLt candidates, 4 compile jobs, each timed in its own process: no crash, close.
TEST(CudaAutotuneSpec, Case3_UnalignedMmTunesInSubprocessesWithoutACrash) {
  ANVIL_REQUIRE_GPU();
  const auto [r, mf] = tune_and_check(
      mm_graph(100, 10, 100, false), "case3", 100, 10, 100,
      {codegen::gemm::GemmBackend::kCutlass, codegen::gemm::GemmBackend::kCublasLt}, 4);
  EXPECT_EQ(r.gemms_tuned, 1) << ::testing::PrintToString(r.tune_warnings);
  EXPECT_GE(r.gemm_candidates_timed, 2);
  bool cpasync = false;
  for (const auto& l : r.tune_lines) cpasync |= l.find("_cpasync_") != std::string::npos;
  EXPECT_TRUE(cpasync) << ::testing::PrintToString(r.tune_lines);
}

// Issue 16 item 2, cuBLASLt's heuristic algorithms as candidates: mm 64x4096 @ 4096x1024 fp16
// (the MLP's last layer: few output tiles, where a split-K plan may win), cuBLASLt only, fast
// mode: its first 4 algorithms are each timed in a child, one is chosen, the package runs it.
TEST(CudaAutotuneSpec, CublasLtHeuristicAlgorithmsAreTimedAndTheChosenOneRuns) {
  ANVIL_REQUIRE_GPU();
  const auto [r, mf] = tune_and_check(mm_graph(64, 4096, 1024, false), "lt_algos", 64, 4096,
                                      1024, {codegen::gemm::GemmBackend::kCublasLt}, 0);
  EXPECT_EQ(r.gemms_tuned, 1) << ::testing::PrintToString(r.tune_warnings);
  EXPECT_EQ(r.gemm_candidates_timed, 4) << ::testing::PrintToString(r.tune_lines);
  const auto& step = mf.at("gemm").at("steps").at(0);
  EXPECT_EQ(step.at("kernel").get<std::string>().rfind("cublaslt_heuristic", 0), 0u)
      << step.dump();
  EXPECT_GT(step.at("time_us").get<double>(), 0.0);
}

// A linear + erf GELU in fp16: cuBLASLt has no erf GELU, so its candidates are timed as the
// package runs them, the plain GEMM and then the epilogue's kernel (the tuner's stand-in,
// codegen/gemm/cuda_epilogue_standin.h; a device copy of C before session 33). Every candidate
// gets a time (the copy's buffer once could not be allocated during the timing graph's capture,
// which made every such candidate "inf" and left the choice to others).
TEST(CudaAutotuneSpec, CublasLtCandidatesWithAnUnfusedGeluAreTimed) {
  ANVIL_REQUIRE_GPU();
  const std::string graph = R"(graph {
  inputs {
    %x: f16[64, 512] = user_input
    %w: f16[1024, 512] = user_input
  }
  %l: f16[64, 1024] = aten.linear.default(input=%x, weight=%w)
  %y: f16[64, 1024] = aten.gelu.default(self=%l)
  outputs {
    user_output %y
  }
})";
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (out_dir() / "cache").string();
  o.gemm.mode = codegen::gemm::AutotuneMode::kFast;
  o.gemm.backends = {codegen::gemm::GemmBackend::kCublasLt};
  const driver::CompileReport r =
      driver::compile_graph(*ir::parse_graph(graph), (out_dir() / "lt_gelu.anvil").string(), o);
  EXPECT_EQ(r.gemms_tuned, 1) << ::testing::PrintToString(r.tune_warnings);
  ASSERT_EQ(r.tune_lines.size(), 4u) << ::testing::PrintToString(r.tune_lines);
  for (const auto& l : r.tune_lines) {
    EXPECT_EQ(l.find(": inf"), std::string::npos) << l;
    EXPECT_NE(l.find(" us (+ its epilogue kernel)"), std::string::npos) << l;
  }
  for (const auto& w : r.tune_warnings) EXPECT_EQ(w.find("stand-in"), std::string::npos) << w;
}

}  // namespace
}  // namespace anvil
