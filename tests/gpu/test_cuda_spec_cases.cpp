// spec/aot.md cases 86 and 88 on the GPU (label gpu). 86: graphs that move tensors to the CPU
// and back mid-graph, with CPU int64 buffers added on the GPU, exported on cuda:0 and on cuda:1,
// each run on every GPU of the machine against PyTorch's CPU outputs. 88: a launch grid over 2^27 elements, a large GEMM,
// attention with an additive bias at an odd head size, and bf16 attention plain and causal (the
// tensor-core kernel); case 88's fp8 parts are in test_cuda_fp8.cpp. Each graph is compiled for
// cuda-sm90 and compared with the reference interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "codegen/harness.h"
#include "common/check.h"
#include "common/scoped_env.h"
#include "gpu/gpu_test_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/device_backend.h"
#include "runtime/model.h"

namespace anvil {
namespace {

using namespace gpu_test;  // NOLINT: the suite's helpers

/// Compiles `text` for CUDA, runs it on cuda:0 and the interpreter on the same random inputs;
/// returns the largest relative error over the outputs.
double gpu_vs_interpreter(const char* name, const char* text) {
  auto g = ir::parse_graph(text);
  ir::verify(*g);
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (out_dir() / "cache").string();
  const std::string pkg = (out_dir() / (std::string(name) + ".anvil")).string();
  driver::compile_graph(*g, pkg, o);
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model m = runtime::Model::load(pkg, mo);
  std::vector<Tensor> ins, dev;
  uint64_t seed = 5;
  for (const auto& spec : g->input_specs()) {
    Shape sizes;
    for (const auto& s : spec.value->type.sizes) sizes.push_back(s.constant());
    ins.push_back(testing::random_tensor(sizes, spec.value->type.dtype, seed++));
    dev.push_back(ins.back().to(Device::cuda(0)));
  }
  interp::Interpreter ref(*g);
  const auto want = ref.run(ins);
  const auto got = m.run(dev);
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const Tensor h = got[i].to(Device::cpu());
    EXPECT_EQ(h.sizes(), want[i].sizes()) << name << " output " << i;
    worst = std::max(worst, testing::rel_error(h, want[i]));
  }
  return worst;
}

TEST(CudaSpecAot, C86_DeviceMovesAndCpuBuffersMatchOnEveryGpu) {
  ANVIL_REQUIRE_GPU();
  const int gpus = runtime::device_backend(Device::Type::kCUDA).device_count();
  ASSERT_GE(gpus, 1);
  // exported on cuda:0 and on cuda:1 (tests/fixtures/gen/export_device_moves.py): the graph
  // holds to(cpu) / to(cuda:N) moves and a CPU int64 buffer and a CPU scalar added on the GPU
  for (const std::string name : {"aot_86_device_moves", "aot_86_device_moves_cuda1"}) {
    const std::string stem = fixture("aot/" + name);
    const std::string pkg = compile_cuda(stem + ".pt2");
    const auto ins = read_set(stem, "in");
    const auto want = read_set(stem, "out");
    ASSERT_EQ(ins.size(), 1u);
    ASSERT_EQ(want.size(), 2u);
    for (int d = 0; d < gpus; ++d) {  // the artifact runs on each GPU, whichever it came from
      runtime::ModelOptions mo;
      mo.device = Device::cuda(d);
      const runtime::Model m = runtime::Model::load(pkg, mo);
      for (const bool host_input : {false, true}) {
        const Tensor x = host_input ? ins[0] : ins[0].to(Device::cuda(d));
        const auto got = m.run({x});
        ASSERT_EQ(got.size(), 2u);
        for (size_t i = 0; i < 2; ++i) {
          const Tensor h = got[i].to(Device::cpu());
          EXPECT_EQ(h.sizes(), want[i].sizes());
          EXPECT_LT(testing::rel_error(h, want[i]), 1e-5)
              << name << " on cuda:" << d << " output " << i << (host_input ? " (host input)" : "");
        }
      }
    }
  }
}

TEST(CudaPool, PoolingKernelsMatchTheInterpreter) {
  // the pooling steps run as CUDA kernels (no host step): padding, dilation, ceil mode,
  // count_include_pad off, divisor_override, non-dividing adaptive windows, a channels-last
  // view, a 3-D input, and bf16
  ANVIL_REQUIRE_GPU();
  EXPECT_LT(gpu_vs_interpreter("pool_f32", R"(graph {
  inputs {
    %x: f32[2, 3, 17, 19] = user_input
    %t: f32[2, 17, 19, 3] = user_input
    %v: f32[3, 17, 19] = user_input
  }
  %m1: f32[2, 3, 9, 10] = aten.max_pool2d.default(self=%x, kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1], ceil_mode=False)
  %m2: f32[2, 3, 8, 10] = aten.max_pool2d.default(self=%x, kernel_size=[3, 2], stride=[2, 2], padding=[1, 1], dilation=[2, 1], ceil_mode=True)
  %a1: f32[2, 3, 9, 10] = aten.avg_pool2d.default(self=%x, kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], ceil_mode=True, count_include_pad=False)
  %a2: f32[2, 3, 8, 9] = aten.avg_pool2d.default(self=%x, kernel_size=[2, 2], stride=[], padding=[0, 0], ceil_mode=False, count_include_pad=True, divisor_override=3)
  %d1: f32[2, 3, 5, 7] = aten.adaptive_avg_pool2d.default(self=%x, output_size=[5, 7])
  %cl: f32[2, 3, 17, 19] = aten.permute.default(self=%t, dims=[0, 3, 1, 2])
  %m3: f32[2, 3, 9, 10] = aten.max_pool2d.default(self=%cl, kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1], ceil_mode=False)
  %m4: f32[3, 8, 9] = aten.max_pool2d.default(self=%v, kernel_size=[2, 2], stride=[], padding=[0, 0], dilation=[1, 1], ceil_mode=False)
  %d2: f32[3, 4, 4] = aten.adaptive_avg_pool2d.default(self=%v, output_size=[4, 4])
  outputs {
    user_output %m1
    user_output %m2
    user_output %a1
    user_output %a2
    user_output %d1
    user_output %m3
    user_output %m4
    user_output %d2
  }
})"),
            1e-5);
  EXPECT_LT(gpu_vs_interpreter("pool_bf16", R"(graph {
  inputs {
    %x: bf16[2, 8, 14, 14] = user_input
  }
  %m: bf16[2, 8, 7, 7] = aten.max_pool2d.default(self=%x, kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1], ceil_mode=False)
  %a: bf16[2, 8, 1, 1] = aten.adaptive_avg_pool2d.default(self=%x, output_size=[1, 1])
  outputs {
    user_output %m
    user_output %a
  }
})"),
            1e-2);
}

TEST(CudaPool, GlobalAveragePoolsMatchTheInterpreter) {
  // adaptive_avg_pool2d to 1x1 is a reduction kernel (a warp per NCHW plane, or a block per 32
  // channels of a channels-last image): channel counts that are not multiples of 32, planes of
  // 1, 49 and 3136 positions, NCHW and channels-last views, every floating dtype
  ANVIL_REQUIRE_GPU();
  EXPECT_LT(gpu_vs_interpreter("gap_f32", R"(graph {
  inputs {
    %x: f32[2, 40, 9, 11] = user_input
    %t: f32[2, 9, 11, 40] = user_input
    %o: f32[3, 5, 1, 1] = user_input
    %d: f64[1, 3, 5, 5] = user_input
    %q: f32[5, 3, 1, 1] = user_input
  }
  %a: f32[2, 40, 1, 1] = aten.adaptive_avg_pool2d.default(self=%x, output_size=[1, 1])
  %cl: f32[2, 40, 9, 11] = aten.permute.default(self=%t, dims=[0, 3, 1, 2])
  %b: f32[2, 40, 1, 1] = aten.adaptive_avg_pool2d.default(self=%cl, output_size=[1, 1])
  %c: f32[3, 5, 1, 1] = aten.adaptive_avg_pool2d.default(self=%o, output_size=[1, 1])
  %e: f64[1, 3, 1, 1] = aten.adaptive_avg_pool2d.default(self=%d, output_size=[1, 1])
  %qp: f32[3, 5, 1, 1] = aten.permute.default(self=%q, dims=[1, 0, 2, 3])
  %f: f32[3, 5, 1, 1] = aten._adaptive_avg_pool2d.default(self=%qp, output_size=[1, 1])
  outputs {
    user_output %f
    user_output %a
    user_output %b
    user_output %c
    user_output %e
  }
})"),
            1e-5);
  // channels-last in 16-byte vectors: 16 channels of 56 x 56 (MobileNetV3-Small's first
  // squeeze-excitation), 264 = 33 vectors (a tile of 32 and one of 1), and an input offset
  EXPECT_LT(gpu_vs_interpreter("gap_16bit", R"(graph {
  inputs {
    %x: bf16[2, 16, 56, 56] = user_input
    %t: f16[3, 7, 7, 70] = user_input
    %v: bf16[2, 56, 56, 16] = user_input
    %w: f16[2, 5, 3, 264] = user_input
    %z: bf16[2, 8, 9, 24] = user_input
  }
  %xs: bf16[2, 16, 56, 56] = aten.add.Tensor(self=%x, other=2.0)
  %a: bf16[2, 16, 1, 1] = aten.adaptive_avg_pool2d.default(self=%xs, output_size=[1, 1])
  %ts: f16[3, 7, 7, 70] = aten.add.Tensor(self=%t, other=2.0)
  %cl: f16[3, 70, 7, 7] = aten.permute.default(self=%ts, dims=[0, 3, 1, 2])
  %b: f16[3, 70, 1, 1] = aten.adaptive_avg_pool2d.default(self=%cl, output_size=[1, 1])
  %vs: bf16[2, 56, 56, 16] = aten.add.Tensor(self=%v, other=2.0)
  %vp: bf16[2, 16, 56, 56] = aten.permute.default(self=%vs, dims=[0, 3, 1, 2])
  %c: bf16[2, 16, 1, 1] = aten.adaptive_avg_pool2d.default(self=%vp, output_size=[1, 1])
  %wp: f16[2, 264, 5, 3] = aten.permute.default(self=%w, dims=[0, 3, 1, 2])
  %d: f16[2, 264, 1, 1] = aten.adaptive_avg_pool2d.default(self=%wp, output_size=[1, 1])
  %zs: bf16[2, 8, 9, 16] = aten.slice.Tensor(self=%z, dim=3, start=8, end=24)
  %zp: bf16[2, 16, 8, 9] = aten.permute.default(self=%zs, dims=[0, 3, 1, 2])
  %e: bf16[2, 16, 1, 1] = aten.adaptive_avg_pool2d.default(self=%zp, output_size=[1, 1])
  outputs {
    user_output %a
    user_output %b
    user_output %c
    user_output %d
    user_output %e
  }
})"),
            1e-2);
}

TEST(CudaPool, SplitGlobalAveragePoolsMatchTheInterpreter) {
  // ANVIL_CUDA_POOL_SPLIT=1 (opt-in): channels-last pools of few blocks split each plane over
  // blocks writing partial sums to the stream's workspace, then a kernel adding them: 16
  // channels of 56 x 56 (6 splits), 264 fp16 channels of 40 x 40 (two tiles of vectors, the
  // second partly idle), and a plane too small to split beside them
  ANVIL_REQUIRE_GPU();
  const test::ScopedEnv split("ANVIL_CUDA_POOL_SPLIT", "1");
  EXPECT_LT(gpu_vs_interpreter("gap_split", R"(graph {
  inputs {
    %v: bf16[2, 56, 56, 16] = user_input
    %w: f16[2, 40, 40, 264] = user_input
    %z: bf16[2, 5, 3, 24] = user_input
  }
  %vs: bf16[2, 56, 56, 16] = aten.add.Tensor(self=%v, other=2.0)
  %vp: bf16[2, 16, 56, 56] = aten.permute.default(self=%vs, dims=[0, 3, 1, 2])
  %a: bf16[2, 16, 1, 1] = aten.adaptive_avg_pool2d.default(self=%vp, output_size=[1, 1])
  %ws: f16[2, 40, 40, 264] = aten.add.Tensor(self=%w, other=2.0)
  %wp: f16[2, 264, 40, 40] = aten.permute.default(self=%ws, dims=[0, 3, 1, 2])
  %b: f16[2, 264, 1, 1] = aten.adaptive_avg_pool2d.default(self=%wp, output_size=[1, 1])
  %zp: bf16[2, 24, 5, 3] = aten.permute.default(self=%z, dims=[0, 3, 1, 2])
  %c: bf16[2, 24, 1, 1] = aten.adaptive_avg_pool2d.default(self=%zp, output_size=[1, 1])
  outputs {
    user_output %a
    user_output %b
    user_output %c
  }
})"),
            1e-2);
}

TEST(CudaSpecAot, C88_LargeGridPermuteContiguous) {
  ANVIL_REQUIRE_GPU();
  // 16 777 472 x 8 = 134 219 776 elements: more blocks than a 1-D grid of 65 535 would hold
  EXPECT_EQ(gpu_vs_interpreter("c88_grid", R"(graph {
  inputs {
    %x: f32[16777472, 8] = user_input
  }
  %p: f32[8, 16777472] = aten.permute.default(self=%x, dims=[1, 0])
  %c: f32[8, 16777472] = aten.contiguous.default(self=%p)
  %r: f32[4, 33554944] = aten.reshape.default(self=%c, shape=[4, 33554944])
  %y: f32[4, 33554944] = aten.add.Tensor(self=%r, other=1.0)
  outputs {
    user_output %y
  }
})"),
            0.0);
}

TEST(CudaSpecAot, C88_LargeGemmAndBiasedAttention) {
  ANVIL_REQUIRE_GPU();
  EXPECT_LE(gpu_vs_interpreter("c88_gemm", R"(graph {
  inputs {
    %a: f32[1024, 4096] = user_input
    %b: f32[4096, 2048] = user_input
  }
  %c: f32[1024, 2048] = aten.mm.default(self=%a, mat2=%b)
  outputs {
    user_output %c
  }
})"),
            1e-4);
  // efficient attention with a bias: (4, 4, 36, 36), head size 36, an additive f32 mask
  EXPECT_LE(gpu_vs_interpreter("c88_attn_bias", R"(graph {
  inputs {
    %q: f32[4, 4, 36, 36] = user_input
    %k: f32[4, 4, 36, 36] = user_input
    %v: f32[4, 4, 36, 36] = user_input
    %bias: f32[4, 4, 36, 36] = user_input
  }
  %o: f32[4, 4, 36, 36] = aten.scaled_dot_product_attention.default(query=%q, key=%k, value=%v, attn_mask=%bias)
  outputs {
    user_output %o
  }
})"),
            1e-4);
}

TEST(CudaSpecAot, C88_Bf16AttentionPlainAndCausal) {
  ANVIL_REQUIRE_GPU();
  // (1, 48, 64, 64) in bf16: the tensor-core kernel, plain and causal
  EXPECT_LE(gpu_vs_interpreter("c88_sdpa_bf16", R"(graph {
  inputs {
    %q: bf16[1, 48, 64, 64] = user_input
    %k: bf16[1, 48, 64, 64] = user_input
    %v: bf16[1, 48, 64, 64] = user_input
  }
  %o: bf16[1, 48, 64, 64] = aten.scaled_dot_product_attention.default(query=%q, key=%k, value=%v)
  %c: bf16[1, 48, 64, 64] = aten.scaled_dot_product_attention.default(query=%q, key=%k, value=%v, is_causal=True)
  outputs {
    user_output %o
    user_output %c
  }
})"),
            2e-2);
}

// Case 84 on the GPU: the NaN / Inf check of a CUDA package (Model::set_check_nan_inf) waits for
// the stream after each listed step and scans the buffer on the host. x + lin(y) (the seed's
// test_inf / test_nan model) with an Inf or a NaN at x[0][0] fails naming element [0, 0] and the
// value; exp(x) overflowing into a GEMM operand fails at the exp step (an intermediate). Clean
// inputs match PyTorch with the check on; with it off the Inf runs through (and runs go back to
// CUDA graphs).
TEST(CudaSpecAot, C84_NanInfCheckOnTheGpu) {
  ANVIL_REQUIRE_GPU();
  const std::string stem = fixture("aot/aot_02_add_linear");
  const std::string pkg = compile_cuda(stem + ".pt2");
  const auto ins = read_set(stem, "in");
  const auto want = read_set(stem, "out");
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model m = runtime::Model::load(pkg, mo);
  m.set_check_nan_inf(true);
  EXPECT_LT(testing::rel_error(m.run(ins)[0], want[0]), 1e-4);
  for (const float v : {std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN()}) {
    Tensor x = ins[0].clone();
    x.data<float>()[0] = v;
    std::string e;
    try {
      m.run({x.to(Device::cuda(0)), ins[1].to(Device::cuda(0))});
    } catch (const Error& err) {
      e = err.what();
    }
    EXPECT_NE(e.find(std::isnan(v) ? "wrote nan into buffer" : "wrote inf into buffer"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("at element 0 [0, 0]"), std::string::npos) << e;
  }
  EXPECT_LT(testing::rel_error(m.run(ins)[0], want[0]), 1e-4) << "usable after the failures";
  m.set_check_nan_inf(false);
  Tensor x = ins[0].clone();
  x.data<float>()[0] = std::numeric_limits<float>::infinity();
  for (int r = 0; r < 3; ++r)  // the second run is captured as a graph, the third replays it
    EXPECT_TRUE(std::isinf(m.run({x, ins[1]})[0].item_at(0)));

  auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[4, 4] = user_input
    %w: f32[4, 3] = user_input
  }
  %e: f32[4, 4] = aten.exp.default(self=%x)
  %mm: f32[4, 3] = aten.mm.default(self=%e, mat2=%w)
  outputs {
    user_output %mm
  }
})");
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (out_dir() / "cache").string();
  const std::string pkg2 = (out_dir() / "nan_check_intermediate.anvil").string();
  driver::compile_graph(*g, pkg2, o);
  const runtime::Model m2 = runtime::Model::load(pkg2, mo);
  m2.set_check_nan_inf(true);
  std::vector<float> xv(16, 0.5f), wv(12, 0.0f);
  xv[9] = 1000.0f;
  std::string e;
  try {
    m2.run({Tensor::from_vector(xv, {4, 4}), Tensor::from_vector(wv, {4, 3})});
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("holding e)"), std::string::npos) << e;
  EXPECT_NE(e.find("at element 9 [2, 1]"), std::string::npos) << e;
}

}  // namespace
}  // namespace anvil
