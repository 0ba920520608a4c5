// GEMM epilogues fused into cuBLASLt on the GPU (label gpu): the gemm_epilogue fixtures
// (scripts/export_gemm_epilogue_cases.py: relu, gelu tanh, bias, residual and beta-scaled
// residual, batched bias, a residual add before a layer norm, an unfused erf gelu) in float32,
// bfloat16 and float16 compiled for cuda-sm90, run on cuda:0 and compared with PyTorch's outputs;
// the device backend's gemm_ex refusing bad arguments with a message (the checks before the
// device need no GPU) and running each of cuBLASLt's first heuristic algorithms; and the
// vectorized pointwise kernels (vector_<dtype>) against PyTorch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anvil/anvil_device.h"
#include "common/check.h"
#include "core/npy.h"
#include "gpu/gpu_test_util.h"
#include "runtime/device_backend.h"
#include "runtime/model.h"
#include "runtime/package.h"

namespace anvil {
namespace {

using namespace gpu_test;  // NOLINT: the suite's helpers

constexpr int kAlgos = ANVIL_GEMM_ALGOS;  // AnvilGemmArgs::algo_index runs 0..7

/// Compiles fixture `stem` for cuda-sm90, runs it `runs` times on cuda:0 and compares its
/// `outputs` outputs with PyTorch's at the dtype's tolerance; returns the package.
std::string expect_matches_pytorch(const std::string& stem, size_t outputs, int runs) {
  const std::string pkg = compile_cuda(stem + ".pt2");
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model m = runtime::Model::load(pkg, mo);
  std::vector<Tensor> inputs;
  const std::vector<Tensor> host_in = read_set(stem, "in");
  EXPECT_EQ(host_in.size(), m.input_specs().size()) << stem;
  for (size_t i = 0; i < host_in.size() && i < m.input_specs().size(); ++i)
    inputs.push_back(host_in[i].to(m.input_specs()[i].dtype).to(Device::cuda(0)));
  const std::vector<Tensor> want = read_set(stem, "out");
  EXPECT_EQ(want.size(), outputs) << stem;
  for (int rep = 0; rep < runs; ++rep) {  // later runs use the cached cuBLASLt plans
    const std::vector<Tensor> got = m.run(inputs);
    EXPECT_EQ(got.size(), want.size()) << stem;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
      const Tensor h = got[i].to(Device::cpu());
      EXPECT_EQ(h.dtype(), m.output_specs()[i].dtype) << stem << " output " << i;
      EXPECT_TRUE(::anvil::test::close(h.to(DType::kFloat32), want[i],
                                       ::anvil::test::tolerance_of(h.dtype())))
          << stem << " output " << i << " run " << rep;
    }
  }
  return pkg;
}

size_t fused_gemms(const std::string& pkg) {
  return nlohmann::json::parse(runtime::Package::open(pkg)->manifest().json)
      .at("gemm_epilogues")
      .size();
}

class CudaGemmEpilogue : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGemmEpilogue, FusedEpiloguesMatchPyTorch) {
  ANVIL_REQUIRE_GPU();
  const std::string pkg =
      expect_matches_pytorch(fixture("gemm_epilogue/gemm_epilogue_" + GetParam()), 12, 2);
  // ten of the eleven GEMMs carry their epilogue (tests/codegen/test_cuda_epilogue.cpp says which)
  EXPECT_EQ(fused_gemms(pkg), 10u);
}

TEST_P(CudaGemmEpilogue, VectorizedPointwiseKernelsMatchPyTorch) {
  // vector_<dtype>: two kernels with 16-byte loads and stores, two scalar ones
  ANVIL_REQUIRE_GPU();
  expect_matches_pytorch(fixture("gemm_epilogue/vector_" + GetParam()), 5, 1);
}

TEST(CudaGemmEpilogueK0, WithoutAFusedKernelTheEpilogueRunsAfterThePlainGemm) {
  // k = 0: gemm_ex answers ANVIL_GEMM_NOT_FUSED for relu and a residual; the GEMM step zeroes
  // the result and launches the epilogue's own kernel: relu(bias) and r + bias
  ANVIL_REQUIRE_GPU();
  const std::string pkg =
      expect_matches_pytorch(fixture("gemm_epilogue/gemm_epilogue_k0_float32"), 2, 2);
  EXPECT_EQ(fused_gemms(pkg), 2u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGemmEpilogue,
                         ::testing::Values("float32", "bfloat16", "float16"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

/// A valid 4 x 4 x 4 float32 problem on `buf` (A, B and D are 16-float blocks of it).
AnvilGemmArgs args_on(float* buf) {
  AnvilGemmArgs g{};
  g.struct_size = sizeof g;
  g.dtype = 7;  // float32
  g.m = g.n = g.k = 4;
  g.alpha = 1.0f;
  g.a = buf;
  g.lda = 4;
  g.b = buf + 16;
  g.ldb = 4;
  g.d = buf + 32;
  g.ldd = 4;
  g.batch = 1;
  return g;
}

TEST(CudaGemmEx, BadArgumentsAreRefusedWithAMessage) {
  const AnvilDeviceApi* api = nullptr;
  try {
    api = &runtime::device_backend(Device::Type::kCUDA);
  } catch (const Error& e) {
    GTEST_SKIP() << "no CUDA device backend: " << e.what();
  }
  ASSERT_EQ(api->abi_version, ANVIL_DEVICE_ABI_VERSION);
  ASSERT_NE(api->gemm_ex, nullptr);
  const auto refused = [&](const AnvilGemmArgs* g, const char* says) {
    const int rc = api->gemm_ex(0, nullptr, g);
    EXPECT_NE(rc, 0) << says;
    EXPECT_NE(rc, ANVIL_GEMM_NOT_FUSED) << says;
    EXPECT_NE(std::string(api->last_error()).find(says), std::string::npos)
        << "wanted '" << says << "' in: " << api->last_error();
  };
  float host[64] = {};  // never dereferenced: every call fails before the device
  refused(nullptr, "the arguments are null");
  AnvilGemmArgs g = args_on(host);
  g.struct_size = 8;
  refused(&g, "struct_size 8 is not between");
  g = args_on(host);
  g.algo_index = kAlgos;
  refused(&g, "algo_index 8 is not in 0..7");
  g = args_on(host);
  g.epilogue = 9;
  refused(&g, "unknown epilogue 9");
  g = args_on(host);
  g.beta = 1.0f;
  refused(&g, "beta is not 0 but there is no C");
  g = args_on(host);
  g.dtype = 3;
  refused(&g, "unsupported dtype code 3");
  g = args_on(host);
  g.m = -1;
  refused(&g, "negative size");
}

// AnvilGemmArgs::algo_index (device ABI 8) runs the heuristic's N-th algorithm: the autotuner's
// cublaslt_heuristic_N candidates. Each of the first 8 (the heuristic's first where it offers
// fewer) computes the same product, as does a caller of device ABI 6-7 (a struct without the
// field, the first algorithm).
TEST(CudaGemmEx, EachHeuristicAlgorithmIndexComputesTheProduct) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& api = runtime::device_backend(Device::Type::kCUDA);
  const int64_t m = 96, n = 1024, k = 768;  // skinny enough for split-K plans among them
  std::vector<float> a(m * k), b(k * n);
  for (int64_t i = 0; i < m * k; ++i) a[i] = static_cast<float>((i * 7 % 17) - 8) / 16.f;
  for (int64_t i = 0; i < k * n; ++i) b[i] = static_cast<float>((i * 5 % 13) - 6) / 8.f;
  const Tensor ta = Tensor::from_vector(a, {m, k}).to(DType::kBFloat16).to(Device::cuda(0));
  const Tensor tb = Tensor::from_vector(b, {k, n}).to(DType::kBFloat16).to(Device::cuda(0));
  const Tensor want = Tensor::from_vector(a, {m, k})
                          .to(DType::kBFloat16)
                          .to(DType::kFloat32);  // the bf16 operands, multiplied in float
  const Tensor wb = Tensor::from_vector(b, {k, n}).to(DType::kBFloat16).to(DType::kFloat32);
  for (int algo = 0; algo <= kAlgos; ++algo) {  // kAlgos: the ABI 6-7 struct
    Tensor d = Tensor::empty({m, n}, DType::kBFloat16).to(Device::cuda(0));
    AnvilGemmArgs g{};
    g.struct_size = algo < kAlgos ? sizeof g : offsetof(AnvilGemmArgs, algo_index);
    g.dtype = static_cast<int32_t>(DType::kBFloat16);
    g.m = m;
    g.n = n;
    g.k = k;
    g.alpha = 1.0f;
    g.a = ta.data_ptr();
    g.lda = k;
    g.b = tb.data_ptr();
    g.ldb = n;
    g.d = d.data_ptr();
    g.ldd = n;
    g.batch = 1;
    g.algo_index = algo < kAlgos ? algo : 5;  // past struct_size: not read
    ASSERT_EQ(api.gemm_ex(0, nullptr, &g), 0) << "algo " << algo << ": " << api.last_error();
    ASSERT_EQ(api.stream_synchronize(0, nullptr), 0) << api.last_error();
    const Tensor got = d.to(Device::cpu()).to(DType::kFloat32);
    const float* gp = got.data<float>();
    const float* ap = want.data<float>();
    const float* bp = wb.data<float>();
    int bad = 0;
    for (int64_t i = 0; i < m; i += 7)
      for (int64_t j = 0; j < n; j += 5) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) acc += double(ap[i * k + q]) * bp[q * n + j];
        if (std::fabs(gp[i * n + j] - acc) > 1e-2 * std::max(1.0, std::fabs(acc))) ++bad;
      }
    EXPECT_EQ(bad, 0) << "algo " << algo;
  }
}

TEST(CudaGemmEx, OverlapsAndMissingBiasAreRefusedOnTheDevice) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& api = runtime::device_backend(Device::Type::kCUDA);
  float* buf = static_cast<float*>(api.alloc(0, 64 * sizeof(float)));
  ASSERT_NE(buf, nullptr) << api.last_error();
  const auto refused = [&](const AnvilGemmArgs& g, const char* says) {
    const int rc = api.gemm_ex(0, nullptr, &g);
    EXPECT_NE(rc, 0) << says;
    EXPECT_NE(std::string(api.last_error()).find(says), std::string::npos)
        << "wanted '" << says << "' in: " << api.last_error();
  };
  AnvilGemmArgs g = args_on(buf);
  g.epilogue = ANVIL_EPILOGUE_BIAS_RELU;
  refused(g, "a bias epilogue needs a bias pointer");
  g = args_on(buf);
  g.bias = buf;
  refused(g, "a bias pointer without a bias epilogue");
  g = args_on(buf);
  g.c = buf + 34;  // two elements into D
  g.ldc = 4;
  refused(g, "C overlaps the output without being it");
  g.c = buf + 32;  // D itself, another ld
  g.ldc = 5;
  refused(g, "C is the output itself but with another leading dimension");
  // D itself, in place: D = A * B + D; zeros everywhere, so D stays 0
  ASSERT_EQ(api.memset_zero(0, buf, 64 * sizeof(float), nullptr), 0) << api.last_error();
  g.ldc = 4;
  g.beta = 1.0f;
  EXPECT_EQ(api.gemm_ex(0, nullptr, &g), 0) << api.last_error();
  EXPECT_EQ(api.stream_synchronize(0, nullptr), 0) << api.last_error();
  EXPECT_EQ(api.free(0, buf), 0) << api.last_error();
}

}  // namespace
}  // namespace anvil
