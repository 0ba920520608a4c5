// Tests for pairwise distances (src/ops/dist.cpp, core/distance.h): cdist / _cdist_forward for
// p = 0, 1, 2, inf and 3.5 with broadcast batch dims and a zero distance, pdist /
// _pdist_forward, and the refused forms. Inputs come from gen() and the same formula in Python;
// expected values are PyTorch 2.11 CPU's, pasted in.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::expect_error;
using testing::gen;
using testing::matches;
using testing::OpRunner;

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;

/// x2 = gen({2, 2, 2}, 5, 13, 6, 3) with x2[0, 0] set to x1[0, 1] (a zero distance).
Tensor x2() {
  Tensor t = gen({2, 2, 2}, 5, 13, 6, 3.0, kF64);
  const Tensor x1 = gen({1, 3, 2}, 3, 11, 5, 2.0, kF64);
  t.data<double>()[0] = x1.data<double>()[2];
  t.data<double>()[1] = x1.data<double>()[3];
  return t;
}

TEST(Cdist, EveryPWithBroadcastBatch) {
  const Tensor x1 = gen({1, 3, 2}, 3, 11, 5, 2.0, kF64);
  const std::pair<double, std::vector<double>> cases[] = {
      {0.0, {2.0, 2.0, 0.0, 2.0, 2.0, 2.0, 2.0, 2.0, 1.0, 2.0, 2.0, 2.0}},
      {1.0,
       {6.0, 4.166667, 0.0, 4.166667, 5.0, 4.166667, 5.833333, 3.833333, 0.166667, 2.166667,
        4.833333, 2.833333}},
      {2.0,
       {4.242641, 3.847799, 0.0, 3.435921, 3.535534, 3.435921, 4.126473, 2.713137, 0.166667,
        1.536591, 3.419714, 2.006932}},
      {INFINITY,
       {3.0, 3.833333, 0.0, 3.333333, 2.5, 3.333333, 3.0, 2.0, 0.166667, 1.166667, 2.5, 1.5}},
      {3.5,
       {3.657041, 3.833546, 0.0, 3.340753, 3.047534, 3.340753, 3.55908, 2.341948, 0.166667, 1.33028,
        2.950321, 1.734367}}};
  for (const auto& [p, want] : cases) {
    SCOPED_TRACE(p);
    EXPECT_TRUE(matches(OpRunner("aten._cdist_forward.default")
                            .tensor("x1", x1)
                            .tensor("x2", x2())
                            .scalar("p", p)
                            .none("compute_mode")
                            .run1(),
                        kF64, {2, 3, 2}, want));
    // cdist with each compute_mode: the same exact values.
    for (int64_t mode : {0, 1, 2})
      EXPECT_TRUE(matches(OpRunner("aten.cdist.default")
                              .tensor("x1", x1.to(kF32))
                              .tensor("x2", x2().to(kF32))
                              .scalar("p", p)
                              .scalar("compute_mode", mode)
                              .run1(),
                          kF32, {2, 3, 2}, want));
  }
}

TEST(Pdist, UpperTrianglePairs) {
  const Tensor c = gen({4, 3}, 3, 11, 5, 2.0);
  const std::pair<double, std::vector<double>> cases[] = {
      {2.0, {4.71699, 5.338539, 4.636809, 4.71699, 4.5, 1.732051}},
      {1.5, {5.108416, 6.329542, 5.557613, 5.108416, 5.300938, 2.080084}},
      {0.0, {3.0, 3.0, 3.0, 3.0, 3.0, 3.0}},
      {INFINITY, {4.5, 3.5, 3.0, 4.5, 3.5, 1.0}}};
  for (const auto& [p, want] : cases) {
    SCOPED_TRACE(p);
    EXPECT_TRUE(
        matches(OpRunner("aten._pdist_forward.default").tensor("self", c).scalar("p", p).run1(),
                kF32, {6}, want));
    EXPECT_TRUE(matches(OpRunner("aten.pdist.default").tensor("self", c).scalar("p", p).run1(),
                        kF32, {6}, want));
  }
  EXPECT_TRUE(
      matches(OpRunner("aten.pdist.default").tensor("self", gen({1, 3})).run1(), kF32, {0}, {}));
}

TEST(Distances, BadInputIsRefused) {
  auto cdist = [](const Tensor& a, const Tensor& b, double p, int64_t mode) {
    OpRunner("aten.cdist.default")
        .tensor("x1", a)
        .tensor("x2", b)
        .scalar("p", p)
        .scalar("compute_mode", mode)
        .run1();
  };
  expect_error(
      [&] {
        cdist(gen({3, 4}, 7, 11, 5, 1.0, DType::kInt64), gen({2, 4}), 2.0, 0);
      },
      {"float32 or float64", "i64"});
  expect_error(
      [&] {
        cdist(gen({3, 4}, 7, 11, 5, 1.0, DType::kFloat16), gen({2, 4}), 2.0, 0);
      },
      {"float32 or float64", "f16"});
  expect_error([&] { cdist(gen({3, 4}), gen({2, 4}), -1.0, 0); }, {"non-negative p", "-1"});
  expect_error(
      [&] {
        cdist(gen({3, 4}), gen({2, 5}), 2.0, 0);
      },
      {"same number of columns", "4", "5"});
  expect_error([&] { cdist(gen({4}), gen({2, 4}), 2.0, 0); }, {"at least 2-D"});
  expect_error([&] { cdist(gen({3, 3, 4}), gen({2, 2, 4}), 2.0, 0); }, {"broadcast", "3", "2"});
  expect_error([&] { cdist(gen({3, 4}), gen({2, 4}), 2.0, 3); }, {"unknown compute_mode", "3"});
  expect_error(
      [] {
        OpRunner("aten._pdist_forward.default").tensor("self", gen({2, 3, 4})).run1();
      },
      {"pdist needs a 2-D input", "[2, 3, 4]"});
  expect_error(
      [] {
        OpRunner("aten._pdist_forward.default")
            .tensor("self", gen({3, 4}))
            .scalar("p", -0.5)
            .run1();
      },
      {"non-negative p"});
}

}  // namespace
}  // namespace anvil
