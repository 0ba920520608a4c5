// Pooling on the CUDA target without a GPU: max_pool2d, avg_pool2d and adaptive_avg_pool2d of
// floating tensors are CUDA kernels (no host step: a host step drains the stream and keeps the
// run out of a CUDA graph), their geometry baked into the kernel; an integer max pool stays a
// host step with its reason; global average pools are reductions. The source compiles with
// nvcc (in CI when the seeded sample of common/nvcc_sample.h picks it). The values are checked
// on a GPU by CudaPool.PoolingKernelsMatchTheInterpreter (tests/gpu/test_cuda_spec_cases.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/nvcc_sample.h"
#include "common/scoped_env.h"
#include "common/text.h"
#include "driver/compile.h"
#include "ir/parser.h"
#include <nlohmann/json.hpp>

namespace anvil {
namespace {

namespace fs = std::filesystem;

/// Options compiling for cuda-sm90 into DIR (its cache, the sources under DIR/src), quietly.
driver::CompileOptions cuda_options(const fs::path& dir) {
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.cache_dir = (dir / "cache").string();
  o.progress = codegen::ProgressMode::kQuiet;
  o.emit_source_dir = (dir / "src").string();
  return o;
}

TEST(CudaPoolEmit, FloatingPoolsAreKernelsAndIntegerOnesHostSteps) {
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_pool_emit_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  driver::CompileOptions o = cuda_options(dir);
  const auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[2, 3, 17, 19] = user_input
    %h: bf16[3, 14, 14] = user_input
    %i: i32[1, 2, 8, 8] = user_input
    %t: f16[2, 9, 11, 40] = user_input
    %u: f16[2, 9, 11, 6] = user_input
  }
  %m: f32[2, 3, 8, 10] = aten.max_pool2d.default(self=%x, kernel_size=[3, 2], stride=[2, 2], padding=[1, 1], dilation=[2, 1], ceil_mode=True)
  %a: f32[2, 3, 8, 9] = aten.avg_pool2d.default(self=%x, kernel_size=[2, 2], stride=[], padding=[0, 0], ceil_mode=False, count_include_pad=True, divisor_override=3)
  %d: bf16[3, 4, 4] = aten.adaptive_avg_pool2d.default(self=%h, output_size=[4, 4])
  %n: i32[1, 2, 4, 4] = aten.max_pool2d.default(self=%i, kernel_size=[2, 2], stride=[], padding=[0, 0], dilation=[1, 1], ceil_mode=False)
  %g: f32[2, 3, 1, 1] = aten.adaptive_avg_pool2d.default(self=%x, output_size=[1, 1])
  %cl: f16[2, 40, 9, 11] = aten.permute.default(self=%t, dims=[0, 3, 1, 2])
  %gl: f16[2, 40, 1, 1] = aten.adaptive_avg_pool2d.default(self=%cl, output_size=[1, 1])
  %cu: f16[2, 6, 9, 11] = aten.permute.default(self=%u, dims=[0, 3, 1, 2])
  %gu: f16[2, 6, 1, 1] = aten.adaptive_avg_pool2d.default(self=%cu, output_size=[1, 1])
  outputs {
    user_output %gu
    user_output %g
    user_output %gl
    user_output %m
    user_output %a
    user_output %d
    user_output %n
  }
})");
  o.emit_only = !test::nvcc_this_test();  // nvcc compiles it on CI's sample (nvcc_sample.h)
  driver::compile_graph(*g, (dir / "pool.anvil").string(), o);
  std::ifstream mf(dir / "src" / "manifest.json");
  ASSERT_TRUE(mf.good());
  const auto m = nlohmann::json::parse(mf);
  ASSERT_EQ(m.at("host_steps").size(), 1u) << m.at("host_steps").dump();
  EXPECT_NE(m["host_steps"][0].at("why").get<std::string>().find("non-floating"),
            std::string::npos)
      << m["host_steps"][0].dump();
  std::ifstream k(dir / "src" / "kernels_0.cu");
  const std::string text((std::istreambuf_iterator<char>(k)), std::istreambuf_iterator<char>());
  // the geometry is constant in the kernels: max pool's dilation 2 rows, avg's divisor 3
  EXPECT_NE(text.find("ki * 2"), std::string::npos);
  EXPECT_NE(text.find("/ static_cast<float>(3)"), std::string::npos);
  EXPECT_NE(text.find("isnan(v)"), std::string::npos) << "max pool propagates NaN";
  // global average pools are reductions: a warp per NCHW plane (323 positions); a block per
  // image for the channels-last one of 40 channels (5 vectors of 8 wide, 204 rows of positions
  // deep: 1024 threads, the blocks being few); a block per 32 channels for the one of 6 (not
  // whole vectors)
  EXPECT_NE(text.find("for (int pos = lane; pos < 323; pos += 32)"), std::string::npos);
  EXPECT_NE(text.find("__shared__ float part[204][40];"), std::string::npos);
  EXPECT_NE(text.find("for (int pos = row; pos < 99; pos += 204)"), std::string::npos);
  EXPECT_NE(text.find("__shared__ float part[8][33];"), std::string::npos);
  EXPECT_NE(text.find("for (int pos = threadIdx.y; pos < 99; pos += 8)"), std::string::npos);
  fs::remove_all(dir);
}

TEST(CudaPoolEmit, SplitGlobalAveragePoolsSumPartsInTheWorkspace) {
  // ANVIL_CUDA_POOL_SPLIT=1 (opt-in): a channels-last global average pool of few blocks (16
  // bf16 channels of 56 x 56 at batch 2: 2 vector lanes, 128 rows, one block per image) is
  // split along the plane (min(528 / 2 blocks, 3136 / (128 * 4), 64) = 6 splits) into partial
  // sums in the stream's workspace, then a kernel adds the 6 in order; a plane of 15
  // positions is not split (CudaPool.SplitGlobalAveragePools* checks the values on a GPU)
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_pool_split_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const test::ScopedEnv split("ANVIL_CUDA_POOL_SPLIT", "1");
  driver::CompileOptions o = cuda_options(dir);
  const auto g = ir::parse_graph(R"(graph {
  inputs {
    %v: bf16[2, 56, 56, 16] = user_input
    %z: bf16[2, 5, 3, 24] = user_input
  }
  %vs: bf16[2, 56, 56, 16] = aten.add.Tensor(self=%v, other=2.0)
  %vp: bf16[2, 16, 56, 56] = aten.permute.default(self=%vs, dims=[0, 3, 1, 2])
  %a: bf16[2, 16, 1, 1] = aten.adaptive_avg_pool2d.default(self=%vp, output_size=[1, 1])
  %zp: bf16[2, 24, 5, 3] = aten.permute.default(self=%z, dims=[0, 3, 1, 2])
  %c: bf16[2, 24, 1, 1] = aten.adaptive_avg_pool2d.default(self=%zp, output_size=[1, 1])
  outputs {
    user_output %a
    user_output %c
  }
})");
  o.emit_only = !test::nvcc_this_test();  // nvcc compiles it on CI's sample (nvcc_sample.h)
  driver::compile_graph(*g, (dir / "split.anvil").string(), o);
  std::string text;
  for (const auto& f : fs::directory_iterator(dir / "src"))
    if (f.path().extension() == ".cu") {
      std::ifstream in(f.path());
      text += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
  EXPECT_EQ(test::count(text, " splits of each plane's positions, then their sum"), 1u);
  EXPECT_NE(text.find("6 splits of each plane's positions"), std::string::npos);
  EXPECT_NE(text.find("for (int pos = sp * 128 + row; pos < 3136; pos += 768)"),
            std::string::npos);
  EXPECT_NE(text.find("wdev->workspace(wdevice, s.stream, 768))"), std::string::npos)
      << "2 images x 6 splits x 16 channels x 4 bytes";
  EXPECT_NE(text.find("for (int sp = 0; sp < 6; ++sp) sum += w[sp * 16];"), std::string::npos);
  EXPECT_NE(text.find("float* __restrict__ ws)"), std::string::npos);
  // no workspace (out of device memory, an older backend): the single kernel instead
  EXPECT_NE(text.find("s.stream, 768) == nullptr)\n    return ext"), std::string::npos);
  EXPECT_EQ(test::count(text, "_whole(s);"), 1u);
  if (!o.emit_only) {
    EXPECT_TRUE(fs::exists(dir / "split.anvil"));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace anvil
