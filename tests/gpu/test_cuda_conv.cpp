// Convolutions on the GPU through cuDNN (AnvilDeviceApi::conv, device ABI 5): the backend entry
// point against a host reference computed in double over a sweep of configurations (kernel 1 /
// 3 / 5 / 7, stride 1 / 2, dilation 1 / 2, padding, groups 1 / depthwise / other, bias, relu,
// batch 1 / 2, NCHW and channels-last memory, float32 / bfloat16 / float16); the generated
// convolution steps in each mode (fused, unfused with their own bias / relu kernel, the host
// path) against the reference interpreter, plainly and in CUDA graphs; and the small CNN
// fixture compiled for CUDA with no convolution host step, against PyTorch. Label gpu: skips
// without a GPU (ANVIL_REQUIRE_GPU=1: fails).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "anvil/anvil_device.h"
#include "cuda_conv_graphs.inc"
#include "codegen/harness.h"
#include "common/check.h"
#include "driver/compile.h"
#include "gpu/gpu_test_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/device_backend.h"
#include "runtime/model.h"
#include "runtime/package.h"
#include "common/scoped_env.h"
#include <nlohmann/json.hpp>

namespace anvil {
namespace {

namespace fs = std::filesystem;

using anvil::test::ScopedEnv;

struct ConvCase {
  const char* name;
  DType dtype;
  int64_t n, c, h, w, k, kh, kw, groups, stride, pad, dilation;
  bool bias, relu, channels_last, tf32;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/// y [n, k, oh, ow] (contiguous NCHW) in double from NCHW x and KCRS w.
std::vector<double> reference(const ConvCase& p, const std::vector<double>& x,
                              const std::vector<double>& w, const std::vector<double>& b) {
  const int64_t oh = out_size(p.h, p.kh, p.stride, p.pad, p.dilation);
  const int64_t ow = out_size(p.w, p.kw, p.stride, p.pad, p.dilation);
  const int64_t cg = p.c / p.groups, kg = p.k / p.groups;
  std::vector<double> y(static_cast<size_t>(p.n * p.k * oh * ow));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t k = 0; k < p.k; ++k) {
      const int64_t g = k / kg;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = p.bias ? b[static_cast<size_t>(k)] : 0.0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t r = 0; r < p.kh; ++r)
              for (int64_t s = 0; s < p.kw; ++s) {
                const int64_t hi = i * p.stride - p.pad + r * p.dilation;
                const int64_t wi = j * p.stride - p.pad + s * p.dilation;
                if (hi < 0 || hi >= p.h || wi < 0 || wi >= p.w) continue;
                acc += x[static_cast<size_t>(((n * p.c + g * cg + c) * p.h + hi) * p.w + wi)] *
                       w[static_cast<size_t>(((k * cg + c) * p.kh + r) * p.kw + s)];
              }
          if (p.relu) acc = std::max(acc, 0.0);
          y[static_cast<size_t>(((n * p.k + k) * oh + i) * ow + j)] = acc;
        }
    }
  return y;
}

/// Strides of logical NCHW dims (d0, d1, d2, d3) for memory in NCHW or NHWC order.
void strides_of(int64_t* s, int64_t d1, int64_t d2, int64_t d3, bool channels_last) {
  if (channels_last) {
    s[0] = d1 * d2 * d3, s[1] = 1, s[2] = d3 * d1, s[3] = d1;
  } else {
    s[0] = d1 * d2 * d3, s[1] = d2 * d3, s[2] = d3, s[3] = 1;
  }
}

class CudaConv : public ::testing::TestWithParam<ConvCase> {};

TEST_P(CudaConv, CudnnMatchesAHostReference) {
  ANVIL_REQUIRE_GPU();
  const ConvCase& p = GetParam();
  const AnvilDeviceApi& dev = runtime::device_backend(Device::Type::kCUDA);
  ASSERT_GE(dev.abi_version, 5u);
  const Device gpu = Device::cuda(0);
  const int64_t oh = out_size(p.h, p.kh, p.stride, p.pad, p.dilation);
  const int64_t ow = out_size(p.w, p.kw, p.stride, p.pad, p.dilation);
  const int64_t cg = p.c / p.groups;
  // host tensors in memory order; the reference reads their NCHW / KCRS views
  const Shape xs = p.channels_last ? Shape{p.n, p.h, p.w, p.c} : Shape{p.n, p.c, p.h, p.w};
  const Shape ws = p.channels_last ? Shape{p.k, p.kh, p.kw, cg} : Shape{p.k, cg, p.kh, p.kw};
  const Tensor x = testing::random_tensor(xs, p.dtype, 21);
  const Tensor w = testing::random_tensor(ws, p.dtype, 22);
  const Tensor b = testing::random_tensor({p.k}, p.dtype, 23);
  const auto nchw = [&](const Tensor& t) {
    return (p.channels_last ? t.permute({0, 3, 1, 2}).contiguous() : t).to_doubles();
  };
  const Tensor dx = x.to(gpu), dw = w.to(gpu), db = b.to(gpu);
  const Shape ys = p.channels_last ? Shape{p.n, oh, ow, p.k} : Shape{p.n, p.k, oh, ow};
  const Tensor dy = Tensor::zeros(ys, p.dtype).to(gpu);

  AnvilConvArgs a{};
  a.struct_size = sizeof a;
  a.dtype = static_cast<int32_t>(p.dtype);
  a.batch = p.n, a.in_channels = p.c, a.in_h = p.h, a.in_w = p.w;
  a.out_channels = p.k, a.kernel_h = p.kh, a.kernel_w = p.kw, a.out_h = oh, a.out_w = ow;
  a.groups = p.groups;
  a.stride_h = a.stride_w = p.stride;
  a.pad_top = a.pad_left = a.pad_bottom = a.pad_right = p.pad;
  a.dilation_h = a.dilation_w = p.dilation;
  a.x = dx.data_ptr(), a.w = dw.data_ptr(), a.y = dy.data_ptr();
  strides_of(a.x_stride, p.c, p.h, p.w, p.channels_last);
  strides_of(a.w_stride, cg, p.kh, p.kw, p.channels_last);
  strides_of(a.y_stride, p.k, oh, ow, p.channels_last);
  a.bias = p.bias ? db.data_ptr() : nullptr;
  a.activation = p.relu ? ANVIL_CONV_ACT_RELU : ANVIL_CONV_ACT_NONE;
  a.allow_tf32 = p.tf32 ? 1 : 0;
  void* stream = dev.stream_create(0);
  ASSERT_NE(stream, nullptr) << dev.last_error();
  int rc = dev.conv(0, stream, &a);
  ConvCase want_case = p;
  if (rc == ANVIL_CONV_NOT_FUSED) {  // allowed: then the plain convolution must run
    std::printf("%s: not fused: %s\n", p.name, dev.last_error());
    a.bias = nullptr, a.activation = ANVIL_CONV_ACT_NONE;
    want_case.bias = want_case.relu = false;
    rc = dev.conv(0, stream, &a);
  }
  ASSERT_EQ(rc, 0) << p.name << ": " << dev.last_error();
  ASSERT_EQ(dev.stream_synchronize(0, stream), 0) << dev.last_error();
  // a second call takes the cached plan
  ASSERT_EQ(dev.conv(0, stream, &a), 0) << dev.last_error();
  ASSERT_EQ(dev.stream_synchronize(0, stream), 0) << dev.last_error();
  dev.stream_destroy(0, stream);

  const std::vector<double> want = reference(want_case, nchw(x), nchw(w), b.to_doubles());
  const std::vector<double> got = nchw(dy.to(Device::cpu()));
  const double tol =
      p.dtype == DType::kFloat32 ? (p.tf32 ? 5e-3 : 1e-4) : ::anvil::test::tolerance_of(p.dtype);
  EXPECT_LE(::anvil::test::rel_error(got, want), tol) << p.name;
}

constexpr DType kF32 = DType::kFloat32, kBF16 = DType::kBFloat16, kF16 = DType::kFloat16;

// name, dtype, n, c, h, w, k, kh, kw, groups, stride, pad, dilation, bias, relu, NHWC, tf32
INSTANTIATE_TEST_SUITE_P(
    Sweep, CudaConv,
    ::testing::Values(
        ConvCase{"f32_k3_s1_bias", kF32, 2, 16, 20, 20, 32, 3, 3, 1, 1, 1, 1, true, false, false, false},
        ConvCase{"f32_k1_pointwise", kF32, 1, 32, 14, 14, 64, 1, 1, 1, 1, 0, 1, false, false, false, false},
        ConvCase{"f32_k7_s2_stem_relu", kF32, 2, 3, 64, 64, 16, 7, 7, 1, 2, 3, 1, true, true, false, false},
        ConvCase{"f32_k5_dilated", kF32, 1, 8, 24, 24, 8, 5, 5, 1, 1, 4, 2, false, false, false, false},
        ConvCase{"f32_depthwise_k3_s2", kF32, 2, 32, 17, 17, 32, 3, 3, 32, 2, 1, 1, true, false, false, false},
        ConvCase{"f32_groups4", kF32, 1, 16, 12, 12, 32, 3, 3, 4, 1, 1, 1, true, true, false, false},
        ConvCase{"f32_nhwc_k3", kF32, 2, 16, 18, 18, 32, 3, 3, 1, 1, 1, 1, true, false, true, false},
        ConvCase{"f32_tf32_k3", kF32, 2, 64, 16, 16, 64, 3, 3, 1, 1, 1, 1, true, true, false, true},
        ConvCase{"bf16_k3_bias_relu", kBF16, 2, 32, 16, 16, 64, 3, 3, 1, 1, 1, 1, true, true, false, false},
        ConvCase{"bf16_nhwc_k1_s2", kBF16, 1, 64, 28, 28, 128, 1, 1, 1, 2, 0, 1, false, false, true, false},
        ConvCase{"bf16_depthwise_k7", kBF16, 1, 96, 14, 14, 96, 7, 7, 96, 1, 3, 1, true, false, true, false},
        ConvCase{"bf16_dilated_s2", kBF16, 2, 16, 21, 21, 16, 3, 3, 1, 2, 2, 2, false, true, false, false},
        ConvCase{"f16_k5_groups2", kF16, 2, 8, 15, 15, 16, 5, 5, 2, 1, 2, 1, true, false, false, false},
        ConvCase{"f16_nhwc_k3_relu", kF16, 1, 32, 10, 10, 32, 3, 3, 1, 1, 1, 1, true, true, true, false},
        ConvCase{"f16_depthwise_s2", kF16, 2, 24, 9, 9, 24, 3, 3, 24, 2, 0, 1, false, false, false, false},
        ConvCase{"f16_k7_d2", kF16, 1, 4, 30, 30, 8, 7, 7, 1, 1, 6, 2, true, false, false, false}),
    [](const ::testing::TestParamInfo<ConvCase>& i) { return std::string(i.param.name); });

TEST(CudaConvBackend, RefusesWhatItDoesNotTakeWithoutQueueingWork) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& dev = runtime::device_backend(Device::Type::kCUDA);
  AnvilConvArgs a{};
  a.struct_size = sizeof a;
  a.dtype = static_cast<int32_t>(DType::kFloat64);
  a.batch = 1, a.in_channels = 4, a.in_h = a.in_w = 8, a.out_channels = 4;
  a.kernel_h = a.kernel_w = 3, a.out_h = a.out_w = 6, a.groups = 1;
  a.stride_h = a.stride_w = a.dilation_h = a.dilation_w = 1;
  EXPECT_EQ(dev.conv(0, nullptr, &a), ANVIL_DEVICE_UNSUPPORTED);
  EXPECT_NE(std::string(dev.last_error()).find("float32, bfloat16, float16"), std::string::npos)
      << dev.last_error();
  a.dtype = static_cast<int32_t>(DType::kFloat32);
  a.groups = 3;
  EXPECT_EQ(dev.conv(0, nullptr, &a), ANVIL_DEVICE_UNSUPPORTED);
  EXPECT_NE(std::string(dev.last_error()).find("groups do not divide"), std::string::npos)
      << dev.last_error();
  a.struct_size = 8;
  EXPECT_EQ(dev.conv(0, nullptr, &a), -1);
  EXPECT_NE(std::string(dev.last_error()).find("AnvilConvArgs of 8 bytes"), std::string::npos)
      << dev.last_error();
  EXPECT_EQ(dev.conv(0, nullptr, nullptr), -1);
}

std::vector<Tensor> random_inputs(const ir::Graph& g, uint64_t seed) {
  std::vector<Tensor> ins;
  for (const auto& spec : g.input_specs()) {
    Shape sizes;
    for (const auto& s : spec.value->type.sizes) sizes.push_back(s.constant());
    ins.push_back(testing::random_tensor(sizes, spec.value->type.dtype, seed++));
  }
  return ins;
}

/// Graph `g`'s inputs copied to the GPU and the reference interpreter's outputs for them.
struct GpuCase {
  std::vector<Tensor> dev, want;
};
GpuCase gpu_case(const ir::Graph& g, const std::vector<Tensor>& ins) {
  GpuCase c;
  interp::Interpreter ref(g);
  c.want = ref.run(ins);
  for (const Tensor& t : ins) c.dev.push_back(t.to(Device::cuda(0)));
  return c;
}

/// Compiles `g` for cuda-sm90 into the test's output folder as NAME.anvil; returns its path.
std::string compile_for_cuda(const ir::Graph& g, const std::string& name) {
  const fs::path dir = gpu_test::out_dir();
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (dir / "cache").string();
  const std::string pkg = (dir / (name + ".anvil")).string();
  driver::compile_graph(g, pkg, o);
  return pkg;
}

/// Loads `pkg` on cuda:0 and runs it three times (plain, captured, replayed) on `dev`, each
/// output within 1e-4 of `want` in fp32 (TF32 off), else within its dtype's tolerance.
void expect_runs_match(const std::string& pkg, const std::vector<Tensor>& dev,
                       const std::vector<Tensor>& want, const std::string& label) {
  ScopedEnv tf("ANVIL_CUDA_CONV_TF32", "0");
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model m = runtime::Model::load(pkg, mo);
  for (int run = 0; run < 3; ++run) {
    const auto got = m.run(dev);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const DType t = want[i].dtype();
      const double tol = t == DType::kFloat32 ? 1e-4 : ::anvil::test::tolerance_of(t);
      EXPECT_LE(testing::rel_error(got[i].to(Device::cpu()), want[i]), tol)
          << label << " run " << run << " output " << i;
    }
  }
}

TEST(CudaConvSteps, EachPathMatchesTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // a relu folded into a biased strided convolution, a dilated depthwise one, a grouped bf16
  // one, a 1-D fp16 one, an unbatched one, and a convolution reading a channels-last view
  auto g = ir::parse_graph(R"(graph {
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
    %xl: f32[2, 16, 16, 8] = user_input
  }
  %c0: f32[2, 16, 8, 8] = aten.conv2d.default(input=%x, weight=%w, bias=%b, stride=[2, 2], padding=[1, 1])
  %r0: f32[2, 16, 8, 8] = aten.relu.default(self=%c0)
  %c1: f32[2, 8, 16, 16] = aten.conv2d.default(input=%x, weight=%wd, padding=[4, 4], dilation=[2, 2], groups=8)
  %c2: bf16[1, 4, 9, 9] = aten.conv2d.default(input=%h, weight=%wh, padding=[1, 1], groups=2)
  %c3: f16[2, 6, 18] = aten.conv1d.default(input=%s, weight=%ws)
  %c4: f32[16, 16, 16] = aten.conv2d.default(input=%u, weight=%w, bias=%b, padding=[1, 1])
  %xp: f32[2, 8, 16, 16] = aten.permute.default(self=%xl, dims=[0, 3, 1, 2])
  %c5: f32[2, 16, 16, 16] = aten.conv2d.default(input=%xp, weight=%w, padding=[1, 1])
  outputs {
    user_output %r0
    user_output %c1
    user_output %c2
    user_output %c3
    user_output %c4
    user_output %c5
  }
})");
  const fs::path dir = gpu_test::out_dir();
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (dir / "cache").string();
  const std::string pkg = (dir / "conv_steps.anvil").string();
  driver::compile_graph(*g, pkg, o);
  const auto j = nlohmann::json::parse(runtime::Package::open(pkg)->manifest().json);
  EXPECT_TRUE(j.at("host_steps").empty()) << j.at("host_steps").dump();
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 60));
  const std::vector<Tensor>& dev = gc.dev;
  const std::vector<Tensor>& want = gc.want;
  for (const char* mode : {"auto", "unfused", "host"}) {
    ScopedEnv env("ANVIL_CUDA_CONV", mode);
    for (const char* tf32 : {"0", "1"}) {
      ScopedEnv tf("ANVIL_CUDA_CONV_TF32", tf32);
      runtime::ModelOptions mo;
      mo.device = Device::cuda(0);
      const runtime::Model m = runtime::Model::load(pkg, mo);
      EXPECT_TRUE(m.uses_cuda_graphs()) << "no host step: captured from the second run";
      for (int run = 0; run < 3; ++run) {  // plain, captured (not with the host path), replayed
        const auto got = m.run(dev);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          const DType t = want[i].dtype();
          const double tol = t == DType::kFloat32 ? (tf32[0] == '1' ? 5e-3 : 1e-4)
                                                  : ::anvil::test::tolerance_of(t);
          EXPECT_LE(testing::rel_error(got[i].to(Device::cpu()), want[i]), tol)
              << mode << " tf32=" << tf32 << " run " << run << " output " << i;
        }
      }
    }
  }
}

TEST(CudaConvSteps, AViewCudnnRefusesRunsTheHostPath) {
  ANVIL_REQUIRE_GPU();
  // the input one element into its buffer: where the view reaches the step, cuDNN refuses the
  // unaligned pointer at run time, the host path runs, and the capture of the second run fails
  // (the host path cannot be captured), so the package runs plainly, with the same values
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %xw: f32[2, 8, 16, 17] = user_input
    %w: f32[16, 8, 3, 3] = user_input
    %b: f32[16] = user_input
  }
  %xs: f32[2, 8, 16, 16] = aten.slice.Tensor(self=%xw, dim=3, start=1, end=17)
  %c: f32[2, 16, 16, 16] = aten.conv2d.default(input=%xs, weight=%w, bias=%b, padding=[1, 1])
  %r: f32[2, 16, 16, 16] = aten.relu.default(self=%c)
  outputs {
    user_output %r
  }
})");
  const fs::path dir = gpu_test::out_dir();
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (dir / "cache").string();
  const std::string pkg = (dir / "conv_unaligned.anvil").string();
  driver::compile_graph(*g, pkg, o);
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 80));
  const std::vector<Tensor>& dev = gc.dev;
  const std::vector<Tensor>& want = gc.want;
  ScopedEnv tf("ANVIL_CUDA_CONV_TF32", "0");
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model m = runtime::Model::load(pkg, mo);
  for (int run = 0; run < 4; ++run) {
    const auto got = m.run(dev);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_LE(testing::rel_error(got[0].to(Device::cpu()), want[0]), 1e-4) << "run " << run;
  }
}

TEST(CudaConvSteps, ChannelsLastResidualBlocksMatchTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // a ResNet-like stem and block (CudaConvEmit.ResidualBlocksStayChannelsLastWithTheAddFused
  // checks the plan): NCHW stem, max pool into NHWC, convolutions in NHWC, the residual add
  // and relu fused into the last convolution's cuDNN graph, an average pool out of NHWC; every
  // path (fused, the epilogue kernel, the host path), with and without the layout plan
  for (const char* dt : {"bf16", "f16", "f32"}) {
    std::string text = R"(graph {
  inputs {
    %x: T[2, 8, 16, 16] = user_input
    %w1: T[16, 8, 3, 3] = user_input
    %b1: T[16] = user_input
    %w2: T[16, 16, 3, 3] = user_input
    %w3: T[16, 16, 1, 1] = user_input
    %b3: T[16] = user_input
  }
  %c1: T[2, 16, 16, 16] = aten.conv2d.default(input=%x, weight=%w1, bias=%b1, padding=[1, 1])
  %r1: T[2, 16, 16, 16] = aten.relu.default(self=%c1)
  %p1: T[2, 16, 8, 8] = aten.max_pool2d.default(self=%r1, kernel_size=[3, 3], stride=[2, 2], padding=[1, 1])
  %c2: T[2, 16, 8, 8] = aten.conv2d.default(input=%p1, weight=%w2, padding=[1, 1])
  %r2: T[2, 16, 8, 8] = aten.relu.default(self=%c2)
  %c3: T[2, 16, 8, 8] = aten.conv2d.default(input=%r2, weight=%w3, bias=%b3)
  %a3: T[2, 16, 8, 8] = aten.add.Tensor(self=%p1, other=%c3)
  %r3: T[2, 16, 8, 8] = aten.relu.default(self=%a3)
  %gp: T[2, 16, 1, 1] = aten.adaptive_avg_pool2d.default(self=%r3, output_size=[1, 1])
  %o: T[2, 16] = aten.view.default(self=%gp, size=[2, 16])
  outputs {
    user_output %o
    user_output %r3
  }
})";
    for (size_t at = text.find("T["); at != std::string::npos; at = text.find("T[", at))
      text.replace(at, 1, dt);
    const auto g = ir::parse_graph(text);
    const GpuCase gc = gpu_case(*g, random_inputs(*g, 90));
    const std::vector<Tensor>& dev = gc.dev;
    const std::vector<Tensor>& want = gc.want;
    for (const char* layout : {"auto", "nchw"}) {
      ScopedEnv lay("ANVIL_CONV_LAYOUT", layout);
      const std::string pkg = compile_for_cuda(*g, std::string("block_") + dt + layout);
      for (const char* mode : {"auto", "unfused", "host"}) {
        ScopedEnv env("ANVIL_CUDA_CONV", mode);
        expect_runs_match(pkg, dev, want, std::string(dt) + " layout " + layout + " " + mode);
      }
    }
  }
}

TEST(CudaConvSteps, TimedEnginesAreTheSameOnEveryThread) {
  ANVIL_REQUIRE_GPU();
  // cuDNN engine timing (ANVIL_CUDNN_AUTOTUNE, on by default) picks an engine at a problem's
  // first call; a second thread (its own handles and plans) runs the engine the first picked,
  // so its outputs are bit for bit the first thread's; with the timing off the values match too
  const auto make = [](int hw) {
    const std::string h = std::to_string(hw), h2 = std::to_string(hw / 2);
    return ir::parse_graph(R"(graph {
  inputs {
    %x: bf16[4, 32, )" + h + ", " + h + R"(] = user_input
    %w1: bf16[64, 32, 3, 3] = user_input
    %w2: bf16[64, 64, 3, 3] = user_input
  }
  %c1: bf16[4, 64, )" + h + ", " + h + R"(] = aten.conv2d.default(input=%x, weight=%w1, padding=[1, 1])
  %r1: bf16[4, 64, )" + h + ", " + h + R"(] = aten.relu.default(self=%c1)
  %c2: bf16[4, 64, )" + h2 + ", " + h2 + R"(] = aten.conv2d.default(input=%r1, weight=%w2, stride=[2, 2], padding=[1, 1])
  outputs {
    user_output %c2
  }
})");
  };
  struct Case {
    std::unique_ptr<ir::Graph> g;
    std::string pkg;
    std::vector<Tensor> dev;
    Tensor want;
  };
  std::vector<Case> cases;
  for (int hw : {28, 20}) {
    Case c;
    c.g = make(hw);
    c.pkg = compile_for_cuda(*c.g, "conv_timed_" + std::to_string(hw));
    const std::vector<Tensor> ins = random_inputs(*c.g, 120);
    interp::Interpreter ref(*c.g);
    c.want = ref.run(ins)[0];
    for (const Tensor& t : ins) c.dev.push_back(t.to(Device::cuda(0)));
    cases.push_back(std::move(c));
  }
  for (const char* tune : {"1", "0"}) {
    ScopedEnv env("ANVIL_CUDNN_AUTOTUNE", tune);
    runtime::ModelOptions mo;
    mo.device = Device::cuda(0);
    const runtime::Model m = runtime::Model::load(cases[0].pkg, mo);
    Tensor first, second;
    std::thread a([&] { first = m.run(cases[0].dev)[0].to(Device::cpu()); });
    a.join();
    std::thread b([&] { second = m.run(cases[0].dev)[0].to(Device::cpu()); });
    b.join();
    EXPECT_LE(testing::rel_error(first, cases[0].want),
              ::anvil::test::tolerance_of(DType::kBFloat16))
        << "autotune " << tune;
    ASSERT_EQ(first.nbytes(), second.nbytes());
    EXPECT_EQ(std::memcmp(first.data_ptr(), second.data_ptr(), first.nbytes()), 0)
        << "autotune " << tune << ": another thread's result differs";
  }
  // four runners meeting new problems (the second package's sizes) at once: whichever thread
  // times first, all run its engine
  ScopedEnv env("ANVIL_CUDNN_AUTOTUNE", "1");
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  mo.num_runners = 4;
  const runtime::Model m = runtime::Model::load(cases[1].pkg, mo);
  std::vector<Tensor> outs(4);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] { outs[t] = m.run(cases[1].dev)[0].to(Device::cpu()); });
  for (auto& t : ts) t.join();
  EXPECT_LE(testing::rel_error(outs[0], cases[1].want),
            ::anvil::test::tolerance_of(DType::kBFloat16));
  for (int t = 1; t < 4; ++t)
    EXPECT_EQ(std::memcmp(outs[0].data_ptr(), outs[t].data_ptr(), outs[0].nbytes()), 0)
        << "concurrent thread " << t;
}

TEST(CudaConvSteps, DirectDepthwiseMatchesTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // the graph of CudaConvEmit.DepthwiseConvolutionsRunTheDirectKernel, compiled with
  // ANVIL_CUDA_DEPTHWISE=1 (anvil's direct depthwise kernel, the default) and =0 (cuDNN)
  const auto g = ir::parse_graph(kDepthwiseGraph);
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 140));
  const std::vector<Tensor>& dev = gc.dev;
  const std::vector<Tensor>& want = gc.want;
  // "1+": the direct kernels may read one layout and write the other (ANVIL_CUDA_DW_ANY_LAYOUT);
  // "1L": and loop kernels may read channels-last outputs (ANVIL_CONV_LAYOUT_LOOPS: c4's);
  // "1T": the plane-tiled kernel for dense rows (ANVIL_CUDA_DW_TILED); "1S": "1+" with the
  // weights of channels-last inputs staged in shared memory (ANVIL_CUDA_DW_STAGED)
  for (const std::string direct : {"1", "1+", "1L", "1T", "1S", "0"}) {
    ScopedEnv tiled("ANVIL_CUDA_DW_TILED", direct == "1T" ? "1" : "0");
    ScopedEnv staged("ANVIL_CUDA_DW_STAGED", direct == "1S" ? "1" : "0");
    ScopedEnv dw("ANVIL_CUDA_DEPTHWISE", direct.substr(0, 1));
    ScopedEnv any("ANVIL_CUDA_DW_ANY_LAYOUT",
                  direct == "1+" || direct == "1L" || direct == "1S" ? "1" : "0");
    ScopedEnv loops("ANVIL_CONV_LAYOUT_LOOPS", direct == "1L" ? "1" : "0");
    const std::string name = direct == "1+" ? "1a" : direct;
    expect_runs_match(compile_for_cuda(*g, "dw_" + name), dev, want, "direct " + direct);
  }
}

TEST(CudaConvSteps, DirectStemMatchesTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // the graph of CudaConvEmit.FewInputChannelsRunTheDirectStemKernel, compiled with
  // ANVIL_CUDA_STEM=1 (anvil's direct kernel for few input channels, the default: NCHW and
  // channels-last inputs, 8-channel stores, a channel tail, a residual) and =0 (cuDNN)
  const auto g = ir::parse_graph(kStemGraph);
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 150));
  const std::vector<Tensor>& dev = gc.dev;
  const std::vector<Tensor>& want = gc.want;
  // "1P": the input patch in registers (ANVIL_CUDA_STEM_PATCH=1)
  for (const std::string stem : {"1", "1P", "0"}) {
    ScopedEnv env("ANVIL_CUDA_STEM", stem.substr(0, 1));
    ScopedEnv patch("ANVIL_CUDA_STEM_PATCH", stem == "1P" ? "1" : "0");
    expect_runs_match(compile_for_cuda(*g, "stem_" + stem), dev, want, "stem " + stem);
  }
}

TEST(CudaConvSteps, TensorCoreStemMatchesTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // the graph of CudaConvEmit.ManyProductStemsRunTheTensorCoreKernel, compiled with the
  // tensor-core stem kernel (the default) and without it (ANVIL_CUDA_STEM_MMA=0: the scalar
  // kernel or cuDNN)
  const auto g = ir::parse_graph(kStemMmaGraph);
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 160));
  for (const char* mma : {"1", "0"}) {
    ScopedEnv env("ANVIL_CUDA_STEM_MMA", mma);
    expect_runs_match(compile_for_cuda(*g, std::string("stem_mma_") + mma), gc.dev, gc.want,
                      std::string("tensor-core stem ") + mma);
  }
}

TEST(CudaConvSteps, DownsampleBlocksMatchTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // the graph of CudaConvEmit.ADownsampleBlocksAddFusesWithNoWriteBack: the add fused into the
  // shortcut's convolution, the write-back renamed, channels-last, on each convolution path
  const auto g = ir::parse_graph(kDownsampleGraph);
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 190));
  const std::vector<Tensor>& dev = gc.dev;
  const std::vector<Tensor>& want = gc.want;
  const std::string pkg = compile_for_cuda(*g, "down");
  for (const char* mode : {"auto", "unfused", "host"}) {
    ScopedEnv env("ANVIL_CUDA_CONV", mode);
    expect_runs_match(pkg, dev, want, std::string("down ") + mode);
  }
}

TEST(CudaConvSteps, ConvNextBlocksMatchTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // the graph of CudaConvEmit.AConvNextBlockIsChannelsLastThroughItsLoopKernels,
  // compiled with ANVIL_CONV_LAYOUT_LOOPS=1 (loop kernels reading and writing channels-last,
  // their loops reordered; the default) and =0, with the depthwise kernel per-thread, tiled
  // (T), staged (S) and channels-last vectors (V)
  const auto g = ir::parse_graph(kConvNextBlockGraph);
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 200));
  const std::vector<Tensor>& dev = gc.dev;
  const std::vector<Tensor>& want = gc.want;
  for (const char* v : {"L", "LT", "LS", "LV", "-", "T"}) {
    const std::string variant(v);
    ScopedEnv loops("ANVIL_CONV_LAYOUT_LOOPS", variant[0] == 'L' ? "1" : "0");
    ScopedEnv tiled("ANVIL_CUDA_DW_TILED", variant.back() == 'T' ? "1" : "0");
    ScopedEnv staged("ANVIL_CUDA_DW_STAGED", variant.back() == 'S' ? "1" : "0");
    ScopedEnv vec("ANVIL_CUDA_DW_VEC", variant.back() == 'V' ? "1" : "0");
    expect_runs_match(compile_for_cuda(*g, "cnx_" + std::string(variant == "-" ? "0" : v)), dev,
                      want, "convnext " + variant);
  }
}

TEST(CudaConvSteps, ConvNextDownsamplingMatchesTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // the graph of CudaConvEmit.TheStreamIntoADownsamplingLayerNormIsChannelsLast: the residual
  // stream into the downsampling layer norm channels-last (the default) and NCHW
  // (ANVIL_CONV_LAYOUT_LOOPS=0), and with the vector depthwise kernel
  const auto g = ir::parse_graph(kConvNextDownGraph);
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 220));
  for (const char* v : {"L", "LV", "-"}) {
    const std::string variant(v);
    ScopedEnv loops("ANVIL_CONV_LAYOUT_LOOPS", variant[0] == 'L' ? "1" : "0");
    ScopedEnv vec("ANVIL_CUDA_DW_VEC", variant.back() == 'V' ? "1" : "0");
    expect_runs_match(compile_for_cuda(*g, "cnxd_" + std::string(variant == "-" ? "0" : v)),
                      gc.dev, gc.want, "convnext downsampling " + variant);
  }
}

TEST(CudaConvSteps, DenseConcatMatchesTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // the graph of CudaConvEmit.DenseBlockConcatenationsAreChannelsLast: the concatenation and
  // its copies channels-last (the default) and NCHW (ANVIL_CONV_LAYOUT_LOOPS=0)
  const auto g = ir::parse_graph(kDenseCatGraph);
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 230));
  for (const char* v : {"1", "0"}) {
    ScopedEnv loops("ANVIL_CONV_LAYOUT_LOOPS", v);
    expect_runs_match(compile_for_cuda(*g, std::string("dcat_") + v), gc.dev, gc.want,
                      std::string("dense concatenation, loops ") + v);
  }
}

TEST(CudaConvSteps, VectorDepthwiseMatchesTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // the graph of CudaConvEmit.ChannelsLastDepthwiseConvolutionsCanRunTheVectorKernel, compiled
  // with ANVIL_CUDA_DW_VEC=1 (channels-last depthwise convolutions on the vector kernel: bf16
  // with a bias, float32 stride 2, float16 dilated with silu) and =0 (the per-thread kernel),
  // and with cuDNN for every depthwise convolution (ANVIL_CUDA_DEPTHWISE=0)
  const auto g = ir::parse_graph(kVecDepthwiseGraph);
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 210));
  const std::vector<Tensor>& dev = gc.dev;
  const std::vector<Tensor>& want = gc.want;
  for (const char* v : {"V", "1", "0"}) {
    const std::string variant(v);
    ScopedEnv vec("ANVIL_CUDA_DW_VEC", variant == "V" ? "1" : "0");
    ScopedEnv dw("ANVIL_CUDA_DEPTHWISE", variant == "0" ? "0" : "1");
    expect_runs_match(compile_for_cuda(*g, "dwv_" + variant), dev, want, "depthwise " + variant);
  }
}

TEST(CudaConvSteps, VectorDepthwiseLoopsMatchTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // the second graph of CudaConvEmit.ChannelsLastDepthwiseConvolutionsCanRunTheVectorKernel:
  // several channel windows (the last partly idle), rows of threads taking a second group of
  // positions, a channels-last residual with gelu, a 1x1 kernel of stride 3 with hardswish;
  // the vector kernel (V), the per-thread kernel (1) and cuDNN (0)
  const auto g = ir::parse_graph(kVecDepthwiseLoopGraph);
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 211));
  for (const char* v : {"V", "1", "0"}) {
    const std::string variant(v);
    ScopedEnv vec("ANVIL_CUDA_DW_VEC", variant == "V" ? "1" : "0");
    ScopedEnv dw("ANVIL_CUDA_DEPTHWISE", variant == "0" ? "0" : "1");
    expect_runs_match(compile_for_cuda(*g, "dwvl_" + variant), gc.dev, gc.want,
                      "depthwise loops " + variant);
  }
}

TEST(CudaConvSteps, FusedActivationsMatchTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // the graph of CudaConvEmit.ActivationsFuseIntoTheConvolutionsEpilogue, compiled with
  // ANVIL_CUDA_CONV_ACT=1 (the default; with and without the direct depthwise kernel) and =0
  // (loop kernels), each path of the convolution
  const auto g = ir::parse_graph(kActivationGraph);
  std::vector<Tensor> ins = random_inputs(*g, 160);
  // NaN and infinities through the convolutions into every activation (hardsigmoid and the
  // clamps keep NaN, as PyTorch)
  float* x = ins[0].data<float>();
  x[5] = NAN;
  x[300] = INFINITY;
  x[1000] = -INFINITY;
  const GpuCase gc = gpu_case(*g, ins);
  const std::vector<Tensor>& dev = gc.dev;
  const std::vector<Tensor>& want = gc.want;
  for (const char* variant : {"act", "act+dw", "act+dwt", "none"}) {
    ScopedEnv act("ANVIL_CUDA_CONV_ACT", variant[0] == 'a' ? "1" : "0");
    ScopedEnv dw("ANVIL_CUDA_DEPTHWISE", std::string(variant).rfind("act+dw", 0) == 0 ? "1" : "0");
    ScopedEnv tiled("ANVIL_CUDA_DW_TILED", std::string(variant) == "act+dwt" ? "1" : "0");
    const std::string pkg = compile_for_cuda(*g, std::string("act_") + variant);
    for (const char* mode : {"auto", "host"}) {  // (the direct depthwise kernel has no host path)
      ScopedEnv env("ANVIL_CUDA_CONV", mode);
      expect_runs_match(pkg, dev, want, std::string(variant) + " " + mode);
    }
  }
}

TEST(CudaConvSteps, OneByOneGemmsMatchTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // the graph of CudaConvEmit.NchwOneByOneConvolutionsCanBeOneBatchedGemm (NCHW activations),
  // its 1x1 convolutions as batched cuBLASLt GEMMs (ANVIL_CUDA_CONV1X1_GEMM=1, the default) and
  // on cuDNN (=0)
  const test::ScopedEnv nchw("ANVIL_CONV_LAYOUT", "nchw");
  const auto g = ir::parse_graph(kConv1x1Graph);
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 170));
  const std::vector<Tensor>& dev = gc.dev;
  const std::vector<Tensor>& want = gc.want;
  for (const char* gemm : {"1", "0"}) {
    ScopedEnv env("ANVIL_CUDA_CONV1X1_GEMM", gemm);
    expect_runs_match(compile_for_cuda(*g, std::string("g1x1_") + gemm), dev, want,
                      std::string("gemm ") + gemm);
  }
}

TEST(CudaConvSteps, ChannelsLastOneByOneGemmsMatchTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  // the graph of CudaConvEmit.ChannelsLastOneByOneConvolutionsAreOneGemmOverThePositions
  // (channels-last activations): its 1x1 convolutions as cuBLASLt GEMMs over the positions
  // where an activation follows (the default), every one but those with a relu (norelu),
  // every one with the epilogues cuBLASLt fuses (all), each the faster of the two timed at
  // its first run (auto: the values of both ways and of the timing runs), and on cuDNN (0);
  // each also in ANVIL_CUDA_CONV=unfused mode, which skips the GEMMs: cuDNN's plain
  // convolution and the epilogue kernels (16-byte vectors of channels). Which path ran is the
  // emitter's (the text CudaConvEmit.ChannelsLastOneByOneConvolutionsAreOneGemmOverThePositions
  // checks): this test checks the values
  const auto g = ir::parse_graph(kConv1x1NhwcGraph);
  const GpuCase gc = gpu_case(*g, random_inputs(*g, 171));
  for (const char* gemm : {"act", "norelu", "all", "auto", "0"}) {
    ScopedEnv env("ANVIL_CUDA_CONV1X1_NHWC", gemm);
    const std::string pkg = compile_for_cuda(*g, std::string("g1x1_nhwc_") + gemm);
    for (const char* mode : {"auto", "unfused"}) {
      ScopedEnv conv("ANVIL_CUDA_CONV", mode);
      expect_runs_match(pkg, gc.dev, gc.want, std::string("gemm ") + gemm + " " + mode);
    }
  }
}

TEST(CudaConvModels, SmallCnnHasNoConvolutionHostStepsAndMatchesPyTorch) {
  ANVIL_REQUIRE_GPU();
  const std::string pkg = gpu_test::compile_cuda(gpu_test::fixture("small_cnn.pt2"));
  const auto j = nlohmann::json::parse(runtime::Package::open(pkg)->manifest().json);
  for (const auto& h : j.at("host_steps"))
    EXPECT_EQ(h.at("target").get<std::string>().find("conv"), std::string::npos) << h.dump();
  EXPECT_EQ(j.at("cudnn_convs").size(), 1u) << j.at("cudnn_convs").dump();
  EXPECT_EQ(j.at("direct_convs").size(), 1u)
      << "the 3-channel stem: " << j.at("direct_convs").dump();
  const Tensor in = read_npy(gpu_test::fixture("small_cnn.in0.npy"));
  const Tensor want = read_npy(gpu_test::fixture("small_cnn.out0.npy"));
  for (const char* tf32 : {"0", "1"}) {  // PyTorch's reference is its CPU float32
    ScopedEnv tf("ANVIL_CUDA_CONV_TF32", tf32);
    runtime::ModelOptions mo;
    mo.device = Device::cuda(0);
    const runtime::Model m = runtime::Model::load(pkg, mo);
    for (int run = 0; run < 3; ++run) {
      const auto got = m.run({in.to(Device::cuda(0))});
      ASSERT_EQ(got.size(), 1u);
      EXPECT_LE(testing::rel_error(got[0].to(Device::cpu()), want), tf32[0] == '1' ? 5e-3 : 1e-4)
          << "tf32=" << tf32 << " run " << run;
    }
  }
}

}  // namespace
}  // namespace anvil
