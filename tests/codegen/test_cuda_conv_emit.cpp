// Convolutions on the CUDA target without a GPU: 1-D and 2-D float32 / bfloat16 / float16
// convolutions are not host steps; each fills AnvilConvArgs and calls anvil_conv (cuDNN through
// the device backend's `conv`, device ABI 5) with its host path behind it, and a fused bias or
// relu keeps its own kernel for when cuDNN cannot fuse them. float64 and transposed ones stay
// host steps, with the reason. Strided views (a channels-last permute, a slice) reach the call
// as they are. The sources compile with nvcc (in CI a seeded sample of the compiles:
// common/nvcc_sample.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <optional>

#include "../gpu/cuda_conv_graphs.inc"
#include "anvil/anvil_device.h"
#include "common/check.h"
#include "common/nvcc_sample.h"
#include "common/scoped_env.h"
#include "common/text.h"
#include "driver/compile.h"
#include "ir/parser.h"
#include "runtime/device_backend.h"
#include "runtime/package.h"
#include <nlohmann/json.hpp>

namespace anvil {
namespace {

namespace fs = std::filesystem;

using test::count;

/// ANVIL_CONV_LAYOUT=nchw while it lives (the layout plan off).
struct ScopedNchw {
  ScopedNchw() { ::setenv("ANVIL_CONV_LAYOUT", "nchw", 1); }
  ~ScopedNchw() { ::unsetenv("ANVIL_CONV_LAYOUT"); }
};

/// The text after the first occurrence of `head` up to the next "\n}\n" (one function).
std::string function_after(const std::string& text, const std::string& head) {
  const size_t at = text.find(head);
  if (at == std::string::npos) return "";
  const size_t end = text.find("\n}\n", at);
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

/// What the compiler emits for `g`: its manifest and the text of its .cu sources, compiled into
/// DIR/src with the environment variable `env` set to `value` while it compiles (when not
/// null). nvcc builds DIR/NAME.anvil when `package` or when the CI sample picks this compile
/// (common/nvcc_sample.h); else the sources are only emitted.
struct Emitted {
  nlohmann::json manifest;
  std::string text;
};
Emitted emit(const ir::Graph& g, const fs::path& dir, const std::string& name,
             const char* env = nullptr, const char* value = "1", bool package = false) {
  fs::remove_all(dir / "src");
  driver::CompileOptions o;
  o.emit_only = !package && !test::nvcc_this_test(name);
  o.target = "cuda-sm90";
  o.cache_dir = (dir / "cache").string();
  o.progress = codegen::ProgressMode::kQuiet;
  o.emit_source_dir = (dir / "src").string();
  std::optional<test::ScopedEnv> scoped;  // set while compiling, put back however it ends
  if (env) scoped.emplace(env, value);
  driver::compile_graph(g, (dir / (name + ".anvil")).string(), o);
  Emitted out;
  std::ifstream mf(dir / "src" / "manifest.json");
  out.manifest = nlohmann::json::parse(mf);
  for (const auto& f : fs::directory_iterator(dir / "src")) {
    if (f.path().extension() != ".cu") continue;
    std::ifstream in(f.path());
    out.text += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  return out;
}

TEST(CudaConvEmit, ConvolutionsCallCudnnWithTheHostPathBehind) {
  const fs::path dir = fs::temp_directory_path() / ("anvil_cuda_conv_emit_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.cache_dir = (dir / "cache").string();
  o.progress = codegen::ProgressMode::kQuiet;
  o.emit_source_dir = (dir / "src").string();
  const auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[2, 8, 16, 16] = user_input
    %w: f32[16, 8, 3, 3] = user_input
    %b: f32[16] = user_input
    %wd: f32[8, 1, 5, 5] = user_input
    %h: bf16[1, 4, 9, 9] = user_input
    %wh: bf16[4, 2, 3, 3] = user_input
    %s: f16[2, 4, 20] = user_input
    %ws: f16[6, 4, 3] = user_input
    %u: f32[8, 16, 16] = user_input
    %d: f64[1, 2, 8, 8] = user_input
    %wdd: f64[2, 2, 3, 3] = user_input
    %xw: f32[2, 8, 16, 17] = user_input
    %xl: f32[2, 16, 16, 8] = user_input
  }
  %c0: f32[2, 16, 8, 8] = aten.conv2d.default(input=%x, weight=%w, bias=%b, stride=[2, 2], padding=[1, 1])
  %r0: f32[2, 16, 8, 8] = aten.relu.default(self=%c0)
  %c1: f32[2, 8, 16, 16] = aten.conv2d.default(input=%x, weight=%wd, padding=[4, 4], dilation=[2, 2], groups=8)
  %c2: bf16[1, 4, 9, 9] = aten.conv2d.default(input=%h, weight=%wh, padding=[1, 1], groups=2)
  %c3: f16[2, 6, 18] = aten.conv1d.default(input=%s, weight=%ws)
  %c4: f32[16, 16, 16] = aten.conv2d.default(input=%u, weight=%w, padding=[1, 1])
  %c5: f64[1, 2, 6, 6] = aten.conv2d.default(input=%d, weight=%wdd)
  %xs: f32[2, 8, 16, 16] = aten.slice.Tensor(self=%xw, dim=3, start=1, end=17)
  %c6: f32[2, 16, 16, 16] = aten.conv2d.default(input=%xs, weight=%w, padding=[1, 1])
  %xp: f32[2, 8, 16, 16] = aten.permute.default(self=%xl, dims=[0, 3, 1, 2])
  %c7: f32[2, 16, 16, 16] = aten.conv2d.default(input=%xp, weight=%w, padding=[1, 1])
  outputs {
    user_output %r0
    user_output %c1
    user_output %c2
    user_output %c3
    user_output %c4
    user_output %c5
    user_output %c6
    user_output %c7
  }
})");
  const std::string pkg = (dir / "conv.anvil").string();
  {
    const test::ScopedEnv dw("ANVIL_CUDA_DEPTHWISE", "0");  // c1 on cuDNN too
    driver::compile_graph(*g, pkg, o);  // nvcc compiles the generated source
  }

  std::ifstream mf(dir / "src" / "manifest.json");
  ASSERT_TRUE(mf.good());
  const auto m = nlohmann::json::parse(mf);
  ASSERT_EQ(m.at("host_steps").size(), 1u) << m.at("host_steps").dump();
  const auto& hs = m["host_steps"][0];
  EXPECT_EQ(hs.at("target"), "aten.conv2d.default");
  EXPECT_NE(hs.at("why").get<std::string>().find("f64 convolutions run on the host"), std::string::npos) << hs.dump();
  EXPECT_EQ(m.at("cudnn_convs").size(), 7u) << m.at("cudnn_convs").dump();
  // the host path's runtime kernels are checked at load
  EXPECT_EQ(runtime::Package::open(pkg)->manifest().externs,
            (std::vector<std::string>{"aten.conv1d.default", "aten.conv2d.default"}));

  std::string text;
  for (const auto& f : fs::directory_iterator(dir / "src")) {
    if (f.path().extension() != ".cu") continue;
    std::ifstream in(f.path());
    text += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  EXPECT_EQ(count(text, "return anvil_conv(s, "), 7u);
  EXPECT_EQ(count(text, "_host(const RunState& s)"), 7u) << "each keeps its host path";
  // the relu folded into the first convolution and its bias: fused, with a kernel behind
  EXPECT_EQ(count(text, "_epilogue(const RunState& s)"), 1u);
  std::map<std::string, std::string> step;  // the first node of each cuDNN step -> its name
  for (const auto& c : m["cudnn_convs"]) step[c.at("nodes")[0]] = c.at("name");
  ASSERT_EQ(step.size(), 7u);
  const auto fn = [&](const std::string& node) {
    return function_after(text, "ANVIL_HIDDEN int " + step.at(node) + "(const RunState& s) {");
  };
  const std::string f0 = fn("c0"), f1 = fn("c1"), f2 = fn("c2"), f3 = fn("c3"), f4 = fn("c4");
  for (const char* want : {"a.activation = ANVIL_CONV_ACT_RELU;", "a.bias = ", "a.stride_h = 2;",
                           "a.stride_w = 2;", "a.pad_top = 1;", "a.pad_right = 1;",
                           "a.dtype = 7;", "_epilogue, "})
    EXPECT_NE(f0.find(want), std::string::npos) << want << " in\n" << f0;
  for (const char* want : {"a.groups = 8;", "a.dilation_h = 2;", "a.dilation_w = 2;",
                           "a.pad_left = 4;", "nullptr, "})
    EXPECT_NE(f1.find(want), std::string::npos) << want << " in\n" << f1;
  EXPECT_EQ(f1.find("a.bias"), std::string::npos);
  for (const char* want : {"a.groups = 2;", "a.dtype = 13;"})
    EXPECT_NE(f2.find(want), std::string::npos) << want << " in\n" << f2;
  // 1-D: a unit height
  for (const char* want : {"a.dtype = 6;", "a.in_h = 1;", "a.kernel_h = 1;", "a.out_h = 1;",
                           "a.kernel_w = (3);", "a.out_w = (18);"})
    EXPECT_NE(f3.find(want), std::string::npos) << want << " in\n" << f3;
  // unbatched: batch 1
  EXPECT_NE(f4.find("a.batch = 1;"), std::string::npos) << f4;
  // views reach cuDNN as they are: a slice one element in (cuDNN refuses it at run time: the
  // host path), and a channels-last permute (NHWC strides, which cuDNN takes)
  const std::string f6 = fn("c6"), f7 = fn("c7");
  for (const char* want : {"+ (1);", "a.x_stride[2] = (17);"})
    EXPECT_NE(f6.find(want), std::string::npos) << want << " in\n" << f6;
  for (const char* want : {"a.x_stride[1] = (1);", "a.x_stride[2] = (128);", "a.x_stride[3] = (8);"})
    EXPECT_NE(f7.find(want), std::string::npos) << want << " in\n" << f7;
  fs::remove_all(dir);
}

TEST(CudaConvEmit, ResidualBlocksStayChannelsLastWithTheAddFused) {
  // a ResNet-like bf16 stem and block: the activations between convolutions and pooling are
  // planned NHWC (passes/conv_layout.cpp); the stem reads an NHWC copy of the NCHW graph input
  // (cuDNN never sees mixed layouts); the residual add and the relu after it go into the last
  // convolution's cuDNN graph
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_conv_nhwc_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: bf16[2, 8, 16, 16] = user_input
    %w1: bf16[16, 8, 3, 3] = user_input
    %b1: bf16[16] = user_input
    %w2: bf16[16, 16, 3, 3] = user_input
    %w3: bf16[16, 16, 1, 1] = user_input
  }
  %c1: bf16[2, 16, 16, 16] = aten.conv2d.default(input=%x, weight=%w1, bias=%b1, padding=[1, 1])
  %r1: bf16[2, 16, 16, 16] = aten.relu.default(self=%c1)
  %p1: bf16[2, 16, 8, 8] = aten.max_pool2d.default(self=%r1, kernel_size=[2, 2], stride=[2, 2])
  %c2: bf16[2, 16, 8, 8] = aten.conv2d.default(input=%p1, weight=%w2, padding=[1, 1])
  %r2: bf16[2, 16, 8, 8] = aten.relu.default(self=%c2)
  %c3: bf16[2, 16, 8, 8] = aten.conv2d.default(input=%r2, weight=%w3)
  %a3: bf16[2, 16, 8, 8] = aten.add.Tensor(self=%c3, other=%p1)
  %r3: bf16[2, 16, 8, 8] = aten.relu.default(self=%a3)
  %gp: bf16[2, 16, 1, 1] = aten.adaptive_avg_pool2d.default(self=%r3, output_size=[1, 1])
  %o: bf16[2, 16] = aten.view.default(self=%gp, size=[2, 16])
  outputs {
    user_output %o
  }
})");
  const Emitted out = emit(*g, dir, "block");
  const auto& m = out.manifest;
  const std::string& text = out.text;
  EXPECT_TRUE(m.at("host_steps").empty()) << m.at("host_steps").dump();
  ASSERT_EQ(m.at("cudnn_convs").size(), 3u) << m.at("cudnn_convs").dump();
  std::map<std::string, std::string> step;
  for (const auto& c : m["cudnn_convs"]) step[c.at("nodes")[0]] = c.at("name");
  const auto fn = [&](const std::string& node) {
    return function_after(text, "ANVIL_HIDDEN int " + step.at(node) + "(const RunState& s) {");
  };
  const std::string f1 = fn("c1"), f2 = fn("c2"), f3 = fn("c3");
  // the stem reads an NHWC copy of the NCHW graph input (a loop kernel) and writes NHWC
  for (const char* want : {"a.x_stride[1] = (1);", "a.x_stride[3] = (8);", "a.y_stride[1] = (1);",
                           "a.activation = ANVIL_CONV_ACT_RELU;"})
    EXPECT_NE(f1.find(want), std::string::npos) << want << " in\n" << f1;
  EXPECT_NE(text.find("knhwc"), std::string::npos) << "the input's NHWC copy kernel";
  // after the pool (NCHW in, NHWC out): channels-last
  for (const char* want : {"a.x_stride[1] = (1);", "a.x_stride[3] = (16);", "a.y_stride[1] = (1);"})
    EXPECT_NE(f2.find(want), std::string::npos) << want << " in\n" << f2;
  // the residual add (p1, NHWC) and the relu after it fused into the 1x1 convolution
  for (const char* want : {"a.residual = ", "a.residual_stride[1] = (1);",
                           "a.residual_stride[2] = (128);", "a.activation = ANVIL_CONV_ACT_RELU;",
                           "_epilogue, "})
    EXPECT_NE(f3.find(want), std::string::npos) << want << " in\n" << f3;
  EXPECT_EQ(f3.find("a.bias"), std::string::npos) << f3;
  // no loop kernel adds or clamps: three epilogues stand behind the fused graphs
  EXPECT_EQ(count(text, "_epilogue(const RunState& s)"), 3u);
  // without the plan, everything is NCHW (and the add stays fused)
  ScopedNchw nchw;
  const std::string text2 = emit(*g, dir, "block_nchw").text;
  EXPECT_EQ(count(text2, "a.x_stride[1] = (1);"), 0u);
  EXPECT_EQ(count(text2, "a.residual = "), 1u);
  fs::remove_all(dir);
}

TEST(CudaConvEmit, ADownsampleBlocksAddFusesWithNoWriteBack) {
  // add_ of two convolutions' results: fused into the second (cuDNN's residual), relu_ too, and
  // no loop kernel copies the sum back into the first one's buffer, so the block stays
  // channels-last (a loop kernel there kept every activation of torchvision's ResNet-50 NCHW:
  // 4.05 ms at bf16 batch 32 on an H200, against 1.43 for bench/cuda_bench.py's own ResNet-50)
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_down_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const Emitted out = emit(*ir::parse_graph(kDownsampleGraph), dir, "down");
  EXPECT_EQ(out.manifest.at("cudnn_convs").size(), 3u);
  EXPECT_EQ(count(out.text, "a.residual = "), 1u);
  EXPECT_EQ(count(out.text, "a.activation = ANVIL_CONV_ACT_RELU;"), 1u) << "the add's relu";
  EXPECT_EQ(out.text.find("// k0"), std::string::npos) << "no loop kernel";
  EXPECT_EQ(count(out.text, "a.y_stride[1] = (1);"), 3u) << "every output channels-last";
  fs::remove_all(dir);
}

TEST(CudaConvEmit, AConvNextBlockIsChannelsLastThroughItsLoopKernels) {
  // by default the loop kernels between the convolutions read and write their buffers
  // channels-last, so both cuDNN convolutions run NHWC on the residual stream; under
  // ANVIL_CONV_LAYOUT_LOOPS=0 the stream is NCHW; nvcc compiles both (values on a GPU:
  // CudaConvSteps.ConvNextBlocksMatchTheInterpreter)
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_cnx_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto g = ir::parse_graph(kConvNextBlockGraph);
  const Emitted on = emit(*g, dir, "cnx_loops");
  EXPECT_EQ(count(on.text, "a.y_stride[1] = (1);"), 1u) << "%r";
  EXPECT_EQ(count(on.text, "a.x_stride[1] = (1);"), 1u) << "%y, %c's input";
  EXPECT_EQ(on.manifest.at("direct_convs").size(), 1u);
  const Emitted off = emit(*g, dir, "cnx", "ANVIL_CONV_LAYOUT_LOOPS", "0");
  EXPECT_EQ(count(off.text, "a.y_stride[1] = (1);"), 0u);
  EXPECT_EQ(count(off.text, "a.x_stride[1] = (1);"), 0u);
  fs::remove_all(dir);
}

TEST(CudaConvEmit, TheStreamIntoADownsamplingLayerNormIsChannelsLast) {
  // the residual add of a stage's last block writes a buffer only loop kernels touch (the
  // downsampling layer norm reads it): channels-last by default, as its neighbours, so the add's
  // loops run with the channels innermost; NCHW under ANVIL_CONV_LAYOUT_LOOPS=0 (values on a
  // GPU: CudaConvSteps.ConvNextBlocksMatchTheInterpreter)
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_cnxd_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto g = ir::parse_graph(kConvNextDownGraph);
  const auto add_kernel = [&](const std::string& name, const char* loops) {
    emit(*g, dir, name, "ANVIL_CONV_LAYOUT_LOOPS", loops);
    std::ifstream in(dir / "src" / "program.txt");
    const std::string prog((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = prog.find("# m, y_value");  // the in-place add
    EXPECT_NE(at, std::string::npos) << prog;
    return at == std::string::npos ? std::string() : prog.substr(at, prog.find("pass 0", at) - at);
  };
  EXPECT_NE(add_kernel("cnxd", "1").find("outer [2, 8, 8] inner [16]"), std::string::npos);
  EXPECT_NE(add_kernel("cnxd_nchw", "0").find("outer [2, 16, 8] inner [8]"), std::string::npos);
  fs::remove_all(dir);
}

TEST(CudaConvEmit, DenseBlockConcatenationsAreChannelsLast) {
  // a concatenation copied by loop kernels (its two 4-channel pieces by one kernel with two
  // stores) and read by a loop kernel before a convolution: channels-last by default, so the
  // copies run with the channels innermost; NCHW under ANVIL_CONV_LAYOUT_LOOPS=0 (values on a
  // GPU: CudaConvSteps.DenseConcatMatchesTheInterpreter)
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_dcat_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto g = ir::parse_graph(kDenseCatGraph);
  const auto program = [&](const std::string& name, const char* loops) {
    emit(*g, dir, name, "ANVIL_CONV_LAYOUT_LOOPS", loops);
    std::ifstream in(dir / "src" / "program.txt");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string on = program("dcat", "1");
  EXPECT_EQ(count(on, "outer [2, 6, 5] inner [4]"), 1u) << on;
  EXPECT_EQ(count(on, "outer [2, 4, 6] inner [5]"), 0u) << on;
  const std::string off = program("dcat_nchw", "0");
  EXPECT_EQ(count(off, "outer [2, 4, 6] inner [5]"), 1u) << off;
  fs::remove_all(dir);
}

TEST(CudaConvEmit, DepthwiseConvolutionsRunTheDirectKernel) {
  // by default, depthwise convolutions (one input channel per group, multiplier 1 or 2,
  // strides, dilation, bias, relu, a residual; NCHW or a channels-last view) are anvil's
  // direct kernel instead of cuDNN, listed as direct_convs, and nvcc compiles it
  // (CudaConvSteps.DirectDepthwiseMatchesTheInterpreter checks the values on a GPU);
  // ANVIL_CUDA_DEPTHWISE=0 at compile time gives them back to cuDNN
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_dw_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto g = ir::parse_graph(kDepthwiseGraph);
  const Emitted out = emit(*g, dir, "dw", "ANVIL_CUDA_DW_ANY_LAYOUT", "1", /*package=*/true);
  EXPECT_EQ(count(out.text, "a depthwise convolution, anvil's direct kernel"), 5u);
  EXPECT_NE(out.text.find("a0 += dw_v * dw_w[3]; a1 += dw_v * dw_w[2];"), std::string::npos)
      << "one input feeds the neighbouring outputs' taps";
  EXPECT_EQ(count(out.text, "return anvil_conv(s, "), 1u) << "the 1x1 one";
  EXPECT_NE(out.text.find("u2 * 2 - 1 + dw_r * 2"), std::string::npos) << "stride 2, dilation 2";
  EXPECT_NE(out.text.find("v3["), std::string::npos) << "the fused residual";
  EXPECT_EQ(out.manifest.at("direct_convs").size(), 5u) << out.manifest.dump();
  ASSERT_EQ(out.manifest.at("cudnn_convs").size(), 1u);
  // with ANVIL_CUDA_DW_ANY_LAYOUT=1 the 1x1 convolution writes channels-last (its reader, the
  // direct kernel, takes any layout; cuDNN never mixes layouts, so its NCHW graph input is
  // copied first) while the depthwise output a loop kernel reads stays NCHW
  const std::string e4 = out.manifest["cudnn_convs"][0].at("name");
  const std::string f4 = function_after(out.text, "ANVIL_HIDDEN int " + e4 + "(const RunState& s) {");
  EXPECT_NE(f4.find("a.y_stride[1] = (1);"), std::string::npos) << f4;
  EXPECT_NE(f4.find("a.x_stride[1] = (1);"), std::string::npos) << f4;
  EXPECT_NE(out.text.find("// knhwc"), std::string::npos) << "the copy of its NCHW input";
  // `anvil inspect` counts them (the package needs no GPU to be read)
  const fs::path listing = dir / "inspect.txt";
  ASSERT_EQ(std::system((std::string("'") + ANVIL_CLI + "' inspect '" + (dir / "dw.anvil").string() +
                         "' > '" + listing.string() + "' 2>&1")
                            .c_str()),
            0);
  std::ifstream li(listing);
  const std::string shown((std::istreambuf_iterator<char>(li)), std::istreambuf_iterator<char>());
  EXPECT_NE(shown.find("anvil's direct convolution kernels (depthwise, few input channels): 5"),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find("cuDNN convolutions: 1 "), std::string::npos) << shown;
  {  // and with loop kernels reading channels-last outputs: nvcc compiles it too
    const test::ScopedEnv loops("ANVIL_CONV_LAYOUT_LOOPS", "1");
    const Emitted l = emit(*g, dir, "dw_loops", "ANVIL_CUDA_DW_ANY_LAYOUT");
    EXPECT_EQ(count(l.text, "a depthwise convolution, anvil's direct kernel"), 5u);
  }
  {  // ANVIL_CUDA_DW_TILED=1: those whose input and output rows are dense are plane-tiled (all
     // but c2, which reads a channels-last view); nvcc compiles them
    const Emitted t = emit(*g, dir, "dw_tiled", "ANVIL_CUDA_DW_TILED");
    EXPECT_EQ(count(t.text, "anvil's direct kernel (plane-tiled: "), 4u);
    EXPECT_EQ(count(t.text, "a depthwise convolution, anvil's direct kernel"), 5u);
    // c1: 6 x 4 outputs in one band of 6 rows, (6 - 1) * 2 + 2 * 2 + 1 = 15 input rows of
    // (4 - 1) * 3 + 2 + 1 = 12 columns; the multiplier 2 maps output channel u1 to u1 / 2
    EXPECT_NE(t.text.find("__shared__ float dt_in[180];"), std::string::npos);
    EXPECT_NE(t.text.find("const int64_t dt_c = u1 / 2;"), std::string::npos);
    // a symbolic batch keeps the per-thread kernel (the grid is counted at compile time)
    const auto sym = ir::parse_graph(R"(graph {
  symbols {
    s0 in [1, 64]
  }
  inputs {
    %x: f32[s0, 8, 16, 16] = user_input
    %w: f32[8, 1, 3, 3] = user_input
  }
  %c: f32[s0, 8, 16, 16] = aten.conv2d.default(input=%x, weight=%w, padding=[1, 1], groups=8)
  outputs {
    user_output %c
  }
})");
    const Emitted ts = emit(*sym, dir, "dw_tiled_sym", "ANVIL_CUDA_DW_TILED");
    EXPECT_EQ(count(ts.text, "a depthwise convolution, anvil's direct kernel\n"), 1u);
  }
  {  // ANVIL_CUDA_DW_STAGED=1: those reading a channels-last input (with
     // ANVIL_CUDA_DW_ANY_LAYOUT=1: c2's permuted view, c4's NHWC 1x1 output, c1's input written
     // channels-last by c0) stage their window of channels' weights in shared memory,
     // [tap][channel]; nvcc compiles them
    const test::ScopedEnv any("ANVIL_CUDA_DW_ANY_LAYOUT", "1");
    const Emitted st = emit(*g, dir, "dw_staged", "ANVIL_CUDA_DW_STAGED");
    EXPECT_EQ(count(st.text, "[tap][channel of the block's window]"), 3u);
    EXPECT_NE(st.text.find("__shared__ float dw_s[72];"), std::string::npos) << "c2: 9 x 8";
    EXPECT_NE(st.text.find("__shared__ uint16_t dw_s[784];"), std::string::npos)
        << "c4: 49 x 16";
  }
  const Emitted off = emit(*g, dir, "dw_off", "ANVIL_CUDA_DEPTHWISE", "0");
  EXPECT_EQ(count(off.text, "anvil's direct kernel"), 0u);
  EXPECT_EQ(off.manifest.at("cudnn_convs").size(), 6u);
  EXPECT_EQ(off.manifest.at("direct_convs").size(), 0u);
  fs::remove_all(dir);
}

TEST(CudaConvEmit, ChannelsLastDepthwiseConvolutionsCanRunTheVectorKernel) {
  // ANVIL_CUDA_DW_VEC=1 (the default for 7x7 and larger only): depthwise convolutions reading and
  // writing channels-last memory with the channels a multiple of the 8-byte vector take the
  // vector kernel (weights staged as [tap][channel] floats, one 8-byte load per input), the
  // others the per-thread kernel; nvcc compiles them (values on a GPU:
  // CudaConvSteps.VectorDepthwiseMatchesTheInterpreter)
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_dwv_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto g = ir::parse_graph(kVecDepthwiseGraph);
  const Emitted v = emit(*g, dir, "dwv", "ANVIL_CUDA_DW_VEC");
  EXPECT_EQ(count(v.text, "(channels-last vectors: 4 channels x 4 outputs per thread)"), 2u)
      << "c0 (bf16, 24 channels), c2 (f16, 8 channels)";
  EXPECT_EQ(count(v.text, "(channels-last vectors: 2 channels x 4 outputs per thread)"), 1u)
      << "c1 (f32, 6 channels)";
  EXPECT_EQ(count(v.text, "a depthwise convolution, anvil's direct kernel\n"), 1u)
      << "c3: 6 bf16 channels, not a multiple of 4";
  EXPECT_NE(v.text.find("__shared__ __align__(16) float dv_w[1372];"), std::string::npos)
      << "c0: 49 taps x 24 channels, each tap's row padded by a vector";
  EXPECT_NE(v.text.find("dv_cl = dv_i / 49, dv_t = dv_i % 49"), std::string::npos)
      << "the weights staged in their own order";
  EXPECT_EQ(v.manifest.at("direct_convs").size(), 4u) << v.manifest.dump();
  const Emitted off = emit(*g, dir, "dwv_off", "ANVIL_CUDA_DW_VEC", "0");
  EXPECT_EQ(count(off.text, "channels-last vectors"), 0u);
  EXPECT_EQ(count(off.text, "a depthwise convolution, anvil's direct kernel\n"), 4u);
  // a value other than 0 or 1 is an error naming the switch, not a silent "off"
  for (const char* bad : {"2", "true", " 1"})
    ANVIL_EXPECT_ERROR(emit(*g, dir, "dwv_bad", "ANVIL_CUDA_DW_VEC", bad),
                       "environment variable ANVIL_CUDA_DW_VEC is not 0 or 1");
  {  // the default: the vector kernel for 49 taps or more (c0's 7x7), the per-thread kernel for
     // c1's 3x3 and c2's 5x5 (slower on the vector kernel in EfficientNet-B0 and MobileNetV3)
    test::ScopedEnv unset("ANVIL_CUDA_DW_VEC", "");  // (empty: the default)
    const Emitted d = emit(*g, dir, "dwv_default");
    EXPECT_EQ(count(d.text, "(channels-last vectors: 4 channels x 4 outputs per thread)"), 1u);
    EXPECT_EQ(count(d.text, "a depthwise convolution, anvil's direct kernel\n"), 3u);
  }
  {  // several channel windows, the last partly idle, and rows of threads looping over groups
     // (values on a GPU: CudaConvSteps.VectorDepthwiseLoopsMatchTheInterpreter)
    const auto lg = ir::parse_graph(kVecDepthwiseLoopGraph);
    const Emitted l = emit(*lg, dir, "dwv_loop", "ANVIL_CUDA_DW_VEC");
    EXPECT_EQ(count(l.text, "(channels-last vectors: 4 channels x 4 outputs per thread)"), 1u);
    EXPECT_EQ(count(l.text, "(channels-last vectors: 2 channels x 4 outputs per thread)"), 1u);
    // c0: 136 channels = windows of 32 and 2 vectors, at most 264 blocks per window (528 in
    // all), as many as the device holds at once (one wave), each of 8 rows of threads (8448
    // groups: 4 rounds per block at 264), 9 taps x 128 channels staged in rows of 132
    EXPECT_NE(l.text.find("static_cast<unsigned>(2 * std::min<int64_t>(264, std::max<int64_t>(1, "
                          "anvil_resident_blocks(dv_resident, ext"),
              std::string::npos);
    EXPECT_NE(l.text.find("_kernel, 256, 0) / 2)))"), std::string::npos);
    EXPECT_EQ(l.text.find("__launch_bounds__(256, "), std::string::npos) << "no bound by default";
    EXPECT_NE(l.text.find("dv_c0 = blockIdx.x % 2 * 128"), std::string::npos);
    EXPECT_NE(l.text.find("dv_g < 8448; dv_g += static_cast<int>(gridDim.x / 2) * 8"),
              std::string::npos);
    EXPECT_NE(l.text.find("const int u1 = dv_c0 + dv_lane * 4;"), std::string::npos)
        << "32-bit indices: every offset fits";
    EXPECT_NE(l.text.find("float dv_w[1188];"), std::string::npos);
    const size_t k0 = l.text.find("(channels-last vectors: 4 channels");
    const std::string c0 = l.text.substr(k0, l.text.find("ANVIL_HIDDEN", k0) - k0);
    EXPECT_NE(c0.find("a += bf16_to_f32(v3[u0 * (1148928) + dv_ch * (1) + u2 * (17408) + "
                      "dv_ox * (136)]);"),
              std::string::npos)
        << "the channels-last residual fused: " << c0;
    EXPECT_NE(c0.find("erff("), std::string::npos) << "gelu fused";
    // c1: 70 float32 channels = windows of 32 and 3 vectors, one tap
    EXPECT_NE(l.text.find("float dv_w[66];"), std::string::npos);
    EXPECT_NE(l.text.find("static_cast<unsigned>(2 * std::min<int64_t>(3, "), std::string::npos)
        << "2 windows of at most 3 blocks";
    {  // ANVIL_CUDA_DW_RESIDENT=0: the fixed grid; ANVIL_CUDA_DW_MINBLOCKS=4: a register bound
      test::ScopedEnv fixed("ANVIL_CUDA_DW_RESIDENT", "0");
      test::ScopedEnv vec("ANVIL_CUDA_DW_VEC", "1");
      const Emitted f = emit(*lg, dir, "dwv_fixed", "ANVIL_CUDA_DW_MINBLOCKS", "4");
      EXPECT_NE(f.text.find("_kernel, 528, 256, 0, sy"), std::string::npos);
      EXPECT_NE(f.text.find("_kernel, 6, 256, 0, sy"), std::string::npos);
      EXPECT_EQ(f.text.find("anvil_resident_blocks(dv_resident"), std::string::npos);
      EXPECT_NE(f.text.find("__global__ void __launch_bounds__(256, 4) ext"), std::string::npos);
    }
    const size_t k1 = l.text.find("(channels-last vectors: 2 channels");
    const std::string c1 = l.text.substr(k1, l.text.find("ANVIL_HIDDEN", k1) - k1);
    EXPECT_NE(c1.find("a += v3[u0 * (1120) + dv_ch * (1) + u2 * (280) + dv_ox * (70)];"),
              std::string::npos)
        << "the channels-last residual fused: " << c1;
    EXPECT_NE(c1.find(" / 6.0f;"), std::string::npos) << "hardswish fused";
  }
  fs::remove_all(dir);
}

TEST(CudaConvEmit, FewInputChannelsRunTheDirectStemKernel) {
  // by default, convolutions of at most 4 input channels (a network's stem) are anvil's direct
  // kernel, listed as direct_convs, and nvcc compiles it (the values on a GPU:
  // CudaConvSteps.DirectStemMatchesTheInterpreter); ANVIL_CUDA_STEM=0 gives them to cuDNN
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_stem_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto g = ir::parse_graph(kStemGraph);
  const Emitted out = emit(*g, dir, "stem");
  EXPECT_EQ(count(out.text, "a convolution of few input channels, anvil's direct kernel"), 3u);
  // c4 (bf16, 9408 products per position): the tensor-core kernel
  // (CudaConvEmit.ManyProductStemsRunTheTensorCoreKernel)
  EXPECT_EQ(count(out.text, "a convolution of few input channels, anvil's tensor-core kernel"),
            1u);
  EXPECT_EQ(out.manifest.at("direct_convs").size(), 4u) << out.manifest.dump();
  ASSERT_EQ(out.manifest.at("cudnn_convs").size(), 1u) << "the 1x1 one";
  // the weights staged as [K / 8][taps][8]: c2's 96 x 48, c3's 5 padded to 8 x 25
  EXPECT_NE(out.text.find("__shared__ __align__(16) float st_w[4608];"), std::string::npos);
  EXPECT_NE(out.text.find("__shared__ __align__(16) float st_w[200];"), std::string::npos);
  EXPECT_NE(out.text.find("(st_k + 4) < 5"), std::string::npos) << "c3's channel tail";
  // c0's output, read by the 1x1 convolution, is channels-last: 16-byte stores of 8 channels
  EXPECT_EQ(count(out.text, "if (st_vec) {"), 1u);
  EXPECT_NE(out.text.find("u2 * 4 - 0, st_x0 = u3 * 4 - 0"), std::string::npos) << "c2's stride";
  // and it reads the NCHW image as it is (cuDNN reads a channels-last copy of it)
  EXPECT_EQ(out.text.find("// knhwc"), std::string::npos);
  EXPECT_EQ(count(out.text, "(the patch in registers)"), 0u);
  {  // ANVIL_CUDA_STEM_PATCH=1: stems of at most 64 taps (c0's 27, c2's 48, c3's 25) read their
     // input patch into registers once; nvcc compiles them
    const Emitted pt = emit(*g, dir, "stem_patch", "ANVIL_CUDA_STEM_PATCH");
    EXPECT_EQ(count(pt.text, "anvil's direct kernel (the patch in registers)"), 3u);
    EXPECT_NE(pt.text.find("float st_in[48];"), std::string::npos) << "c2: 3 x 4 x 4";
  }
  {  // one output channel over 3 x 23 x 23 taps: 1587 products, but 8 x 1587 staged floats
     // pass 48 KiB of shared memory (sm_80's ptxas refused it): cuDNN's
    const auto big = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[1, 3, 23, 23] = user_input
    %w: f32[1, 3, 23, 23] = user_input
  }
  %c: f32[1, 1, 1, 1] = aten.conv2d.default(input=%x, weight=%w)
  outputs {
    user_output %c
  }
})");
    const Emitted b = emit(*big, dir, "stem_big");
    EXPECT_EQ(b.manifest.at("direct_convs").size(), 0u);
    EXPECT_EQ(b.manifest.at("cudnn_convs").size(), 1u);
  }
  const Emitted off = emit(*g, dir, "stem_off", "ANVIL_CUDA_STEM", "0");
  EXPECT_EQ(count(off.text, "anvil's direct kernel"), 0u);
  EXPECT_EQ(off.manifest.at("cudnn_convs").size(), 5u);
  EXPECT_NE(off.text.find("// knhwc"), std::string::npos) << "c0's input copied for cuDNN";
  fs::remove_all(dir);
}

TEST(CudaConvEmit, ManyProductStemsRunTheTensorCoreKernel) {
  // 16-bit convolutions of at most 4 input channels and at least 2048 products per output
  // position are anvil's tensor-core stem kernel (passes/stem_rule.h): weights and the tile's
  // input patch staged in shared memory, mma.sync over an implicit im2col; they read the image
  // as it is (no channels-last copy) and nvcc compiles them (the values on a GPU:
  // CudaConvSteps.TensorCoreStemMatchesTheInterpreter); ANVIL_CUDA_STEM_MMA=0 gives them to
  // the scalar kernel where it fits, else to cuDNN
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_stem_mma_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto g = ir::parse_graph(kStemMmaGraph);
  const Emitted out = emit(*g, dir, "stem_mma");
  EXPECT_EQ(count(out.text, "anvil's tensor-core kernel"), 5u);
  EXPECT_EQ(out.manifest.at("direct_convs").size(), 5u) << out.manifest.dump();
  EXPECT_EQ(out.manifest.at("cudnn_convs").size(), 0u);
  EXPECT_EQ(out.text.find("// knhwc"), std::string::npos) << "no channels-last copy of an image";
  // m0: 2 x 3 x 2 tiles of 8 x 16 positions, k = 49 taps x 4 channels rounded to 208; the
  // weights as [64][108] pairs, the patch 21 x 37 pixels
  EXPECT_NE(out.text.find("(12 tiles of 8 x 16 positions, k 208)"), std::string::npos);
  EXPECT_NE(out.text.find("__shared__ __align__(16) uint32_t sm_w[6912];"), std::string::npos);
  EXPECT_NE(out.text.find("__shared__ __align__(16) uint32_t sm_x[1554];"), std::string::npos);
  EXPECT_NE(out.text.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
            std::string::npos);
  EXPECT_NE(out.text.find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
            std::string::npos)
      << "m1 and m4 are fp16";
  // m0's output is channels-last (the pool reads it): paired 4-byte stores; m1's is the NCHW
  // graph output: one value per store
  EXPECT_EQ(count(out.text, "const bool sm_pair ="), 1u);
  // m2's residual and relu in the store; m3's 16 n8 tiles
  EXPECT_NE(out.text.find("float sm_acc[2][16][4];"), std::string::npos);
  EXPECT_NE(out.text.find("float sm_acc[2][6][4];"), std::string::npos);
  {  // a dilation written as one int (not a list): the layout plan reads it as the emitter
     // does, so this 7x7 stem (9408 products, dilated: neither direct kernel) goes to cuDNN
     // with its image copied channels-last like its output, not read NCHW (a mixed-layout
     // cuDNN convolution gave wrong values)
    const auto dil = ir::parse_graph(R"(graph {
  inputs {
    %x: bf16[2, 3, 30, 30] = user_input
    %w: bf16[64, 3, 7, 7] = user_input
  }
  %c: bf16[2, 64, 12, 12] = aten.conv2d.default(input=%x, weight=%w, stride=2, padding=6, dilation=2)
  %p: bf16[2, 64, 6, 6] = aten.max_pool2d.default(self=%c, kernel_size=[2, 2])
  outputs {
    user_output %p
  }
})");
    const Emitted d = emit(*dil, dir, "stem_dilated");
    EXPECT_EQ(d.manifest.at("cudnn_convs").size(), 1u) << d.manifest.dump();
    EXPECT_EQ(count(d.text, "// knhwc"), 1u) << "the image copied for cuDNN";
  }
  const Emitted off = emit(*g, dir, "stem_mma_off", "ANVIL_CUDA_STEM_MMA", "0");
  EXPECT_EQ(count(off.text, "anvil's tensor-core kernel"), 0u);
  // m1 (4608), m3 (8192) and m0 (9408) pass the scalar kernel's 6144 products or its shared
  // memory: m0 and m3 go to cuDNN
  EXPECT_EQ(off.manifest.at("cudnn_convs").size(), 2u) << off.manifest.dump();
  fs::remove_all(dir);
}

TEST(CudaConvEmit, ActivationsFuseIntoTheConvolutionsEpilogue) {
  // by default, hardswish, relu6, SiLU (after a fused residual), sigmoid, both GELUs and
  // hardsigmoid after a convolution become its fused_act, applied by the step's epilogue kernel
  // after cuDNN's (or the host path's) plain convolution, or in the store of the direct
  // depthwise kernel, so no loop kernel reads the convolutions' outputs; nvcc compiles it
  // (CudaConvSteps.FusedActivationsMatchTheInterpreter checks the values on a GPU);
  // ANVIL_CUDA_CONV_ACT=0 at compile time leaves them loop kernels
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_act_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto g = ir::parse_graph(kActivationGraph);
  const Emitted out = emit(*g, dir, "act");
  EXPECT_TRUE(out.manifest.at("host_steps").empty()) << out.manifest.at("host_steps").dump();
  EXPECT_EQ(out.manifest.at("cudnn_convs").size(), 8u);
  EXPECT_EQ(out.manifest.at("direct_convs").size(), 1u) << "the depthwise one";
  EXPECT_EQ(count(out.text, "return rc != 0 ? rc : "), 8u)
      << "each runs its epilogue after the convolution";
  EXPECT_EQ(count(out.text, "if (grc == 0) return "), 1u)
      << "and c2's 1x1 GEMM form after its GEMM";
  for (const char* want : {"erff(", "tanhf(", "expf(", "static_cast<float>(6.0)", "+ 3.0f",
                           "static_cast<float>(-9.9999997473787516e-06)",
                           "static_cast<float>(0.25)", "static_cast<float>(-3.5)",
                           "static_cast<float>(1.0000000200408773e+20)"})
    EXPECT_NE(out.text.find(want), std::string::npos) << want;
  EXPECT_EQ(count(out.text, "const int rc = anvil_conv(s, "), 8u);
  // the host path is the plain convolution: no bias, no residual, no activation attributes
  EXPECT_EQ(out.text.find("fused_act"), std::string::npos);
  const Emitted off = emit(*g, dir, "act_off", "ANVIL_CUDA_CONV_ACT", "0");
  EXPECT_EQ(count(off.text, "return rc != 0 ? rc : "), 0u) << "c0's bias is cuDNN's, nothing left";
  EXPECT_EQ(count(off.text, "_epilogue(s);"), 1u) << "but c2's 1x1 GEMM form adds its residual";
  fs::remove_all(dir);
}

TEST(CudaConvEmit, NchwOneByOneConvolutionsCanBeOneBatchedGemm) {
  // by default (ANVIL_CUDA_CONV1X1_GEMM unset or =1 at compile time) a 16-bit 1x1 convolution
  // of NCHW views is one batched cuBLASLt GEMM per image (Y[n] = W X[n]), its bias / residual / activation in the
  // step's epilogue kernel, cuDNN behind it; nvcc compiles it
  // (CudaConvSteps.OneByOneGemmsMatchTheInterpreter checks the values on a GPU)
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_1x1_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const test::ScopedEnv nchw("ANVIL_CONV_LAYOUT", "nchw");
  const auto g = ir::parse_graph(kConv1x1Graph);
  const Emitted out = emit(*g, dir, "g1x1");
  EXPECT_EQ(count(out.text, "one batched cuBLASLt GEMM (ANVIL_CUDA_CONV1X1_GEMM=0: cuDNN)"), 4u)
      << "c0 .. c3, not the fp32 c4 nor c5 (planes of 49)";
  // c0: m = K 24, n = HW 96, k = C 16, W row-major (ld 16), X[n] at ld 96, images 1536 apart
  EXPECT_NE(out.text.find(", 0, 0, 24, 96, 16, 1.0f, a.w, 16, 0, a.x, 96, 1536, a.y, 96, "
                          "2304, 2, ANVIL_EPILOGUE_NONE"),
            std::string::npos);
  // c3: a slice of channels (ld 24, images 288 apart)
  EXPECT_NE(out.text.find(", 0, 0, 5, 24, 8, 1.0f, a.w, 8, 0, a.x, 24, 288, a.y, 24, 120, 3,"),
            std::string::npos);
  const Emitted off = emit(*g, dir, "g1x1_off", "ANVIL_CUDA_CONV1X1_GEMM", "0");
  EXPECT_EQ(count(off.text, "one batched cuBLASLt GEMM"), 0u) << "=0 keeps cuDNN";
  fs::remove_all(dir);
}

TEST(CudaConvEmit, ChannelsLastOneByOneConvolutionsAreOneGemmOverThePositions) {
  // a 16-bit 1x1 convolution of channels-last views can be one cuBLASLt GEMM over the N*H*W
  // positions (Y = X W^T), its bias / relu / residual in cuBLASLt's epilogue where it has them,
  // else the plain GEMM and the step's epilogue kernel; cuDNN behind it. By default only those
  // with an activation cuDNN does not fuse (c0's SiLU); ANVIL_CUDA_CONV1X1_NHWC=all every one,
  // =0 none (CudaConvSteps.ChannelsLastOneByOneGemmsMatchTheInterpreter checks the values)
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_cuda_1x1_nhwc_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto g = ir::parse_graph(kConv1x1NhwcGraph);
  // c0: 192 positions x 24 channels = X (ld 16) W^T (W [24, 16], ld 16); bias + SiLU after it
  const char* c0 =
      "13, 0, 1, 192, 24, 16, 1.0f, a.x, 16, 0, a.w, 16, 0, a.y, 24, 0, 1, ANVIL_EPILOGUE_NONE";
  const Emitted def = emit(*g, dir, "g1x1_nhwc");
  EXPECT_EQ(count(def.text, "channels-last 1x1: one cuBLASLt GEMM"), 1u) << "c0 only";
  EXPECT_NE(def.text.find(c0), std::string::npos);
  // the epilogue kernels of channels-last outputs update 16-byte vectors (8 channels)
  EXPECT_GE(count(def.text, "*reinterpret_cast<uint4*>(y0 + o) = "), 3u);
  const Emitted all = emit(*g, dir, "g1x1_nhwc_all", "ANVIL_CUDA_CONV1X1_NHWC", "all");
  EXPECT_EQ(count(all.text, "channels-last 1x1: one cuBLASLt GEMM"), 6u) << "c0 .. c5";
  EXPECT_NE(all.text.find(c0), std::string::npos);
  // c1 (bias + residual as C), c2 (bias + relu) and c5 (fp16, bias) through gemm_ex
  EXPECT_EQ(count(all.text, "grc = dev->gemm_ex(device, s.stream, &ga);"), 3u);
  EXPECT_EQ(count(all.text, "ga.beta = 1.0f;"), 1u) << "c1's residual";
  EXPECT_EQ(count(all.text, "ga.epilogue = ANVIL_EPILOGUE_BIAS_RELU;"), 1u) << "c2";
  EXPECT_EQ(count(all.text, "ga.epilogue = ANVIL_EPILOGUE_BIAS;"), 2u) << "c1, c5";
  EXPECT_NE(all.text.find("ga.dtype = 6;"), std::string::npos) << "c5 in fp16";
  const Emitted norelu = emit(*g, dir, "g1x1_nhwc_norelu", "ANVIL_CUDA_CONV1X1_NHWC", "norelu");
  EXPECT_EQ(count(norelu.text, "channels-last 1x1: one cuBLASLt GEMM"), 4u)
      << "c0, c1, c4, c5: not c2 (bias + relu) nor c3 (residual + relu)";
  EXPECT_EQ(count(norelu.text, "ga.epilogue = ANVIL_EPILOGUE_BIAS_RELU;"), 0u);
  // auto: every one, each timing its GEMM against cuDNN on its first plain run (while a graph
  // is captured undecided: the GEMM where an activation follows, as act)
  const Emitted autom = emit(*g, dir, "g1x1_nhwc_auto", "ANVIL_CUDA_CONV1X1_NHWC", "auto");
  EXPECT_EQ(count(autom.text, "channels-last 1x1: one cuBLASLt GEMM"), 6u);
  EXPECT_EQ(count(autom.text, "static AnvilPick pick;"), 6u);
  EXPECT_EQ(count(autom.text, "const int way = anvil_pick_now(s, &pick, 1);"), 1u) << "c0";
  EXPECT_EQ(count(autom.text, "const int way = anvil_pick_now(s, &pick, 0);"), 5u);
  EXPECT_NE(autom.text.find("if (way < 0) return anvil_pick_time(s, &pick, ext1);"),
            std::string::npos)
      << "the step times itself run each way";
  const Emitted off = emit(*g, dir, "g1x1_nhwc_off", "ANVIL_CUDA_CONV1X1_NHWC", "0");
  EXPECT_EQ(count(off.text, "channels-last 1x1"), 0u) << "=0 keeps cuDNN";
  try {  // a typo is an error naming the variable, not a silent default
    emit(*g, dir, "g1x1_nhwc_bad", "ANVIL_CUDA_CONV1X1_NHWC", "every");
    ADD_FAILURE() << "ANVIL_CUDA_CONV1X1_NHWC=every compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ANVIL_CUDA_CONV1X1_NHWC"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("'every'"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(CudaConvEmit, TheBackendHasDeviceAbi5AndChecksItsArgumentsFirst) {
  // no GPU needed: the CUDA backend library loads where the CUDA libraries are installed, and
  // its conv rejects a missing or too small AnvilConvArgs before touching a device
  const AnvilDeviceApi& dev = runtime::device_backend(Device::Type::kCUDA);
  EXPECT_GE(dev.abi_version, 5u);  // 5 added conv (6, float8 GEMM operands, keeps it)
  ASSERT_NE(dev.conv, nullptr);
  EXPECT_EQ(dev.conv(0, nullptr, nullptr), -1);
  EXPECT_NE(std::string(dev.last_error()).find("null arguments"), std::string::npos)
      << dev.last_error();
  AnvilConvArgs a{};
  a.struct_size = 16;
  EXPECT_EQ(dev.conv(0, nullptr, &a), -1);
  EXPECT_NE(std::string(dev.last_error()).find("AnvilConvArgs of 16 bytes"), std::string::npos)
      << dev.last_error();
  // a caller built against device ABI 5-6 passes the struct without the residual: accepted
  // (it fails later here, with no GPU, for another reason)
  a.struct_size = static_cast<uint32_t>(offsetof(AnvilConvArgs, residual));
  EXPECT_NE(dev.conv(0, nullptr, &a), 0);
  EXPECT_EQ(std::string(dev.last_error()).find("AnvilConvArgs of"), std::string::npos)
      << dev.last_error();
}

}  // namespace
}  // namespace anvil
