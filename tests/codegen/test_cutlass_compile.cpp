// Compiles ONE representative CUTLASS candidate (the linear case: bf16, B column-major, per-column
// bias + relu, beta * C, cooperative 128x128x64 1x2x1) through nvcc into a shared library, loads
// it, and checks that its entry points exist and refuse calls that do not fit it (no GPU needed:
// the checks run before any CUDA call). One nvcc run of a CUTLASS 3.x TU takes minutes on a
// 2-core machine, so the test runs only with ANVIL_CUTLASS_COMPILE_TEST=1; it skips, saying why,
// without it or without CUTLASS's headers. bench/cutlass_compile_all.sh compiles every candidate.
// A second test does the same for a mixed fp16 x int8 candidate.
#include <dlfcn.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "anvil/anvil_rt.h"
#include "codegen/gemm/cutlass_candidates.h"
#include "codegen/toolchain.h"
#include "core/error.h"

namespace anvil::codegen::gemm {
namespace {

namespace fs = std::filesystem;

TEST(CutlassCompile, OneCandidateBuildsAndRefusesMismatchedCalls) {
  const char* on = std::getenv("ANVIL_CUTLASS_COMPILE_TEST");
  if (!on || std::string(on) != "1")
    GTEST_SKIP() << "nvcc on a CUTLASS kernel takes minutes: set ANVIL_CUTLASS_COMPILE_TEST=1";
  std::string why;
  const auto headers = find_cutlass_headers(&why);
  if (!headers) GTEST_SKIP() << "CUTLASS headers not found (" << why << ")";

  GemmProblem p;
  p.op = GemmOp::kAddmm;
  p.m = 256;
  p.n = 512;
  p.k = 128;
  p.a_dtype = p.b_dtype = p.out_dtype = DType::kBFloat16;
  p.trans_b = true;
  p.align_a = p.align_b = p.align_c = 8;
  p.bias = GemmBias::kPerColumn;
  p.activation = GemmActivation::kRelu;
  p.alpha = 2.0;
  p.beta = 0.4;
  const auto cands = cutlass_candidates(p, 90);
  const std::string want =
      "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x2x1_0_tnt_align8_"
      "warpspecialized_cooperative_epi_tma_bias_col_relu";
  const GemmCandidate* cand = nullptr;
  for (const auto& c : cands)
    if (c.name == want) cand = &c;
  ASSERT_NE(cand, nullptr);
  ASSERT_TRUE(cand->fuses_bias && cand->fuses_activation);

  const fs::path dir = fs::temp_directory_path() / ("anvil_cutlass_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ToolchainOptions opt = cutlass_toolchain_options(*headers);
  opt.cache_dir = (dir / "cache").string();  // a fresh cache: nvcc really runs
  opt.jobs = 1;
  const auto t0 = std::chrono::steady_clock::now();
  const BuildResult r =
      build_shared_library({{"cand.cu", cand->source}}, (dir / "cand.so").string(), opt);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ cutlass ] %s compiled in %.1f s\n", cand->name.c_str(), secs);
  EXPECT_EQ(r.compiled, 1);

  void* so = dlopen(r.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  using Entry = int (*)(const AnvilGemmCall*, void*, size_t, void*);
  using Workspace = size_t (*)(const AnvilGemmCall*);
  auto entry = reinterpret_cast<Entry>(dlsym(so, cand->entry.c_str()));
  auto ws = reinterpret_cast<Workspace>(dlsym(so, (cand->entry + "_workspace").c_str()));
  ASSERT_NE(entry, nullptr);
  ASSERT_NE(ws, nullptr);

  // A call that fits except for one field: each variant is refused before any CUDA call.
  alignas(16) static char buf[64];
  AnvilGemmCall ok{};
  ok.a_dtype = ok.b_dtype = ok.c_dtype = static_cast<int32_t>(DType::kBFloat16);
  ok.trans_a = 0;
  ok.trans_b = 1;
  ok.m = 256;
  ok.n = 512;
  ok.k = 128;
  ok.c = buf;
  ok.a = ok.b = ok.bias = buf;
  ok.lda = ok.ldb = 128;
  ok.ldc = 512;
  ok.alpha = 2.0f;
  ok.beta = 0.4f;
  ok.bias_kind = ANVIL_GEMM_BIAS_COL;
  ok.activation = ANVIL_GEMM_ACT_RELU;
  EXPECT_EQ(entry(nullptr, nullptr, 0, nullptr), kCutlassCallMismatch);
  EXPECT_EQ(ws(nullptr), 0u);
  auto refused = [&](auto mutate, int code) {
    AnvilGemmCall c = ok;
    mutate(c);
    EXPECT_EQ(entry(&c, nullptr, 0, nullptr), code);
    EXPECT_EQ(ws(&c), 0u);
  };
  refused([](AnvilGemmCall& c) { c.a_dtype = static_cast<int32_t>(DType::kFloat16); }, 1);
  refused([](AnvilGemmCall& c) { c.trans_b = 0; }, 1);
  refused([](AnvilGemmCall& c) { c.bias_kind = ANVIL_GEMM_BIAS_ROW; }, 1);
  refused([](AnvilGemmCall& c) { c.activation = ANVIL_GEMM_ACT_SILU; }, 1);
  refused([](AnvilGemmCall& c) { c.bias = nullptr; }, 1);
  refused([](AnvilGemmCall& c) { c.k = 0; }, 1);
  refused([](AnvilGemmCall& c) { c.lda = 129; }, kCutlassMisaligned);
  refused([](AnvilGemmCall& c) { c.b = buf + 2; }, kCutlassMisaligned);
  dlclose(so);
  fs::remove_all(dir);
}

// The mixed-input family (spec B.5 case 21): fp16 A[100,16] @ (int8[100,16])^T, rows of D not
// 16-byte aligned (the non-TMA epilogue): CUTLASS's mixed-input mainloop on the transposed
// problem compiles, and its entries refuse calls that do not fit it before any CUDA call.
TEST(CutlassCompile, MixedInputCandidateBuildsAndRefusesMismatchedCalls) {
  const char* on = std::getenv("ANVIL_CUTLASS_COMPILE_TEST");
  if (!on || std::string(on) != "1")
    GTEST_SKIP() << "nvcc on a CUTLASS kernel takes minutes: set ANVIL_CUTLASS_COMPILE_TEST=1";
  std::string why;
  const auto headers = find_cutlass_headers(&why);
  if (!headers) GTEST_SKIP() << "CUTLASS headers not found (" << why << ")";
  GemmProblem p;
  p.op = GemmOp::kMixedMm;
  p.m = 100;
  p.n = 100;
  p.k = 16;
  p.a_dtype = p.out_dtype = DType::kFloat16;
  p.b_dtype = DType::kInt8;
  p.acc_dtype = DType::kFloat32;
  p.trans_b = true;
  p.align_a = 8;
  p.align_b = 16;
  p.align_c = 4;
  const auto cands = cutlass_candidates(p, 90);
  ASSERT_FALSE(cands.empty());
  const GemmCandidate& cand = cands[0];
  ASSERT_EQ(cand.name,
            "cutlass3x_sm90_tensorop_gemm_f16_s8_f32_void_f16_128x128x64_1x1x1_0_tnt_align8x16_"
            "warpspecialized_cooperative_epi_nosmem");
  const fs::path dir = fs::temp_directory_path() / ("anvil_cutlass_mx_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ToolchainOptions opt = cutlass_toolchain_options(*headers);
  opt.cache_dir = (dir / "cache").string();
  opt.jobs = 1;
  const auto t0 = std::chrono::steady_clock::now();
  const BuildResult r = build_shared_library({{"mixed.cu", cand.source}}, (dir / "mixed.so").string(), opt);
  std::printf("[ cutlass ] %s compiled in %.1f s\n", cand.name.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  EXPECT_EQ(r.compiled, 1);
  void* so = dlopen(r.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  using Entry = int (*)(const AnvilGemmCall*, void*, size_t, void*);
  using Workspace = size_t (*)(const AnvilGemmCall*);
  auto entry = reinterpret_cast<Entry>(dlsym(so, cand.entry.c_str()));
  auto ws = reinterpret_cast<Workspace>(dlsym(so, (cand.entry + "_workspace").c_str()));
  ASSERT_NE(entry, nullptr);
  ASSERT_NE(ws, nullptr);

  alignas(16) static char buf[64];
  AnvilGemmCall ok{};
  ok.a_dtype = ok.c_dtype = static_cast<int32_t>(DType::kFloat16);
  ok.b_dtype = static_cast<int32_t>(DType::kInt8);
  ok.trans_b = 1;
  ok.m = 100;
  ok.n = 100;
  ok.k = 16;
  ok.a = ok.b = ok.c = buf;
  ok.lda = ok.ldb = 16;
  ok.ldc = 100;
  ok.alpha = 1.0f;
  auto refused = [&](auto mutate, int code) {
    AnvilGemmCall c = ok;
    mutate(c);
    EXPECT_EQ(entry(&c, nullptr, 0, nullptr), code);
    EXPECT_EQ(ws(&c), 0u);
  };
  refused([](AnvilGemmCall& c) { c.b_dtype = static_cast<int32_t>(DType::kFloat16); }, 1);
  refused([](AnvilGemmCall& c) { c.trans_b = 0; }, 1);
  refused([](AnvilGemmCall& c) { c.beta = 0.5f; }, 1);  // void C: no source
  refused([](AnvilGemmCall& c) { c.bias_kind = ANVIL_GEMM_BIAS_COL; }, 1);
  refused([](AnvilGemmCall& c) { c.ldb = 24; }, kCutlassMisaligned);  // int8 rows of 16 bytes
  refused([](AnvilGemmCall& c) { c.ldc = 102; }, kCutlassMisaligned);  // C aligned to 4
  refused([](AnvilGemmCall& c) { c.b = buf + 8; }, kCutlassMisaligned);
  dlclose(so);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace anvil::codegen::gemm
