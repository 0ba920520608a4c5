// float8 on the CUDA target without a GPU: the fp8 fixtures of spec/aot.md case 88
// (tests/fixtures/gen/export_fp8.py, recorded on fake CUDA tensors) compile for cuda-sm90 with
// nvcc — the generated kernels convert through include/anvil/anvil_fp8.h as __device__ code and
// aten._scaled_mm becomes a call of cuBLASLt's FP8 GEMM (gemm_ex with float8 operands), no host
// step. What the compiler must refuse is refused with the op and the dtype named. The values are
// checked on a GPU by tests/gpu/test_cuda_fp8.cpp (CudaSpecAot.C88_Fp8*).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/nvcc_sample.h"
#include "core/error.h"
#include "driver/compile.h"
#include "ir/parser.h"
#include "runtime/device_backend.h"
#include <nlohmann/json.hpp>

namespace anvil {
namespace {

namespace fs = std::filesystem;

fs::path work_dir() {
  return fs::temp_directory_path() / ("anvil_cuda_fp8_emit_" + std::to_string(::getpid()));
}

/// Removes the work folder once the suite's tests have run.
class RemoveWorkDir : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(work_dir(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kRemoveWorkDir =
    ::testing::AddGlobalTestEnvironment(new RemoveWorkDir);

driver::CompileOptions cuda_options(const std::string& name) {
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.cache_dir = (work_dir() / "cache").string();
  o.progress = codegen::ProgressMode::kQuiet;
  o.emit_source_dir = (work_dir() / name).string();
  o.emit_only = !test::nvcc_this_test(name);  // nvcc on CI's seeded sample (common/nvcc_sample.h)
  return o;
}

/// The message of the Error `f` throws ("" when none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// Every generated source of a compile, concatenated.
std::string sources_of(const std::string& name) {
  std::string text;
  for (const auto& e : fs::directory_iterator(work_dir() / name)) {
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    text += ss.str();
  }
  return text;
}

/// Compiles fixture `name` for cuda-sm90 (nvcc builds it when sampled) and returns its sources.
std::string compile_fixture(const std::string& name) {
  const std::string pt2 = std::string(ANVIL_FIXTURES_DIR) + "/aot/" + name + ".pt2";
  driver::compile_pt2(pt2, (work_dir() / (name + ".anvil")).string(), cuda_options(name));
  std::ifstream mf(work_dir() / name / "manifest.json");
  EXPECT_TRUE(mf.good()) << name;
  const auto m = nlohmann::json::parse(mf);
  EXPECT_TRUE(!m.contains("host_steps") || m.at("host_steps").empty())
      << name << ": " << m.value("host_steps", nlohmann::json()).dump();
  return sources_of(name);
}

TEST(CudaFp8Emit, CastsAndSumsConvertInDeviceCode) {
  const std::string casts = compile_fixture("aot_88_fp8_casts_cuda");
  for (const char* fn : {"anvil_f32_to_f8e4m3fn(", "anvil_f32_to_f8e5m2(",
                         "anvil_f32_to_f8e4m3fnuz(", "anvil_f32_to_f8e5m2fnuz(",
                         "anvil_f8e4m3fn_to_f32(", "#include \"anvil/anvil_fp8.h\""})
    EXPECT_NE(casts.find(fn), std::string::npos) << fn;
  const std::string sum = compile_fixture("aot_88_fp8_sum_cuda");
  for (const char* fn : {"anvil_f8e4m3fn_to_f32(", "anvil_f8e5m2_to_f32(",
                         "anvil_f8e4m3fnuz_to_f32(", "anvil_f8e5m2fnuz_to_f32("})
    EXPECT_NE(sum.find(fn), std::string::npos) << fn;
  compile_fixture("aot_88_fp8_identity_cuda");
}

TEST(CudaFp8Emit, ScaledMmIsCuBlasLtsFp8Gemm) {
  const std::string text = compile_fixture("aot_88_fp8_scaled_mm_cuda");
  EXPECT_NE(text.find("ga.a_dtype = 29"), std::string::npos) << "e4m3fn A";
  EXPECT_NE(text.find("ga.b_dtype = 29"), std::string::npos) << "e4m3fn B";
  EXPECT_NE(text.find("ga.dtype = 6"), std::string::npos) << "fp16 D";
  EXPECT_NE(text.find("ga.trans_b = 1"), std::string::npos) << "B column-major";
  EXPECT_NE(text.find("ga.epilogue = ANVIL_EPILOGUE_BIAS"), std::string::npos);
  EXPECT_NE(text.find("dev->gemm_ex("), std::string::npos);
  // where cuBLASLt cannot fuse the bias: the GEMM alone, then the step's own bias kernel
  EXPECT_NE(text.find("if (rc == ANVIL_GEMM_NOT_FUSED)"), std::string::npos);
  EXPECT_NE(text.find("_bias<<<"), std::string::npos);
}

/// Row-wise scales, e4m3fn x e5m2, a float32 result with a bfloat16 bias and fast accumulation;
/// mat2 comes row-major from a cast, so the lowering adds a transposing copy (column-major).
/// CudaFp8.ScaledMmRowwiseE5m2F32Out (tests/gpu/test_cuda_fp8.cpp) runs the same graph.
const char* kRowwiseGraph = R"(graph {
  inputs {
    %a: f32[64, 32] = user_input
    %b: f32[32, 48] = user_input
    %sa: f32[64, 1] = user_input
    %sb: f32[1, 48] = user_input
    %bias: bf16[48] = user_input
  }
  %a8: f8e4m3fn[64, 32] = aten._to_copy.default(self=%a, *dtype=f8e4m3fn)
  %b8: f8e5m2[32, 48] = aten._to_copy.default(self=%b, *dtype=f8e5m2)
  %c: f32[64, 48] = aten._scaled_mm.default(self=%a8, mat2=%b8, scale_a=%sa, scale_b=%sb, bias=%bias, out_dtype=f32, use_fast_accum=True)
  outputs {
    user_output %c
  }
})";

TEST(CudaFp8Emit, RowwiseScalesE5m2AndF32Out) {
  const auto g = ir::parse_graph(kRowwiseGraph);
  driver::compile_graph(*g, (work_dir() / "rowwise.anvil").string(), cuda_options("rowwise"));
  const std::string text = sources_of("rowwise");
  for (const char* part : {"ga.a_dtype = 29", "ga.b_dtype = 30", "ga.dtype = 7",
                           "ga.scale_rowwise = 1", "ga.fast_accum = 1", "ga.ldb = 32",
                           "anvil_f32_to_f8e5m2("})
    EXPECT_NE(text.find(part), std::string::npos) << part;
}

TEST(CudaFp8Emit, TheBackendChecksFp8GemmArgumentsBeforeTheDevice) {
  // no GPU needed: the CUDA backend loads where the CUDA libraries are installed, and its
  // gemm_ex refuses float8 arguments cuBLASLt's FP8 GEMM cannot take before touching a device
  const AnvilDeviceApi& dev = runtime::device_backend(Device::Type::kCUDA);
  ASSERT_GE(dev.abi_version, 6u);
  AnvilGemmArgs g{};
  g.struct_size = sizeof g;
  g.dtype = static_cast<int32_t>(DType::kFloat16);
  g.a_dtype = g.b_dtype = static_cast<int32_t>(DType::kFloat8E4M3FN);
  g.m = 16, g.n = 32, g.k = 16;
  g.alpha = 1.0f;
  g.lda = 16, g.ldb = 32, g.ldd = 32, g.batch = 1;
  const auto refused = [&](const char* part) {
    EXPECT_NE(dev.gemm_ex(0, nullptr, &g), 0) << part;
    const std::string why = dev.last_error();
    EXPECT_NE(why.find(part), std::string::npos) << why;
  };
  refused("TN layout");  // B row-major (trans_b 0)
  g.trans_b = 1, g.ldb = 24;
  refused("multiples of 16");
  g.ldb = 16;
  g.a_dtype = static_cast<int32_t>(DType::kFloat8E4M3FNUZ);
  refused("float8_e4m3fn (29) or float8_e5m2 (30)");
  g.a_dtype = g.b_dtype = static_cast<int32_t>(DType::kFloat8E5M2);
  refused("float8_e5m2 x float8_e5m2");
  g.a_dtype = g.b_dtype = static_cast<int32_t>(DType::kFloat8E4M3FN);
  g.dtype = static_cast<int32_t>(DType::kFloat64);
  refused("writes float16, bfloat16 or float32");
  g.dtype = static_cast<int32_t>(DType::kFloat16);
  g.batch = 2;
  refused("batch 1");
}

TEST(CudaFp8Emit, UnsupportedFp8UsesAreCompileErrors) {
  // the fnuz formats have no cuBLASLt GEMM: the shape rule names the op and the dtype
  const std::string fnuz = R"(graph {
  inputs {
    %a: f8e4m3fnuz[16, 16] = user_input
    %b: f8e4m3fn[16, 32] = user_input
    %sa: f32[] = user_input
    %sb: f32[] = user_input
  }
  %c: f16[16, 32] = aten._scaled_mm.default(self=%a, mat2=%b, scale_a=%sa, scale_b=%sb, out_dtype=f16)
  outputs {
    user_output %c
  }
})";
  const std::string e1 = error_of([&] {
    const auto g = ir::parse_graph(fnuz);
    driver::compile_graph(*g, (work_dir() / "fnuz.anvil").string(), cuda_options("fnuz"));
  });
  EXPECT_NE(e1.find("aten._scaled_mm"), std::string::npos) << e1;
  EXPECT_NE(e1.find("f8e4m3fnuz"), std::string::npos) << e1;
  // arithmetic on float8 (PyTorch implements none): the nodes and the inputs are named
  const std::string e2 = error_of([&] {
    const auto g = ir::parse_graph(R"(graph {
  inputs {
    %a: f8e5m2[8] = user_input
  }
  %m: f8e5m2[8] = aten.mul.Tensor(self=%a, other=%a)
  outputs {
    user_output %m
  }
})");
    driver::compile_graph(*g, (work_dir() / "mul.anvil").string(), cuda_options("mul"));
  });
  EXPECT_NE(e2.find("Unsupported input dtype"), std::string::npos) << e2;
  EXPECT_NE(e2.find("aten.mul.Tensor"), std::string::npos) << e2;
  EXPECT_NE(e2.find("'a' f8e5m2"), std::string::npos) << e2;
}

}  // namespace
}  // namespace anvil
