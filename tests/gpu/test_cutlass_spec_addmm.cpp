// Spec B.5 case 17 at its full size on the GPU (label gpu): addmm x[4096,2048] + 2.0 *
// A[4096,25728] @ B[25728,2048] with beta 0.4, fp16, x a full C matrix. The CUTLASS candidates
// (C-source epilogue alpha * acc + beta * C) go through the generator and the filters with the
// denylist "pingpong", allowlist "" and at most 4 configurations; each is compiled (nvcc, in
// parallel) and timed in a child process of its own (anvil-gemm-time, which checks 64 sampled
// outputs); the fastest is then run here and checked against a host double-precision reference
// on a sample of outputs: 4 random elements of every 128 x 128 block of D (2048 dot products of
// 25728 terms; the whole product in double on the host would take hours). Skips without a GPU,
// on a GPU other than sm_90, and without CUTLASS's headers; compiling the four kernels takes
// minutes (object cache under $ANVIL_TEST_OUTDIR).
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "anvil/anvil_device.h"
#include "anvil/anvil_rt.h"
#include "codegen/gemm/cutlass_candidates.h"
#include "codegen/gemm/gemm_problem.h"
#include "codegen/target.h"
#include "core/half.h"
#include "driver/gemm_tune.h"
#include "gpu/gpu_test_util.h"

namespace anvil::gpu_test {
namespace {

namespace gm = codegen::gemm;

TEST(CutlassSpec, Case17_FullSizeAddmmWithAFullCMatrix) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& api = runtime::device_backend(Device::Type::kCUDA);
  if (api.capability(0) != 90) GTEST_SKIP() << "CUTLASS sm90 kernels need sm_90, not " << api.capability(0);
  std::string why;
  const auto headers = gm::find_cutlass_headers(&why);
  if (!headers) GTEST_SKIP() << "CUTLASS headers not found (" << why << ")";
  const std::string tool = driver::gemm_time_tool();
  ASSERT_FALSE(tool.empty()) << "anvil-gemm-time not found beside the test binary nor on PATH";

  const int64_t M = 4096, N = 2048, K = 25728;
  gm::GemmProblem p;
  p.op = gm::GemmOp::kAddmm;
  p.m = M;
  p.n = N;
  p.k = K;
  p.a_dtype = p.b_dtype = p.out_dtype = DType::kFloat16;
  p.acc_dtype = DType::kFloat32;
  p.lda = K;
  p.ldb = N;
  p.ldc = N;
  p.align_a = p.align_b = p.align_c = 8;
  p.bias = gm::GemmBias::kFull;  // x[M, N]: C itself, read by the epilogue
  p.alpha = 2.0;
  p.beta = 0.4;
  p.target = "cuda-sm90";

  gm::GemmOptions o;
  o.mode = gm::AutotuneMode::kFast;
  o.backends = {gm::GemmBackend::kCutlass};
  o.deny_regex = "pingpong";
  o.allow_regex = "";
  o.max_profiled = 4;
  o.jobs = 4;
  o.child_timeout_s = 300;  // the child fills 160 M random operands before it times
  std::vector<std::string> notes;
  const std::vector<gm::GemmCandidate> cands = gm::gemm_candidates(p, o, {}, 90, &notes);
  ASSERT_GE(cands.size(), 1u) << ::testing::PrintToString(notes);
  ASSERT_LE(cands.size(), 4u);
  std::set<std::string> names;
  for (const auto& c : cands) {
    EXPECT_EQ(c.backend, gm::GemmBackend::kCutlass) << c.name;
    EXPECT_EQ(c.name.find("pingpong"), std::string::npos) << c.name;
    EXPECT_NE(c.name.find("gemm_f16_f16_f32_f16_f16_"), std::string::npos) << c.name;  // C read
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
  }

  // Compile in parallel and time each candidate in its own process.
  codegen::ToolchainOptions to = gm::cutlass_toolchain_options(*headers);
  to.cache_dir = (out_dir() / "cache").string();
  std::vector<driver::CandidateTiming> timings;
  const int best = driver::time_candidates(p, cands, codegen::find_target("cuda-sm90"), to, o,
                                           tool, timings, "cuda:0");
  ASSERT_EQ(timings.size(), cands.size());
  for (const auto& t : timings) {
    EXPECT_FALSE(std::isinf(t.ns)) << t.name << ": " << t.error;
    std::printf("[case 17] %s: %.1f us\n", t.name.c_str(), t.ns / 1e3);
  }
  ASSERT_GE(best, 0);
  const gm::GemmCandidate& cand = cands[size_t(best)];
  SCOPED_TRACE(cand.name);

  // The chosen kernel here (the same source and flags: the object cache's copy).
  gm::GemmCandidate chosen = cand;
  codegen::SourceFile src{"case17.cu", chosen.source, {}, "candidate.cu"};
  to.jobs = 1;
  to.progress = codegen::ProgressMode::kQuiet;
  const auto built = codegen::build_shared_library({src}, (out_dir() / "case17.so").string(), to);
  void* so = dlopen(built.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  using Entry = int (*)(const AnvilGemmCall*, void*, size_t, void*);
  using Workspace = size_t (*)(const AnvilGemmCall*);
  auto entry = reinterpret_cast<Entry>(dlsym(so, chosen.entry.c_str()));
  auto ws_fn = reinterpret_cast<Workspace>(dlsym(so, (chosen.entry + "_workspace").c_str()));
  ASSERT_TRUE(entry && ws_fn);

  // Operands: A and B in [-1, 1), x in [-8, 8) so that beta * x is not lost in the product's
  // rounding (|2 A·B| is about 100 here).
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> uf(-1.f, 1.f), ux(-8.f, 8.f);
  std::vector<Half> ha(size_t(M * K)), hb(size_t(K * N)), hx(size_t(M * N));
  for (auto& v : ha) v = Half(uf(rng));
  for (auto& v : hb) v = Half(uf(rng));
  for (auto& v : hx) v = Half(ux(rng));
  void* stream = api.stream_create(0);
  ASSERT_NE(stream, nullptr) << api.last_error();
  auto upload = [&](const std::vector<Half>& h) {
    void* d = api.alloc(0, h.size() * sizeof(Half));
    EXPECT_NE(d, nullptr) << api.last_error();
    runtime::device_copy(api, 0, d, h.data(), h.size() * sizeof(Half), ANVIL_COPY_HOST_TO_DEVICE,
                         nullptr, "test");
    return d;
  };
  void *da = upload(ha), *db = upload(hb), *dc = upload(hx);
  AnvilGemmCall call{};
  call.a_dtype = call.b_dtype = call.c_dtype = int32_t(DType::kFloat16);
  call.m = M;
  call.n = N;
  call.k = K;
  call.a = da;
  call.lda = K;
  call.b = db;
  call.ldb = N;
  call.c = dc;  // holds x; the kernel reads it as C and overwrites it with D
  call.ldc = N;
  call.alpha = 2.0f;
  call.beta = 0.4f;
  call.bias_kind = ANVIL_GEMM_BIAS_NONE;
  call.activation = ANVIL_GEMM_ACT_NONE;
  const size_t ws_bytes = ws_fn(&call);
  void* ws = ws_bytes ? api.alloc(0, ws_bytes) : nullptr;
  if (ws_bytes) {
    ASSERT_NE(ws, nullptr) << api.last_error();
  }
  ASSERT_EQ(entry(&call, ws, ws_bytes, stream), 0);
  ASSERT_EQ(api.stream_synchronize(0, stream), 0) << api.last_error();
  std::vector<Half> out(hx.size());
  runtime::device_copy(api, 0, out.data(), dc, out.size() * sizeof(Half),
                       ANVIL_COPY_DEVICE_TO_HOST, nullptr, "test");

  // 4 random elements of every 128 x 128 block against the double reference: fp32 accumulation
  // of 25728 terms and an fp16 result (half an ulp is 0.125 at 256) stay well inside it; a lost
  // beta * x (up to 3.2), a wrong alpha or a missed K block does not.
  std::uniform_int_distribution<int64_t> r(0, 127);
  int checked = 0, bad = 0;
  double max_err = 0;
  for (int64_t bi = 0; bi < M; bi += 128)
    for (int64_t bj = 0; bj < N; bj += 128)
      for (int s = 0; s < 4; ++s) {
        const int64_t i = bi + r(rng), j = bj + r(rng);
        double acc = 0;
        for (int64_t q = 0; q < K; ++q)
          acc += double(float(ha[size_t(i * K + q)])) * double(float(hb[size_t(q * N + j)]));
        const double want = 2.0 * acc + 0.4 * double(float(hx[size_t(i * N + j)]));
        const double err = std::fabs(double(float(out[size_t(i * N + j)])) - want);
        max_err = std::max(max_err, err);
        ++checked;
        if (err > 2e-3 * std::fabs(want) + 2e-2) {
          if (++bad <= 5)
            ADD_FAILURE() << "D[" << i << ", " << j << "] = " << float(out[size_t(i * N + j)])
                          << ", want " << want;
        }
      }
  EXPECT_EQ(checked, 2048);
  EXPECT_EQ(bad, 0) << "max |err| " << max_err;
  for (void* d : {da, db, dc, ws}) api.free(0, d);
  api.stream_destroy(0, stream);
  dlclose(so);
}

}  // namespace
}  // namespace anvil::gpu_test
