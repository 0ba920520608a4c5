// GEMM candidate filtering and options (codegen/gemm/gemm_filter.h, gemm_problem.h), the
// spec's part B cases that do not need a compiler: the alignment rule (29, 30), the size gate
// (1, 2, 5, 31), allow / deny lists and the cap (22-24), option parsing.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codegen/gemm/gemm_filter.h"
#include "codegen/gemm/gemm_problem.h"
#include "core/error.h"

namespace anvil::codegen::gemm {
namespace {

TEST(GemmFilter, MaxAlignmentFollowsTheSpec) {  // cases 29 and 30
  EXPECT_EQ(max_alignment(DType::kFloat16, {1, 2, 4}, {0, 4, 1}, 0), 4);
  EXPECT_EQ(max_alignment(DType::kFloat16, {1, 4, 2}, {0, 1, 4}, 0), 4);
  EXPECT_EQ(max_alignment(DType::kFloat16, {2, 4, 2}, {23, 1, 4}, 0), 1);
  EXPECT_EQ(max_alignment(DType::kFloat16, {1, 2, 4}, {0, 4, 1}, 6), 2);
  EXPECT_EQ(max_alignment(DType::kFloat16, {2, 2, 8}, {32, 8, 1}, 24), 8);
  EXPECT_EQ(max_alignment(DType::kFloat32, {2, 2, 8}, {32, 8, 1}, 24), 4);
  EXPECT_EQ(max_alignment(DType::kFloat16, {2, 2}, {4, 2}, 0), 1);  // no stride-1 dim
  EXPECT_EQ(max_alignment(DType::kInt8, {4, 32}, {32, 1}, 0), 16);
  EXPECT_EQ(max_alignment(DType::kFloat64, {4, 32}, {32, 1}, 0), 0);  // not supported
}

GemmProblem problem(int64_t m, int64_t n, int64_t k, DType d = DType::kFloat16) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a_dtype = p.b_dtype = p.out_dtype = d;
  return p;
}

TEST(GemmFilter, TheSizeGateAdmitsEqualityAndRefusesSymbolicZeroAndFp64) {
  GemmOptions o;
  std::string why;
  o.min_gemm_size = 100001;  // case 1: 100*10*100 = 100000 < 100001
  EXPECT_FALSE(template_eligible(problem(100, 10, 100), o, &why));
  EXPECT_NE(why.find("below the minimum"), std::string::npos) << why;
  o.min_gemm_size = 100000;  // case 2: equality is eligible
  EXPECT_TRUE(template_eligible(problem(100, 10, 100), o, &why));
  GemmProblem sym = problem(128, 128, 16);
  sym.m.reset();  // case 5: dynamic shapes
  EXPECT_FALSE(template_eligible(sym, o, &why));
  EXPECT_NE(why.find("symbolic"), std::string::npos);
  o.min_gemm_size = 1;
  EXPECT_FALSE(template_eligible(problem(0, 10, 10), o, &why));  // case 31: M = 0
  EXPECT_FALSE(template_eligible(problem(8, 8, 8, DType::kFloat64), o, &why));  // fp64 output
  EXPECT_NE(why.find("output dtype"), std::string::npos);
}

GemmCandidate tmpl(const std::string& name) {
  GemmCandidate c;
  c.name = name;
  c.backend = GemmBackend::kCutlass;
  c.source = "// " + name;
  c.entry = name;
  return c;
}

std::vector<GemmCandidate> sample() {
  GemmCandidate lib;
  lib.name = "openblas_sgemm";
  lib.backend = GemmBackend::kOpenBlas;
  return {lib,
          tmpl("cutlass_128x128_warpspecialized_cooperative"),
          tmpl("cutlass_128x128_warpspecialized_pingpong"),
          tmpl("cutlass_64x128_warpspecialized_cooperative_stream_k"),
          tmpl("cutlass_128x128_warpspecialized_cooperative"),  // duplicate name
          tmpl("cutlass_256x128_warpspecialized_pingpong")};
}

std::vector<std::string> names(const std::vector<GemmCandidate>& v) {
  std::vector<std::string> out;
  for (const auto& c : v) out.push_back(c.name);
  return out;
}

TEST(GemmFilter, DenyAllowDedupeAndCapInTheSpecsOrder) {
  GemmOptions o;
  o.deny_regex = "pingpong";  // case 22
  auto kept = names(filter_candidates(sample(), o, 0));
  EXPECT_EQ(kept, (std::vector<std::string>{"openblas_sgemm",
                                            "cutlass_128x128_warpspecialized_cooperative",
                                            "cutlass_64x128_warpspecialized_cooperative_stream_k"}));
  o.deny_regex.reset();
  o.allow_regex = "pingpong";  // case 23: every candidate kept contains it
  kept = names(filter_candidates(sample(), o, 0));
  EXPECT_EQ(kept, (std::vector<std::string>{"cutlass_128x128_warpspecialized_pingpong",
                                            "cutlass_256x128_warpspecialized_pingpong"}));
  o.allow_regex = "stream_k";  // case 7
  kept = names(filter_candidates(sample(), o, 0));
  EXPECT_EQ(kept, std::vector<std::string>{"cutlass_64x128_warpspecialized_cooperative_stream_k"});
  o.allow_regex.clear();
  o.deny_regex = "openblas|cooperative";  // libraries are filtered by name too
  EXPECT_EQ(names(filter_candidates(sample(), o, 0)),
            (std::vector<std::string>{"cutlass_128x128_warpspecialized_pingpong",
                                      "cutlass_256x128_warpspecialized_pingpong"}));
  o.allow_regex.clear();
  o.deny_regex = "";  // an empty deny list filters nothing
  kept = names(filter_candidates(sample(), o, 2));  // case 24: the first 2, unique, in order
  EXPECT_EQ(kept, (std::vector<std::string>{"openblas_sgemm",
                                            "cutlass_128x128_warpspecialized_cooperative",
                                            "cutlass_128x128_warpspecialized_pingpong"}));
  o.allow_regex = "([";
  try {
    filter_candidates(sample(), o, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--gemm-allow"), std::string::npos) << e.what();
  }
}

TEST(GemmFilter, OptionsParseAndBadValuesAreClearErrors) {
  EXPECT_EQ(parse_backends(" CUTLASS, own ,cutlass"),
            (std::vector<GemmBackend>{GemmBackend::kCutlass, GemmBackend::kOwn}));
  EXPECT_EQ(parse_backends("ATen").size(), 3u);
  EXPECT_EQ(parse_autotune_mode("MAX"), AutotuneMode::kMax);
  EXPECT_THROW(parse_backends("triton"), Error);
  EXPECT_THROW(parse_backends(" , "), Error);
  EXPECT_THROW(parse_autotune_mode("always"), Error);
}

TEST(GemmFilter, CpuLibraryCandidatesFollowDtypesBackendsAndFeatures) {
  GemmOptions o;
  GemmProblem p = problem(64, 64, 64, DType::kFloat32);
  auto all = names(gemm_candidates(p, o, {"avx2", "fma", "avx512f"}, 0));
  // libraries first, then the first 4 templates (the fast mode's cap) in generation order
  ASSERT_EQ(all.size(), 8u);
  EXPECT_EQ(std::vector<std::string>(all.begin(), all.begin() + 4),
            (std::vector<std::string>{"openblas_sgemm", "own_packed_f32_avx512",
                                      "own_packed_f32_avx2", "onednn_f32_f32"}));
  for (size_t i = 4; i < all.size(); ++i) EXPECT_EQ(all[i].rfind("own_f32_avx512_", 0), 0u);
  o.mode = AutotuneMode::kMax;  // every template
  EXPECT_GT(gemm_candidates(p, o, {"avx2", "fma", "avx512f"}, 0).size(), 8u);
  o.mode = AutotuneMode::kOff;
  all = names(gemm_candidates(p, o, {"avx2", "fma"}, 0));  // no AVX-512 kernel offered
  EXPECT_EQ(std::count(all.begin(), all.end(), "own_packed_f32_avx512"), 0);
  o.backends = {GemmBackend::kOneDnn};  // one family
  EXPECT_EQ(names(gemm_candidates(p, o, {}, 0)), std::vector<std::string>{"onednn_f32_f32"});
  o.backends.clear();
  p = problem(64, 64, 64, DType::kBFloat16);  // bf16: no BLAS, no packed fp32 kernel
  o.backends = {GemmBackend::kOneDnn, GemmBackend::kOpenBlas};
  EXPECT_EQ(names(gemm_candidates(p, o, {"avx512f"}, 0)),
            std::vector<std::string>{"onednn_bf16_bf16"});
  p.m.reset();  // symbolic: libraries only
  o.backends.clear();
  for (const auto& n : names(gemm_candidates(p, o, {"avx512f", "avx512bf16"}, 0)))
    EXPECT_EQ(n.rfind("own_", 0), std::string::npos) << n;
}

}  // namespace
}  // namespace anvil::codegen::gemm
