// anvil's skinny CUDA GEMM (codegen/gemm/cuda_skinny.h) on the GPU (label gpu): candidates
// rendered for a set of problems (the issue-14 MLP's shapes with their fused epilogues, ragged
// M / N / K, M over one tile, fp16 with alpha and relu6, every tile and split of one shape),
// compiled by nvcc into one library, run on device buffers of random values and compared with a
// host double-precision reference. Skips without a GPU or on a GPU older than sm_90. CI compiles
// one unit without a GPU (SkinnyEmit in tests/codegen).
#include <dlfcn.h>

#include <cmath>
#include <fstream>
#include <random>

#include "anvil/anvil_device.h"
#include "anvil/anvil_rt.h"
#include "codegen/gemm/cuda_skinny.h"
#include "codegen/harness.h"
#include "core/half.h"
#include "gpu/gpu_test_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/model.h"

namespace anvil::gpu_test {
namespace {

using codegen::gemm::GemmActivation;
using codegen::gemm::GemmBias;
using codegen::gemm::GemmCandidate;
using codegen::gemm::GemmProblem;

struct SkinnyCase {
  GemmProblem p;
  std::vector<GemmCandidate> cands;
};

GemmProblem problem(DType t, int64_t m, int64_t n, int64_t k, GemmBias bias, GemmActivation act,
                    double alpha = 1.0) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a_dtype = p.b_dtype = p.out_dtype = t;
  p.trans_b = true;
  p.align_a = p.align_b = p.align_c = 8;
  p.bias = bias;
  p.activation = act;
  p.alpha = alpha;
  p.target = "cuda-sm90";
  return p;
}

// The first `first` candidates (the heuristic's order), plus every one with 3 stages when `all`.
SkinnyCase make(const GemmProblem& p, size_t first, bool all = false) {
  SkinnyCase c{p, {}};
  const auto cands = codegen::gemm::skinny_candidates(p, 90);
  for (size_t i = 0; i < cands.size(); ++i)
    if (i < first || (all && cands[i].name.find("_st3") != std::string::npos))
      c.cands.push_back(cands[i]);
  return c;
}

std::vector<SkinnyCase> cases() {
  const DType bf = DType::kBFloat16, f16 = DType::kFloat16;
  std::vector<SkinnyCase> v;
  v.push_back(make(problem(bf, 64, 4096, 1024, GemmBias::kPerColumn, GemmActivation::kGeluErf), 3));
  v.push_back(make(problem(bf, 64, 1024, 4096, GemmBias::kPerColumn, GemmActivation::kNone), 3));
  v.push_back(make(problem(bf, 37, 200, 136, GemmBias::kNone, GemmActivation::kNone), 2));
  v.push_back(
      make(problem(f16, 5, 96, 1024, GemmBias::kPerColumn, GemmActivation::kRelu6, 0.5), 2));
  v.push_back(make(problem(bf, 200, 256, 512, GemmBias::kNone, GemmActivation::kSilu), 2));
  v.push_back(
      make(problem(bf, 64, 512, 2048, GemmBias::kPerColumn, GemmActivation::kGeluTanh), 0, true));
  return v;
}

double activate(GemmActivation a, double v) {
  switch (a) {
    case GemmActivation::kRelu:
      return v > 0 ? v : 0;
    case GemmActivation::kRelu6:
      return v < 0 ? 0 : v > 6 ? 6 : v;
    case GemmActivation::kGeluErf:
      return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case GemmActivation::kGeluTanh:
      return 0.5 * v * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case GemmActivation::kSilu:
      return v / (1 + std::exp(-v));
    default:
      return v;
  }
}

float get(DType t, const std::vector<uint16_t>& v, size_t i) {
  if (t == DType::kFloat16) return Half::to_float(v[i]);
  BFloat16 b;
  b.bits = v[i];
  return float(b);
}
uint16_t put(DType t, double x) {
  return t == DType::kFloat16 ? Half::from_float(float(x)) : BFloat16::from_float(float(x));
}

TEST(CudaSkinny, CandidatesMatchAHostReference) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& api = runtime::device_backend(Device::Type::kCUDA);
  if (api.capability(0) < 90)
    GTEST_SKIP() << "the skinny GEMM needs sm_90, not " << api.capability(0);
  const std::vector<SkinnyCase> all = cases();
  std::vector<codegen::SourceFile> units;
  for (const auto& c : all)
    for (const auto& g : c.cands) units.push_back({g.entry + ".cu", g.source});
  ASSERT_GE(units.size(), 20u);
  codegen::ToolchainOptions o = codegen::gemm::skinny_toolchain_options();
  o.jobs = 16;
  const auto res = codegen::build_shared_library(units, (out_dir() / "skinny.so").string(), o);
  void* so = dlopen(res.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  using Entry = int (*)(const AnvilGemmCall*, void*, size_t, void*);
  void* stream = api.stream_create(0);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uf(-1, 1);
  int checked = 0;
  for (const auto& c : all) {
    const GemmProblem& p = c.p;
    const int64_t M = *p.m, N = *p.n, K = *p.k;
    const DType t = p.a_dtype;
    std::vector<uint16_t> ha(static_cast<size_t>(M * K)), hb(static_cast<size_t>(N * K));
    std::vector<uint16_t> hbias(static_cast<size_t>(N)), hd(static_cast<size_t>(M * N));
    for (auto& x : ha) x = put(t, uf(rng));
    for (auto& x : hb) x = put(t, uf(rng));
    for (auto& x : hbias) x = put(t, uf(rng));
    std::vector<double> ref(size_t(M * N));
    double scale = 1;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t q = 0; q < K; ++q)
          s += double(get(t, ha, size_t(i * K + q))) * double(get(t, hb, size_t(j * K + q)));
        double v = p.alpha * s;
        if (p.bias == GemmBias::kPerColumn) v += get(t, hbias, size_t(j));
        ref[size_t(i * N + j)] = activate(p.activation, v);
        scale = std::max(scale, std::fabs(ref[size_t(i * N + j)]));
      }
    auto upload = [&](const std::vector<uint16_t>& h) {
      void* d = api.alloc(0, h.size() * 2);
      runtime::device_copy(api, 0, d, h.data(), h.size() * 2, ANVIL_COPY_HOST_TO_DEVICE, nullptr,
                           "test");
      return d;
    };
    void *da = upload(ha), *db = upload(hb), *dbias = upload(hbias), *dd = upload(hd);
    for (const auto& g : c.cands) {
      SCOPED_TRACE(g.name + " on " + std::to_string(M) + "x" + std::to_string(N) + "x" +
                   std::to_string(K));
      auto entry = reinterpret_cast<Entry>(dlsym(so, g.entry.c_str()));
      ASSERT_NE(entry, nullptr);
      AnvilGemmCall call{};
      call.a_dtype = call.b_dtype = call.c_dtype = int32_t(t);
      call.trans_b = 1;
      call.m = M;
      call.n = N;
      call.k = K;
      call.a = da;
      call.lda = K;
      call.b = db;
      call.ldb = K;
      call.c = dd;
      call.ldc = N;
      call.alpha = float(p.alpha);
      if (p.bias == GemmBias::kPerColumn) {
        call.bias = dbias;
        call.bias_kind = ANVIL_GEMM_BIAS_COL;
      }
      call.activation = int32_t(p.activation);            // the enum follows ANVIL_GEMM_ACT_* order
      std::fill(hd.begin(), hd.end(), uint16_t(0x7fc0));  // NaN: every element must be written
      runtime::device_copy(api, 0, dd, hd.data(), hd.size() * 2, ANVIL_COPY_HOST_TO_DEVICE, nullptr,
                           "test");
      ASSERT_EQ(entry(&call, nullptr, 0, stream), 0);
      AnvilGemmCall wrong = call;
      wrong.beta = 1.f;  // a C source: not this kernel's
      EXPECT_EQ(entry(&wrong, nullptr, 0, stream), 1);
      ASSERT_EQ(api.stream_synchronize(0, stream), 0) << api.last_error();
      runtime::device_copy(api, 0, hd.data(), dd, hd.size() * 2, ANVIL_COPY_DEVICE_TO_HOST, nullptr,
                           "test");
      double worst = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        const double e =
            std::fabs(double(get(t, hd, i)) - ref[i]) / (std::fabs(ref[i]) + 0.05 * scale);
        if (!(e <= worst)) worst = e;  // NaN counts
      }
      EXPECT_LE(worst, 1.5e-2) << "worst relative error";
      ++checked;
    }
    for (void* d : {da, db, dbias, dd}) api.free(0, d);
  }
  EXPECT_EQ(checked, int(units.size()));
  api.stream_destroy(0, stream);
}

// Packages compiled with --autotune off: linear layers at batch 1 and 16 take the skinny kernel
// (gemm_default.h), with bias + erf GELU, bias alone and relu6 fused, in bf16 and fp16; their
// outputs match the reference interpreter on the same inputs, and twice in a row (CUDA graph
// replay).
TEST(CudaSkinny, PackagesTakeItForSmallBatchesAndMatchTheInterpreter) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& api = runtime::device_backend(Device::Type::kCUDA);
  if (api.capability(0) < 90)
    GTEST_SKIP() << "the skinny GEMM needs sm_90, not " << api.capability(0);
  for (const std::string dt : {"bf16", "f16"})
    for (const int m : {1, 16}) {
      const std::string name = "skinny_" + dt + "_m" + std::to_string(m);
      SCOPED_TRACE(name);
      auto t = [&](int r, int c) {
        return dt + "[" + std::to_string(r) + ", " + std::to_string(c) + "]";
      };
      const auto g = ir::parse_graph(
          "graph {\n  inputs {\n    %x: " + t(m, 1024) +
          " = user_input\n    %w1: " + t(2048, 1024) + " = user_input\n    %b1: " + dt +
          "[2048] = user_input\n    %w2: " + t(1024, 2048) + " = user_input\n    %b2: " + dt +
          "[1024] = user_input\n  }\n"
          "  %l1: " +
          t(m, 2048) +
          " = aten.linear.default(input=%x, weight=%w1, bias=%b1)\n"
          "  %g: " +
          t(m, 2048) +
          " = aten.gelu.default(self=%l1)\n"
          "  %l2: " +
          t(m, 1024) +
          " = aten.linear.default(input=%g, weight=%w2, bias=%b2)\n"
          "  %r: " +
          t(m, 1024) +
          " = aten.relu6.default(self=%l2)\n"
          "  outputs {\n    user_output %l2\n    user_output %r\n  }\n}\n");
      driver::CompileOptions o;
      o.target = "cuda-sm90";
      o.progress = codegen::ProgressMode::kQuiet;
      o.cache_dir = (out_dir() / "cache").string();
      o.emit_source_dir = (out_dir() / name).string();
      const std::string pkg = (out_dir() / (name + ".anvil")).string();
      driver::compile_graph(*g, pkg, o);
      std::ifstream k(out_dir() / name / "kernels_0.cu");
      const std::string text((std::istreambuf_iterator<char>(k)), std::istreambuf_iterator<char>());
      EXPECT_NE(text.find("_bias_gelu_erf(&call"), std::string::npos) << "first GEMM on the kernel";
      runtime::ModelOptions mo;
      mo.device = Device::cuda(0);
      const runtime::Model model = runtime::Model::load(pkg, mo);
      std::vector<Tensor> ins, dev;
      uint64_t seed = 11;
      for (const auto& spec : g->input_specs()) {
        Shape sizes;
        for (const auto& s : spec.value->type.sizes) sizes.push_back(s.constant());
        ins.push_back(testing::random_tensor(sizes, spec.value->type.dtype, seed++));
        dev.push_back(ins.back().to(Device::cuda(0)));
      }
      const auto want = interp::Interpreter(*g).run(ins);
      for (int rep = 0; rep < 2; ++rep) {
        const auto got = model.run(dev);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_LT(testing::rel_error(got[i].to(Device::cpu()), want[i]), 2e-2)
              << "output " << i << " run " << rep;
      }
    }
}

}  // namespace
}  // namespace anvil::gpu_test
