// anvil's skinny CUDA GEMM without a GPU: which problems get configurations, in what order, and
// that nvcc compiles the rendered units (split K over a cluster and not, bf16 and fp16, fused
// epilogues); the tuner's epilogue stand-in, built the same way. The values are checked on a GPU by
// CudaSkinny.* (tests/gpu/test_cuda_skinny.cpp).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "codegen/gemm/cuda_epilogue_standin.h"
#include "codegen/gemm/cuda_skinny.h"
#include "codegen/gemm/gemm_filter.h"
#include "common/nvcc_sample.h"
#include "driver/compile.h"
#include "ir/parser.h"

namespace anvil::codegen::gemm {
namespace {

namespace fs = std::filesystem;

GemmProblem linear(int64_t m, int64_t n, int64_t k, DType t = DType::kBFloat16) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a_dtype = p.b_dtype = p.out_dtype = t;
  p.trans_b = true;
  p.align_a = p.align_b = p.align_c = 8;
  p.target = "cuda-sm90";
  return p;
}

TEST(SkinnyEmit, OnlySkinnySixteenBitLinearProblemsOnSm90GetConfigurations) {
  EXPECT_FALSE(skinny_configs(linear(64, 4096, 1024), 90).empty());
  EXPECT_FALSE(skinny_configs(linear(1, 96, 8, DType::kFloat16), 90).empty());
  EXPECT_TRUE(skinny_configs(linear(64, 4096, 1024), 80).empty()) << "clusters need sm_90";
  EXPECT_TRUE(skinny_configs(linear(512, 4096, 1024), 90).empty()) << "M over 256";
  EXPECT_TRUE(skinny_configs(linear(64, 4096, 1020), 90).empty()) << "K % 8";
  EXPECT_TRUE(skinny_configs(linear(64, 4096, 1024, DType::kFloat32), 90).empty());
  GemmProblem p = linear(64, 4096, 1024);
  p.trans_b = false;
  EXPECT_TRUE(skinny_configs(p, 90).empty()) << "B [K,N]";
  p = linear(64, 4096, 1024);
  p.beta = 1.0;
  EXPECT_TRUE(skinny_configs(p, 90).empty()) << "a C source";
  p = linear(64, 4096, 1024);
  p.bias = GemmBias::kPerRow;
  EXPECT_TRUE(skinny_configs(p, 90).empty());
  p = linear(64, 4096, 1024);
  p.align_a = 4;
  EXPECT_TRUE(skinny_configs(p, 90).empty());
  p.m.reset();
  EXPECT_TRUE(skinny_configs(p, 90).empty()) << "symbolic M";
}

TEST(SkinnyEmit, ConfigurationsFitSharedMemoryAndSplitKOnlyWithEnoughSteps) {
  for (const auto& c : skinny_configs(linear(64, 1024, 512), 90)) {
    EXPECT_LE(c.smem_bytes(), 227 * 1024) << skinny_config_name(c);
    EXPECT_LE(c.split_k, 2) << "4 K steps: at most 2 per split" << skinny_config_name(c);
    EXPECT_EQ(c.m_tiles, 4);
  }
  const auto tiny = skinny_configs(linear(16, 64, 128), 90);
  ASSERT_FALSE(tiny.empty());
  for (const auto& c : tiny) {
    EXPECT_EQ(c.split_k, 1);
    EXPECT_EQ(c.m_tiles, 1);
  }
  // The MLP's wide GEMM: the first choice spreads the weight over (nearly) every SM.
  const auto wide = skinny_configs(linear(64, 4096, 4096), 90);
  ASSERT_FALSE(wide.empty());
  const SkinnyConfig& c = wide.front();
  const int64_t ctas = (4096 + c.n_tile - 1) / c.n_tile * c.split_k;
  EXPECT_GE(ctas, 100) << skinny_config_name(c);
}

TEST(SkinnyEmit, NamesCarryTheConfigurationAndEpilogue) {
  SkinnyConfig c;
  c.bias = GemmBias::kPerColumn;
  c.activation = GemmActivation::kGeluErf;
  EXPECT_EQ(skinny_config_name(c), "anvil_skinny_sm90_bf16_m64_n64_w1x4_s4_st4_bias_gelu_erf");
  GemmCandidate g;
  g.backend = GemmBackend::kOwn;
  g.name = skinny_config_name(c);
  EXPECT_TRUE(is_skinny_candidate(g));
  g.backend = GemmBackend::kCutlass;
  EXPECT_FALSE(is_skinny_candidate(g));
}

TEST(SkinnyEmit, NvccCompilesTheRenderedUnits) {
  const fs::path dir = fs::temp_directory_path() / ("anvil_skinny_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  SkinnyConfig a;  // bf16, split over a cluster of 4, bias + erf GELU
  a.bias = GemmBias::kPerColumn;
  a.activation = GemmActivation::kGeluErf;
  SkinnyConfig b;  // fp16, one CTA per tile (no cluster), relu6, 8 warps (4 along N, 2 along K)
  b.dtype = DType::kFloat16;
  b.m_tiles = 1;
  b.n_tile = 128;
  b.warps = 8;
  b.warps_n = 4;
  b.split_k = 1;
  b.stages = 3;
  b.activation = GemmActivation::kRelu6;
  ToolchainOptions o = skinny_toolchain_options();
  o.jobs = 2;
  o.cache_dir = (dir / "cache").string();
  const auto r = build_shared_library(
      {{"a.cu", render_skinny_source(a, "entry_a")}, {"b.cu", render_skinny_source(b, "entry_b")}},
      (dir / "skinny.so").string(), o);
  EXPECT_TRUE(fs::exists(r.so_path));
  fs::remove_all(dir);
}

// The tuner's epilogue stand-in (cuda_epilogue_standin.h) builds with the same nvcc options and
// exports the entry and its workspace query, as the tuning child looks them up. Its timing on a
// GPU: CudaAutotuneSpec.CublasLtCandidatesWithAnUnfusedGeluAreTimed.
TEST(SkinnyEmit, TheTunersEpilogueStandinBuildsAndExportsItsEntry) {
  const std::string src = epilogue_standin_source();
  EXPECT_NE(src.find(std::string("int ") + kEpilogueStandinEntry + "("), std::string::npos);
  EXPECT_NE(src.find(std::string("size_t ") + kEpilogueStandinEntry + "_workspace("),
            std::string::npos);
  if (!test::nvcc_this_test()) return;  // CI compiles a seeded sample (tests/common/nvcc_sample.h)
  const fs::path dir = fs::temp_directory_path() / ("anvil_standin_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ToolchainOptions o = epilogue_standin_toolchain_options();
  o.cache_dir = (dir / "cache").string();
  const auto r = build_shared_library({{"standin.cu", src}}, (dir / "standin.so").string(), o);
  void* h = ::dlopen(r.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << ::dlerror();
  EXPECT_NE(::dlsym(h, kEpilogueStandinEntry), nullptr);
  EXPECT_NE(::dlsym(h, (std::string(kEpilogueStandinEntry) + "_workspace").c_str()), nullptr);
  ::dlclose(h);
  fs::remove_all(dir);
}

std::string read_text(const fs::path& f) {
  std::ifstream in(f);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A bf16 linear at batch 16 with a 1024 x 1024 weight, bias and erf GELU, compiled for cuda-sm90
// with --autotune off: the step calls the skinny kernel with the epilogue fused, cuBLASLt (and
// the GELU kernel) where the kernel refuses the call, and nvcc builds the package. Off with
// ANVIL_CUDA_SKINNY=0 and with a backend list without "own".
TEST(SkinnyEmit, ASkinnyLinearUsesTheKernelWithoutTuning) {
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_skinny_pkg_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto graph = [](int m) {
    const std::string x = "bf16[" + std::to_string(m) + ", 1024]";
    return ir::parse_graph(
        "graph {\n  inputs {\n    %x: " + x +
        " = user_input\n"
        "    %w: bf16[1024, 1024] = user_input\n    %b: bf16[1024] = user_input\n"
        "  }\n  %l: " +
        x +
        " = aten.linear.default(input=%x, weight=%w, bias=%b)\n"
        "  %y: " +
        x +
        " = aten.gelu.default(self=%l)\n"
        "  outputs {\n    user_output %y\n  }\n}\n");
  };
  auto compile = [&](const std::string& name, const std::string& backends, int m = 16) {
    driver::CompileOptions o;
    o.target = "cuda-sm90";
    o.cache_dir = (dir / "cache").string();
    o.progress = ProgressMode::kQuiet;
    o.emit_source_dir = (dir / name).string();
    if (!backends.empty()) o.gemm.backends = parse_backends(backends);
    driver::compile_graph(*graph(m), (dir / (name + ".anvil")).string(), o);
    return read_text(dir / name / "model.cu") + read_text(dir / name / "kernels_0.cu");
  };
  const std::string on = compile("on", "");
  EXPECT_NE(on.find("anvil_skinny_sm90_bf16_m16_"), std::string::npos) << on;
  EXPECT_NE(on.find("_bias_gelu_erf(&call"), std::string::npos);
  EXPECT_NE(on.find("else cuBLASLt below"), std::string::npos);
  EXPECT_NE(on.find("dev->gemm(device"), std::string::npos) << "the fallback";
  EXPECT_NE(on.find("gemm0_epilogue(s);"), std::string::npos) << "the fallback's GELU";
  EXPECT_TRUE(fs::exists(dir / "on" / "gemm_kernel_0.cu"));
  EXPECT_TRUE(fs::exists(dir / "on.anvil"));
  EXPECT_EQ(compile("lt", "cublaslt,cutlass").find("anvil_skinny"), std::string::npos);
  // batch 17 and up: cuBLASLt (the kernel loses to it at M 64 on an H100 / H200)
  EXPECT_EQ(compile("m17", "", 17).find("anvil_skinny"), std::string::npos);
  ::setenv("ANVIL_CUDA_SKINNY", "0", 1);
  const std::string off = compile("off", "");
  ::unsetenv("ANVIL_CUDA_SKINNY");
  EXPECT_EQ(off.find("anvil_skinny"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace anvil::codegen::gemm
