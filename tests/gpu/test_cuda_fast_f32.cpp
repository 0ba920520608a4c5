// CUTLASS's 3xTF32 kernels for fp32 GEMMs on the GPU (label gpu): every autotuner candidate
// (cutlass_candidates.h CutlassConfig::fast_f32) of three problems (a linear layer, ragged sizes
// with a C source in place and apart, both operands transposed) against a host fp64 product, no
// less accurate than cuBLASLt's fp32 GEMM on the same operands; the device backend's prebuilt one
// (anvil_device.h ANVIL_FP32_3XTF32) where it is asked and wins; and an untuned package that
// asks for it against the reference interpreter at fp32's tolerance, with graph replay.
// Skips without a GPU or on a GPU older than sm_90. CI compiles one unit without a GPU
// (CutlassFastF32 in tests/codegen).
#include <dlfcn.h>

#include <cmath>
#include <fstream>
#include <random>

#include "anvil/anvil_device.h"
#include "anvil/anvil_rt.h"
#include "codegen/gemm/cutlass_candidates.h"
#include "codegen/harness.h"
#include "gpu/gpu_test_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/model.h"

namespace anvil::gpu_test {
namespace {

using codegen::gemm::GemmCandidate;
using codegen::gemm::GemmProblem;

struct Case {
  int64_t m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
};

/// `h` in a new allocation on cuda:0 (the caller frees it).
void* upload(const AnvilDeviceApi& api, const std::vector<float>& h) {
  void* d = api.alloc(0, h.size() * 4);
  runtime::device_copy(api, 0, d, h.data(), h.size() * 4, ANVIL_COPY_HOST_TO_DEVICE, nullptr,
                       "test");
  return d;
}

GemmProblem problem(const Case& c) {
  GemmProblem p;
  p.m = c.m;
  p.n = c.n;
  p.k = c.k;
  p.trans_a = c.trans_a;
  p.trans_b = c.trans_b;
  p.align_a = p.align_b = p.align_c = 4;
  p.alpha = c.alpha;
  p.beta = c.beta;
  p.target = "cuda-sm90";
  return p;
}

TEST(CudaFastF32, KernelsMatchAnFp64ProductAsCloselyAsCublasLtsFp32Gemm) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& api = runtime::device_backend(Device::Type::kCUDA);
  if (api.capability(0) / 10 != 9)
    GTEST_SKIP() << "the 3xTF32 kernels are built for sm_90a, not " << api.capability(0);
  std::string why;
  const auto headers = codegen::gemm::find_cutlass_headers(&why);
  ASSERT_TRUE(headers) << why;
  const std::vector<Case> cases = {{1024, 1024, 1024, false, true, 1.0f, 0.0f},
                                   {300, 200, 136, false, false, 0.5f, 0.75f},
                                   {512, 768, 1024, true, true, 1.0f, 0.0f}};
  std::vector<std::vector<GemmCandidate>> cands;
  std::vector<codegen::SourceFile> units;
  for (const Case& c : cases) {
    cands.push_back(codegen::gemm::cutlass_candidates(problem(c), 90));
    ASSERT_EQ(cands.back().size(), 4u);
    for (const auto& g : cands.back()) units.push_back({g.entry + ".cu", g.source});
  }
  codegen::ToolchainOptions o = codegen::gemm::cutlass_toolchain_options(*headers);
  o.jobs = 16;
  o.cache_dir = (out_dir() / "cache").string();
  const auto res = codegen::build_shared_library(units, (out_dir() / "fastf32.so").string(), o);
  void* so = dlopen(res.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  using Entry = int (*)(const AnvilGemmCall*, void*, size_t, void*);
  void* stream = api.stream_create(0);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uf(-1, 1);
  int checked = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const int64_t M = c.m, N = c.n, K = c.k;
    // A stored [M, K] or [K, M] (trans_a), B [K, N] or [N, K] (trans_b), C [M, N]
    const int64_t lda = c.trans_a ? M : K, ldb = c.trans_b ? K : N;
    std::vector<float> ha(size_t(M * K)), hb(size_t(K * N)), hc(size_t(M * N)), hd(hc.size());
    for (auto& x : ha) x = uf(rng);
    for (auto& x : hb) x = uf(rng) * 0.05f;
    for (auto& x : hc) x = uf(rng);
    auto at = [&](int64_t i, int64_t q) {
      return c.trans_a ? ha[size_t(q * lda + i)] : ha[size_t(i * lda + q)];
    };
    auto bt = [&](int64_t q, int64_t j) {
      return c.trans_b ? hb[size_t(j * ldb + q)] : hb[size_t(q * ldb + j)];
    };
    std::vector<double> prod(hc.size());
    double scale = 0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t q = 0; q < K; ++q) s += double(at(i, q)) * double(bt(q, j));
        prod[size_t(i * N + j)] = s;
        scale = std::max(scale, std::fabs(c.alpha * s + c.beta * hc[size_t(i * N + j)]));
      }
    void *da = upload(api, ha), *db = upload(api, hb), *dd = upload(api, hc);
    // max |got - want| / max |want|, want = alpha * A.B + beta * C (C as uploaded before the call)
    auto error = [&](double beta) {
      runtime::device_copy(api, 0, hd.data(), dd, hd.size() * 4, ANVIL_COPY_DEVICE_TO_HOST, nullptr,
                           "test");
      double worst = 0;
      for (size_t i = 0; i < hd.size(); ++i) {
        const double want = c.alpha * prod[i] + beta * hc[i];
        const double e = std::fabs(double(hd[i]) - want);
        if (!(e <= worst)) worst = e;  // NaN counts
      }
      return worst / scale;
    };
    // cuBLASLt's fp32 GEMM (TF32 off) on the same operands, beta 0
    ASSERT_EQ(api.gemm(0, stream, int32_t(DType::kFloat32), c.trans_a, c.trans_b, M, N, K, c.alpha,
                       da, lda, 0, db, ldb, 0, dd, N, 0, 1, ANVIL_EPILOGUE_NONE, nullptr, 0),
              0)
        << api.last_error();
    ASSERT_EQ(api.stream_synchronize(0, stream), 0) << api.last_error();
    const double lt_error = error(0.0);
    // beta's matrix in C itself, and (beta != 0) as a residual apart, C then all NaN
    void* dr = upload(api, hc);
    const std::vector<float> nan(hc.size(), std::nanf(""));
    for (const auto& g : cands[ci])
      for (const bool apart : {false, true}) {
        if (apart && c.beta == 0) continue;
        SCOPED_TRACE(g.name + " on " + std::to_string(M) + "x" + std::to_string(N) + "x" +
                     std::to_string(K) + (apart ? ", residual apart" : ""));
        auto entry = reinterpret_cast<Entry>(dlsym(so, g.entry.c_str()));
        ASSERT_NE(entry, nullptr);
        runtime::device_copy(api, 0, dd, (apart ? nan : hc).data(), hc.size() * 4,
                             ANVIL_COPY_HOST_TO_DEVICE, nullptr, "test");
        AnvilGemmCall call{};
        call.a_dtype = call.b_dtype = call.c_dtype = int32_t(DType::kFloat32);
        call.trans_a = c.trans_a;
        call.trans_b = c.trans_b;
        call.m = M;
        call.n = N;
        call.k = K;
        call.a = da;
        call.lda = lda;
        call.b = db;
        call.ldb = ldb;
        call.c = dd;
        call.ldc = N;
        call.alpha = c.alpha;
        call.beta = c.beta;
        if (apart) {
          call.source = dr;
          call.ld_source = N;
        }
        ASSERT_EQ(entry(&call, nullptr, 0, stream), 0);
        ASSERT_EQ(api.stream_synchronize(0, stream), 0) << api.last_error();
        const double e = error(c.beta);
        std::printf("[ 3xtf32 ] %s %ldx%ldx%ld: error %.2e (cuBLASLt fp32 %.2e)\n", g.name.c_str(),
                    long(M), long(N), long(K), e, lt_error);
        // fp32's accuracy: within 2x cuBLASLt's error and of the order of fp32's epsilon
        EXPECT_LE(e, std::max(2 * lt_error, 1e-6)) << "cuBLASLt fp32: " << lt_error;
        EXPECT_LE(e, 4e-6);
        ++checked;
      }
    for (void* d : {da, db, dd, dr}) api.free(0, d);
  }
  EXPECT_EQ(checked, int(units.size()) + 4) << "one case with beta: each kernel twice";
  api.stream_destroy(0, stream);
}

// The device backend's prebuilt 3xTF32 kernel (allow_tf32 = ANVIL_FP32_3XTF32): on a problem it
// takes, the plain GEMM and gemm_ex with a residual C apart give bit for bit what the tuner's
// first fast_f32 candidate (the same CUTLASS kernel) gives, not what cuBLASLt's fp32 GEMM gives,
// and are no less accurate than it against an fp64 product; a problem too small for it (256^3)
// runs cuBLASLt's fp32 GEMM (bit for bit); allow_tf32 = 0 never takes it.
TEST(CudaFastF32, TheBackendRunsItWhereAskedAndItWins) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& api = runtime::device_backend(Device::Type::kCUDA);
  if (api.capability(0) / 10 != 9)
    GTEST_SKIP() << "the 3xTF32 kernels are built for sm_90a, not " << api.capability(0);
  std::string why;
  const auto headers = codegen::gemm::find_cutlass_headers(&why);
  ASSERT_TRUE(headers) << why;
  const Case big{1024, 1024, 1024, false, true, 1.0f, 1.0f};
  const GemmCandidate cand = codegen::gemm::cutlass_candidates(problem(big), 90).front();
  ASSERT_NE(cand.name.find("_128x64x32_64x32x32_4_tnt"), std::string::npos) << cand.name;
  codegen::ToolchainOptions o = codegen::gemm::cutlass_toolchain_options(*headers);
  o.cache_dir = (out_dir() / "cache").string();
  const auto res = codegen::build_shared_library({{"c.cu", cand.source}},
                                                 (out_dir() / "backend_ref.so").string(), o);
  void* so = dlopen(res.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  using Entry = int (*)(const AnvilGemmCall*, void*, size_t, void*);
  auto entry = reinterpret_cast<Entry>(dlsym(so, cand.entry.c_str()));
  ASSERT_NE(entry, nullptr);
  void* stream = api.stream_create(0);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uf(-1, 1);
  for (const int64_t size : {1024, 256}) {
    SCOPED_TRACE(std::to_string(size) + "^3");
    const size_t count = size_t(size * size);
    std::vector<float> ha(count), hb(count), hr(count);
    for (auto& x : ha) x = uf(rng);
    for (auto& x : hb) x = uf(rng) * 0.05f;
    for (auto& x : hr) x = uf(rng);
    void *da = upload(api, ha), *db = upload(api, hb), *dr = upload(api, hr), *dd = upload(api, hr);
    auto result = [&]() {
      EXPECT_EQ(api.stream_synchronize(0, stream), 0) << api.last_error();
      std::vector<float> h(count);
      runtime::device_copy(api, 0, h.data(), dd, count * 4, ANVIL_COPY_DEVICE_TO_HOST, nullptr,
                           "test");
      return h;
    };
    auto plain = [&](int mode) {
      EXPECT_EQ(api.gemm(0, stream, int32_t(DType::kFloat32), 0, 1, size, size, size, 1.0f, da,
                         size, 0, db, size, 0, dd, size, 0, 1, ANVIL_EPILOGUE_NONE, nullptr, mode),
                0)
          << api.last_error();
      return result();
    };
    auto residual = [&](int mode) {  // D = A.B^T + R, R apart
      AnvilGemmArgs g{};
      g.struct_size = sizeof g;
      g.dtype = int32_t(DType::kFloat32);
      g.trans_b = 1;
      g.m = g.n = g.k = size;
      g.alpha = g.beta = 1.0f;
      g.a = da;
      g.lda = size;
      g.b = db;
      g.ldb = size;
      g.c = dr;
      g.ldc = size;
      g.d = dd;
      g.ldd = size;
      g.batch = 1;
      g.allow_tf32 = mode;
      EXPECT_EQ(api.gemm_ex(0, stream, &g), 0) << api.last_error();
      return result();
    };
    auto candidate = [&](bool with_residual) {
      AnvilGemmCall call{};
      call.a_dtype = call.b_dtype = call.c_dtype = int32_t(DType::kFloat32);
      call.trans_b = 1;
      call.m = call.n = call.k = size;
      call.a = da;
      call.b = db;
      call.c = dd;
      call.lda = call.ldb = call.ldc = size;
      call.alpha = 1.0f;
      call.beta = with_residual ? 1.0f : 0.0f;
      call.source = with_residual ? dr : nullptr;
      call.ld_source = size;
      EXPECT_EQ(entry(&call, nullptr, 0, stream), 0);
      return result();
    };
    const auto sgemm = plain(0), fast = plain(ANVIL_FP32_3XTF32), ref = candidate(false);
    const auto sgemm_r = residual(0), fast_r = residual(ANVIL_FP32_3XTF32);
    const auto ref_r = candidate(true);
    if (size == 1024) {
      EXPECT_EQ(fast, ref) << "the plain GEMM ran the 3xTF32 kernel";
      EXPECT_NE(fast, sgemm);
      EXPECT_EQ(fast_r, ref_r) << "gemm_ex with a residual ran the 3xTF32 kernel";
      EXPECT_NE(fast_r, sgemm_r);
      double err_fast = 0, err_lt = 0, scale = 0;
      for (int64_t i = 0; i < size; i += 7)  // every 7th row against fp64
        for (int64_t j = 0; j < size; ++j) {
          double want = 0;
          for (int64_t q = 0; q < size; ++q)
            want += double(ha[size_t(i * size + q)]) * double(hb[size_t(j * size + q)]);
          const size_t at = size_t(i * size + j);
          scale = std::max(scale, std::fabs(want));
          err_fast = std::max(err_fast, std::fabs(fast[at] - want));
          err_lt = std::max(err_lt, std::fabs(sgemm[at] - want));
        }
      std::printf("[ 3xtf32 ] backend 1024^3: error %.2e (cuBLASLt fp32 %.2e)\n", err_fast / scale,
                  err_lt / scale);
      EXPECT_LE(err_fast, 2 * err_lt + 1e-6 * scale);
    } else {
      EXPECT_EQ(fast, sgemm) << "too small for the kernel: cuBLASLt's fp32 GEMM";
      EXPECT_EQ(fast_r, sgemm_r);
    }
    for (void* d : {da, db, dr, dd}) api.free(0, d);
  }
  api.stream_destroy(0, stream);
}

// An fp32 package with --autotune off: its GEMMs ask the backend for the 3xTF32 kernel, which
// takes the 1024-row linear and the GEMM with a residual add; the outputs match the reference
// interpreter, on the graph's replay too, no further from it than the package built with
// ANVIL_CUDA_FAST_FP32=0 (cuBLASLt's fp32 GEMMs; both about 1e-4 of max |want| with these
// inputs), within the fp32 bound of issue 14's acceptance (1e-3).
TEST(CudaFastF32, APackageTakesItForLargeFp32GemmsAndMatchesTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& api = runtime::device_backend(Device::Type::kCUDA);
  if (api.capability(0) / 10 != 9)
    GTEST_SKIP() << "the 3xTF32 kernels are built for sm_90a, not " << api.capability(0);
  const auto g = ir::parse_graph(
      "graph {\n  inputs {\n    %x: f32[1024, 1024] = user_input\n"
      "    %w1: f32[1536, 1024] = user_input\n    %w2: f32[1536, 1024] = user_input\n  }\n"
      "  %l1: f32[1024, 1536] = aten.linear.default(input=%x, weight=%w1)\n"
      "  %t: f32[1024, 1536] = aten.tanh.default(self=%l1)\n"
      "  %l2: f32[1024, 1024] = aten.mm.default(self=%t, mat2=%w2)\n"
      "  %y: f32[1024, 1024] = aten.add.Tensor(self=%l2, other=%x)\n"
      "  outputs {\n    user_output %t\n    user_output %y\n  }\n}\n");
  std::vector<Tensor> ins, dev;
  uint64_t seed = 3;
  for (const auto& spec : g->input_specs()) {
    Shape sizes;
    for (const auto& s : spec.value->type.sizes) sizes.push_back(s.constant());
    ins.push_back(testing::random_tensor(sizes, spec.value->type.dtype, seed++));
    dev.push_back(ins.back().to(Device::cuda(0)));
  }
  const auto want = interp::Interpreter(*g).run(ins);
  double worst[2] = {0, 0};      // off, on
  std::vector<Tensor> first[2];  // off, on: run 0's outputs
  for (const bool rule : {true, false}) {
    const std::string name = rule ? "fastf32_on" : "fastf32_off";
    SCOPED_TRACE(name);
    if (!rule) ::setenv("ANVIL_CUDA_FAST_FP32", "0", 1);
    driver::CompileOptions o;
    o.target = "cuda-sm90";
    o.progress = codegen::ProgressMode::kQuiet;
    o.cache_dir = (out_dir() / "cache").string();
    o.emit_source_dir = (out_dir() / name).string();
    const std::string pkg = (out_dir() / (name + ".anvil")).string();
    driver::compile_graph(*g, pkg, o);
    ::unsetenv("ANVIL_CUDA_FAST_FP32");
    std::ifstream k(out_dir() / name / "kernels_0.cu");
    const std::string text((std::istreambuf_iterator<char>(k)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("ANVIL_FP32_3XTF32") != std::string::npos, rule);
    runtime::ModelOptions mo;
    mo.device = Device::cuda(0);
    const runtime::Model model = runtime::Model::load(pkg, mo);
    for (int rep = 0; rep < 2; ++rep) {
      const auto got = model.run(dev);
      ASSERT_EQ(got.size(), want.size());
      if (rep == 0)
        for (const Tensor& t : got) first[rule].push_back(t.to(Device::cpu()));
      for (size_t i = 0; i < got.size(); ++i) {
        const double e = testing::rel_error(got[i].to(Device::cpu()), want[i]);
        EXPECT_LT(e, 1e-3) << "output " << i << " run " << rep;  // issue 14's fp32 bound
        worst[rule] = std::max(worst[rule], e);
      }
    }
  }
  std::printf("[ 3xtf32 ] package error vs the interpreter: %.2e (cuBLASLt fp32: %.2e)\n", worst[1],
              worst[0]);
  EXPECT_LE(worst[1], 2 * worst[0] + 1e-6);
  // the two packages ran different GEMM kernels (their sums round differently)
  ASSERT_EQ(first[0].size(), first[1].size());
  EXPECT_GT(testing::rel_error(first[1][0], first[0][0]), 0.0) << "the 3xTF32 kernel never ran";
}

}  // namespace
}  // namespace anvil::gpu_test
