// The mixed GEMM step on the CUDA target without a GPU (spec B.4.1 "mixed_mm", B.5 case 21):
// a package whose mixed step runs a CUTLASS mixed-input kernel passes the int8 B as int8 and its
// source compiles with nvcc (the kernel's own unit, minutes of nvcc, replaced by a stub with its
// entry points: tests/codegen/test_cutlass_compile.cpp compiles the real one); a compile that
// finds no mixed-input kernel (here: no GPU to tune on) lowers the GEMM again as a conversion
// kernel and a GEMM of one dtype. tests/gpu/test_cuda_mixed_gemm.cpp runs them on a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "codegen/gemm/cutlass_candidates.h"
#include "codegen/gemm/gemm_problem.h"
#include "codegen/generate.h"
#include "codegen/target.h"
#include "common/check.h"
#include "driver/compile.h"
#include "ir/parser.h"
#include "passes/pipeline.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

// spec B.5 case 21: fp16 A[100, 16] @ (int8 w[100, 16])^T
const char* kCase21 = R"(graph {
  inputs {
    %a: f16[100, 16] = user_input
    %w: i8[100, 16] = user_input
  }
  %wf: f16[100, 16] = aten._to_copy.default(self=%w, dtype=f16)
  %wt: f16[16, 100] = aten.t.default(self=%wf)
  %y: f16[100, 100] = aten.mm.default(self=%a, mat2=%wt)
  outputs {
    user_output %y
  }
})";

class MixedGemmEmit : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("anvil_mixed_emit_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

std::string read_text(const fs::path& f) {
  std::ifstream in(f);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_F(MixedGemmEmit, APackageCallingAMixedKernelPassesInt8BAndCompilesWithNvcc) {
  std::string why;  // the CUDA target packages a CUTLASS choice with the headers' flags
  if (!codegen::gemm::find_cutlass_headers(&why))
    GTEST_SKIP() << "CUTLASS headers not found (" << why << ")";
  const auto g = ir::parse_graph(kCase21);
  codegen::CodegenOptions co;
  co.target = "cuda-sm90";
  passes::PipelineOptions po = codegen::pipeline_for(co);
  po.mixed_gemm = true;
  passes::Program program = passes::compile_to_program(*g, po);
  passes::GemmStep* step = nullptr;
  int kernels = 0;
  for (auto& s : program.steps) {
    if (auto* gs = std::get_if<passes::GemmStep>(&s)) step = gs;
    kernels += std::holds_alternative<passes::LoopKernel>(s);
  }
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(kernels, 0);  // no conversion kernel
  ASSERT_TRUE(step->b_dtype.has_value());
  // the problem the tuner poses: mixed_mm, int8 B column-major, only the mixed family
  const codegen::gemm::GemmProblem p = codegen::gemm::problem_of(program, *step, "cuda-sm90");
  EXPECT_EQ(p.op, codegen::gemm::GemmOp::kMixedMm);
  EXPECT_EQ(p.b_dtype, DType::kInt8);
  EXPECT_TRUE(p.trans_b);
  EXPECT_EQ(p.align_b, 16);
  codegen::gemm::GemmOptions go;
  go.mode = codegen::gemm::AutotuneMode::kFast;
  const auto offered = codegen::gemm::gemm_candidates(p, go, {}, 90);
  EXPECT_FALSE(offered.empty());
  for (const auto& c : offered) {  // no cuBLASLt: it takes one dtype
    EXPECT_EQ(c.backend, codegen::gemm::GemmBackend::kCutlass) << c.name;
    EXPECT_NE(c.name.find("_f16_s8_"), std::string::npos) << c.name;
  }
  const auto cands = codegen::gemm::cutlass_candidates(p, 90);
  ASSERT_FALSE(cands.empty());
  const codegen::gemm::GemmCandidate& c = cands[0];
  step->choice = {c.name, 0, 0, c.entry, c.source, 1.0, 1, c.fuses_bias, c.fuses_activation};

  const codegen::CodegenResult gen = codegen::generate_program(program, co);
  std::vector<codegen::SourceFile> files;
  bool kernel_unit = false;
  std::string calls;
  for (const auto& s : gen.sources) {
    if (s.filename.rfind("gemm_kernel_", 0) == 0) {
      // the CUTLASS unit: a stub with its entry points instead
      EXPECT_NE(s.text.find(c.entry), std::string::npos);
      kernel_unit = true;
      files.push_back({s.filename,
                       "#include \"anvil/anvil_rt.h\"\n#include <cstddef>\nextern \"C\" int " +
                           c.entry + "(const AnvilGemmCall*, void*, size_t, void*) { return 1; }\n"
                           "extern \"C\" size_t " + c.entry +
                           "_workspace(const AnvilGemmCall*) { return 0; }\n",
                       {}, ""});
      continue;
    }
    calls += s.text;
    files.push_back({s.filename, s.text, s.flags, s.cache_name});
  }
  EXPECT_TRUE(kernel_unit);
  const std::string i8 = std::to_string(static_cast<int>(DType::kInt8));
  const std::string f16 = std::to_string(static_cast<int>(DType::kFloat16));
  EXPECT_NE(calls.find("call.a_dtype = call.c_dtype = " + f16 + "; call.b_dtype = " + i8 +
                       ";  // mixed: i8 B converted in the kernel"),
            std::string::npos)
      << calls;
  EXPECT_NE(calls.find("call.b = reinterpret_cast<int8_t*>("), std::string::npos) << calls;
  EXPECT_NE(calls.find(c.entry + "(&call, ws, ws_bytes, s.stream)"), std::string::npos);

  codegen::ToolchainOptions to;
  to.target = "cuda-sm90";
  to.cache_dir = (dir_ / "cache").string();
  to.progress = codegen::ProgressMode::kQuiet;
  to.jobs = 1;
  const std::string so = (dir_ / "model.so").string();
  codegen::find_target("cuda-sm90").build(files, so, to);
  EXPECT_TRUE(fs::exists(so));
}

TEST_F(MixedGemmEmit, WithoutAMixedKernelTheGemmIsLoweredAgainAsConversionAndGemm) {
  const auto g = ir::parse_graph(kCase21);
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.cache_dir = (dir_ / "cache").string();
  o.progress = codegen::ProgressMode::kQuiet;
  o.compiler = "/bin/false";  // emission only: the compile stops after the sources
  o.emit_source_dir = (dir_ / "src").string();
  o.gemm.mode = codegen::gemm::AutotuneMode::kFast;
  o.gemm.backends = {codegen::gemm::GemmBackend::kCutlass};
  const std::string err = ::anvil::test::error_message(
      [&] { driver::compile_graph(*g, (dir_ / "m.anvil").string(), o); });
  EXPECT_FALSE(err.empty());  // /bin/false
  const std::string program = read_text(dir_ / "src" / "program.txt");
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(program.find("b_dtype="), std::string::npos) << program;
  const std::string code = read_text(dir_ / "src" / "kernels_0.cu");
  EXPECT_EQ(code.find("mixed:"), std::string::npos);
  EXPECT_NE(code.find("GEMM, cuBLASLt"), std::string::npos) << code;
}

}  // namespace
}  // namespace anvil
