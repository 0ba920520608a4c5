// cuDNN's fused attention behind AnvilDeviceApi::attention, against a host reference computed
// in double, and the generated attention steps with each engine forced (ANVIL_CUDA_ATTENTION=
// cudnn / own) and chosen (auto) against the reference interpreter. Label gpu: skips without a
// GPU (ANVIL_REQUIRE_GPU=1: fails).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "anvil/anvil_device.h"
#include "codegen/harness.h"
#include "common/check.h"
#include "driver/compile.h"
#include "gpu/gpu_test_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/device_backend.h"
#include "runtime/model.h"
#include "common/scoped_env.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

struct Problem {
  const char* name;
  DType dtype;
  int64_t B, H, Hk, L, S, E;
  bool causal, bias;
  float scale;  // 0: 1/sqrt(E)
};

/// o[b, h, i, :] in double: softmax(scale q.k + bias) v, causal top-left, GQA heads.
std::vector<double> reference(const Problem& p, const std::vector<double>& q,
                              const std::vector<double>& k, const std::vector<double>& v,
                              const std::vector<double>& bias) {
  // q, o: [B, L, H, E] in memory; k, v: [B, S, Hk, E]; bias: [B, 1, L, S]
  const double scale = p.scale != 0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(p.E));
  std::vector<double> o(static_cast<size_t>(p.B * p.L * p.H * p.E));
  std::vector<double> sc(static_cast<size_t>(p.S));
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h) {
      const int64_t hk = h / (p.H / p.Hk);
      for (int64_t i = 0; i < p.L; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < p.S; ++j) {
          double d = 0;
          for (int64_t e = 0; e < p.E; ++e)
            d += q[((b * p.L + i) * p.H + h) * p.E + e] * k[((b * p.S + j) * p.Hk + hk) * p.E + e];
          d *= scale;
          if (p.bias) d += bias[(b * p.L + i) * p.S + j];
          if (p.causal && j > i) d = -std::numeric_limits<double>::infinity();
          sc[j] = d;
          mx = std::max(mx, d);
        }
        double sum = 0;
        for (int64_t j = 0; j < p.S; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
        for (int64_t e = 0; e < p.E; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < p.S; ++j) acc += sc[j] * v[((b * p.S + j) * p.Hk + hk) * p.E + e];
          o[((b * p.L + i) * p.H + h) * p.E + e] = acc / sum;
        }
      }
    }
  return o;
}

class CudaAttention : public ::testing::TestWithParam<Problem> {};

TEST_P(CudaAttention, CudnnMatchesAHostReference) {
  ANVIL_REQUIRE_GPU();
  const Problem& p = GetParam();
  const AnvilDeviceApi& dev = runtime::device_backend(Device::Type::kCUDA);
  ASSERT_GE(dev.abi_version, 3u);
  const Device gpu = Device::cuda(0);
  // [B, L, H, E] in memory, seen as (b, h, l, d): the layout of a transposed projection
  const Tensor q = testing::random_tensor({p.B, p.L, p.H, p.E}, p.dtype, 11);
  const Tensor k = testing::random_tensor({p.B, p.S, p.Hk, p.E}, p.dtype, 12);
  const Tensor v = testing::random_tensor({p.B, p.S, p.Hk, p.E}, p.dtype, 13);
  const Tensor bias = testing::random_tensor({p.B, 1, p.L, p.S}, p.dtype, 14);
  const Tensor dq = q.to(gpu), dk = k.to(gpu), dv = v.to(gpu), db = bias.to(gpu);
  const Tensor dout = Tensor::zeros({p.B, p.L, p.H, p.E}, p.dtype).to(gpu);

  AnvilAttentionArgs a{};
  a.dtype = static_cast<int32_t>(p.dtype);
  a.causal = p.causal ? 1 : 0;
  a.batch = p.B, a.heads = p.H, a.kv_heads = p.Hk, a.len_q = p.L, a.len_kv = p.S;
  a.head_dim = a.head_dim_v = p.E;
  a.scale = p.scale != 0 ? p.scale : static_cast<float>(1.0 / std::sqrt(double(p.E)));
  a.q = dq.data_ptr(), a.k = dk.data_ptr(), a.v = dv.data_ptr(), a.o = dout.data_ptr();
  const auto strides = [](int64_t* s, int64_t L, int64_t H, int64_t E) {
    s[0] = L * H * E, s[1] = E, s[2] = H * E, s[3] = 1;
  };
  strides(a.q_stride, p.L, p.H, p.E);
  strides(a.o_stride, p.L, p.H, p.E);
  strides(a.k_stride, p.S, p.Hk, p.E);
  strides(a.v_stride, p.S, p.Hk, p.E);
  if (p.bias) {
    a.bias = db.data_ptr();
    const int64_t sz[4] = {p.B, 1, p.L, p.S}, st[4] = {p.L * p.S, 0, p.S, 1};
    for (int d = 0; d < 4; ++d) a.bias_size[d] = sz[d], a.bias_stride[d] = st[d];
  }
  void* stream = dev.stream_create(0);
  ASSERT_NE(stream, nullptr) << dev.last_error();
  const int rc = dev.attention(0, stream, &a);
  ASSERT_EQ(rc, 0) << p.name << ": " << dev.last_error();
  ASSERT_EQ(dev.stream_synchronize(0, stream), 0) << dev.last_error();
  dev.stream_destroy(0, stream);

  const std::vector<double> want =
      reference(p, q.to_doubles(), k.to_doubles(), v.to_doubles(), bias.to_doubles());
  const std::vector<double> got = dout.to(Device::cpu()).to_doubles();
  EXPECT_LE(::anvil::test::rel_error(got, want), 2e-2) << p.name;
}

INSTANTIATE_TEST_SUITE_P(
    Problems, CudaAttention,
    ::testing::Values(Problem{"bf16_causal", DType::kBFloat16, 2, 4, 4, 128, 128, 64, true, false, 0},
                      Problem{"fp16_plain", DType::kFloat16, 1, 2, 2, 96, 96, 64, false, false, 0},
                      Problem{"bf16_gqa_causal", DType::kBFloat16, 2, 8, 2, 64, 64, 128, true, false, 0},
                      Problem{"bf16_bias_scale", DType::kBFloat16, 2, 4, 4, 64, 64, 64, false, true, 0.2f},
                      Problem{"fp16_cross", DType::kFloat16, 1, 4, 4, 40, 72, 64, false, false, 0},
                      Problem{"bf16_llama_block", DType::kBFloat16, 4, 16, 16, 256, 256, 64, true, false, 0}),
    [](const ::testing::TestParamInfo<Problem>& i) { return std::string(i.param.name); });

TEST(CudaAttentionBackend, RefusesWhatItDoesNotTakeWithoutQueueingWork) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& dev = runtime::device_backend(Device::Type::kCUDA);
  AnvilAttentionArgs a{};
  a.dtype = static_cast<int32_t>(DType::kFloat32);
  a.batch = a.heads = a.kv_heads = 1, a.len_q = a.len_kv = 16, a.head_dim = a.head_dim_v = 64;
  EXPECT_EQ(dev.attention(0, nullptr, &a), ANVIL_DEVICE_UNSUPPORTED);
  EXPECT_NE(std::string(dev.last_error()).find("bfloat16 and float16"), std::string::npos)
      << dev.last_error();
  a.dtype = static_cast<int32_t>(DType::kBFloat16);
  a.heads = 3, a.kv_heads = 2;
  EXPECT_EQ(dev.attention(0, nullptr, &a), ANVIL_DEVICE_UNSUPPORTED);
  EXPECT_NE(std::string(dev.last_error()).find("not a multiple"), std::string::npos)
      << dev.last_error();
  EXPECT_EQ(dev.attention(0, nullptr, nullptr), -1);
}

using anvil::test::ScopedEnv;

TEST(CudaAttentionSteps, EachEngineMatchesTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %q: bf16[2, 4, 77, 64] = user_input
    %k: bf16[2, 2, 77, 64] = user_input
    %v: bf16[2, 2, 77, 64] = user_input
    %ma: bf16[2, 1, 77, 77] = user_input
    %h: f16[1, 2, 130, 32] = user_input
  }
  %c: bf16[2, 4, 77, 64] = aten.scaled_dot_product_attention.default(query=%q, key=%k, value=%v, is_causal=True, enable_gqa=True)
  %a: bf16[2, 4, 77, 64] = aten.scaled_dot_product_attention.default(query=%q, key=%k, value=%v, attn_mask=%ma, scale=0.2, enable_gqa=True)
  %f: f16[1, 2, 130, 32] = aten.scaled_dot_product_attention.default(query=%h, key=%h, value=%h, is_causal=True)
  outputs {
    user_output %c
    user_output %a
    user_output %f
  }
})");
  const fs::path dir = gpu_test::out_dir();
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (dir / "cache").string();
  const std::string pkg = (dir / "attention_engines.anvil").string();
  driver::compile_graph(*g, pkg, o);
  std::vector<Tensor> ins;
  uint64_t seed = 40;
  for (const auto& spec : g->input_specs()) {
    Shape sizes;
    for (const auto& s : spec.value->type.sizes) sizes.push_back(s.constant());
    ins.push_back(testing::random_tensor(sizes, spec.value->type.dtype, seed++));
  }
  interp::Interpreter ref(*g);
  const auto want = ref.run(ins);
  std::vector<Tensor> dev;
  for (const Tensor& t : ins) dev.push_back(t.to(Device::cuda(0)));
  for (const char* mode : {"cudnn", "own", "auto"}) {
    ScopedEnv env("ANVIL_CUDA_ATTENTION", mode);
    runtime::ModelOptions mo;
    mo.device = Device::cuda(0);
    const runtime::Model m = runtime::Model::load(pkg, mo);
    for (int run = 0; run < 3; ++run) {  // plain, captured, replayed
      const auto got = m.run(dev);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LE(testing::rel_error(got[i].to(Device::cpu()), want[i]), 2e-2)
            << mode << " run " << run << " output " << i;
    }
  }
}

}  // namespace
}  // namespace anvil
