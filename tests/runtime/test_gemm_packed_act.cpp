// The packed GEMM's activations in the store (GemmAct: GELU erf and tanh, SiLU, ReLU6, after the
// column bias and ReLU) against a double reference with std::erf / std::tanh, on every ISA this
// CPU runs, over several row blocks, panel groups and K blocks; a column split gives bit-identical
// results; k = 0 applies the activation to the bias; NaN stays NaN; packed_k uses the first k rows
// of a B packed with more; sgemm_const_b on a pool of 1 and 3 threads gives the same numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "runtime/kernels/gemm_packed.h"
#include "runtime/rt_api.h"

namespace anvil::runtime {
namespace {

/// torch's formula of `act` in double.
double act_ref(GemmAct act, double x) {
  switch (act) {
    case GemmAct::kRelu6:
      return std::min(std::max(x, 0.0), 6.0);
    case GemmAct::kGeluErf:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case GemmAct::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case GemmAct::kSilu:
      return x / (1.0 + std::exp(-x));
    case GemmAct::kNone:
      break;
  }
  return x;
}

const GemmAct kActs[] = {GemmAct::kRelu6, GemmAct::kGeluErf, GemmAct::kGeluTanh, GemmAct::kSilu};

std::vector<GemmIsa> isas() {
  std::vector<GemmIsa> v;
  for (GemmIsa i : {GemmIsa::kGeneric, GemmIsa::kAvx2, GemmIsa::kAvx512})
    if (gemm_isa_available(i)) v.push_back(i);
  return v;
}

std::vector<float> rand_vec(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

TEST(GemmPackedAct, EveryActivationMatchesTheDoubleReference) {
  std::mt19937 rng(77);
  // m over several 8-row blocks; n over 1-3-panel groups with a partial last panel; k over two
  // K blocks (kc <= 512) and below one.
  const int64_t shapes[][3] = {{1, 17, 5}, {8, 48, 64}, {19, 100, 700}, {197, 49, 96}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    // A linear's weight [n, k] (trans_b), values so that the products span the activations'
    // interesting range (about -6 .. 6)
    const auto a = rand_vec(rng, m * k, -1.0f, 1.0f), w = rand_vec(rng, n * k, -1.0f, 1.0f),
               bias = rand_vec(rng, n, -1.0f, 1.0f);
    const float alpha = 3.0f / std::sqrt(static_cast<float>(k));
    std::vector<float> packed(static_cast<size_t>(packed_b_floats(k, n)));
    pack_b(true, k, n, w.data(), k, packed.data());
    for (GemmAct act : kActs) {
      for (bool relu : {false, true}) {
        std::vector<double> ref(static_cast<size_t>(m * n));
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (int64_t p = 0; p < k; ++p) acc += double(a[i * k + p]) * w[j * k + p];
            acc = acc * alpha + bias[j];
            if (relu) acc = std::max(acc, 0.0);
            ref[i * n + j] = act_ref(act, acc);
          }
        for (GemmIsa isa : isas()) {
          const std::string ctx =
              "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
              " act=" + std::to_string(static_cast<int>(act)) + " relu=" + std::to_string(relu) +
              " isa=" + std::to_string(static_cast<int>(isa));
          std::vector<float> whole(static_cast<size_t>(m * n)), split(whole.size());
          sgemm_packed(false, m, n, k, alpha, a.data(), k, packed.data(), bias.data(), relu,
                       whole.data(), n, 0, n, isa, nullptr, act);
          double worst = 0;
          for (size_t e = 0; e < whole.size(); ++e)
            worst = std::max(worst, std::fabs(whole[e] - ref[e]));
          EXPECT_LT(worst, 2e-5) << ctx;  // values up to ~6: fp32 sums and 2e-7 erf / exp
          // one panel at a time: the same bits
          for (int64_t n0 = 0; n0 < n; n0 += kPackedPanel)
            sgemm_packed(false, m, n, k, alpha, a.data(), k, packed.data(), bias.data(), relu,
                         split.data(), n, n0, std::min(n, n0 + kPackedPanel), isa, nullptr, act);
          EXPECT_EQ(split, whole) << ctx;
        }
      }
    }
  }
}

TEST(GemmPackedAct, EmptyKAndNanInputs) {
  const float bias[3] = {-1.0f, 0.5f, 8.0f};
  for (GemmAct act : kActs) {
    std::vector<float> c(6);
    sgemm_packed(false, 2, 3, 0, 1.0f, nullptr, 1, nullptr, bias, false, c.data(), 3, 0, 3,
                 GemmIsa::kAuto, nullptr, act);
    for (int j = 0; j < 6; ++j) EXPECT_NEAR(c[j], act_ref(act, bias[j % 3]), 1e-6) << j;
  }
  // a NaN in a row of A makes that row NaN, after every activation (torch's gelu(nan) = nan)
  const int64_t m = 3, n = 20, k = 4;
  std::vector<float> a(m * k, 0.5f), w(n * k, 0.25f), packed(packed_b_floats(k, n));
  a[1 * k + 2] = std::numeric_limits<float>::quiet_NaN();
  pack_b(true, k, n, w.data(), k, packed.data());
  for (GemmAct act : kActs) {
    std::vector<float> c(m * n);
    sgemm_packed(false, m, n, k, 1.0f, a.data(), k, packed.data(), nullptr, false, c.data(), n, 0,
                 n, GemmIsa::kAuto, nullptr, act);
    for (int64_t e = 0; e < m * n; ++e) EXPECT_EQ(std::isnan(c[e]), e / n == 1) << e;
  }
}

TEST(GemmPackedAct, PackedKUsesTheFirstRowsOfAPackedB) {
  std::mt19937 rng(5);
  const int64_t m = 9, n = 40, kfull = 37, k = 13;
  const auto a = rand_vec(rng, m * k, -1, 1), b = rand_vec(rng, kfull * n, -1, 1);
  std::vector<float> pfull(packed_b_floats(kfull, n)), pshort(packed_b_floats(k, n));
  pack_b(false, kfull, n, b.data(), n, pfull.data());
  pack_b(false, k, n, b.data(), n, pshort.data());  // the first k rows of B
  std::vector<float> want(m * n), got(m * n);
  sgemm_packed(false, m, n, k, 1.0f, a.data(), k, pshort.data(), nullptr, false, want.data(), n, 0,
               n);
  sgemm_packed(false, m, n, k, 1.0f, a.data(), k, pfull.data(), nullptr, false, got.data(), n, 0, n,
               GemmIsa::kAuto, nullptr, GemmAct::kNone, kfull);
  EXPECT_EQ(got, want);
  EXPECT_THROW(sgemm_packed(false, m, n, k, 1.0f, a.data(), k, pfull.data(), nullptr, false,
                            got.data(), n, 0, n, GemmIsa::kAuto, nullptr, GemmAct::kNone, k - 1),
               Error);
}

/// sgemm_const_b (bias + GELU) of an m x n x 64 product on pools of 2, 3 and 8 threads against
/// one thread (the same bits) and the double reference.
void const_b_on_pools(int64_t m, int64_t n);

TEST(GemmPackedAct, ThePoolSplitFollowsTheLargerOperand) {
  // ViT's Linears (B the larger operand) in column chunks, ConvNeXt's first MLP (A more than
  // twice B) in row blocks of whole 8-row register blocks; few rows always in columns
  EXPECT_EQ(packed_gemm_split(197, 768, 768, 8).kind, PackedGemmSplit::kColumnPanels);
  EXPECT_EQ(packed_gemm_split(197, 768, 768, 8).block, 6);  // 96 columns x 197 rows each
  EXPECT_EQ(packed_gemm_split(197, 768, 768, 8).chunks, 8);
  const PackedGemmSplit rows = packed_gemm_split(3136, 384, 96, 8);
  EXPECT_EQ(rows.kind, PackedGemmSplit::kRowBlocks);
  EXPECT_EQ(rows.block, 392);
  EXPECT_EQ(rows.chunks, 8);
  EXPECT_EQ(packed_gemm_split(784, 768, 192, 8).kind, PackedGemmSplit::kColumnPanels);
  EXPECT_EQ(packed_gemm_split(700, 64, 512, 8).block % 8, 0);  // 88 rows: whole register blocks
  EXPECT_EQ(packed_gemm_split(8, 1024, 512, 8).kind, PackedGemmSplit::kColumnPanels);
  EXPECT_EQ(packed_gemm_split(8, 1024, 512, 1).kind, PackedGemmSplit::kSerial);
}

TEST(GemmPackedAct, ConstBOnAPoolMatchesOneThread) {
  // sgemm_const_b splits 197 x 768 (48 panels) into column blocks on the pool, 600 x 200 into
  // row blocks, with bias and GELU in the store: every pool size gives the single-threaded bits.
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{197, 768}, {600, 200}}) {
    SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n));
    const_b_on_pools(m, n);
  }
}

void const_b_on_pools(int64_t m, int64_t n) {
  std::mt19937 rng(9);
  const int64_t k = 64;
  const auto a = rand_vec(rng, m * k, -1, 1), w = rand_vec(rng, n * k, -1, 1),
             bias = rand_vec(rng, n, -1, 1);
  std::vector<float> one(m * n);
  {
    ThreadPool pool(1);
    ScopedThreadPool scope(&pool);
    sgemm_const_b(nullptr, false, true, m, n, k, 0.3f, a.data(), k, w.data(), k, one.data(), n,
                  bias.data(), false, GemmAct::kGeluErf);
  }
  for (int threads : {2, 3, 8}) {
    ThreadPool pool(threads);
    ScopedThreadPool scope(&pool);
    std::vector<float> c(m * n);
    sgemm_const_b(nullptr, false, true, m, n, k, 0.3f, a.data(), k, w.data(), k, c.data(), n,
                  bias.data(), false, GemmAct::kGeluErf);
    EXPECT_EQ(c, one) << threads << " threads";
  }
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += double(a[i * k + p]) * w[j * k + p];
      worst = std::max(worst,
                       std::fabs(one[i * n + j] - act_ref(GemmAct::kGeluErf, 0.3 * acc + bias[j])));
    }
  EXPECT_LT(worst, 1e-5);
}

}  // namespace
}  // namespace anvil::runtime
