// The CUDA target without a GPU (CI has nvcc and the CUDA libraries, no GPU): generated CUDA
// sources compile with nvcc into a package that records its device; models with steps the target
// cannot compile are refused with all of them listed; a CUDA package on a machine without a GPU
// is a clear error at load. On a GPU machine the load test checks that the package loads.
#include <gtest/gtest.h>

#include <map>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "anvil/anvil_rt.h"
#include "codegen/target.h"
#include "common/check.h"
#include "common/scoped_env.h"
#include "common/text.h"
#include "cuda_compile_fixture.h"
#include "core/error.h"
#include "driver/compile.h"
#include "ir/parser.h"
#include "runtime/collectives.h"
#include "runtime/device_backend.h"
#include "runtime/model.h"
#include "runtime/package.h"
#include <nlohmann/json.hpp>

namespace anvil {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& f) { return std::string(ANVIL_FIXTURES_DIR) + "/" + f; }

class CudaTarget : public test::CudaCompileTest {};

TEST_F(CudaTarget, SourcesCompileWithNvccIntoAPackageForTheGpu) {
  opts_.emit_source_dir = (dir_ / "src").string();
  const std::string pkg = (dir_ / "m.anvil").string();
  // softmax: row reductions (one block per row, warp shuffles)
  const auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[3, 7, 16] = user_input
  }
  %sm: f32[3, 7, 16] = aten.softmax.int(self=%x, dim=-1)
  outputs {
    user_output %sm
  }
})");
  const driver::CompileReport r = driver::compile_graph(*g, pkg, opts_);
  EXPECT_EQ(r.target, "cuda-sm90");
  EXPECT_GE(r.units_compiled, 1);
  const auto p = runtime::Package::open(pkg);
  EXPECT_EQ(p->manifest().device_type, Device::Type::kCUDA);
  EXPECT_EQ(p->manifest().cuda_min_capability, 80);
  EXPECT_EQ(p->manifest().abi_version, ANVIL_MODEL_ABI_VERSION);
  EXPECT_FALSE(p->model_so().empty());
  std::ifstream in(dir_ / "src" / "kernels_0.cu");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("__global__"), std::string::npos);
  // 21 rows of 16: a warp per row (ANVIL_CUDA_ROWS=block: a block per row)
  EXPECT_TRUE(text.find("= warp_reduce(acc") != std::string::npos ||
              text.find("= block_reduce(acc") != std::string::npos)
      << "softmax should reduce across the threads of a row";
  EXPECT_NE(text.find("anvil_launch(s, "), std::string::npos);

  const std::string mlp = (dir_ / "mlp.anvil").string();
  driver::compile_pt2(fixture("mlp_small.pt2"), mlp, opts_);
  std::ifstream src(dir_ / "src" / "kernels_0.cu");
  const std::string mlp_text((std::istreambuf_iterator<char>(src)),
                             std::istreambuf_iterator<char>());
  EXPECT_NE(mlp_text.find("dev->gemm("), std::string::npos) << "linear layers go to cuBLASLt";

  // a transformer: embedding, index.Tensor, cumsum, diff and attention get generated kernels;
  // its steps cut into kernels units of about 32 KB of source (ANVIL_CUDA_UNIT_KB), compiled
  // apart and linked into one model.so (a step calling code of another unit would not link:
  // the units' symbols are hidden)
  const test::ScopedEnv unit_kb("ANVIL_CUDA_UNIT_KB", "32");
  const std::string llama_pkg = (dir_ / "llama.anvil").string();
  const driver::CompileReport lr = driver::compile_pt2(fixture("llama_tiny.pt2"), llama_pkg, opts_);
  EXPECT_EQ(lr.num_externs, 7);
  std::string llama;
  int units = 0;
  for (; fs::exists(dir_ / "src" / ("kernels_" + std::to_string(units) + ".cu")); ++units) {
    std::ifstream ls(dir_ / "src" / ("kernels_" + std::to_string(units) + ".cu"));
    const std::string unit((std::istreambuf_iterator<char>(ls)), std::istreambuf_iterator<char>());
    EXPECT_NE(unit.find("__global__"), std::string::npos) << "unit " << units;
    EXPECT_LT(unit.size(), 96u * 1024) << "unit " << units;  // the preamble + about 32 KB
    llama += unit;
  }
  EXPECT_GE(units, 3);
  EXPECT_FALSE(runtime::Package::open(llama_pkg)->model_so().empty());
  for (const char* k : {"(aten.embedding.default)", "(aten.diff.default)", "(aten.cumsum.default)",
                        "(aten.index.Tensor)", "(aten.scaled_dot_product_attention.default)"})
    EXPECT_NE(llama.find(k), std::string::npos) << k;
}

TEST_F(CudaTarget, AKernelsUnitSizeThatIsNotOneIsRefusedNamingTheVariable) {
  opts_.compiler = "/bin/false";  // the sources are never compiled: the size is read first
  for (const char* bad : {"abc", "0", "-4", "32k"}) {
    const test::ScopedEnv unit_kb("ANVIL_CUDA_UNIT_KB", bad);
    const std::string err = ::anvil::test::error_message(
        [&] { driver::compile_pt2(fixture("mlp_small.pt2"), (dir_ / "m.anvil").string(), opts_); });
    EXPECT_TRUE(::anvil::test::error_says(err, "ANVIL_CUDA_UNIT_KB")) << bad << ": " << err;
  }
}

TEST_F(CudaTarget, UnsupportedStepsAreListedAllAtOnce) {
  // loop reductions over complex values (neither target compiles one): every such kernel is
  // named in one error, and no package is written
  const auto g = ir::parse_graph(R"(graph {
  inputs {
    %a: c64[4, 3] = user_input
  }
  %s: c64[4] = aten.sum.dim_IntList(self=%a, dim=[1])
  %t: c64[3] = aten.sum.dim_IntList(self=%a, dim=[0])
  outputs {
    user_output %s
    user_output %t
  }
})");
  const std::string msg = ::anvil::test::error_message(
      [&] { driver::compile_graph(*g, (dir_ / "c.anvil").string(), opts_); });
  EXPECT_TRUE(::anvil::test::error_says(msg, "the cuda target cannot compile 2 steps"));
  for (const char* step : {"k0 (s)", "k1 (t)", "a reduction of c64 values"})
    EXPECT_NE(msg.find(step), std::string::npos) << step << " missing from: " << msg;
  EXPECT_FALSE(fs::exists(dir_ / "c.anvil"));
}

/// The manifest's host steps of a CUDA package (name -> target).
std::map<std::string, std::string> host_steps(const std::string& pkg) {
  const auto p = runtime::Package::open(pkg);
  const auto j = nlohmann::json::parse(p->manifest().json);
  std::map<std::string, std::string> out;
  for (const auto& h : j.at("host_steps")) out[h.at("name")] = h.at("target");
  return out;
}

/// The text of a file.
std::string slurp(const fs::path& f) {
  std::ifstream in(f);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Occurrences of "std::complex<" that are not libcu++'s "cuda::std::complex<".
int host_complex_uses(const std::string& text) {
  int n = 0;
  for (size_t at = text.find("std::complex<"); at != std::string::npos;
       at = text.find("std::complex<", at + 1))
    n += at < 6 || text.compare(at - 6, 6, "cuda::") != 0;
  return n;
}

TEST_F(CudaTarget, ComplexValuesCompileWithNvcc) {
  // case 77: complex32 / complex64 / complex128 inputs, a.clone(), b + b and c * 2 as kernels
  // computing in cuda::std::complex (complex32 stored as two fp16 halves); no host step.
  opts_.emit_source_dir = (dir_ / "c77").string();
  const std::string c77 = (dir_ / "c77.anvil").string();
  const driver::CompileReport r =
      driver::compile_pt2(fixture("aot/aot_77_complex_checks.pt2"), c77, opts_);
  EXPECT_EQ(r.target, "cuda-sm90");
  EXPECT_TRUE(host_steps(c77).empty());
  const std::string k77 = slurp(dir_ / "c77" / "kernels_0.cu");
  EXPECT_NE(k77.find("#include <cuda/std/complex>"), std::string::npos);
  EXPECT_NE(k77.find("cuda::std::complex<float>* __restrict__"), std::string::npos);
  EXPECT_NE(k77.find("cuda::std::complex<double>* __restrict__"), std::string::npos);
  EXPECT_NE(k77.find("anvil_c32* __restrict__"), std::string::npos);
  EXPECT_NE(k77.find("= c32_to_c64(p"), std::string::npos) << "complex32 loads widen";
  EXPECT_EQ(host_complex_uses(k77), 0) << "std::complex is host-only: kernels use libcu++'s";
  // model.cu (run(), no complex values in its host code) does not pay for the complex headers
  EXPECT_EQ(slurp(dir_ / "c77" / "model.cu").find("complex"), std::string::npos);

  // real / imag of complex tensors, FFTs: the kernels take the parts with cuda::std::real /
  // imag; the FFTs are host steps whose views of complex tensors are host std::complex.
  opts_.emit_source_dir = (dir_ / "s2").string();
  const std::string s2 = (dir_ / "s2.anvil").string();
  driver::compile_pt2(fixture("aot/ops_strides2.pt2"), s2, opts_);
  const auto hs = host_steps(s2);
  EXPECT_EQ(hs.at("ext0"), "aten.fft_fft.default");
  EXPECT_EQ(hs.at("ext10"), "aten.fft_rfft.default");
  const std::string ks2 = slurp(dir_ / "s2" / "kernels_0.cu");
  for (const char* part : {"cuda::std::real(", "cuda::std::imag("})
    EXPECT_NE(ks2.find(part), std::string::npos) << part;
  EXPECT_GT(host_complex_uses(ks2), 0) << "the FFT host steps' complex views";
  EXPECT_EQ(runtime::Package::open(s2)->manifest().device_type, Device::Type::kCUDA);

  // nor does a program without complex values
  opts_.emit_source_dir = (dir_ / "mlp").string();
  driver::CompileOptions emit_only = opts_;
  emit_only.compiler = "/bin/false";
  ::anvil::test::error_message([&] {
    driver::compile_pt2(fixture("mlp_small.pt2"), (dir_ / "mlp.anvil").string(), emit_only);
  });
  const std::string kmlp = slurp(dir_ / "mlp" / "kernels_0.cu");
  ASSERT_FALSE(kmlp.empty());
  EXPECT_EQ(kmlp.find("complex"), std::string::npos);
}

TEST_F(CudaTarget, ExternsWithoutACudaKernelRunOnTheHostAndAreCounted) {
  // Sorting and arg-reductions have no CUDA kernel yet: they compile as host steps (the CPU
  // kernel on host copies), listed in the manifest for `anvil inspect`, their runtime kernels
  // checked at load like a CPU package's.
  const std::string ops = (dir_ / "ops.anvil").string();
  driver::compile_pt2(fixture("aot/ops_reductions_more.pt2"), ops, opts_);
  const auto hs = host_steps(ops);
  EXPECT_EQ(hs.size(), 10u);
  EXPECT_EQ(hs.at("ext2"), "aten.sort.default");
  EXPECT_EQ(hs.at("ext3"), "aten.topk.default");
  EXPECT_EQ(runtime::Package::open(ops)->manifest().externs,
            (std::vector<std::string>{"aten.argmax.default", "aten.argmin.default",
                                      "aten.argsort.default", "aten.cumprod.default",
                                      "aten.sort.default", "aten.topk.default"}));
  // small_cnn: its pooling is a CUDA kernel (no host step); its 3-channel stem is anvil's
  // direct kernel, its other convolution goes to cuDNN (manifest "cudnn_convs") with the CPU
  // kernel behind it as its host path.
  opts_.emit_source_dir = (dir_ / "src").string();
  const std::string pkg = (dir_ / "cnn.anvil").string();
  driver::compile_pt2(fixture("small_cnn.pt2"), pkg, opts_);
  EXPECT_TRUE(host_steps(pkg).empty());
  EXPECT_EQ(runtime::Package::open(pkg)->manifest().externs,
            (std::vector<std::string>{"aten.conv2d.default"}));
  std::ifstream in(dir_ / "src" / "kernels_0.cu");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("s.api->extern_call(s.run_ctx, \"aten.conv2d.default\""), std::string::npos)
      << "the convolutions' host path";
  EXPECT_EQ(::anvil::test::count(text, "return anvil_conv(s, \"ext"), 1u);
  EXPECT_EQ(
      ::anvil::test::count(text, "a convolution of few input channels, anvil's direct kernel"),
      1u);
  // The bench models and the transformer fixtures run wholly on the GPU (their manifests are
  // read as emitted: no nvcc run, a compiler that fails stops each compile after emission).
  driver::CompileOptions emit_only = opts_;
  emit_only.compiler = "/bin/false";
  for (const char* m : {"mlp_small", "block_tiny", "llama_tiny", "gpt2_tiny", "bert_tiny"}) {
    emit_only.emit_source_dir = (dir_ / m).string();
    ::anvil::test::error_message([&] {
      driver::compile_pt2(fixture(std::string(m) + ".pt2"), (dir_ / "x.anvil").string(), emit_only);
    });
    std::ifstream mf(dir_ / m / "manifest.json");
    ASSERT_TRUE(mf.good()) << m;
    const auto j = nlohmann::json::parse(mf);
    ASSERT_TRUE(j.contains("host_steps")) << m;
    EXPECT_TRUE(j["host_steps"].empty()) << m << ": " << j["host_steps"].dump();
  }
}

TEST_F(CudaTarget, GraphsRecordedOnTheGpuCompileForIt) {
  // aot_80 was exported with its module and input on cuda:0: the CPU target refuses it (spec aot
  // case 80), the CUDA target takes it.
  const std::string pt2 = fixture("aot/aot_80_cuda_inputs.pt2");
  const driver::CompileReport r = driver::compile_pt2(pt2, (dir_ / "g.anvil").string(), opts_);
  EXPECT_EQ(r.target, "cuda-sm90");
  driver::CompileOptions cpu = opts_;
  cpu.target = "native";
  ANVIL_EXPECT_ERROR(driver::compile_pt2(pt2, (dir_ / "c.anvil").string(), cpu),
                     "Device mismatch: the graph was recorded with tensors on another device");
}

TEST_F(CudaTarget, LoadingWithoutAGpuIsAClearError) {
  const std::string pkg = (dir_ / "m.anvil").string();
  driver::compile_pt2(fixture("mlp_small.pt2"), pkg, opts_);
  // on the CPU: refused whatever the machine
  ANVIL_EXPECT_ERROR(runtime::Model::load(pkg, {}),
                     "package was compiled for cuda (target cuda-sm90); load it with that device");
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  std::string no_gpu;
  try {
    runtime::require_device(Device::cuda(0), "test");
  } catch (const Error& e) {
    no_gpu = e.what();
  }
  if (no_gpu.empty()) {  // a GPU machine: the package loads there
    const runtime::Model m = runtime::Model::load(pkg, mo);
    EXPECT_EQ(m.device(), Device::cuda(0));
    return;
  }
  ANVIL_EXPECT_ERROR(runtime::Model::load(pkg, mo), "no cuda device is available");
  // host tensors cannot go to a missing device either
  ANVIL_EXPECT_ERROR(Tensor::zeros({2}, DType::kFloat32).to(Device::cuda(0)), "cuda");
}

TEST(Targets, EveryTargetNameHasOneTargetAndUnknownNamesListThem) {
  EXPECT_EQ(codegen::find_target("native").name(), "cpu");
  EXPECT_EQ(codegen::find_target("x86_64-avx2").name(), "cpu");
  EXPECT_EQ(codegen::find_target("cuda-sm90").name(), "cuda");
  EXPECT_EQ(codegen::find_target("cuda-sm80").device_type(), Device::Type::kCUDA);
  const std::string msg =
      ::anvil::test::error_message([] { codegen::find_target("cuda-sm75"); });
  EXPECT_TRUE(::anvil::test::error_says(msg, "unknown compile target"));
  EXPECT_TRUE(::anvil::test::error_says(msg, "cuda-sm80, cuda-sm90"));
  EXPECT_TRUE(::anvil::test::error_says(msg, "native"));
}

TEST(DeviceBackend, MissingBackendLibraryNamesWhereItLooked) {
  // the backend's file name is fixed; the search order is documented in device_backend.h
  EXPECT_EQ(runtime::device_backend_library(Device::Type::kCUDA), "libanvil_cuda.so");
  ANVIL_EXPECT_ERROR(runtime::device_backend(Device::Type::kCPU), "the CPU has no device backend");
}

TEST_F(CudaTarget, SixteenBitAttentionGoesToCudnnWithTheOwnKernelBehind) {
  // 16-bit attention without a mask or with an additive one is a cuDNN candidate: its step
  // fills AnvilAttentionArgs and calls anvil_attention, which picks cuDNN's fused attention or
  // the step's own kernel (<step>_own) per shape. A boolean mask or fp32 stays with the own
  // kernel alone. The source must still compile with nvcc.
  opts_.emit_source_dir = (dir_ / "src").string();
  const auto g = ir::parse_graph(R"(graph {
  inputs {
    %q: bf16[2, 4, 32, 64] = user_input
    %k: bf16[2, 2, 32, 64] = user_input
    %mb: bool[32, 32] = user_input
    %ma: bf16[2, 1, 32, 32] = user_input
    %x: f32[1, 2, 16, 32] = user_input
  }
  %c: bf16[2, 4, 32, 64] = aten.scaled_dot_product_attention.default(query=%q, key=%k, value=%k, is_causal=True, enable_gqa=True)
  %b: bf16[2, 4, 32, 64] = aten.scaled_dot_product_attention.default(query=%q, key=%k, value=%k, attn_mask=%mb, enable_gqa=True)
  %a: bf16[2, 4, 32, 64] = aten.scaled_dot_product_attention.default(query=%q, key=%k, value=%k, attn_mask=%ma, scale=0.2, enable_gqa=True)
  %f: f32[1, 2, 16, 32] = aten.scaled_dot_product_attention.default(query=%x, key=%x, value=%x)
  outputs {
    user_output %c
    user_output %b
    user_output %a
    user_output %f
  }
})");
  driver::compile_graph(*g, (dir_ / "attn.anvil").string(), opts_);
  std::string text;
  for (const auto& f : fs::directory_iterator(dir_ / "src")) {
    if (f.path().extension() != ".cu") continue;
    std::ifstream in(f.path());
    text += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  size_t calls = 0;
  for (size_t at = text.find("return anvil_attention(s, "); at != std::string::npos;
       at = text.find("return anvil_attention(s, ", at + 1))
    ++calls;
  EXPECT_EQ(calls, 2u) << "the causal and the additive-mask bf16 attention try cuDNN";
  EXPECT_NE(text.find("a.causal = 1;"), std::string::npos);
  EXPECT_NE(text.find("a.bias = "), std::string::npos) << "the additive mask is cuDNN's bias";
  const size_t second = text.find("a.scale = ", text.find("a.scale = ") + 1);
  ASSERT_NE(second, std::string::npos);
  EXPECT_NE(text.substr(second, 60).find("0.2"), std::string::npos) << text.substr(second, 60);
  size_t owns = 0;
  for (size_t at = text.find("_own(const RunState& s)"); at != std::string::npos;
       at = text.find("_own(const RunState& s)", at + 1))
    ++owns;
  EXPECT_EQ(owns, 2u) << "each cuDNN candidate keeps its own kernel behind it";
}

TEST_F(CudaTarget, CollectivesAreIssuedAndWaitedOnTheRunsStream) {
  // a tensor-parallel graph compiles for the GPU: its all_reduce is issued and waited in run()
  // with the run's stream (a GPU group orders it after the kernels queued there and makes the
  // stream, not the host, wait); the manifest lists it, so a package joins the world at load
  opts_.emit_source_dir = (dir_ / "src").string();
  driver::compile_pt2(fixture("tp_mlp_allreduce.pt2"), (dir_ / "tp.anvil").string(), opts_);
  std::ifstream in(dir_ / "src" / "model.cu");
  const std::string model((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(model.find("coll_issue_stream(s.run_ctx, s.stream, \"all_reduce\""), std::string::npos);
  EXPECT_NE(model.find("coll_wait_stream(s.run_ctx,"), std::string::npos);
  const auto p = runtime::Package::open((dir_ / "tp.anvil").string());
  EXPECT_NE(p->manifest().json.find("\"collectives\""), std::string::npos);
  EXPECT_TRUE(runtime::package_has_collectives(p->manifest().json));
}

}  // namespace
}  // namespace anvil
