// PackedWeightCache: constant GEMM operands packed once per constant set (runtime/packed_weights.h).
#include <gtest/gtest.h>

#include <vector>

#include "core/thread_pool.h"
#include "runtime/kernels/gemm_packed.h"
#include "runtime/packed_weights.h"
#include "runtime/rt_api.h"

namespace anvil::runtime {
namespace {

std::vector<float> iota_matrix(int64_t rows, int64_t cols) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
  return v;
}

TEST(PackedWeightCache, PacksOncePerAddressAndLayout) {
  const std::vector<float> w = iota_matrix(40, 24);  // a linear weight [n=40, k=24]
  PackedWeightCache cache;
  const auto p1 = cache.get(/*trans_b=*/true, 24, 40, w.data(), 24);
  const auto p2 = cache.get(true, 24, 40, w.data(), 24);
  EXPECT_EQ(p1.get(), p2.get());
  EXPECT_EQ(cache.size(), 1u);
  std::vector<float> want(static_cast<size_t>(packed_b_floats(24, 40)));
  pack_b(true, 24, 40, w.data(), 24, want.data());
  EXPECT_EQ(std::vector<float>(p1->data(), p1->data() + want.size()), want);
  // The same memory read as another layout is another pack.
  cache.get(false, 40, 24, w.data(), 24);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_GE(cache.bytes(), static_cast<int64_t>(2 * want.size() * sizeof(float)));
}

TEST(PackedWeightCache, PackingInParallelOnAPoolGivesTheSameLayout) {
  // 300 columns (19 panels, the last partial) x k 700: packed in column ranges on a pool of
  // 3 and 8 threads, both layouts, with a padded leading dimension.
  const int64_t k = 700, n = 300;
  const std::vector<float> w = iota_matrix(n, k + 5);  // [n, k] with ld k + 5
  const std::vector<float> b = iota_matrix(k, n + 3);  // [k, n] with ld n + 3
  for (int threads : {3, 8}) {
    ThreadPool pool(threads);
    ScopedThreadPool scope(&pool);
    for (bool trans : {true, false}) {
      const float* src = trans ? w.data() : b.data();
      const int64_t ld = trans ? k + 5 : n + 3;
      std::vector<float> want(static_cast<size_t>(packed_b_floats(k, n)));
      pack_b(trans, k, n, src, ld, want.data());
      const PackedMatrix got(trans, k, n, src, ld);
      EXPECT_EQ(std::vector<float>(got.data(), got.data() + want.size()), want)
          << threads << " threads, trans " << trans;
    }
  }
}

TEST(PackedWeightCache, CarriesOverOnlyKeptConstants) {
  const std::vector<float> a = iota_matrix(16, 16), b = iota_matrix(16, 16);
  PackedWeightCache cache;
  const auto pa = cache.get(false, 16, 16, a.data(), 16);
  cache.get(false, 16, 16, b.data(), 16);
  // A new constant set that kept `a` and replaced `b`: b's address may be reused by a new value,
  // so its pack must not follow.
  auto next = cache.carried_over({const_cast<float*>(a.data())});
  EXPECT_EQ(next->size(), 1u);
  EXPECT_EQ(next->get(false, 16, 16, a.data(), 16).get(), pa.get());
  EXPECT_EQ(next->size(), 1u);
  EXPECT_EQ(cache.carried_over({})->size(), 0u);
}

TEST(PackedWeightCache, ConstBGemmMatchesPlainGemm) {
  const int64_t m = 5, n = 33, k = 20;
  const std::vector<float> x = iota_matrix(m, k), w = iota_matrix(n, k);
  std::vector<float> got(static_cast<size_t>(m * n)), want(static_cast<size_t>(m * n));
  PackedWeightCache cache;
  for (PackedWeightCache* c : {&cache, &cache, static_cast<PackedWeightCache*>(nullptr)}) {
    sgemm_const_b(c, false, true, m, n, k, 0.5f, x.data(), k, w.data(), k, got.data(), n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += double(x[i * k + p]) * w[j * k + p];
        want[i * n + j] = static_cast<float>(0.5 * acc);
      }
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3) << i;
  }
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace anvil::runtime
