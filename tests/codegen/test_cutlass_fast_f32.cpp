// CUTLASS's 3xTF32 kernels for fp32 GEMMs without a GPU: the autotuner's candidates
// (cutlass_candidates.h CutlassConfig::fast_f32), which problems get them and in what order, that
// nvcc compiles a rendered unit whose entries refuse calls that do not fit it; and that an
// untuned fp32 package asks the device backend for its prebuilt one (anvil_device.h
// ANVIL_FP32_3XTF32). Their values are checked on a GPU by
// CudaFastF32.* (tests/gpu/test_cuda_fast_f32.cpp).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "anvil/anvil_rt.h"
#include "codegen/gemm/cutlass_candidates.h"
#include "codegen/gemm/gemm_filter.h"
#include "driver/compile.h"
#include "ir/parser.h"

namespace anvil::codegen::gemm {
namespace {

namespace fs = std::filesystem;

GemmProblem f32(int64_t m, int64_t n, int64_t k) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.trans_b = true;  // a linear layer's weight [N, K]
  p.align_a = p.align_b = p.align_c = 4;
  p.target = "cuda-sm90";
  return p;
}

TEST(CutlassFastF32, Fp32ProblemsGetTheThreeTf32KernelsLargestTileFirst) {
  const auto c = cutlass_candidates(f32(1024, 3072, 1024), 90);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].name,
            "cutlass2x_sm80_tensorop_3xtf32_gemm_f32_f32_f32_f32_128x64x32_64x32x32_4_tnt_align4");
  for (const auto& g : c) {
    EXPECT_TRUE(is_fast_f32_name(g.name)) << g.name;
    EXPECT_TRUE(has_library_fallback(g.name));
    EXPECT_EQ(g.backend, GemmBackend::kCutlass);
    EXPECT_FALSE(g.fuses_bias || g.fuses_activation);
    EXPECT_NE(g.source.find("cutlass::arch::OpMultiplyAddFastF32"), std::string::npos);
    EXPECT_NE(
        g.source.find("extern \"C\" __attribute__((visibility(\"default\"))) int " + g.entry + "("),
        std::string::npos);
  }
  // M <= 256: the 64 x 64 tile first (it tied cuBLASLt at M 256 where 128 x 64 lost)
  EXPECT_NE(cutlass_candidates(f32(256, 1024, 1024), 90)[0].name.find("_64x64x32_32x32x32_4_"),
            std::string::npos);
  // layouts: A column-major (trans_a) is "n", B row-major [K, N] is "t"
  GemmProblem p = f32(512, 512, 512);
  p.trans_a = true;
  p.trans_b = false;
  const auto nt = cutlass_candidates(p, 90);
  ASSERT_FALSE(nt.empty());
  EXPECT_NE(nt[0].name.find("_ntt_align4"), std::string::npos);
  EXPECT_NE(nt[0].source.find("using LayoutA = cutlass::layout::ColumnMajor;"), std::string::npos);
  EXPECT_NE(nt[0].source.find("using LayoutB = cutlass::layout::RowMajor;"), std::string::npos);
  // a C source (beta, or addmm's full bias copied into C) is read at run time: same kernels
  p = f32(512, 512, 512);
  p.beta = 1.0;
  EXPECT_EQ(cutlass_candidates(p, 90).size(), 4u);
  p.bias = GemmBias::kFull;
  EXPECT_EQ(cutlass_candidates(p, 90).size(), 4u);
}

TEST(CutlassFastF32, NoKernelsWhereTheyCannotRun) {
  auto none = [](GemmProblem p, const char* why) {
    EXPECT_TRUE(cutlass_candidates(p, 90).empty()) << why;
  };
  GemmProblem p = f32(512, 512, 512);
  p.align_b = 2;
  none(p, "rows of B not 16-byte aligned");
  p = f32(512, 512, 512);
  p.align_c = 1;
  none(p, "rows of C not 16-byte aligned");
  p = f32(512, 512, 512);
  p.batch = 4;
  none(p, "batched");
  p = f32(512, 512, 512);
  p.bias = GemmBias::kPerColumn;
  none(p, "a bias vector it does not fuse");
  p = f32(512, 512, 512);
  p.activation = GemmActivation::kRelu;
  none(p, "an activation it does not fuse");
  p = f32(512, 512, 512);
  p.acc_dtype = DType::kFloat64;
  none(p, "an fp64 accumulator");
  p = f32(512, 512, 512);
  p.m.reset();
  none(p, "symbolic M");
  EXPECT_TRUE(cutlass_candidates(f32(512, 512, 512), 80).empty()) << "sm_80: not generated";
  EXPECT_TRUE(cutlass_candidates(f32(512, 512, 512), 90, CutlassOptions{false, false}).empty());
  GemmOptions o;
  o.deny_regex = "3xtf32";
  EXPECT_TRUE(filter_candidates(cutlass_candidates(f32(512, 512, 512), 90), o, 8).empty());
}

TEST(CutlassFastF32, NvccCompilesAUnitWhoseEntriesRefuseCallsThatDoNotFit) {
  std::string why;
  const auto headers = find_cutlass_headers(&why);
  if (!headers) GTEST_SKIP() << "CUTLASS headers not found (" << why << ")";
  const fs::path dir = fs::temp_directory_path() / ("anvil_fastf32_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const GemmCandidate cand = cutlass_candidates(f32(1024, 1024, 1024), 90).front();
  ToolchainOptions opt = cutlass_toolchain_options(*headers);
  opt.cache_dir = (dir / "cache").string();
  opt.jobs = 1;
  const BuildResult r =
      build_shared_library({{"cand.cu", cand.source}}, (dir / "cand.so").string(), opt);
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
  ok.a_dtype = ok.b_dtype = ok.c_dtype = static_cast<int32_t>(DType::kFloat32);
  ok.trans_b = 1;
  ok.m = ok.n = ok.k = 1024;
  ok.a = ok.b = ok.c = buf;
  ok.lda = ok.ldb = ok.ldc = 1024;
  ok.alpha = 1.0f;
  ok.beta = 1.0f;
  EXPECT_EQ(entry(nullptr, nullptr, 0, nullptr), kCutlassCallMismatch);
  auto refused = [&](auto mutate, int code) {
    AnvilGemmCall c = ok;
    mutate(c);
    EXPECT_EQ(entry(&c, nullptr, 0, nullptr), code);
    EXPECT_EQ(ws(&c), 0u);
  };
  refused([](AnvilGemmCall& c) { c.b_dtype = static_cast<int32_t>(DType::kBFloat16); }, 1);
  refused([](AnvilGemmCall& c) { c.trans_a = 1; }, 1);
  refused([](AnvilGemmCall& c) { c.bias_kind = ANVIL_GEMM_BIAS_COL; }, 1);
  refused([](AnvilGemmCall& c) { c.activation = ANVIL_GEMM_ACT_RELU; }, 1);
  refused([](AnvilGemmCall& c) { c.m = 0; }, 1);
  refused([](AnvilGemmCall& c) { c.ldb = 1026; }, kCutlassMisaligned);
  refused([](AnvilGemmCall& c) { c.a = buf + 4; }, kCutlassMisaligned);
  // contiguous extents not a multiple of 4 (rows of a view): CUTLASS would read / write past them
  refused([](AnvilGemmCall& c) { c.n = 1022; }, kCutlassMisaligned);
  refused([](AnvilGemmCall& c) { c.k = 1022; }, kCutlassMisaligned);
  refused([](AnvilGemmCall& c) { c.source = buf + 4; }, kCutlassMisaligned);
  // A call that fits: without a GPU of compute capability 9.x the kernel refuses it (the step
  // then runs cuBLASLt); on one it would launch, which tests/gpu does.
  if (std::getenv("ANVIL_REQUIRE_GPU") == nullptr) {
    int devices = 0;
    using Count = int (*)(int*);
    void* rt = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
    auto count = rt ? reinterpret_cast<Count>(dlsym(rt, "cudaGetDeviceCount")) : nullptr;
    if (!count || count(&devices) != 0 || devices == 0)
      EXPECT_EQ(entry(&ok, nullptr, 0, nullptr), kCutlassWrongArch);
  }
  dlclose(so);
  fs::remove_all(dir);
}

std::string read_text(const fs::path& f) {
  std::ifstream in(f);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The untimed path: an fp32 package for cuda-sm90 asks the device backend for its prebuilt
// 3xTF32 kernel (anvil_device.h ANVIL_FP32_3XTF32) in every fp32 GEMM call, plain, with a
// residual and with a bias (the backend takes the problems it wins on: tests/gpu); the package
// holds no GEMM unit of its own. A bf16 GEMM and ANVIL_CUDA_FAST_FP32=0 pass 0 (TF32 off).
TEST(CutlassFastF32, Fp32GemmsOfACudaPackageAskTheBackendForIt) {
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_fastf32_pkg_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto graph = [](const std::string& t) {
    const std::string x = t + "[1024, 1024]";
    return ir::parse_graph("graph {\n  inputs {\n    %x: " + x +
                           " = user_input\n"
                           "    %w1: " +
                           x + " = user_input\n    %w2: " + x +
                           " = user_input\n"
                           "    %b3: " +
                           t +
                           "[1024] = user_input\n"
                           "  }\n  %l1: " +
                           x +
                           " = aten.linear.default(input=%x, weight=%w1)\n"
                           "  %r: " +
                           x +
                           " = aten.tanh.default(self=%l1)\n"
                           "  %l2: " +
                           x +
                           " = aten.mm.default(self=%r, mat2=%w2)\n"
                           "  %y: " +
                           x +
                           " = aten.add.Tensor(self=%l2, other=%x)\n"
                           "  %z: " +
                           x +
                           " = aten.linear.default(input=%y, weight=%w1, bias=%b3)\n"
                           "  outputs {\n    user_output %z\n  }\n}\n");
  };
  auto emit = [&](const std::string& name, const std::string& t) {
    driver::CompileOptions o;
    o.target = "cuda-sm90";
    o.cache_dir = (dir / "cache").string();
    o.progress = ProgressMode::kQuiet;
    o.emit_source_dir = (dir / name).string();
    o.compiler = "/bin/false";  // emission only: the compile stops after the sources
    try {
      driver::compile_graph(*graph(t), (dir / (name + ".anvil")).string(), o);
    } catch (const Error&) {
    }
    std::string text = read_text(dir / name / "model.cu");
    for (int u = 0; fs::exists(dir / name / ("kernels_" + std::to_string(u) + ".cu")); ++u)
      text += read_text(dir / name / ("kernels_" + std::to_string(u) + ".cu"));
    EXPECT_FALSE(fs::exists(dir / name / "gemm_kernel_0.cu"));
    return text;
  };
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const std::string mode = "(dev->abi_version >= 9 ? ANVIL_FP32_3XTF32 : 0)";
  const std::string on = emit("on", "f32");
  EXPECT_EQ(count(on, "nullptr, " + mode + ");"), 1) << "the plain GEMM\n" << on;
  EXPECT_EQ(count(on, "ga.allow_tf32 = " + mode + ";"), 2) << "the residual and biased GEMMs";
  EXPECT_NE(on.find("// residual"), std::string::npos);
  EXPECT_EQ(count(on, "ANVIL_FP32_3XTF32"), 3);
  EXPECT_EQ(emit("bf16", "bf16").find("ANVIL_FP32_3XTF32"), std::string::npos);
  ::setenv("ANVIL_CUDA_FAST_FP32", "0", 1);
  const std::string off = emit("off", "f32");
  ::unsetenv("ANVIL_CUDA_FAST_FP32");
  EXPECT_EQ(off.find("ANVIL_FP32_3XTF32"), std::string::npos);
  EXPECT_EQ(count(off, "ga.allow_tf32 = 0;"), 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace anvil::codegen::gemm
