// CUTLASS 3.x sm90 candidates (src/codegen/gemm/cutlass_candidates.h): enumeration, names,
// the B.4.4 dtype / layout / alignment filters, the rendered source, the header discovery.
// Nothing here runs nvcc except CutlassCompile.OneCandidate (test_cutlass_compile.cpp).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <regex>
#include <set>
#include <string>

#include "codegen/gemm/cutlass_candidates.h"

namespace anvil::codegen::gemm {
namespace {

GemmProblem bf16_problem(int64_t m, int64_t n, int64_t k) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a_dtype = p.b_dtype = p.out_dtype = DType::kBFloat16;
  p.acc_dtype = DType::kFloat32;
  p.align_a = p.align_b = p.align_c = 8;
  p.target = "cuda-sm90";
  return p;
}

GemmProblem int8_problem(int64_t m, int64_t n, int64_t k) {
  GemmProblem p = bf16_problem(m, n, k);
  p.op = GemmOp::kIntMm;
  p.a_dtype = p.b_dtype = DType::kInt8;
  p.out_dtype = p.acc_dtype = DType::kInt32;
  p.trans_b = true;
  p.align_a = p.align_b = 16;
  p.align_c = 4;
  return p;
}

std::vector<std::string> names(const std::vector<GemmCandidate>& c) {
  std::vector<std::string> out;
  for (const auto& g : c) out.push_back(g.name);
  return out;
}

int count_matching(const std::vector<GemmCandidate>& c, const std::string& token) {
  int n = 0;
  for (const auto& g : c) n += g.name.find(token) != std::string::npos;
  return n;
}

TEST(CutlassCandidates, Bf16EnumerationIsDeterministicUniqueAndComplete) {
  const GemmProblem p = bf16_problem(1024, 256, 1024);
  const auto a = cutlass_candidates(p, 90);
  const auto b = cutlass_candidates(p, 90);
  // 4 tiles x 3 clusters: cooperative + stream-K on the three M%128 tiles (18), ping-pong on
  // 64x128 and 128x128 (6).
  ASSERT_EQ(a.size(), 24u);
  EXPECT_EQ(names(a), names(b));
  const std::vector<std::string> all = names(a);
  const std::set<std::string> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), a.size());
  EXPECT_EQ(count_matching(a, "_warpspecialized_pingpong_"), 6);
  EXPECT_EQ(count_matching(a, "_stream_k_"), 9);
  EXPECT_EQ(count_matching(a, "_warpspecialized_cooperative_"), 18);  // 9 plain + 9 stream-K
  // Generation order: four configurations by the problem's size first (fewer than two waves
  // of 128 x 256 tiles here: 128x128 ping-pong 1x2, 64x128 ping-pong, 128x128 stream-K,
  // 128x256 stream-K 2x1), then the others by tile, then cluster, then schedule.
  const char* first[] = {"_128x128x64_1x2x1_0_ttt_align8_warpspecialized_pingpong_epi_tma",
                         "_64x128x64_1x1x1_0_ttt_align8_warpspecialized_pingpong_epi_tma",
                         "_128x128x64_1x1x1_0_ttt_align8_stream_k_warpspecialized_cooperative",
                         "_128x256x64_2x1x1_0_ttt_align8_stream_k_warpspecialized_cooperative"};
  for (int i = 0; i < 4; ++i)
    EXPECT_NE(a[i].name.find(first[i]), std::string::npos) << i << ": " << a[i].name;
  EXPECT_EQ(a[4].name,
            "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_void_bf16_64x128x64_2x1x1_0_ttt_align8_"
            "warpspecialized_pingpong_epi_tma");
  EXPECT_EQ(a[6].name,
            "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_void_bf16_128x128x64_1x1x1_0_ttt_align8_"
            "warpspecialized_cooperative_epi_tma");
  // at least two waves of 128 x 256 tiles (4096 x 4096): those on 2 x 1 clusters first
  const auto big = cutlass_candidates(bf16_problem(4096, 4096, 4096), 90);
  const char* big_first[] = {
      "_128x256x64_2x1x1_0_ttt_align8_stream_k_warpspecialized_cooperative",
      "_128x256x64_2x1x1_0_ttt_align8_warpspecialized_cooperative",
      "_256x128x64_1x2x1_0_ttt_align8_warpspecialized_cooperative",
      "_128x128x64_1x2x1_0_ttt_align8_warpspecialized_pingpong"};
  ASSERT_EQ(big.size(), 24u);
  for (int i = 0; i < 4; ++i)
    EXPECT_NE(big[i].name.find(big_first[i]), std::string::npos) << i << ": " << big[i].name;
  for (const auto& g : a) {
    EXPECT_EQ(g.backend, GemmBackend::kCutlass);
    EXPECT_EQ(g.entry, "anvil_" + g.name);
    const std::string exported = "extern \"C\" __attribute__((visibility(\"default\"))) ";
    EXPECT_NE(g.source.find(exported + "int " + g.entry + "(const AnvilGemmCall* call"),
              std::string::npos);
    EXPECT_NE(g.source.find(exported + "size_t " + g.entry + "_workspace("), std::string::npos);
    EXPECT_FALSE(g.fuses_bias);
    EXPECT_FALSE(g.fuses_activation);
    // Cooperative tiles split M over two warp groups; ping-pong holds at most 128x128.
    const std::regex tile("_(\\d+)x(\\d+)x64_");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(g.name, m, tile)) << g.name;
    const int tm = std::stoi(m[1]), tn = std::stoi(m[2]);
    if (g.name.find("pingpong") != std::string::npos)
      EXPECT_TRUE(tm <= 128 && tn <= 128) << g.name;
    else
      EXPECT_EQ(tm % 128, 0) << g.name;
  }
}

TEST(CutlassCandidates, LayoutsFollowTransposes) {
  GemmProblem p = bf16_problem(256, 256, 256);
  p.trans_b = true;  // linear: B is the [N,K] weight, a column-major view
  const auto tn = cutlass_candidates(p, 90);
  ASSERT_FALSE(tn.empty());
  for (const auto& g : tn) EXPECT_NE(g.name.find("_0_tnt_align8"), std::string::npos) << g.name;
  EXPECT_NE(tn[0].source.find("using LayoutB = cutlass::layout::ColumnMajor;"), std::string::npos);
  EXPECT_NE(tn[0].source.find("using LayoutA = cutlass::layout::RowMajor;"), std::string::npos);
  p.trans_a = true;
  p.trans_b = false;
  const auto nt = cutlass_candidates(p, 90);
  ASSERT_FALSE(nt.empty());
  for (const auto& g : nt) EXPECT_NE(g.name.find("_0_ntt_align8"), std::string::npos) << g.name;
  EXPECT_NE(nt[0].source.find("using LayoutA = cutlass::layout::ColumnMajor;"), std::string::npos);
  EXPECT_NE(nt[0].source.find("constexpr int kTransA = 1, kTransB = 0;"), std::string::npos);
}

TEST(CutlassCandidates, AlignmentFilter) {
  // TMA needs 16-byte rows (align 8 for 16-bit). Below that: the cp.async kernels (no clusters,
  // no stream-K, no fused bias / activation), aligned to the largest of 8 / 4 / 2 that both A and
  // B allow; never a kernel claiming more alignment than an operand has; align 1 gets none.
  for (int align : {1, 2, 4}) {
    for (int which = 0; which < 2; ++which) {
      GemmProblem p = bf16_problem(64, 64, 64);
      (which == 0 ? p.align_a : p.align_b) = align;
      p.bias = GemmBias::kPerColumn;
      p.activation = GemmActivation::kRelu;
      const auto c = cutlass_candidates(p, 90);
      if (align == 1) {
        EXPECT_TRUE(c.empty());
        continue;
      }
      // 64x128 ping-pong, 128x128 cooperative and ping-pong, cluster 1x1x1.
      ASSERT_EQ(c.size(), 3u) << align;
      const std::string token = "_align" + std::to_string(align) + "_cpasync_warpspecialized_";
      EXPECT_EQ(count_matching(c, token), 3) << token;
      EXPECT_EQ(count_matching(c, "_1x1x1_0_"), 3);
      EXPECT_EQ(count_matching(c, "_epi_nosmem"), 3);
      for (const auto& g : c) {
        EXPECT_FALSE(g.fuses_bias || g.fuses_activation) << g.name;
        EXPECT_NE(g.source.find("cutlass::gemm::KernelCpAsyncWarpSpecialized"), std::string::npos);
        EXPECT_NE(g.source.find("cutlass::epilogue::NoSmemWarpSpecialized;"), std::string::npos);
        EXPECT_NE(g.source.find("constexpr int kAlignA = " + std::to_string(align)), std::string::npos);
      }
    }
  }
  // A and B aligned to 8 but C (N = 10) to 2: the cp.async mainloop at align 8, C at 2.
  GemmProblem p = bf16_problem(64, 10, 64);
  p.align_c = 2;
  auto c = cutlass_candidates(p, 90);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(count_matching(c, "_align8_cpasync_"), 3);
  EXPECT_NE(c[0].source.find("kAlignB = 8, kAlignC = 2;"), std::string::npos);
  p.align_c = 1;
  EXPECT_NE(cutlass_candidates(p, 90)[0].source.find("kAlignC = 1;"), std::string::npos);
  p = bf16_problem(64, 64, 64);
  p.align_a = p.align_b = p.align_c = 16;  // more than 8 allowed: the align8 TMA kernels
  // (M <= 64: the skinny 64x64 tile's three clusters besides the 24)
  EXPECT_EQ(count_matching(cutlass_candidates(p, 90), "_align8_"), 27);
  EXPECT_EQ(count_matching(cutlass_candidates(p, 90), "_epi_tma"), 27);
  EXPECT_EQ(count_matching(cutlass_candidates(p, 90), "_align8_stream_k_"), 9);
}

TEST(CutlassCandidates, DtypesAndAccumulators) {
  GemmProblem p = bf16_problem(128, 128, 128);
  p.a_dtype = p.b_dtype = p.out_dtype = DType::kFloat16;
  auto c = cutlass_candidates(p, 90);
  ASSERT_EQ(c.size(), 24u);
  EXPECT_EQ(count_matching(c, "gemm_f16_f16_f32_void_f16_"), 24);
  p.acc_dtype = DType::kFloat16;  // allow_fp16_reduced_precision_reduction
  c = cutlass_candidates(p, 90);
  ASSERT_EQ(c.size(), 24u);
  EXPECT_EQ(count_matching(c, "gemm_f16_f16_f16_void_f16_"), 24);
  EXPECT_NE(c[0].source.find("using ElementAccumulator = cutlass::half_t;"), std::string::npos);
  // bf16 never accumulates in 16 bits; mixed input dtypes, a dtype-changing output, fp64 (spec
  // case 1) give nothing; fp32 gives the 3xTF32 kernels alone (test_cutlass_fast_f32.cpp), not
  // 1xTF32 ones even when allowed.
  GemmProblem q = bf16_problem(128, 128, 128);
  q.acc_dtype = DType::kBFloat16;
  EXPECT_TRUE(cutlass_candidates(q, 90).empty());
  q = bf16_problem(128, 128, 128);
  q.b_dtype = DType::kFloat16;
  EXPECT_TRUE(cutlass_candidates(q, 90).empty());
  q = bf16_problem(128, 128, 128);
  q.out_dtype = DType::kFloat32;
  EXPECT_TRUE(cutlass_candidates(q, 90).empty());
  for (DType t : {DType::kFloat32, DType::kFloat64}) {
    q = bf16_problem(128, 128, 128);
    q.a_dtype = q.b_dtype = q.out_dtype = q.acc_dtype = t;
    q.align_a = q.align_b = q.align_c = 4;
    for (const bool tf32 : {false, true})
      for (const auto& c : cutlass_candidates(q, 90, CutlassOptions{tf32}))
        EXPECT_TRUE(t == DType::kFloat32 && is_fast_f32_name(c.name)) << c.name;
    EXPECT_EQ(cutlass_candidates(q, 90).empty(), t == DType::kFloat64);
  }
}

TEST(CutlassCandidates, Int8NeedsKMajorOperandsAndK16) {
  auto c = cutlass_candidates(int8_problem(100, 32, 16), 90);
  ASSERT_EQ(c.size(), 24u);
  EXPECT_EQ(count_matching(c, "gemm_s8_s8_s32_void_s32_"), 24);
  EXPECT_EQ(count_matching(c, "x128_"), 24);  // K tile of 128 bytes
  EXPECT_EQ(count_matching(c, "_0_tnt_align16_"), 24);
  EXPECT_NE(c[0].source.find("using ElementCompute = int32_t;"), std::string::npos);
  GemmProblem p = int8_problem(100, 32, 16);
  p.trans_b = false;  // B row-major: not K-major
  EXPECT_TRUE(cutlass_candidates(p, 90).empty());
  p = int8_problem(100, 32, 16);
  p.trans_a = true;
  EXPECT_TRUE(cutlass_candidates(p, 90).empty());
  p = int8_problem(100, 32, 24);  // K % 16 != 0
  EXPECT_TRUE(cutlass_candidates(p, 90).empty());
  p = int8_problem(100, 32, 32);
  p.align_a = 8;
  EXPECT_TRUE(cutlass_candidates(p, 90).empty());
  p = int8_problem(100, 32, 32);
  p.out_dtype = DType::kInt8;
  EXPECT_TRUE(cutlass_candidates(p, 90).empty());
}

TEST(CutlassCandidates, NoCandidatesForSymbolicZeroOrOtherArch) {
  GemmProblem p = bf16_problem(0, 64, 64);  // spec case 5: a zero dim
  EXPECT_TRUE(cutlass_candidates(p, 90).empty());
  p = bf16_problem(64, 64, 0);
  EXPECT_TRUE(cutlass_candidates(p, 90).empty());
  p = bf16_problem(64, 64, 64);
  p.m.reset();  // spec case 31: symbolic sizes
  EXPECT_TRUE(cutlass_candidates(p, 90).empty());
  p = bf16_problem(64, 64, 64);
  for (int sm : {75, 80, 89, 100}) EXPECT_TRUE(cutlass_candidates(p, sm).empty()) << sm;
  p.op = GemmOp::kMixedMm;
  EXPECT_TRUE(cutlass_candidates(p, 90).empty());
}

TEST(CutlassCandidates, EpilogueFusion) {
  GemmProblem p = bf16_problem(256, 512, 128);
  p.op = GemmOp::kAddmm;
  p.trans_b = true;
  p.bias = GemmBias::kPerColumn;
  p.alpha = 2.0;
  p.beta = 0.4;
  auto c = cutlass_candidates(p, 90);
  ASSERT_EQ(c.size(), 24u);
  for (const auto& g : c) {
    EXPECT_TRUE(g.fuses_bias);
    EXPECT_FALSE(g.fuses_activation);
    EXPECT_NE(g.name.find("gemm_bf16_bf16_f32_bf16_bf16_"), std::string::npos) << g.name;
  }
  EXPECT_NE(c[0].source.find("cutlass::epilogue::fusion::LinCombPerColBias<"), std::string::npos);
  EXPECT_NE(c[0].source.find("constexpr bool kHasSource = true;"), std::string::npos);
  EXPECT_NE(c[0].source.find("constexpr int kBiasKind = 1;"), std::string::npos);

  p.bias = GemmBias::kPerRow;
  p.activation = GemmActivation::kSilu;
  c = cutlass_candidates(p, 90);
  ASSERT_FALSE(c.empty());
  EXPECT_TRUE(c[0].fuses_bias && c[0].fuses_activation);
  EXPECT_NE(c[0].source.find("LinCombPerRowBiasEltAct<cutlass::epilogue::thread::SiLu, "),
            std::string::npos);
  EXPECT_NE(c[0].source.find("constexpr int kActivation = 5;"), std::string::npos);

  p.m = 250;  // per-row bias read in vectors of 8 along M: not fused
  c = cutlass_candidates(p, 90);
  ASSERT_FALSE(c.empty());
  EXPECT_FALSE(c[0].fuses_bias);
  EXPECT_TRUE(c[0].fuses_activation);
  EXPECT_NE(c[0].source.find("LinCombEltAct<cutlass::epilogue::thread::SiLu, "), std::string::npos);

  p = bf16_problem(256, 512, 128);
  p.activation = GemmActivation::kRelu6;  // no CUTLASS fusion op: left to the caller
  c = cutlass_candidates(p, 90);
  ASSERT_FALSE(c.empty());
  EXPECT_FALSE(c[0].fuses_activation);
  EXPECT_NE(c[0].source.find("LinearCombination<"), std::string::npos);
  EXPECT_NE(c[0].source.find("constexpr bool kHasSource = false;"), std::string::npos);
  p.activation = GemmActivation::kGeluTanh;
  EXPECT_NE(cutlass_candidates(p, 90)[0].source.find("thread::GELU_taylor"), std::string::npos);
}

TEST(CutlassCandidates, BatchedMode) {
  GemmProblem p = bf16_problem(256, 32, 256);
  p.op = GemmOp::kBmm;
  p.batch = 10;
  const auto c = cutlass_candidates(p, 90);
  ASSERT_EQ(c.size(), 24u);
  EXPECT_EQ(count_matching(c, "_batched"), 24);
  EXPECT_NE(c[0].source.find("constexpr int64_t kBatch = 10;"), std::string::npos);
  p.batch = 0;
  EXPECT_TRUE(cutlass_candidates(p, 90).empty());
}

TEST(CutlassCandidates, AllowDenyTokens) {
  // The lead's filter matches regexes on these names (spec cases 7, 22, 23).
  const auto c = cutlass_candidates(bf16_problem(512, 512, 512), 90);
  int kept_deny = 0, kept_allow = 0;
  for (const auto& g : c) {
    kept_deny += !std::regex_search(g.name, std::regex("pingpong"));
    kept_allow += std::regex_search(g.name, std::regex("stream_k"));
  }
  EXPECT_EQ(kept_deny, 18);
  EXPECT_EQ(kept_allow, 9);
}

TEST(CutlassHeaders, EnvOverrideAndWarning) {
  const char* old = getenv("ANVIL_CUTLASS_DIR");
  const std::string saved = old ? old : "";
  setenv("ANVIL_CUTLASS_DIR", "/nonexistent/cutlass", 1);
  std::string why, warning;
  EXPECT_FALSE(find_cutlass_headers(&why).has_value());
  EXPECT_NE(why.find("/nonexistent/cutlass"), std::string::npos) << why;
  EXPECT_TRUE(cutlass_candidates_if_available(bf16_problem(64, 64, 64), 90, &warning).empty());
  EXPECT_EQ(warning.rfind("CUTLASS headers not found (", 0), 0u) << warning;
  EXPECT_NE(warning.find("): CUTLASS candidates skipped"), std::string::npos) << warning;
  if (old)
    setenv("ANVIL_CUTLASS_DIR", saved.c_str(), 1);
  else
    unsetenv("ANVIL_CUTLASS_DIR");
  // The build's default, when it holds the headers, gives both include folders.
  if (auto h = find_cutlass_headers()) {
    warning.clear();
    EXPECT_EQ(cutlass_candidates_if_available(bf16_problem(128, 64, 64), 90, &warning).size(),
              24u);
    EXPECT_TRUE(warning.empty());
    const auto flags = cutlass_nvcc_flags(*h);
    EXPECT_NE(std::find(flags.begin(), flags.end(), h->include), flags.end());
    EXPECT_NE(std::find(flags.begin(), flags.end(), "-gencode=arch=compute_90a,code=sm_90a"),
              flags.end());
  }
}

}  // namespace
}  // namespace anvil::codegen::gemm

namespace anvil::codegen::gemm {
namespace {

TEST(CutlassCandidates, EpilogueIsPartOfTheNameAndEntry) {
  // Two GEMMs of one shape with different epilogues get different kernels in one package.
  GemmProblem p = bf16_problem(256, 512, 128);
  const auto plain = cutlass_candidates(p, 90);
  p.bias = GemmBias::kPerColumn;
  p.activation = GemmActivation::kGeluErf;
  const auto fused = cutlass_candidates(p, 90);
  ASSERT_EQ(plain.size(), fused.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(fused[i].name, plain[i].name + "_bias_col_gelu_erf");
    EXPECT_NE(fused[i].entry, plain[i].entry);
    EXPECT_TRUE(fused[i].fuses_bias && fused[i].fuses_activation);
  }
  p.bias = GemmBias::kNone;
  p.activation = GemmActivation::kRelu;
  EXPECT_EQ(cutlass_candidates(p, 90)[0].name, plain[0].name + "_relu");
}

TEST(CutlassCandidates, SkinnyProblemsTryTheKernelsThatSpreadBFirst) {
  // M <= 64 (a batch of tokens against a weight): a 64 x 64 ping-pong tile is added and the
  // first four (what --autotune fast times) are stream-K 128x128, ping-pong 64x64 and 64x128,
  // stream-K 128x256, all with single-CTA clusters.
  const auto c = cutlass_candidates(bf16_problem(64, 4096, 1024), 90);
  ASSERT_EQ(c.size(), 27u);  // 24 + the 64x64 tile's three clusters
  EXPECT_EQ(count_matching(c, "_64x64x64_"), 3);
  ASSERT_GE(c.size(), 4u);
  const char* first[] = {"_128x128x64_1x1x1_0_ttt_align8_stream_k_",
                         "_64x64x64_1x1x1_0_ttt_align8_warpspecialized_pingpong",
                         "_64x128x64_1x1x1_0_ttt_align8_warpspecialized_pingpong",
                         "_128x256x64_1x1x1_0_ttt_align8_stream_k_"};
  for (int i = 0; i < 4; ++i)
    EXPECT_NE(c[i].name.find(first[i]), std::string::npos) << i << ": " << c[i].name;
  // larger problems have the four tiles and their own first four
  // (Bf16EnumerationIsDeterministicUniqueAndComplete)
  const auto big = cutlass_candidates(bf16_problem(65, 4096, 1024), 90);
  EXPECT_EQ(big.size(), 24u);
  EXPECT_EQ(count_matching(big, "_64x64x64_"), 0);
  EXPECT_NE(big[0].name.find("_128x128x64_1x2x1_"), std::string::npos) << big[0].name;
}

}  // namespace
}  // namespace anvil::codegen::gemm

#include "codegen/gemm/gemm_filter.h"

namespace anvil::codegen::gemm {
namespace {

// Spec B.5 case 17's candidate set: addmm x[4096,2048] + 2.0 * A[4096,25728] @ B[25728,2048],
// beta 0.4, x a full C matrix; denylist "pingpong", max configs 4. Every kernel reads C (beta *
// C in its epilogue: the name's C dtype is f16, not void); the four are the first of anvil's
// generation order (for this size: the 128 x 256 2 x 1 ones first) without a ping-pong one.
// The kernels themselves run in CutlassSpec.Case17_* [GPU].
TEST(CutlassCandidates, Case17FullCAddmmDenylistAndCap) {
  GemmProblem p = bf16_problem(4096, 2048, 25728);
  p.op = GemmOp::kAddmm;
  p.a_dtype = p.b_dtype = p.out_dtype = DType::kFloat16;
  p.bias = GemmBias::kFull;
  p.alpha = 2.0;
  p.beta = 0.4;
  const auto all = cutlass_candidates(p, 90);
  ASSERT_FALSE(all.empty());
  for (const auto& g : all) {
    EXPECT_NE(g.name.find("gemm_f16_f16_f32_f16_f16_"), std::string::npos) << g.name;
    EXPECT_NE(g.source.find("using ElementC = ElementD;"), std::string::npos) << g.name;
    EXPECT_FALSE(g.fuses_bias);  // the full x is C itself, not a fused bias vector
  }
  GemmOptions o;
  o.deny_regex = "pingpong";
  o.allow_regex = "";
  const auto kept = filter_candidates(all, o, 4);
  ASSERT_EQ(kept.size(), 4u);
  std::set<std::string> seen;
  size_t last = 0;
  for (const auto& g : kept) {
    EXPECT_EQ(g.name.find("pingpong"), std::string::npos) << g.name;
    EXPECT_TRUE(seen.insert(g.name).second) << g.name;
    size_t at = 0;
    while (at < all.size() && all[at].name != g.name) ++at;
    ASSERT_LT(at, all.size());
    EXPECT_TRUE(seen.size() == 1 || at > last) << g.name << " out of generation order";
    last = at;
  }
  // (4096 x 2048: 256 tiles of 128 x 256, those first)
  EXPECT_NE(
      kept[0].name.find("_128x256x64_2x1x1_0_ttt_align8_stream_k_warpspecialized_cooperative"),
      std::string::npos)
      << kept[0].name;
  // beta 0 and no full x: CUTLASS's void C
  p.beta = 0.0;
  p.bias = GemmBias::kNone;
  EXPECT_NE(cutlass_candidates(p, 90)[0].name.find("gemm_f16_f16_f32_void_f16_"), std::string::npos);
}

GemmProblem mixed_problem(int64_t m, int64_t n, int64_t k) {
  GemmProblem p = bf16_problem(m, n, k);
  p.op = GemmOp::kMixedMm;
  p.a_dtype = p.out_dtype = DType::kFloat16;
  p.b_dtype = DType::kInt8;
  p.trans_b = true;  // int8 B stored [N, K]
  p.align_a = 8;
  p.align_b = 16;
  p.align_c = 8;
  return p;
}

// Spec B.5 case 21 (mixed_mm fp16 A[100,16] @ int8[100,16]^T): CUTLASS's mixed-input mainloop on
// the transposed problem, the int8 operand as its A, D column-major in its view.
TEST(CutlassCandidates, MixedFp16TimesInt8SolvesTheTransposedProblem) {
  GemmProblem p = mixed_problem(100, 100, 16);
  p.align_c = 4;  // rows of 100 halves: 8 bytes aligned, the non-TMA epilogue
  auto c = cutlass_candidates(p, 90);
  // 128x128 cooperative and ping-pong, 64x128 ping-pong, 128x256 cooperative; 1x1x1 clusters
  ASSERT_EQ(c.size(), 4u) << ::testing::PrintToString(names(c));
  EXPECT_EQ(count_matching(c, "gemm_f16_s8_f32_void_f16_"), 4);
  EXPECT_EQ(count_matching(c, "_1x1x1_0_tnt_align8x16_warpspecialized_"), 4);
  EXPECT_EQ(count_matching(c, "_epi_nosmem"), 4);
  EXPECT_EQ(count_matching(c, "stream_k"), 0);
  const std::string& src = c[0].source;
  for (const char* want :
       {"using LayoutC = cutlass::layout::ColumnMajor;", "kAlignC = 4;",
        "    ElementB, cutlass::layout::RowMajor, kAlignB,\n    ElementA, cutlass::layout::ColumnMajor, kAlignA,",
        "cutlass::epilogue::NoSmemWarpSpecialized;", "KernelTmaWarpSpecializedCooperative;",
        "make_shape(static_cast<int>(n), static_cast<int>(m), static_cast<int>(k)",
        "a.mainloop.ptr_A = static_cast<decltype(a.mainloop.ptr_A)>(call->b);",
        "make_stride(Int<1>{}, call->ldc, batch_c)"})
    EXPECT_NE(src.find(want), std::string::npos) << want << "\n" << src;
  // 16-byte rows of D: the TMA epilogue
  p.align_c = 8;
  c = cutlass_candidates(p, 90);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(count_matching(c, "_epi_tma"), 4);
  EXPECT_NE(c[0].source.find("cutlass::epilogue::TmaWarpSpecializedCooperative;"), std::string::npos);
  // beta * C reads C
  p.beta = 0.5;
  EXPECT_EQ(count_matching(cutlass_candidates(p, 90), "gemm_f16_s8_f32_f16_f16_"), 4);
  // bf16 activations too; the op name does not matter, the dtypes do
  p = mixed_problem(100, 100, 16);
  p.a_dtype = p.out_dtype = DType::kBFloat16;
  p.op = GemmOp::kMm;
  EXPECT_EQ(count_matching(cutlass_candidates(p, 90), "gemm_bf16_s8_f32_void_bf16_"), 4);
  // refused: int8 B not K-major, A column-major, B rows not 16-byte aligned, A rows not 16-byte
  // aligned, 16-bit accumulation, an fp32 output, int8 A with a 16-bit B, mixed_mm without int8
  auto none = [](GemmProblem q) { return cutlass_candidates(q, 90).empty(); };
  p = mixed_problem(100, 100, 16);
  p.trans_b = false;
  EXPECT_TRUE(none(p));
  p = mixed_problem(100, 100, 16);
  p.trans_a = true;
  EXPECT_TRUE(none(p));
  p = mixed_problem(100, 100, 16);
  p.align_b = 8;
  EXPECT_TRUE(none(p));
  p = mixed_problem(100, 100, 16);
  p.align_a = 4;
  EXPECT_TRUE(none(p));
  p = mixed_problem(100, 100, 16);
  p.acc_dtype = DType::kFloat16;
  EXPECT_TRUE(none(p));
  p = mixed_problem(100, 100, 16);
  p.out_dtype = DType::kFloat32;
  EXPECT_TRUE(none(p));
  p = mixed_problem(100, 100, 16);
  std::swap(p.a_dtype, p.b_dtype);
  EXPECT_TRUE(none(p));
  p = mixed_problem(100, 100, 16);
  p.b_dtype = DType::kFloat16;
  EXPECT_TRUE(none(p));
}

}  // namespace
}  // namespace anvil::codegen::gemm
