// How the CUDA target launches its loop and row kernels (codegen/cuda/emit_cuda.cpp pdl_mode),
// without a GPU, on the row graph of tests/gpu/cuda_row_graphs.inc (pointwise, vectorized and
// row kernels beside GEMMs): by default each is a programmatic dependent launch (anvil_launch)
// whose kernel waits for its producer in its first statement, extern kernels (pools, direct
// convolutions) included; ANVIL_CUDA_PDL=2 also lets the
// next kernel be scheduled early; =0 gives plain <<<>>> launches and no waits; any other value
// is an error naming the variable. tests/gpu/test_cuda_rows.cpp runs every mode on a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../gpu/cuda_row_graphs.inc"
#include "common/check.h"
#include "common/nvcc_sample.h"
#include "common/scoped_env.h"
#include "common/text.h"
#include "cuda_compile_fixture.h"
#include "driver/compile.h"
#include "ir/parser.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

class CudaLaunchEmit : public test::CudaCompileTest {
 protected:
  /// The .cu sources of kRowGraph emitted into dir_/name (nvcc builds them when `build`).
  std::string emit(const std::string& name, bool build = false) {
    opts_.emit_source_dir = (dir_ / name).string();
    opts_.emit_only = !build;
    driver::compile_graph(*ir::parse_graph(kRowGraph), (dir_ / (name + ".anvil")).string(), opts_);
    std::string text;
    for (const auto& f : fs::directory_iterator(dir_ / name)) {
      if (f.path().extension() != ".cu") continue;
      std::ifstream in(f.path());
      text += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
    return text;
  }
};

/// Each __global__ function's first statement, in order (the line after its opening brace).
std::vector<std::string> first_statements(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = text.find("__global__ "); at != std::string::npos;
       at = text.find("__global__ ", at + 1)) {
    const size_t open = text.find(") {\n", at);
    if (open == std::string::npos) break;
    const size_t start = open + 4, end = text.find('\n', start);
    out.push_back(text.substr(start, end - start));
  }
  return out;
}

TEST_F(CudaLaunchEmit, KernelsAreProgrammaticLaunchesThatWaitForTheirProducerFirst) {
  const std::string text = emit("pdl", test::nvcc_this_test("pdl"));
  const auto firsts = first_statements(text);
  ASSERT_GE(firsts.size(), 10u) << "the row graph's loop, vector and row kernels";
  for (const auto& s : firsts) EXPECT_EQ(s, "  anvil_grid_wait();") << text.substr(0, 4000);
  EXPECT_GE(test::count(text, "anvil_launch(s, "), firsts.size());
  EXPECT_EQ(text.find("<<<"), std::string::npos) << "no plain launch of a loop or row kernel";
  EXPECT_EQ(text.find("  anvil_grid_trigger();\n"), std::string::npos);
}

// Extern kernels (here a max pool and a depthwise convolution's direct kernel) launch the same
// way, with their dynamic shared memory.
TEST_F(CudaLaunchEmit, ExternKernelsAreProgrammaticLaunchesToo) {
  opts_.emit_source_dir = (dir_ / "ext").string();
  opts_.emit_only = true;
  driver::compile_graph(*ir::parse_graph(R"(graph {
  inputs {
    %x: f32[2, 8, 12, 12] = user_input
    %w: f32[8, 1, 3, 3] = user_input
  }
  %c: f32[2, 8, 12, 12] = aten.conv2d.default(input=%x, weight=%w, padding=[1, 1], groups=8)
  %m: f32[2, 8, 6, 6] = aten.max_pool2d.default(self=%c, kernel_size=[2, 2], stride=[2, 2], padding=[0, 0], dilation=[1, 1], ceil_mode=False)
  outputs {
    user_output %m
  }
})"),
                        (dir_ / "ext.anvil").string(), opts_);
  std::string text;
  for (const auto& f : fs::directory_iterator(dir_ / "ext")) {
    if (f.path().extension() != ".cu") continue;
    std::ifstream in(f.path());
    text += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  EXPECT_GE(test::count(text, "anvil_launch_shared(s, "), 2u) << text;
  EXPECT_EQ(text.find("<<<"), std::string::npos);
  for (const auto& s : first_statements(text)) EXPECT_EQ(s, "  anvil_grid_wait();");
}

TEST_F(CudaLaunchEmit, ModeTwoAlsoLetsTheNextKernelStartEarly) {
  const test::ScopedEnv mode("ANVIL_CUDA_PDL", "2");
  const std::string text = emit("early");
  const auto firsts = first_statements(text);
  ASSERT_GE(firsts.size(), 10u);
  for (const auto& s : firsts) EXPECT_EQ(s, "  anvil_grid_wait();");
  EXPECT_EQ(test::count(text, "  anvil_grid_wait();\n  anvil_grid_trigger();\n"), firsts.size());
}

TEST_F(CudaLaunchEmit, ModeZeroLaunchesAsBeforeAndBadValuesAreErrors) {
  {
    const test::ScopedEnv mode("ANVIL_CUDA_PDL", "0");
    const std::string text = emit("plain");
    EXPECT_EQ(text.find("anvil_launch(s, "), std::string::npos);
    EXPECT_EQ(text.find("  anvil_grid_wait();"), std::string::npos);
    EXPECT_GE(test::count(text, "<<<"), 10u);
  }
  const test::ScopedEnv mode("ANVIL_CUDA_PDL", "yes");
  const std::string msg = test::error_message([&] { emit("bad"); });
  EXPECT_TRUE(test::error_says(msg, "ANVIL_CUDA_PDL names no launch mode")) << msg;
  EXPECT_TRUE(test::error_says(msg, "0 (plain launches), 1")) << msg;
  EXPECT_TRUE(test::error_says(msg, "yes")) << msg;
}

}  // namespace
}  // namespace anvil
