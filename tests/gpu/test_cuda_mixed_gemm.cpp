// Mixed GEMMs at compiler level on a GPU (label gpu; spec B.4.1 "mixed_mm", B.5 case 21): the
// pattern mm / linear / addmm of a float16 / bfloat16 A and an int8 matrix converted to A's
// dtype, compiled for cuda-sm90 with the autotuner and CUTLASS candidates, is one GEMM step
// running a CUTLASS mixed-input kernel (the manifest's kernel names the f16 x s8 / bf16 x s8
// family, no conversion kernel), and its results match the interpreter's. Without CUTLASS among
// the backends the same graphs take the conversion kernel and cuBLASLt.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "gpu/gpu_test_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/model.h"
#include "runtime/package.h"

namespace anvil {
namespace {

using namespace gpu_test;  // NOLINT: the suite's helpers

struct MixedCase {
  const char* name;
  std::string text;
};

std::vector<MixedCase> mixed_cases() {
  return {
      // spec B.5 case 21: fp16 A[100, 16] @ (int8[100, 16])^T (rows of D not 16-byte aligned)
      {"case21", R"(graph {
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
})"},
      // linear with a bias (the bias stays a loop kernel after the GEMM), bf16, aligned rows
      {"linear_bf16", R"(graph {
  inputs {
    %a: bf16[64, 128] = user_input
    %w: i8[256, 128] = user_input
    %bias: bf16[256] = user_input
  }
  %wf: bf16[256, 128] = aten._to_copy.default(self=%w, dtype=bf16)
  %y: bf16[64, 256] = aten.linear.default(input=%a, weight=%wf, bias=%bias)
  outputs {
    user_output %y
  }
})"},
      // addmm over the transposed view converted (to(t(w)))
      {"addmm_f16", R"(graph {
  inputs {
    %x: f16[128] = user_input
    %a: f16[32, 64] = user_input
    %w: i8[128, 64] = user_input
  }
  %wt: i8[64, 128] = aten.permute.default(self=%w, dims=[1, 0])
  %wf: f16[64, 128] = aten._to_copy.default(self=%wt, dtype=f16)
  %y: f16[32, 128] = aten.addmm.default(self=%x, mat1=%a, mat2=%wf)
  outputs {
    user_output %y
  }
})"},
  };
}

/// Seeded inputs for `g`: int8 in [-8, 7] (small, so fp16 sums stay exact enough), floats in
/// [-1, 1).
std::vector<Tensor> inputs_for(const ir::Graph& g) {
  std::mt19937 gen(7);
  std::vector<Tensor> in;
  for (const ir::Value* v : g.inputs()) {
    Shape sizes;
    for (const SymInt& s : v->type.sizes) sizes.push_back(s.constant());
    std::vector<float> data(static_cast<size_t>(shape_numel(sizes)));
    for (float& x : data)
      x = v->type.dtype == DType::kInt8 ? static_cast<float>(static_cast<int>(gen() % 16) - 8)
                                        : static_cast<float>(gen() / 2147483648.0 - 1.0);
    in.push_back(Tensor::from_vector(data, sizes).to(v->type.dtype));
  }
  return in;
}

std::string compile_for_gpu(const ir::Graph& g, const std::string& name,
                            std::vector<codegen::gemm::GemmBackend> backends) {
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (out_dir() / "cache").string();
  o.gemm.mode = codegen::gemm::AutotuneMode::kFast;
  o.gemm.backends = std::move(backends);
  o.gemm.max_profiled = 2;
  const std::string pkg = (out_dir() / (name + ".anvil")).string();
  driver::compile_graph(g, pkg, o);
  return pkg;
}

void expect_matches_interpreter(const std::string& pkg, const ir::Graph& g) {
  const std::vector<Tensor> in = inputs_for(g);
  const std::vector<Tensor> want = interp::Interpreter(g).run(in);
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model m = runtime::Model::load(pkg, mo);
  std::vector<Tensor> dev;
  for (const Tensor& t : in) dev.push_back(t.to(Device::cuda(0)));
  const std::vector<Tensor> got = m.run(dev);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(::anvil::test::matches_reference(got[i].to(Device::cpu()), want[i]))
        << pkg << " output " << i;
}

TEST(CudaMixedGemm, MixedFormsRunACutlassMixedInputKernelAndMatchTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  using codegen::gemm::GemmBackend;
  for (const MixedCase& c : mixed_cases()) {
    SCOPED_TRACE(c.name);
    const auto g = ir::parse_graph(c.text);
    // spec case 21's backend lists: "CUTLASS" and "CUTLASS,ATen" (cuBLASLt offers nothing here)
    for (const auto& backends : std::vector<std::vector<GemmBackend>>{
             {GemmBackend::kCutlass}, {GemmBackend::kCutlass, GemmBackend::kCublasLt}}) {
      const std::string pkg =
          compile_for_gpu(*g, std::string(c.name) + "_" + std::to_string(backends.size()), backends);
      const auto mf = nlohmann::json::parse(runtime::Package::open(pkg)->manifest().json);
      ASSERT_EQ(mf.at("gemm").at("steps").size(), 1u) << mf.at("gemm").dump();
      const std::string kernel = mf["gemm"]["steps"][0].at("kernel");
      EXPECT_TRUE(kernel.find("_f16_s8_") != std::string::npos ||
                  kernel.find("_bf16_s8_") != std::string::npos)
          << kernel;
      expect_matches_interpreter(pkg, *g);
    }
    // without CUTLASS: a conversion kernel and cuBLASLt, the same values
    const std::string pkg = compile_for_gpu(*g, std::string(c.name) + "_lt", {GemmBackend::kCublasLt});
    const auto mf = nlohmann::json::parse(runtime::Package::open(pkg)->manifest().json);
    EXPECT_EQ(mf["gemm"]["steps"][0]["kernel"].get<std::string>().find("_s8_"), std::string::npos);
    expect_matches_interpreter(pkg, *g);
  }
}

}  // namespace
}  // namespace anvil
