// The random generator (core/random.h) and the random ops (ops/random.cpp) against PyTorch 1.13
// CPU values (computed once with torch.manual_seed(0); torch 2.x CPU uses the same algorithms):
// the scalar normal path (numel < 16, with its cached second sample), the vector path with a
// re-drawn tail (numel 40), uniform f32 / f64, and a stream continued across calls.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/check.h"
#include "core/error.h"
#include "core/random.h"
#include "op_test_util.h"

namespace anvil {
namespace {

using testing::OpRunner;

// torch.manual_seed(0); torch.randn(5)
const std::vector<double> kRandn5 = {1.5409960746765137, -0.293428897857666, -2.1787893772125244,
                                     0.5684312582015991, -1.0845223665237427};
// torch.manual_seed(0); torch.randn(40)
const std::vector<double> kRandn40 = {
    -1.1258398294448853,  -1.152360200881958,   -0.2505785822868347,  -0.4338788092136383,
    0.8487103581428528,   0.6920091509819031,   -0.31601276993751526, -2.1152193546295166,
    0.32227492332458496,  -1.2633347511291504,  0.34998318552970886,  0.30813392996788025,
    0.11984150856733322,  1.237657904624939,    1.1167771816253662,   -0.2472781538963318,
    -1.3526537418365479,  -1.6959311962127686,  0.5666506290435791,   0.7935083508491516,
    0.5988394618034363,   -1.5550950765609741,  -0.3413603901863098,  1.85300612449646,
    -0.21586325764656067, -0.7425481677055359,  0.5627213716506958,   0.25962740182876587,
    -0.17396099865436554, -0.678746223449707,   0.9382607340812683,   0.4888698160648346,
    1.203223705291748,    0.08453469723463058,  -1.2001394033432007,  -0.004785737954080105,
    -0.5180748105049133,  -0.30670419335365295, -1.580993890762329,   1.7066433429718018};
// torch.manual_seed(0); torch.rand(5)
const std::vector<double> kRand5 = {0.49625658988952637, 0.7682217955589294, 0.08847743272781372,
                                    0.13203048706054688, 0.30742281675338745};
// torch.manual_seed(0); torch.rand(3, dtype=torch.float64)
const std::vector<double> kRand3F64 = {0.9700530018065531, 0.707819864399788, 0.45938294312745087};
// torch.manual_seed(0); torch.randn(3, dtype=torch.float64)
const std::vector<double> kRandn3F64 = {1.5409961082440433, -0.2934289057609464,
                                        -2.1787893820745574};
// torch.manual_seed(0); torch.randn(5); y = torch.randn(40); z = torch.rand(3): y[:4] and z
const std::vector<double> kSeqRandn40Head = {-0.08853142708539963, 0.5238832831382751,
                                             -0.6658713221549988, 0.8503773808479309};
const std::vector<double> kSeqRand3 = {0.8101882934570312, 0.9800970554351807, 0.1146882176399231};

/// Expects the first want.size() elements of `t` to equal `want` within `tol`.
void expect_values(const Tensor& t, const std::vector<double>& want, double tol) {
  const std::vector<double> got = t.to_doubles();
  ASSERT_GE(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(Random, NormalScalarPathMatchesTorch) {
  RandomGenerator g(0);
  Tensor t = Tensor::empty({5}, DType::kFloat32);
  g.normal_(t);
  expect_values(t, kRandn5, 1e-6);
}

TEST(Random, NormalVectorPathWithTailMatchesTorch) {
  RandomGenerator g(0);
  Tensor t = Tensor::empty({40}, DType::kFloat32);
  g.normal_(t);
  expect_values(t, kRandn40, 1e-6);
}

TEST(Random, UniformAndDoubleMatchTorch) {
  RandomGenerator g(0);
  Tensor u = Tensor::empty({5}, DType::kFloat32);
  g.uniform_(u);
  expect_values(u, kRand5, 0.0);  // exact: 24-bit fractions
  g.manual_seed(0);
  Tensor ud = Tensor::empty({3}, DType::kFloat64);
  g.uniform_(ud);
  expect_values(ud, kRand3F64, 0.0);
  g.manual_seed(0);
  Tensor nd = Tensor::empty({3}, DType::kFloat64);
  g.normal_(nd);
  expect_values(nd, kRandn3F64, 1e-12);
}

TEST(Random, StreamContinuesAcrossCalls) {
  RandomGenerator g(7);
  g.manual_seed(0);  // reseeding restarts the stream
  Tensor a = Tensor::empty({5}, DType::kFloat32);
  g.normal_(a);  // leaves a cached normal sample, which the vector path does not use
  Tensor b = Tensor::empty({40}, DType::kFloat32);
  g.normal_(b);
  Tensor c = Tensor::empty({3}, DType::kFloat32);
  g.uniform_(c);
  expect_values(a, kRandn5, 1e-6);
  expect_values(b, kSeqRandn40Head, 1e-6);
  expect_values(c, kSeqRand3, 0.0);
  EXPECT_EQ(g.seed(), 0u);
}

TEST(Random, NonFloatingDtypeIsAnError) {
  RandomGenerator g(0);
  Tensor t = Tensor::empty({4}, DType::kInt64);
  ANVIL_EXPECT_ERROR(g.normal_(t), "random sampling needs a floating dtype");
  ANVIL_EXPECT_ERROR(g.uniform_(t), "random sampling needs a floating dtype");
}

TEST(RandomOps, RandnUsesDefaultGenerator) {
  default_generator().manual_seed(0);
  Tensor y = OpRunner("aten.randn.default").ints("size", {4, 10}).run1();
  EXPECT_EQ(y.dtype(), DType::kFloat32);
  EXPECT_EQ(y.sizes(), (Shape{4, 10}));
  expect_values(y, kRandn40, 1e-6);
  // The stream goes on: a second call gives new values.
  Tensor y2 = OpRunner("aten.randn.default").ints("size", {4, 10}).run1();
  EXPECT_NE(y2.to_doubles()[0], y.to_doubles()[0]);
}

TEST(RandomOps, RandAndLikeForms) {
  default_generator().manual_seed(0);
  Tensor r = OpRunner("aten.rand.default").ints("size", {5}).run1();
  expect_values(r, kRand5, 0.0);
  default_generator().manual_seed(0);
  Tensor self = Tensor::empty({3}, DType::kFloat64);
  Tensor n = OpRunner("aten.randn_like.default").tensor("self", self).run1();
  EXPECT_EQ(n.dtype(), DType::kFloat64);
  expect_values(n, kRandn3F64, 1e-12);
  default_generator().manual_seed(0);
  Tensor u = OpRunner("aten.rand_like.default")
                 .tensor("self", Tensor::empty({5}, DType::kFloat64))
                 .dtype("dtype", DType::kFloat32)
                 .run1();
  EXPECT_EQ(u.dtype(), DType::kFloat32);
  expect_values(u, kRand5, 0.0);
}

// PyTorch: torch.manual_seed(0); torch.randn_like(torch.empty(5, 8).t()) equals
// torch.randn(5, 8).t(): the result keeps self's (transposed) layout and the samples fill it in
// memory order.
TEST(RandomOps, LikeFormsKeepSelfsLayoutAndFillMemoryOrder) {
  default_generator().manual_seed(0);
  const Tensor self = Tensor::empty({5, 8}, DType::kFloat32).as_strided({8, 5}, {1, 8}, 0);
  Tensor n = OpRunner("aten.randn_like.default").tensor("self", self).run1();
  EXPECT_EQ(n.strides(), (Shape{1, 8}));
  const std::vector<double> got = n.to_doubles();  // row-major over (8, 5)
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_NEAR(got[static_cast<size_t>(i * 5 + j)], kRandn40[static_cast<size_t>(j * 8 + i)], 1e-6)
          << i << ", " << j;
}

TEST(RandomOps, IntegerDtypeIsRejected) {
  ANVIL_EXPECT_ERROR(
      OpRunner("aten.randn.default").ints("size", {2}).dtype("dtype", DType::kInt64).run1(),
      "random sampling needs a floating dtype");
  ANVIL_EXPECT_ERROR(OpRunner("aten.rand.default").ints("size", {-1}).run1(),
                     "cannot create a tensor with a negative dimension");
}

}  // namespace
}  // namespace anvil
