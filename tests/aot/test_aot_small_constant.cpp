// spec/aot.md section 4, case 3 (the seed's test_small_constant): Linear(4, 4) on x(4, 4), which
// the seed compiles with always_keep_tensor_constants, so that small constants stay real tensors
// instead of being inlined into the generated code. anvil has no such option because it never
// inlines a constant tensor: every parameter, buffer and graph constant, however small, is a
// tensor of the package's weights.bin, listed in the manifest and read through
// AnvilRunArgs::constants. What that means observably is checked here: the two 4-element-row
// constants are listed with their names, kinds, dtypes and sizes, hold the values the PyTorch
// output was computed from, and an update of them changes the results.
#include <gtest/gtest.h>

#include "aot_util.h"

namespace anvil::aot_test {
namespace {

constexpr const char* kFixture = "aot_03_small_constant";

/// x (n x 4) @ w^T + b in double.
std::vector<double> linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const std::vector<double> xv = x.to_doubles(), wv = w.to_doubles(), bv = b.to_doubles();
  const size_t n = xv.size() / 4;
  std::vector<double> y(n * 4);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < 4; ++j) {
      double acc = bv[j];
      for (size_t k = 0; k < 4; ++k) acc += xv[i * 4 + k] * wv[j * 4 + k];
      y[i * 4 + j] = acc;
    }
  return y;
}

TEST(AotCase, C03_SmallConstantsStayTensors) {
  ANVIL_AOT_LOAD(model, kFixture);
  const auto ins = read_set(kFixture, "in", "");
  const auto want = read_set(kFixture, "out", "");
  expect_outputs(model.run(ins), want, "compiled");

  // Both constants are package tensors under their module names, not folded or inlined.
  const auto& specs = model.constant_specs();
  ASSERT_EQ(specs.size(), 2u);
  std::string wname, bname;
  for (const auto& c : specs) {
    EXPECT_EQ(c.kind, "parameter") << c.name;
    EXPECT_EQ(c.dtype, DType::kFloat32) << c.name;
    if (c.original_name == "linear.weight") {
      wname = c.name;
      EXPECT_EQ(c.sizes, (Shape{4, 4}));
      EXPECT_EQ(c.nbytes, 64u);
    } else if (c.original_name == "linear.bias") {
      bname = c.name;
      EXPECT_EQ(c.sizes, (Shape{4}));
      EXPECT_EQ(c.nbytes, 16u);
    }
  }
  ASSERT_FALSE(wname.empty());
  ASSERT_FALSE(bname.empty());
  EXPECT_EQ(model.constant_original_names().at(wname), "linear.weight");

  // The package's values are the ones PyTorch computed the reference with.
  const Tensor w = model.constant(wname), b = model.constant(bname);
  const std::vector<double> from_constants = linear(ins[0], w, b);
  const std::vector<double> ref = want[0].to_doubles();
  ASSERT_EQ(from_constants.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(from_constants[i], ref[i], 1e-5) << i;

  // They are read at run time: new values (at once, and staged then swapped) change the output.
  std::vector<float> w2(16), b2 = {0.5f, -1.0f, 2.0f, 0.0f};
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = 0.125f * static_cast<float>(i) - 1.0f;
  const Tensor tw2 = Tensor::from_vector(w2, {4, 4}), tb2 = Tensor::from_vector(b2, {4});
  model.update_constants({{wname, tw2}, {bname, tb2}}, /*inactive=*/false);
  EXPECT_EQ(model.constant(wname).to_doubles(), tw2.to_doubles());
  const std::vector<double> want2 = linear(ins[0], tw2, tb2);
  std::vector<double> got = model.run(ins)[0].to_doubles();
  for (size_t i = 0; i < want2.size(); ++i) EXPECT_NEAR(got[i], want2[i], 1e-5) << i;
  model.update_constants({{wname, w}, {bname, b}}, /*inactive=*/true);
  got = model.run(ins)[0].to_doubles();
  for (size_t i = 0; i < want2.size(); ++i) EXPECT_NEAR(got[i], want2[i], 1e-5) << "staged " << i;
  model.swap_constants();
  expect_outputs(model.run(ins), want, "original constants swapped back in");
}

}  // namespace
}  // namespace anvil::aot_test
