// A symbolic M's buckets on the CUDA target without a GPU (driver/gemm_buckets.h): a GEMM step
// whose buckets run a CUTLASS kernel for small M and cuBLASLt above (its heuristic's fourth
// algorithm, as the tuner may pick) dispatches on m in its source, keeps its bias + relu
// epilogue fused in both (the CUTLASS kernel's store, cuBLASLt's gemm_ex with the statement's
// own kernel behind it), and the package source compiles with nvcc (the CUTLASS unit replaced
// by a stub with its entry points). The GPU run: tests/gpu/test_cuda_gemm_buckets.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "codegen/gemm/cutlass_candidates.h"
#include "codegen/gemm/gemm_problem.h"
#include "codegen/generate.h"
#include "codegen/target.h"
#include "ir/parser.h"
#include "passes/pipeline.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;
namespace gm = codegen::gemm;

codegen::CodegenOptions cuda_options() {
  codegen::CodegenOptions co;
  co.target = "cuda-sm90";
  return co;
}

/// Graph `text` compiled to a program for cuda-sm90.
passes::Program cuda_program(const std::string& text) {
  return passes::compile_to_program(*ir::parse_graph(text), codegen::pipeline_for(cuda_options()));
}

/// The program's last GEMM step (null when it has none).
passes::GemmStep* last_gemm(passes::Program& program) {
  passes::GemmStep* step = nullptr;
  for (auto& s : program.steps)
    if (auto* gs = std::get_if<passes::GemmStep>(&s)) step = gs;
  return step;
}

TEST(GemmBucketsEmit, CudaDispatchesOnMBetweenACutlassKernelAndCublasLtAndCompiles) {
  std::string why;
  if (!gm::find_cutlass_headers(&why)) GTEST_SKIP() << "CUTLASS headers not found (" << why << ")";
  passes::Program program = cuda_program(R"(graph {
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
  const codegen::CodegenOptions co = cuda_options();
  passes::GemmStep* step = last_gemm(program);
  ASSERT_NE(step, nullptr);
  // the problem of the bucket [1, 128], posed at 128 with the epilogue the package fuses
  gm::GemmProblem p = gm::problem_of(program, *step, "cuda-sm90", 128);
  ASSERT_TRUE(p.is_static());
  EXPECT_EQ(*p.m, 128);
  EXPECT_EQ(p.align_a, 8);
  p.bias = gm::GemmBias::kPerColumn;
  p.activation = gm::GemmActivation::kRelu;
  const gm::GemmCandidate* c = nullptr;
  const auto cands = gm::cutlass_candidates(p, 90);
  for (const auto& cand : cands)
    if (cand.fuses_bias && cand.fuses_activation) c = &cand;
  ASSERT_NE(c, nullptr);
  step->buckets = {{1, 128, {c->name, 0, 0, c->entry, c->source, 1.0, 2, true, true}},
                   {129, 300, {"cublaslt_heuristic_3", 0, 3, "", "", 1.0, 2, false, false}}};

  const codegen::CodegenResult gen = codegen::generate_program(program, co);
  const auto mf = nlohmann::json::parse(gen.manifest_json);
  ASSERT_EQ(mf.at("gemm_epilogues").size(), 1u) << mf.at("gemm_epilogues").dump();
  const auto& fused = mf["gemm_epilogues"][0];
  EXPECT_EQ(fused.at("by"), "per bucket");
  EXPECT_EQ(fused.at("by_bucket"), nlohmann::json({c->name, "cublaslt_heuristic_3"}));
  std::vector<codegen::SourceFile> files;
  std::string code;
  int kernel_units = 0;
  for (const auto& s : gen.sources) {
    if (s.filename.rfind("gemm_kernel_", 0) == 0) {  // the CUTLASS unit: a stub instead
      ++kernel_units;
      files.push_back({s.filename,
                       "#include \"anvil/anvil_rt.h\"\n#include <cstddef>\nextern \"C\" int " +
                           c->entry + "(const AnvilGemmCall*, void*, size_t, void*) { return 1; }\n"
                           "extern \"C\" size_t " + c->entry +
                           "_workspace(const AnvilGemmCall*) { return 0; }\n",
                       {}, ""});
      continue;
    }
    code += s.text;
    files.push_back({s.filename, s.text, s.flags, s.cache_name});
  }
  EXPECT_EQ(kernel_units, 1);
  EXPECT_NE(code.find("if (m <= 128) {  // m in [1, 128]: " + c->name), std::string::npos)
      << code;
  EXPECT_NE(code.find("} else {  // m in [129, 300]: cuBLASLt, cublaslt_heuristic_3"),
            std::string::npos)
      << code;
  // the tuner's pick among cuBLASLt's heuristic algorithms (AnvilGemmArgs::algo_index)
  EXPECT_NE(code.find("ga.algo_index = 3;"), std::string::npos) << code;
  EXPECT_NE(code.find("call.activation = 1;"), std::string::npos);  // relu in the kernel's store
  EXPECT_NE(code.find("ANVIL_EPILOGUE_BIAS_RELU"), std::string::npos);  // and in gemm_ex's
  EXPECT_NE(code.find("GEMM, a kernel per bucket of m"), std::string::npos);

  const fs::path dir = fs::temp_directory_path() / ("anvil_buckets_emit_" + std::to_string(getpid()));
  fs::create_directories(dir);
  codegen::ToolchainOptions to;
  to.target = "cuda-sm90";
  to.cache_dir = (dir / "cache").string();
  to.progress = codegen::ProgressMode::kQuiet;
  to.jobs = 1;
  const std::string so = (dir / "model.so").string();
  codegen::find_target("cuda-sm90").build(files, so, to);
  EXPECT_TRUE(fs::exists(so));
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// The tuner's cuBLASLt candidates are the heuristic's first 4 algorithms in fast mode and 8 in
// max (issue 16: "cuBLASLt's heuristic algorithms, the first N"); a GEMM step whose choice is
// the N-th (N > 0) calls gemm_ex with algo_index N, the heuristic's first stays a plain gemm.
TEST(GemmBucketsEmit, CublasLtHeuristicAlgorithmsAreCandidatesAndTheChosenOneIsCalled) {
  passes::Program program = cuda_program(R"(graph {
  inputs {
    %x: bf16[64, 256] = user_input
    %w: bf16[512, 256] = user_input
  }
  %l: bf16[64, 512] = aten.linear.default(input=%x, weight=%w)
  outputs {
    user_output %l
  }
})");
  const codegen::CodegenOptions co = cuda_options();
  passes::GemmStep* step = last_gemm(program);
  ASSERT_NE(step, nullptr);
  const gm::GemmProblem p = gm::problem_of(program, *step, "cuda-sm90", 64);
  for (const auto mode : {gm::AutotuneMode::kFast, gm::AutotuneMode::kMax}) {
    gm::GemmOptions o;
    o.mode = mode;
    o.backends = {gm::GemmBackend::kCublasLt};
    const auto cands = gm::gemm_candidates(p, o, {}, 90, nullptr);
    const int n = mode == gm::AutotuneMode::kMax ? 8 : 4;
    ASSERT_EQ(cands.size(), static_cast<size_t>(n));
    for (int v = 0; v < n; ++v) {
      EXPECT_EQ(cands[v].backend, gm::GemmBackend::kCublasLt);
      EXPECT_EQ(cands[v].variant, v);
      EXPECT_EQ(cands[v].name, v == 0 ? "cublaslt_heuristic"
                                      : "cublaslt_heuristic_" + std::to_string(v));
      EXPECT_TRUE(cands[v].source.empty());
    }
    o.deny_regex = "heuristic_[1-9]";  // the deny-list reaches them by name
    EXPECT_EQ(gm::gemm_candidates(p, o, {}, 90, nullptr).size(), 1u);
  }
  auto source = [&] {
    std::string code;
    for (const auto& s : codegen::generate_program(program, co).sources) code += s.text;
    return code;
  };
  std::string code = source();  // untuned: the heuristic's first, a plain gemm
  EXPECT_EQ(code.find("algo_index"), std::string::npos);
  EXPECT_NE(code.find("dev->gemm(device"), std::string::npos);
  step->choice = {"cublaslt_heuristic_2", 0, 2, "", "", 3.0, 4, false, false};
  code = source();
  EXPECT_NE(code.find("ga.algo_index = 2;"), std::string::npos) << code;
  EXPECT_NE(code.find("ga.epilogue = ANVIL_EPILOGUE_NONE;"), std::string::npos) << code;
  EXPECT_NE(code.find("GEMM, cuBLASLt, cublaslt_heuristic_2"), std::string::npos) << code;
  EXPECT_EQ(code.find("dev->gemm(device"), std::string::npos) << code;
}

}  // namespace
}  // namespace anvil
