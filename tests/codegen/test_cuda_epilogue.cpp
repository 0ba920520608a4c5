// GEMM epilogues fused into cuBLASLt by the CUDA target (codegen/cuda/gemm_epilogue.h), without a
// GPU: which GEMM steps call gemm_ex with which epilogue (the manifest's gemm_epilogues and the
// generated source), which forms stay loop kernels (gelu's erf form, an activation after a
// residual add, a subtraction, a result read twice, mixed dtypes, float64), which pointwise
// kernels get vector loads and stores (emit_cuda_vector.cpp), and that the sources compile with
// nvcc. tests/gpu/test_cuda_gemm_epilogue.cpp runs the same fixtures on a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "common/check.h"
#include "common/scoped_env.h"
#include "common/text.h"
#include "cuda_compile_fixture.h"
#include "driver/compile.h"
#include "ir/parser.h"
#include "runtime/package.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& f) { return std::string(ANVIL_FIXTURES_DIR) + "/" + f; }

std::string read_text(const fs::path& f) {
  std::ifstream in(f);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

using test::count;

namespace graph_cases {
struct Case {
  const char* name;
  const char* text;
};
#include "codegen/graph_cases.inc"
// clang-format on
}  // namespace graph_cases

class CudaEpilogue : public test::CudaCompileTest {
 protected:
  void SetUp() override {
    CudaCompileTest::SetUp();
    opts_.emit_only = true;  // the sources only: no nvcc
  }

  /// Emits `pt2` (or the graph `text`) for cuda-sm90 into dir_/name: the kernels' source and
  /// the manifest's gemm_epilogues as "gemm:EPILOGUE[+C]" -> count.
  std::map<std::string, int> emit(const std::string& name, const std::string& pt2,
                                  const std::string& text = "") {
    opts_.emit_source_dir = (dir_ / name).string();
    if (text.empty()) {
      driver::compile_pt2(pt2, (dir_ / (name + ".anvil")).string(), opts_);
    } else {
      const auto g = ir::parse_graph(text);
      driver::compile_graph(*g, (dir_ / (name + ".anvil")).string(), opts_);
    }
    source_ = read_text(dir_ / name / "kernels_0.cu");
    const std::string mf = read_text(dir_ / name / "manifest.json");
    EXPECT_FALSE(mf.empty()) << name << ": no manifest emitted";
    std::map<std::string, int> out;
    if (mf.empty()) return out;
    const auto j = nlohmann::json::parse(mf);
    for (const auto& f : j.at("gemm_epilogues"))
      ++out[f.at("epilogue").get<std::string>() + (f.at("residual").get<bool>() ? "+C" : "")];
    return out;
  }

  std::string source_;
};

TEST_F(CudaEpilogue, EachFusableFormCallsGemmExWithItsEpilogue) {
  // the fixture's twelve outputs (scripts/export_gemm_epilogue_cases.py): relu(linear),
  // gelu_tanh(linear), gelu_erf(linear), r + linear, addmm(b, h, w), addmm(r, h, w, beta=0.5),
  // relu(linear without bias), linear of a 3-D input, gelu_tanh(linear to 20), baddbmm(b, ...),
  // layer_norm(r + linear) and r + linear (the add leaves the layer norm's multi-pass kernel)
  for (const char* dt : {"float32", "bfloat16", "float16"}) {
    const std::string name = std::string("gemm_epilogue_") + dt;
    const auto fused = emit(name, fixture("gemm_epilogue/" + name + ".pt2"));
    EXPECT_EQ(fused, (std::map<std::string, int>{{"ANVIL_EPILOGUE_BIAS_RELU", 1},
                                                 {"ANVIL_EPILOGUE_BIAS_GELU_TANH", 2},
                                                 {"ANVIL_EPILOGUE_BIAS+C", 2},
                                                 {"ANVIL_EPILOGUE_BIAS", 3},
                                                 {"ANVIL_EPILOGUE_NONE+C", 1},
                                                 {"ANVIL_EPILOGUE_RELU", 1}}))
        << dt;
    EXPECT_EQ(count(source_, "dev->gemm_ex(device, s.stream, &ga)"), 10u) << dt;
    // the erf gelu's GEMM is a plain one, and its kernel keeps erf
    EXPECT_EQ(count(source_, "ANVIL_EPILOGUE_NONE, nullptr, ga.allow_tf32);"), 10u) << dt;
    // ... asking float32's for the backend's 3xTF32 kernel (anvil_device.h ANVIL_FP32_3XTF32)
    const bool f32 = std::string(dt) == "float32";
    EXPECT_EQ(count(source_, "ANVIL_EPILOGUE_NONE, nullptr, 0);"), f32 ? 0u : 1u) << dt;
    EXPECT_EQ(count(source_, "ga.allow_tf32 = (dev->abi_version >= 9 ? ANVIL_FP32_3XTF32 : 0);"),
              f32 ? 10u : 0u)
        << dt;
    EXPECT_NE(source_.find("erf"), std::string::npos) << dt;
    EXPECT_EQ(count(source_, "ga.c = "), 3u) << dt;  // the residuals
    EXPECT_NE(source_.find("ga.beta = static_cast<float>(0.5);"), std::string::npos) << dt;
    EXPECT_EQ(count(source_, "ga.bias = "), 8u) << dt;
    // every fused statement keeps its kernel for cuBLASLt's "not fused" answer
    EXPECT_EQ(count(source_, "_epilogue(s);"), 10u) << dt;
  }
}

TEST_F(CudaEpilogue, EmptyInnerDimensionsStillFuseAndKeepTheFallback) {
  // k = 0 (gemm_epilogue_k0_float32): fused at compile time; gemm_ex answers "not fused" at run
  // time and the step runs the plain GEMM (zeros) and the epilogue's kernel
  EXPECT_EQ(
      emit("k0", fixture("gemm_epilogue/gemm_epilogue_k0_float32.pt2")),
      (std::map<std::string, int>{{"ANVIL_EPILOGUE_BIAS_RELU", 1}, {"ANVIL_EPILOGUE_BIAS+C", 1}}));
  EXPECT_NE(source_.find("if (rc == 0) gemm0_epilogue(s);"), std::string::npos);
  EXPECT_NE(source_.find("if (rc == 0) gemm1_epilogue(s);"), std::string::npos);
}

/// A graph of one GEMM `mm` and its epilogue `body` (IR lines ending in %y) over f32 inputs
/// h [8, 32], w [16, 32], b [16], x [8, 16].
std::string graph(const std::string& body, const std::string& dt = "f32") {
  return "graph {\n  inputs {\n    %h: " + dt + "[8, 32] = user_input\n    %w: " + dt +
         "[16, 32] = user_input\n    %b: " + dt + "[16] = user_input\n    %x: " + dt +
         "[8, 16] = user_input\n  }\n" + body + "  outputs {\n    user_output %y\n  }\n}\n";
}

TEST_F(CudaEpilogue, FormsCuBlasLtCannotComputeStayLoopKernels) {
  const char* linear = "  %l: f32[8, 16] = aten.linear.default(input=%h, weight=%w, bias=%b)\n";
  // reference: the plain bias add fuses
  EXPECT_EQ(emit("bias", "",
                 graph(std::string(linear) + "  %y: f32[8, 16] = aten.relu.default("
                                             "self=%l)\n")),
            (std::map<std::string, int>{{"ANVIL_EPILOGUE_BIAS_RELU", 1}}));
  // relu after the residual add: cuBLASLt's activation would apply to C too, not fused
  EXPECT_TRUE(
      emit("relu_res", "",
           graph(std::string(linear) + "  %a: f32[8, 16] = aten.add.Tensor(self=%x, other=%l)\n"
                                       "  %y: f32[8, 16] = aten.relu.default(self=%a)\n"))
          .empty());
  EXPECT_NE(source_.find("dev->gemm(device"), std::string::npos);
  // linear - x
  EXPECT_TRUE(
      emit("sub", "",
           graph(std::string(linear) + "  %y: f32[8, 16] = aten.sub.Tensor(self=%l, other=%x)\n"))
          .empty());
  // x * linear
  EXPECT_TRUE(
      emit("mul", "",
           graph(std::string(linear) + "  %y: f32[8, 16] = aten.mul.Tensor(self=%x, other=%l)\n"))
          .empty());
  // erf gelu
  EXPECT_TRUE(emit("erf", "",
                   graph(std::string(linear) + "  %y: f32[8, 16] = aten.gelu.default(self=%l)\n"))
                  .empty());
  // the bias broadcast over columns (b [8, 1]) is not cuBLASLt's bias over rows
  EXPECT_TRUE(emit("colbias", "",
                   "graph {\n  inputs {\n    %h: f32[8, 32] = user_input\n    %w: f32[32, 16] = "
                   "user_input\n    %c: f32[8, 1] = user_input\n  }\n"
                   "  %y: f32[8, 16] = aten.addmm.default(self=%c, mat1=%h, mat2=%w)\n"
                   "  outputs {\n    user_output %y\n  }\n}\n")
                  .empty());
  // the linear's result is an output too: read twice, not computed in place
  EXPECT_TRUE(emit("twice", "",
                   "graph {\n  inputs {\n    %h: f32[8, 32] = user_input\n    %w: f32[16, 32] = "
                   "user_input\n  }\n"
                   "  %l: f32[8, 16] = aten.linear.default(input=%h, weight=%w)\n"
                   "  %y: f32[8, 16] = aten.relu.default(self=%l)\n"
                   "  outputs {\n    user_output %l\n    user_output %y\n  }\n}\n")
                  .empty());
  // float64: cuBLASLt's epilogues are not used for it
  EXPECT_TRUE(emit("f64", "",
                   graph("  %l: f64[8, 16] = aten.linear.default(input=%h, weight=%w, bias=%b)\n"
                         "  %y: f64[8, 16] = aten.relu.default(self=%l)\n",
                         "f64"))
                  .empty());
  // a bf16 linear plus a float32 residual: the add is float32, the GEMM bf16
  EXPECT_TRUE(emit("mixed", "",
                   "graph {\n  inputs {\n    %h: bf16[8, 32] = user_input\n    %w: bf16[16, 32] = "
                   "user_input\n    %x: f32[8, 16] = user_input\n  }\n"
                   "  %l: bf16[8, 16] = aten.linear.default(input=%h, weight=%w)\n"
                   "  %y: f32[8, 16] = aten.add.Tensor(self=%x, other=%l)\n"
                   "  outputs {\n    user_output %y\n  }\n}\n")
                  .empty());
}

// The forms only the CPU's chosen kernels fuse (codegen/gemm/gemm_epilogue.h cpu_only_form: a
// constant factor or divisor, a constant added, relu6) are neither cuBLASLt's nor posed to
// CUTLASS candidates: on CUDA they stay loop kernels after a plain GEMM.
TEST_F(CudaEpilogue, CpuOnlyFormsStayLoopKernels) {
  const std::string mm = "  %l: f32[8, 16] = aten.linear.default(input=%h, weight=%w)\n";
  const std::string linear =
      "  %l: f32[8, 16] = aten.linear.default(input=%h, weight=%w, bias=%b)\n";
  const std::string Y = "  %y: f32[8, 16] = ";
  const std::string S = "  %s: f32[8, 16] = ";
  for (const auto& [name, body] : std::vector<std::pair<std::string, std::string>>{
           {"scale", mm + Y + "aten.mul.Tensor(self=%l, other=3.0)\n"},
           {"div", mm + Y + "aten.div.Tensor(self=%l, other=16)\n"},
           {"shift", mm + S + "aten.mul.Tensor(self=%l, other=3.3)\n" + Y +
                         "aten.sub.Tensor(self=%s, other=1.234)\n"},
           {"add_const", mm + Y + "aten.add.Tensor(self=%l, other=0.5)\n"},
           {"scaled_bias", mm + S + "aten.mul.Tensor(self=%l, other=0.5)\n" + Y +
                               "aten.add.Tensor(self=%s, other=%b)\n"},
           {"relu6", linear + Y + "aten.relu6.default(self=%l)\n"},
           {"hardtanh", linear + Y + "aten.hardtanh.default(self=%l, min_val=0.0, max_val=6.0)\n"},
           {"clamp_relu", mm + S + "aten.relu.default(self=%l)\n" + Y +
                              "aten.clamp.default(self=%s, max=6.0)\n"}}) {
    EXPECT_TRUE(emit(name, "", graph(body)).empty()) << name;
    EXPECT_NE(source_.find("dev->gemm(device"), std::string::npos) << name;  // a plain GEMM
  }
}

TEST_F(CudaEpilogue, AResidualAddLeavesTheLayerNormKernelItOpens) {
  // x + linear(h) feeding a layer norm and returned: the add is a store of the norm's
  // multi-pass kernel; it moves into the GEMM and the kernel reads the GEMM's result (a block
  // per row, as ANVIL_CUDA_ROWS=block keeps it: CudaRowsEmit covers the other forms)
  const test::ScopedEnv rows("ANVIL_CUDA_ROWS", "block");
  EXPECT_EQ(emit("ln", "",
                 "graph {\n  inputs {\n    %h: f32[8, 32] = user_input\n    %w: f32[16, 32] = "
                 "user_input\n    %b: f32[16] = user_input\n    %x: f32[8, 16] = user_input\n"
                 "  }\n"
                 "  %l: f32[8, 16] = aten.linear.default(input=%h, weight=%w, bias=%b)\n"
                 "  %a: f32[8, 16] = aten.add.Tensor(self=%x, other=%l)\n"
                 "  %y: f32[8, 16] = aten.layer_norm.default(input=%a, normalized_shape=[16])\n"
                 "  outputs {\n    user_output %y\n    user_output %a\n  }\n}\n"),
            (std::map<std::string, int>{{"ANVIL_EPILOGUE_BIAS+C", 1}}));
  EXPECT_NE(source_.find("= block_reduce(acc"), std::string::npos);  // the norm stays
  EXPECT_NE(source_.find("gemm0_epilogue(s);"), std::string::npos);
  // x * 2 + linear(h): the product is computed inside the add, a residual scaled by beta = 2
  EXPECT_EQ(emit("scaled", "",
                 graph("  %l: f32[8, 16] = aten.linear.default(input=%h, weight=%w, bias=%b)\n"
                       "  %x2: f32[8, 16] = aten.mul.Tensor(self=%x, other=2.0)\n"
                       "  %y: f32[8, 16] = aten.add.Tensor(self=%x2, other=%l)\n")),
            (std::map<std::string, int>{{"ANVIL_EPILOGUE_BIAS+C", 1}}));
  EXPECT_NE(source_.find("ga.beta = static_cast<float>(2);"), std::string::npos);
  // x * x + linear(h) is no residual
  EXPECT_TRUE(emit("square", "",
                   graph("  %l: f32[8, 16] = aten.linear.default(input=%h, weight=%w, bias=%b)\n"
                         "  %x2: f32[8, 16] = aten.mul.Tensor(self=%x, other=%x)\n"
                         "  %y: f32[8, 16] = aten.add.Tensor(self=%x2, other=%l)\n"))
                  .empty());
}

TEST_F(CudaEpilogue, PointwiseKernelsLoadAndStoreVectorsWhereContiguous) {
  // vector_<dtype> (scripts/export_gemm_epilogue_cases.py): k0 x * y + z[row] and a gelu
  // (inner 64), k1 an inner size of 13, k2 a transposed read, k3 a 3-D broadcast (inner 64)
  for (const auto& [dt, width, vec] :
       {std::tuple<std::string, std::string, std::string>{"float32", "4", "uint4"},
        {"bfloat16", "8", "uint4"},
        {"float16", "8", "uint4"}}) {
    emit("vector_" + dt, fixture("gemm_epilogue/vector_" + dt + ".pt2"));
    for (const char* k : {"k0", "k3"}) {
      EXPECT_NE(
          source_.find("// " + std::string(k) + " vectorized: " + width + " elements per thread"),
          std::string::npos)
          << dt << " " << k;
      EXPECT_NE(source_.find("anvil_launch(s, " + std::string(k) +
                             "_kernel_v, anvil_blocks(n_outer * n_inner / " + width + ", 256)"),
                std::string::npos)
          << dt << " " << k;
    }
    for (const char* k : {"k1", "k2"})
      EXPECT_EQ(source_.find(std::string(k) + " vectorized"), std::string::npos) << dt << " " << k;
    // aligned operands only, else the scalar kernel; the per-row z stays a scalar load
    EXPECT_NE(source_.find("reinterpret_cast<uintptr_t>(s.in[0]) % 16 == 0"), std::string::npos)
        << dt;
    EXPECT_NE(source_.find("*reinterpret_cast<const " + vec + "*>(p0 + (64*o0 + r0));"),
              std::string::npos)
        << dt;
    // the scalar fallback launch
    EXPECT_EQ(count(source_, "anvil_launch(s, k0_kernel, "), 1u) << dt;
  }
  // symbolic sizes: gpt2_tiny's head split (64*s0*s1-strided outputs) is proven V-aligned
  emit("gpt2", fixture("gpt2_tiny.pt2"));
  EXPECT_NE(source_.find("k6 vectorized: 4 elements per thread"), std::string::npos);
  EXPECT_NE(source_.find("const int64_t total = (4*s23*s27) * (16) / 4;"), std::string::npos);
}

TEST_F(CudaEpilogue, AResidualSumReadTwiceIsStoredByItsGemm) {
  // a = x + o_proj(h) read by the next block's input and by the last residual a + down(..):
  // a is stored once, by the first GEMM's epilogue (x as cuBLASLt's C), and the last sum is
  // the second GEMM's epilogue (a as its C); no kernel recomputes x + o_proj(h)
  const std::string text =
      "graph {\n  inputs {\n    %h: bf16[8, 32] = user_input\n    %w1: bf16[16, 32] = "
      "user_input\n    %w2: bf16[16, 16] = user_input\n    %x: bf16[8, 16] = user_input\n"
      "  }\n"
      "  %o: bf16[8, 16] = aten.linear.default(input=%h, weight=%w1)\n"
      "  %a: bf16[8, 16] = aten.add.Tensor(self=%x, other=%o)\n"
      "  %n: bf16[8, 16] = aten.mul.Tensor(self=%a, other=%a)\n"
      "  %d: bf16[8, 16] = aten.linear.default(input=%n, weight=%w2)\n"
      "  %y: bf16[8, 16] = aten.add.Tensor(self=%a, other=%d)\n"
      "  outputs {\n    user_output %y\n  }\n}\n";
  EXPECT_EQ(emit("residual2", "", text),
            (std::map<std::string, int>{{"ANVIL_EPILOGUE_NONE+C", 2}}));
  const std::string program = read_text(dir_ / "residual2" / "program.txt");
  EXPECT_EQ(count(program, "add(load("), 2u) << program;  // each sum once, in its GEMM
}

TEST_F(CudaEpilogue, InPlacePointwiseKernelsAreVectorizedToo) {
  // SwiGLU after two GEMMs: silu(g) * u is computed in place in g's buffer (the GEMM writes the
  // kernel's destination); each thread loads its own 8 lanes of g before it stores them
  const std::string swiglu =
      "graph {\n  inputs {\n    %h: bf16[8, 32] = user_input\n    %wg: bf16[64, 32] = "
      "user_input\n    %wu: bf16[64, 32] = user_input\n  }\n"
      "  %g: bf16[8, 64] = aten.linear.default(input=%h, weight=%wg)\n"
      "  %u: bf16[8, 64] = aten.linear.default(input=%h, weight=%wu)\n"
      "  %s: bf16[8, 64] = aten.silu.default(self=%g)\n"
      "  %y: bf16[8, 64] = aten.mul.Tensor(self=%s, other=%u)\n"
      "  outputs {\n    user_output %y\n  }\n}\n";
  EXPECT_TRUE(emit("swiglu", "", swiglu).empty());
  EXPECT_NE(source_.find("k0 vectorized: 8 elements per thread"), std::string::npos) << source_;
  // the destination is read and written through the same pointer, at the same lanes
  EXPECT_NE(source_.find("*reinterpret_cast<const uint4*>(p"), std::string::npos);
  EXPECT_EQ(count(source_, "anvil_launch(s, k0_kernel_v, "), 1u);
  // a kernel reading its destination at another element (a shifted read) stays scalar
  const std::string shifted =
      "graph {\n  inputs {\n    %h: bf16[8, 32] = user_input\n    %w: bf16[64, 32] = "
      "user_input\n  }\n"
      "  %g: bf16[8, 64] = aten.linear.default(input=%h, weight=%w)\n"
      "  %f: bf16[8, 64] = aten.flip.default(self=%g, dims=[1])\n"
      "  %y: bf16[8, 64] = aten.mul.Tensor(self=%g, other=%f)\n"
      "  outputs {\n    user_output %y\n  }\n}\n";
  emit("shifted", "", shifted);
  EXPECT_EQ(source_.find("vectorized:"), std::string::npos) << source_;
}

TEST_F(CudaEpilogue, BuffersStoredTwiceAndConcatenationSlicesAreVectorized) {
  // (tests/codegen/graph_cases.inc; the GPU runs them in Graphs/CudaGraph.*)
  const auto text = [](const std::string& name) {
    for (const auto& c : graph_cases::kCases)
      if (name == c.name) return std::string(c.text);
    ADD_FAILURE() << "no graph case " << name;
    return std::string();
  };
  // y = x * s + t stored, then ReLU in place; z = y * y stored, then ReLU in place: one kernel
  // storing each of two buffers twice; each thread keeps its lanes' latest values (the later
  // statements read them forwarded, not from memory) and stores each buffer's vector once
  emit("stored_twice", "", text("inplace_relu_after_affine_bf16"));
  EXPECT_NE(source_.find("k0 vectorized: 8 elements per thread"), std::string::npos) << source_;
  const auto kernel_v = [&](const std::string& k) {
    const size_t at = source_.find(k + "_kernel_v(");
    EXPECT_NE(at, std::string::npos) << k << " is not vectorized:\n" << source_;
    return at == std::string::npos ? std::string()
                                   : source_.substr(at, source_.find("\n}\n", at) - at);
  };
  std::string body = kernel_v("k0");
  EXPECT_EQ(count(body, "*reinterpret_cast<uint4*>(p"), 2u) << body;        // y and z, once each
  EXPECT_EQ(count(body, "*reinterpret_cast<const uint4*>(p"), 3u) << body;  // x, s, t
  // a concatenation of 16 + 8 + 8 lanes: the 8-lane slices are stored by one kernel, a vector
  // store each; every kernel vectorized
  emit("cat_slices", "", text("cat_slices_bf16"));
  EXPECT_EQ(count(source_, " vectorized: 8 elements per thread"), 3u) << source_;
  body = kernel_v("k1");
  EXPECT_EQ(count(body, "*reinterpret_cast<uint4*>(p"), 2u) << body;
}

TEST_F(CudaEpilogue, NormsOverAConcatenationArePerPartOnlyWhenAsked) {
  // CUDA keeps the concatenation, then one norm kernel over all channels (its per-part kernels
  // lost on an H200: design_notes.md); ANVIL_NORM_THROUGH_CAT=1 asks for the parts
  const auto relus = [&](const char* name) {
    for (const auto& c : graph_cases::kCases)
      if (std::string(c.name) == "norm_relu_over_cat_bf16") emit(name, "", c.text);
    return count(read_text(dir_ / name / "program.txt"), " = relu(");
  };
  EXPECT_EQ(relus("default"), 1u);
  const test::ScopedEnv on("ANVIL_NORM_THROUGH_CAT", "1");
  EXPECT_EQ(relus("parts"), 2u);
}

TEST_F(CudaEpilogue, RowKernelsLoadAndStoreVectorsWhereContiguous) {
  // a layer norm over rows of 64 bf16: each pass loop takes 8-element vectors (64 / 8 = 8
  // vectors a row: one warp), the weight a vector too; the scalar kernel stays for unaligned data
  // (a block per row, as ANVIL_CUDA_ROWS=block keeps it: CudaRowsEmit covers the other forms)
  const test::ScopedEnv rows("ANVIL_CUDA_ROWS", "block");
  const std::string norm =
      "graph {\n  inputs {\n    %x: bf16[8, 64] = user_input\n    %w: bf16[64] = user_input\n"
      "  }\n"
      "  %y: bf16[8, 64] = aten.layer_norm.default(input=%x, normalized_shape=[64], weight=%w)\n"
      "  outputs {\n    user_output %y\n  }\n}\n";
  emit("norm", "", norm);
  EXPECT_NE(source_.find("k0 vectorized: rows of 8-element vectors"), std::string::npos) << source_;
  EXPECT_NE(source_.find("anvil_launch(s, k0_kernel_rv, anvil_blocks(n_outer, 1), 32, sy"),
            std::string::npos);
  EXPECT_NE(source_.find("*reinterpret_cast<const uint4*>(p"), std::string::npos);
  // the fallback
  EXPECT_EQ(count(source_, "anvil_launch(s, k0_kernel, anvil_blocks(n_outer, 1), 64, sy"), 1u);
  // rows of 13: no whole vectors
  const std::string odd =
      "graph {\n  inputs {\n    %x: bf16[8, 13] = user_input\n  }\n"
      "  %y: bf16[8, 13] = aten._softmax.default(self=%x, dim=1, half_to_float=False)\n"
      "  outputs {\n    user_output %y\n  }\n}\n";
  emit("odd", "", odd);
  EXPECT_EQ(source_.find("vectorized"), std::string::npos) << source_;
}

TEST_F(CudaEpilogue, FusedSourcesCompileWithNvcc) {
  // one nvcc run: the bfloat16 fixture has every fused form, the fallback kernels and an
  // unfused erf gelu
  opts_.emit_only = false;
  opts_.emit_source_dir = (dir_ / "src").string();
  const std::string pkg = (dir_ / "e.anvil").string();
  const driver::CompileReport r =
      driver::compile_pt2(fixture("gemm_epilogue/gemm_epilogue_bfloat16.pt2"), pkg, opts_);
  EXPECT_EQ(r.target, "cuda-sm90");
  EXPECT_FALSE(runtime::Package::open(pkg)->model_so().empty());
  EXPECT_NE(read_text(dir_ / "src" / "kernels_0.cu").find("ANVIL_EPILOGUE_BIAS_GELU_TANH"),
            std::string::npos);
  // and the vectorized pointwise kernels (16-bit: 8 lanes)
  driver::compile_pt2(fixture("gemm_epilogue/vector_bfloat16.pt2"), (dir_ / "v.anvil").string(),
                      opts_);
  EXPECT_NE(read_text(dir_ / "src" / "kernels_0.cu").find("k0_kernel_v"), std::string::npos);
}

}  // namespace
}  // namespace anvil
