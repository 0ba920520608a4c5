// The packed-B fp32 GEMM (src/runtime/kernels/gemm_packed.h) against a double-precision
// reference, on every ISA this CPU runs: random shapes covering the micro-kernel edges (m, n, k
// around the tile sizes), both transposes, padded leading dimensions, alpha, bias and ReLU; column
// ranges [n0, n1) split in multiples of 16 must give bit-identical results to the whole range and
// leave other columns and row padding untouched. Also the packed layout and error cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "core/error.h"
#include "runtime/kernels/gemm_packed.h"

namespace anvil::runtime {
namespace {

const GemmIsa kAllIsas[] = {GemmIsa::kGeneric, GemmIsa::kAvx2, GemmIsa::kAvx512, GemmIsa::kAuto};

/// Readable ISA name for failure messages.
std::string isa_name(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAuto: return "auto";
    case GemmIsa::kGeneric: return "generic";
    case GemmIsa::kAvx2: return "avx2";
    case GemmIsa::kAvx512: return "avx512";
  }
  return "?";
}

/// The ISAs of kAllIsas this CPU runs. Those it lacks are reported (a note on stdout and the
/// test's `skipped_isas` XML property), never skipped silently; ANVIL_REQUIRE_GEMM_ISAS=all
/// turns a missing one into a failure (for hosts that are meant to have AVX-512).
std::vector<GemmIsa> runnable_isas() {
  std::vector<GemmIsa> out;
  std::string skipped;
  for (GemmIsa isa : kAllIsas) {
    if (gemm_isa_available(isa))
      out.push_back(isa);
    else
      skipped += (skipped.empty() ? "" : ", ") + isa_name(isa);
  }
  if (!skipped.empty()) {
    std::printf("note: this CPU lacks %s: those GEMM kernels are not tested here\n",
                skipped.c_str());
    ::testing::Test::RecordProperty("skipped_isas", skipped);
    const char* req = std::getenv("ANVIL_REQUIRE_GEMM_ISAS");
    if (req && std::string(req) == "all") ADD_FAILURE() << "ISAs missing on this CPU: " << skipped;
  }
  return out;
}

/// One GEMM problem with its operands stored as the kernel sees them.
struct Problem {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false, relu = false, has_bias = false, has_row_bias = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  float alpha = 1.0f;
  std::vector<float> a, b, bias, row_bias;
  std::vector<double> ref, scale;  // expected C (m x n) and the error scale per element

  float op_a(int64_t i, int64_t p) const { return trans_a ? a[p * lda + i] : a[i * lda + p]; }
  float op_b(int64_t p, int64_t j) const { return trans_b ? b[j * ldb + p] : b[p * ldb + j]; }
};

/// A random problem of the given size; the reference is computed in double.
Problem make_problem(std::mt19937& rng, int64_t m, int64_t n, int64_t k) {
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::uniform_int_distribution<int> coin(0, 1), pad(0, 5);
  Problem pr;
  pr.m = m, pr.n = n, pr.k = k;
  pr.trans_a = coin(rng), pr.trans_b = coin(rng), pr.relu = coin(rng), pr.has_bias = coin(rng);
  pr.has_row_bias = coin(rng);
  pr.lda = (pr.trans_a ? m : k) + pad(rng);
  pr.ldb = (pr.trans_b ? k : n) + pad(rng);
  pr.ldc = n + pad(rng);
  const float alphas[] = {1.0f, 0.5f, -1.25f};
  pr.alpha = alphas[std::uniform_int_distribution<int>(0, 2)(rng)];
  pr.a.resize(static_cast<size_t>((pr.trans_a ? k : m) * pr.lda));
  pr.b.resize(static_cast<size_t>((pr.trans_b ? n : k) * pr.ldb));
  for (float& v : pr.a) v = val(rng);
  for (float& v : pr.b) v = val(rng);
  if (pr.has_bias) {
    pr.bias.resize(static_cast<size_t>(n));
    for (float& v : pr.bias) v = val(rng);
  }
  if (pr.has_row_bias) {
    pr.row_bias.resize(static_cast<size_t>(m));
    for (float& v : pr.row_bias) v = val(rng);
  }
  pr.ref.assign(static_cast<size_t>(m * n), 0.0);
  pr.scale.assign(static_cast<size_t>(m * n), 0.0);
  std::vector<double> arow(static_cast<size_t>(k));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) arow[p] = pr.op_a(i, p);
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0, mag = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double prod = arow[p] * pr.op_b(p, j);
        acc += prod;
        mag += std::fabs(prod);
      }
      acc *= pr.alpha;
      mag *= std::fabs(pr.alpha);
      if (pr.has_bias) acc += pr.bias[j], mag += std::fabs(pr.bias[j]);
      if (pr.has_row_bias) acc += pr.row_bias[i], mag += std::fabs(pr.row_bias[i]);
      if (pr.relu) acc = std::max(acc, 0.0);
      pr.ref[i * n + j] = acc;
      pr.scale[i * n + j] = mag;
    }
  }
  return pr;
}

const float kSentinel = -12345.0f;

/// Runs sgemm_packed over columns [n0, n1) into `c` (m x ldc, pre-filled by the caller).
void run(const Problem& pr, const std::vector<float>& packed, GemmIsa isa, int64_t n0, int64_t n1,
         std::vector<float>& c) {
  sgemm_packed(pr.trans_a, pr.m, pr.n, pr.k, pr.alpha, pr.a.data(), pr.lda, packed.data(),
               pr.has_bias ? pr.bias.data() : nullptr, pr.relu, c.data(), pr.ldc, n0, n1, isa,
               pr.has_row_bias ? pr.row_bias.data() : nullptr);
}

/// Checks one problem on one ISA: accuracy of the whole range, bit-identical split ranges, and
/// untouched padding / out-of-range columns.
void check_problem(const Problem& pr, const std::vector<float>& packed, GemmIsa isa,
                   std::mt19937& rng) {
  const std::string ctx = "isa=" + isa_name(isa) + " m=" + std::to_string(pr.m) +
                          " n=" + std::to_string(pr.n) + " k=" + std::to_string(pr.k) +
                          " ta=" + std::to_string(pr.trans_a) + " tb=" + std::to_string(pr.trans_b) +
                          " bias=" + std::to_string(pr.has_bias) +
                          " row_bias=" + std::to_string(pr.has_row_bias) +
                          " relu=" + std::to_string(pr.relu);
  const size_t c_size = static_cast<size_t>(pr.m * pr.ldc);
  std::vector<float> whole(c_size, kSentinel);
  run(pr, packed, isa, 0, pr.n, whole);
  int bad = 0;
  for (int64_t i = 0; i < pr.m; ++i) {
    for (int64_t j = 0; j < pr.ldc; ++j) {
      const float got = whole[i * pr.ldc + j];
      if (j >= pr.n) {
        if (got != kSentinel && ++bad <= 3) ADD_FAILURE() << ctx << ": padding written at " << i << "," << j;
        continue;
      }
      const double ref = pr.ref[i * pr.n + j];
      const double tol = 1e-5 * pr.scale[i * pr.n + j] + 1e-6;
      if (!(std::fabs(got - ref) <= tol) && ++bad <= 3)
        ADD_FAILURE() << ctx << ": C[" << i << "][" << j << "] = " << got << ", expected " << ref
                      << " (tol " << tol << ")";
    }
  }
  // Random split of [0, n) at multiples of 16: every piece into a fresh sentinel buffer.
  std::vector<float> pieces(c_size, kSentinel);
  int64_t n0 = 0;
  while (n0 < pr.n) {
    const int64_t panels = std::uniform_int_distribution<int64_t>(1, 5)(rng);
    const int64_t n1 = std::min(pr.n, n0 + panels * kPackedPanel);
    std::vector<float> part(c_size, kSentinel);
    run(pr, packed, isa, n0, n1, part);
    for (int64_t i = 0; i < pr.m; ++i) {
      for (int64_t j = 0; j < pr.ldc; ++j) {
        const float v = part[i * pr.ldc + j];
        if (j >= n0 && j < n1) {
          pieces[i * pr.ldc + j] = v;
        } else if (v != kSentinel && ++bad <= 3) {
          ADD_FAILURE() << ctx << ": range [" << n0 << "," << n1 << ") wrote column " << j;
        }
      }
    }
    n0 = n1;
  }
  for (size_t e = 0; e < c_size; ++e) {
    // Bitwise comparison (NaN-free data): the split must not change any element.
    if (pieces[e] != whole[e] && ++bad <= 3)
      ADD_FAILURE() << ctx << ": split result differs at flat index " << e << ": " << pieces[e]
                    << " vs " << whole[e];
  }
}

TEST(GemmPacked, MatchesDoubleReferenceOnEveryIsa) {
  const int64_t ms[] = {1, 2, 7, 8, 9, 64, 65};
  const int64_t ns[] = {1, 15, 16, 17, 47, 48, 49, 512, 688};
  const int64_t ks[] = {1, 3, 16, 255, 256, 257, 1024};
  std::mt19937 rng(1234);
  std::vector<std::array<int64_t, 3>> shapes;
  // Every listed value appears at least once, then random combinations under a work cap.
  for (int i = 0; i < 9; ++i) shapes.push_back({ms[i % 7], ns[i], ks[i % 7]});
  while (shapes.size() < 150) {
    const int64_t m = ms[rng() % 7], n = ns[rng() % 9], k = ks[rng() % 7];
    if (m * n * k <= 8'000'000) shapes.push_back({m, n, k});
  }
  const std::vector<GemmIsa> isas = runnable_isas();
  ASSERT_GE(isas.size(), 2u);  // kGeneric and kAuto always run
  for (const auto& s : shapes) {
    const Problem pr = make_problem(rng, s[0], s[1], s[2]);
    std::vector<float> packed(static_cast<size_t>(packed_b_floats(pr.k, pr.n)));
    pack_b(pr.trans_b, pr.k, pr.n, pr.b.data(), pr.ldb, packed.data());
    for (GemmIsa isa : isas) check_problem(pr, packed, isa, rng);
  }
}

TEST(GemmPacked, PackedLayoutIsPanelsOfSixteenZeroPadded) {
  // B is 3 x 20 (k x n); stored transposed (20 x 3, ldb 4) in the trans_b case.
  const int64_t k = 3, n = 20;
  std::vector<float> b(static_cast<size_t>(k * n)), bt(static_cast<size_t>(n * 4), 99.0f);
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) b[p * n + j] = static_cast<float>(100 * p + j), bt[j * 4 + p] = b[p * n + j];
  ASSERT_EQ(packed_b_floats(k, n), 2 * 16 * 3);
  for (bool trans : {false, true}) {
    std::vector<float> out(static_cast<size_t>(packed_b_floats(k, n)), -1.0f);
    pack_b(trans, k, n, trans ? bt.data() : b.data(), trans ? 4 : n, out.data());
    for (int64_t panel = 0; panel < 2; ++panel)
      for (int64_t p = 0; p < k; ++p)
        for (int64_t c = 0; c < 16; ++c) {
          const int64_t j = panel * 16 + c;
          const float want = j < n ? static_cast<float>(100 * p + j) : 0.0f;
          EXPECT_EQ(out[panel * 16 * k + p * 16 + c], want) << "trans=" << trans << " p=" << p << " j=" << j;
        }
  }
}

TEST(GemmPacked, EmptyKGivesBiasAndRelu) {
  const float bias[3] = {1.5f, -2.0f, 0.0f};
  std::vector<float> c(2 * 3, kSentinel);
  for (GemmIsa isa : runnable_isas()) {
    sgemm_packed(false, 2, 3, 0, 1.0f, nullptr, 1, nullptr, bias, true, c.data(), 3, 0, 3, isa);
    EXPECT_EQ(c, (std::vector<float>{1.5f, 0.0f, 0.0f, 1.5f, 0.0f, 0.0f}));
  }
}

TEST(GemmPacked, ReluKeepsNanLikeTorch) {
  // Row 0 of A holds a NaN: with ReLU, row 0 of C stays NaN (torch.relu(nan) = nan) and row 1
  // is exact (small integers).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t m = 2, n = 20, k = 3;
  const std::vector<float> a = {1.0f, nan, 2.0f, 1.0f, -1.0f, 2.0f};
  std::vector<float> b(static_cast<size_t>(k * n));
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) b[p * n + j] = static_cast<float>((p + 1) * (j % 5) - 4);
  std::vector<float> packed(static_cast<size_t>(packed_b_floats(k, n)));
  pack_b(false, k, n, b.data(), n, packed.data());
  for (GemmIsa isa : runnable_isas()) {
    std::vector<float> c(static_cast<size_t>(m * n), kSentinel);
    sgemm_packed(false, m, n, k, 1.0f, a.data(), k, packed.data(), nullptr, true, c.data(), n, 0, n,
                 isa);
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_TRUE(std::isnan(c[j])) << isa_name(isa) << " j=" << j;
      const float want = b[j] - b[n + j] + 2.0f * b[2 * n + j];
      EXPECT_EQ(c[n + j], std::max(want, 0.0f)) << isa_name(isa) << " j=" << j;
    }
  }
}

TEST(GemmPacked, RejectsBadArguments) {
  std::vector<float> a(64, 1.0f), packed(static_cast<size_t>(packed_b_floats(4, 40))), c(4 * 40);
  std::vector<float> b(4 * 40, 1.0f);
  pack_b(false, 4, 40, b.data(), 40, packed.data());
  auto call = [&](int64_t n0, int64_t n1, int64_t lda, int64_t ldc) {
    sgemm_packed(false, 4, 40, 4, 1.0f, a.data(), lda, packed.data(), nullptr, false, c.data(), ldc,
                 n0, n1);
  };
  EXPECT_NO_THROW(call(16, 40, 4, 40));
  ANVIL_EXPECT_ERROR(call(8, 40, 4, 40), "bad column range [n0, n1)");   // n0 not a multiple of 16
  ANVIL_EXPECT_ERROR(call(0, 41, 4, 40), "bad column range [n0, n1)");   // n1 > n
  ANVIL_EXPECT_ERROR(call(32, 16, 4, 40), "bad column range [n0, n1)");  // n0 > n1
  ANVIL_EXPECT_ERROR(call(0, 40, 3, 40), "lda too small");               // lda < k
  ANVIL_EXPECT_ERROR(call(0, 40, 4, 39), "ldc too small");               // ldc < n1
  ANVIL_EXPECT_ERROR(pack_b(true, 4, 40, b.data(), 3, packed.data()),
                     "leading dimension too small");  // ldb < k
}

}  // namespace
}  // namespace anvil::runtime
