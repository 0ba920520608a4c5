// CUTLASS 3.x sm90 GEMM candidates on the GPU (label gpu): a handful of generated candidates
// compiled by nvcc into one shared library, loaded, run on device buffers of random values, and
// compared with a host double-precision reference (16-bit outputs: 2e-2 of the largest
// |reference|; int_mm: bit-exact), mixed fp16 x int8 (mixed_mm) included. Skips without a GPU,
// on a GPU other than sm_90, and without CUTLASS's headers.
// Each case compiles its one candidate (a few minutes of nvcc; cached by source hash).
#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <random>

#include "anvil/anvil_device.h"
#include "anvil/anvil_rt.h"
#include "codegen/gemm/cutlass_candidates.h"
#include "core/half.h"
#include "gpu/gpu_test_util.h"

namespace anvil::gpu_test {
namespace {

using codegen::gemm::GemmActivation;
using codegen::gemm::GemmBias;
using codegen::gemm::GemmCandidate;
using codegen::gemm::GemmOp;
using codegen::gemm::GemmProblem;

struct Case {
  std::string label;
  GemmProblem p;
  std::string pick;  // the candidate: the first whose name contains this
};

GemmProblem problem(GemmOp op, DType t, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  GemmProblem p;
  p.op = op;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a_dtype = p.b_dtype = p.out_dtype = t;
  p.acc_dtype = t == DType::kInt8 ? DType::kInt32 : DType::kFloat32;
  if (t == DType::kInt8) p.out_dtype = DType::kInt32;
  p.trans_a = ta;
  p.trans_b = tb;
  p.align_a = p.align_b = t == DType::kInt8 ? 16 : 8;
  p.align_c = t == DType::kInt8 ? 4 : 8;
  p.target = "cuda-sm90";
  return p;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  const DType bf = DType::kBFloat16;
  // spec B.5 case 4: (128x16) @ (16x128), K shorter than the K tile
  v.push_back({"mm_128x16x128", problem(GemmOp::kMm, bf, 128, 128, 16, false, false),
               "_128x128x64_1x1x1_0_ttt_align8_warpspecialized_cooperative"});
  v.push_back({"mm_1024x256x1024", problem(GemmOp::kMm, bf, 1024, 256, 1024, false, false),
               "_128x256x64_1x2x1_0_ttt_align8_warpspecialized_cooperative"});
  // 16384x1408x16384 scaled down (K still long against the tile count: 44 tiles of 128x128).
  v.push_back({"stream_k_512x1408x2048", problem(GemmOp::kMm, bf, 512, 1408, 2048, false, true),
               "_128x128x64_1x1x1_0_tnt_align8_stream_k_warpspecialized_cooperative"});
  Case col{"addmm_bias_col", problem(GemmOp::kAddmm, bf, 256, 512, 192, false, true),
           "_128x128x64_2x1x1_0_tnt_align8_warpspecialized_cooperative"};
  col.p.bias = GemmBias::kPerColumn;
  col.p.alpha = 2.0;
  col.p.beta = 0.4;
  v.push_back(col);
  Case row{"addmm_bias_row_relu", problem(GemmOp::kAddmm, bf, 384, 256, 320, false, false),
           "_256x128x64_1x1x1_0_ttt_align8_warpspecialized_cooperative"};
  row.p.bias = GemmBias::kPerRow;
  row.p.activation = GemmActivation::kRelu;
  row.p.alpha = 2.0;
  row.p.beta = 0.4;
  v.push_back(row);
  Case bmm{"bmm_10x256x32x256", problem(GemmOp::kBmm, bf, 256, 32, 256, true, false),
           "_128x128x64_1x1x1_0_ntt_align8_warpspecialized_cooperative"};
  bmm.p.batch = 10;
  v.push_back(bmm);
  v.push_back({"int_mm_100x32x16", problem(GemmOp::kIntMm, DType::kInt8, 100, 32, 16, false, true),
               "_128x128x128_1x1x1_0_tnt_align16_warpspecialized_cooperative"});
  Case pp{"pingpong_f16_192x256x320", problem(GemmOp::kMm, DType::kFloat16, 192, 256, 320, false, false),
          "_64x128x64_1x1x1_0_ttt_align8_warpspecialized_pingpong"};
  pp.p.activation = GemmActivation::kSilu;
  v.push_back(pp);
  // spec B.5 cases 1-3's shape: N = 10 leaves 2-element alignment, the cp.async kernels; beta
  // with C (the non-TMA epilogue's source).
  Case x2{"cpasync_f16_100x10x100", problem(GemmOp::kMm, DType::kFloat16, 100, 10, 100, false, false),
          "_128x128x64_1x1x1_0_ttt_align2_cpasync_warpspecialized_cooperative_epi_nosmem"};
  x2.p.align_a = 4;
  x2.p.align_b = x2.p.align_c = 2;
  x2.p.beta = 0.5;
  v.push_back(x2);
  // spec B.5 case 21: mixed_mm fp16 A[100,16] @ (int8[100,16])^T -> fp16, the int8 operand
  // converted in the mainloop (the kernel solves the transposed problem); rows of 100 halves
  // take the non-TMA epilogue. Then a 16-byte aligned one with beta * C and the TMA epilogue.
  Case mx{"mixed_mm_f16_s8_100x100x16", problem(GemmOp::kMixedMm, DType::kFloat16, 100, 100, 16, false, true),
          "_128x128x64_1x1x1_0_tnt_align8x16_warpspecialized_cooperative_epi_nosmem"};
  mx.p.b_dtype = DType::kInt8;
  mx.p.align_b = 16;
  mx.p.align_c = 4;
  v.push_back(mx);
  Case mt{"mixed_mm_f16_s8_256x512x192_beta", problem(GemmOp::kMixedMm, DType::kFloat16, 256, 512, 192, false, true),
          "_64x128x64_1x1x1_0_tnt_align8x16_warpspecialized_pingpong_epi_tma"};
  mt.p.b_dtype = DType::kInt8;
  mt.p.align_b = 16;
  mt.p.alpha = 0.5;
  mt.p.beta = 0.25;
  v.push_back(mt);
  return v;
}

const GemmCandidate& pick(const std::vector<GemmCandidate>& cands, const Case& c) {
  for (const auto& g : cands)
    if (g.name.find(c.pick) != std::string::npos) return g;
  throw Error("no candidate matches", c.label, c.pick, std::to_string(cands.size()) + " candidates");
}

// Case i's candidate compiled alone into its own library (the gpu tests run sharded: each shard
// compiles only its cases), through the object cache ($ANVIL_CACHE_DIR).
struct Built {
  std::string skip;
  void* so = nullptr;
  GemmCandidate cand;
};

Built build_case(int i) {
  Built r;
  std::string why;
  const auto headers = codegen::gemm::find_cutlass_headers(&why);
  if (!headers) {
    r.skip = "CUTLASS headers not found (" + why + ")";
    return r;
  }
  const Case c = cases()[size_t(i)];
  r.cand = pick(codegen::gemm::cutlass_candidates(c.p, 90), c);
  codegen::ToolchainOptions o = codegen::gemm::cutlass_toolchain_options(*headers);
  const auto res = codegen::build_shared_library({{c.label + ".cu", r.cand.source}},
                                                 (out_dir() / (c.label + ".so")).string(), o);
  r.so = dlopen(res.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!r.so) throw Error("dlopen failed", res.so_path, "a loadable library", dlerror());
  return r;
}

float host_value(DType t, const void* p, size_t i) {
  switch (t) {
    case DType::kBFloat16: return static_cast<const BFloat16*>(p)[i];
    case DType::kFloat16: return static_cast<const Half*>(p)[i];
    case DType::kInt8: return static_cast<const int8_t*>(p)[i];
    case DType::kInt32: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
    default: return 0;
  }
}

void set_value(DType t, void* p, size_t i, double v) {
  switch (t) {
    case DType::kBFloat16: static_cast<BFloat16*>(p)[i] = BFloat16(static_cast<float>(v)); break;
    case DType::kFloat16: static_cast<Half*>(p)[i] = Half(static_cast<float>(v)); break;
    case DType::kInt8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
    case DType::kInt32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    default: break;
  }
}

size_t dsize(DType t) { return t == DType::kInt8 ? 1 : t == DType::kInt32 ? 4 : 2; }

double activate(GemmActivation a, double v) {
  switch (a) {
    case GemmActivation::kRelu: return v > 0 ? v : 0;
    case GemmActivation::kSilu: return v / (1 + std::exp(-v));
    default: return v;
  }
}

class CutlassGemm : public ::testing::TestWithParam<int> {};

TEST_P(CutlassGemm, MatchesHostReference) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& api = runtime::device_backend(Device::Type::kCUDA);
  if (api.capability(0) != 90) GTEST_SKIP() << "CUTLASS sm90 kernels need sm_90, not " << api.capability(0);
  const Built b = build_case(GetParam());
  if (!b.skip.empty()) GTEST_SKIP() << b.skip;
  const Case c = cases()[size_t(GetParam())];
  const GemmCandidate& cand = b.cand;
  const GemmProblem& p = c.p;
  SCOPED_TRACE(c.label + ": " + cand.name);
  using Entry = int (*)(const AnvilGemmCall*, void*, size_t, void*);
  using Workspace = size_t (*)(const AnvilGemmCall*);
  auto entry = reinterpret_cast<Entry>(dlsym(b.so, cand.entry.c_str()));
  auto ws_fn = reinterpret_cast<Workspace>(dlsym(b.so, (cand.entry + "_workspace").c_str()));
  ASSERT_TRUE(entry && ws_fn);

  const int64_t M = *p.m, N = *p.n, K = *p.k, L = p.batch;
  const bool integer = p.a_dtype == DType::kInt8;  // int_mm: int32 output, exact
  // Stored shapes (row-major): A [M,K] or [K,M]; B [K,N] or [N,K]; C [M,N]; batches stacked.
  const int64_t lda = p.trans_a ? M : K, ldb = p.trans_b ? K : N, ldc = N;
  const size_t na = size_t(L * M * K), nb = size_t(L * K * N), nc = size_t(L * M * N);
  std::vector<char> ha(na * dsize(p.a_dtype)), hb(nb * dsize(p.b_dtype)), hc(nc * dsize(p.out_dtype));
  std::vector<char> hbias(size_t(std::max(M, N)) * dsize(p.out_dtype));
  std::mt19937 rng(1234 + GetParam());
  std::uniform_real_distribution<double> uf(-1, 1);
  std::uniform_int_distribution<int> ui(-128, 127);
  // int8 operands (int_mm, mixed_mm's B) take integers in [-128, 127], the others [-1, 1)
  auto rnd = [&](DType t) { return t == DType::kInt8 ? double(ui(rng)) : uf(rng); };
  for (size_t i = 0; i < na; ++i) set_value(p.a_dtype, ha.data(), i, rnd(p.a_dtype));
  for (size_t i = 0; i < nb; ++i) set_value(p.b_dtype, hb.data(), i, rnd(p.b_dtype));
  for (size_t i = 0; i < nc; ++i) set_value(p.out_dtype, hc.data(), i, integer ? 0 : uf(rng));
  const int64_t nbias = p.bias == GemmBias::kPerRow ? M : N;
  for (int64_t i = 0; i < nbias; ++i) set_value(p.out_dtype, hbias.data(), size_t(i), uf(rng));

  // Host reference in double from the stored (rounded) values.
  std::vector<double> fa(na), fb(nb);
  for (size_t i = 0; i < na; ++i) fa[i] = host_value(p.a_dtype, ha.data(), i);
  for (size_t i = 0; i < nb; ++i) fb[i] = host_value(p.b_dtype, hb.data(), i);
  std::vector<double> ref(nc);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t q = 0; q < K; ++q) {
          const size_t ai = size_t(l * M * K + (p.trans_a ? q * lda + i : i * lda + q));
          const size_t bi = size_t(l * K * N + (p.trans_b ? j * ldb + q : q * ldb + j));
          s += fa[ai] * fb[bi];
        }
        const size_t ci = size_t(l * M * N + i * ldc + j);
        double v = p.alpha * s + p.beta * host_value(p.out_dtype, hc.data(), ci);
        if (p.bias == GemmBias::kPerColumn) v += host_value(p.out_dtype, hbias.data(), size_t(j));
        if (p.bias == GemmBias::kPerRow) v += host_value(p.out_dtype, hbias.data(), size_t(i));
        ref[ci] = activate(p.activation, v);
      }

  void* stream = api.stream_create(0);
  auto upload = [&](const std::vector<char>& h) {
    void* d = api.alloc(0, h.size());
    EXPECT_NE(d, nullptr) << api.last_error();
    runtime::device_copy(api, 0, d, h.data(), h.size(), ANVIL_COPY_HOST_TO_DEVICE, nullptr, "test");
    return d;
  };
  void *da = upload(ha), *db = upload(hb), *dc = upload(hc), *dbias = upload(hbias);
  AnvilGemmCall call{};
  call.a_dtype = int32_t(p.a_dtype);
  call.b_dtype = int32_t(p.b_dtype);
  call.c_dtype = int32_t(p.out_dtype);
  call.trans_a = p.trans_a;
  call.trans_b = p.trans_b;
  call.m = M;
  call.n = N;
  call.k = K;
  call.a = da;
  call.lda = lda;
  call.b = db;
  call.ldb = ldb;
  call.c = dc;
  call.ldc = ldc;
  call.alpha = float(p.alpha);
  call.beta = float(p.beta);
  call.bias = p.bias == GemmBias::kNone ? nullptr : dbias;
  call.bias_kind = p.bias == GemmBias::kPerColumn ? ANVIL_GEMM_BIAS_COL
                   : p.bias == GemmBias::kPerRow  ? ANVIL_GEMM_BIAS_ROW
                                                  : ANVIL_GEMM_BIAS_NONE;
  call.activation = int32_t(p.activation);  // the enum follows ANVIL_GEMM_ACT_* order
  const size_t ws_bytes = ws_fn(&call);
  void* ws = ws_bytes ? api.alloc(0, ws_bytes) : nullptr;
  if (ws_bytes) {
    ASSERT_NE(ws, nullptr) << api.last_error();
    // Too small a workspace is refused, not overrun.
    EXPECT_EQ(entry(&call, ws, ws_bytes - 1, stream), codegen::gemm::kCutlassWorkspaceTooSmall);
  }
  ASSERT_EQ(entry(&call, ws, ws_bytes, stream), 0);
  ASSERT_EQ(api.stream_synchronize(0, stream), 0) << api.last_error();
  std::vector<char> out(hc.size());
  runtime::device_copy(api, 0, out.data(), dc, out.size(), ANVIL_COPY_DEVICE_TO_HOST, nullptr, "test");

  if (integer) {
    for (size_t i = 0; i < nc; ++i)
      ASSERT_EQ(static_cast<const int32_t*>(static_cast<const void*>(out.data()))[i], int64_t(ref[i]))
          << "element " << i;
  } else {
    double max_ref = 0, max_err = 0;
    for (size_t i = 0; i < nc; ++i) {
      max_ref = std::max(max_ref, std::fabs(ref[i]));
      max_err = std::max(max_err, std::fabs(host_value(p.out_dtype, out.data(), i) - ref[i]));
    }
    EXPECT_GT(max_ref, 0.0);
    EXPECT_LE(max_err, 2e-2 * max_ref) << "max |err| " << max_err << ", max |ref| " << max_ref;
  }
  for (void* d : {da, db, dc, dbias, ws}) api.free(0, d);
  api.stream_destroy(0, stream);
  dlclose(b.so);
}

INSTANTIATE_TEST_SUITE_P(Cases, CutlassGemm, ::testing::Range(0, int(cases().size())),
                         [](const ::testing::TestParamInfo<int>& i) { return cases()[i.param].label; });

}  // namespace
}  // namespace anvil::gpu_test
