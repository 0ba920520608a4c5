// Activations fused into the convolution extern (runtime/kernels/conv_act.cpp): the vectorised
// fp32 versions against the double-precision std:: ones over a wide range of values, special
// values included (in the widest vector ISA the machine has); and the extern's fused_act.
#include <cmath>
#include <limits>
#include <vector>

#include "common/check.h"
#include "runtime/kernels/conv.h"
#include "test_externs_util.h"

namespace anvil::runtime::test {
namespace {

using kern::ConvAct;

/// Values from -120 to 120 (dense near 0, where the activations bend), the clamp bounds
/// themselves, +-0, +-inf and NaN.
std::vector<float> probe_values() {
  std::vector<float> v;
  for (int i = -3000; i <= 3000; ++i) v.push_back(static_cast<float>(i) * 0.0025f);  // +-7.5
  for (int i = -600; i <= 600; ++i) v.push_back(static_cast<float>(i) * 0.2f);       // +-120
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 88.5f, -87.5f,
                  1e-30f, -1e-30f})
    v.push_back(s);
  return v;
}

TEST(ConvActivation, FloatMatchesDoubleReference) {
  const std::vector<float> in = probe_values();
  const ConvAct acts[] = {ConvAct::kRelu,      ConvAct::kClamp, ConvAct::kHardswish,
                          ConvAct::kHardsigmoid, ConvAct::kSilu,  ConvAct::kSigmoid,
                          ConvAct::kGelu,      ConvAct::kGeluTanh};
  for (ConvAct act : acts)
    for (size_t len : {in.size(), size_t{1}, size_t{13}, size_t{37}}) {
      SCOPED_TRACE(str("act ", static_cast<int>(act), " length ", len));
      std::vector<float> got(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(len));
      std::vector<double> want(got.begin(), got.end());
      kern::conv_activate(act, -0.5f, 2.0f, got.data(), static_cast<int64_t>(len));
      kern::conv_activate(act, -0.5, 2.0, want.data(), static_cast<int64_t>(len));
      int bad = 0;
      for (size_t i = 0; i < len && bad < 5; ++i) {
        const double w = want[i], g = got[i];
        if (std::isnan(w)) {
          bad += !std::isnan(g);
          EXPECT_TRUE(std::isnan(g)) << "x=" << in[i];
          continue;
        }
        if (std::isinf(w)) {
          bad += g != w;
          EXPECT_EQ(g, w) << "x=" << in[i];
          continue;
        }
        // erf's approximation: 1.5e-7 absolute, times |x| / 2 in gelu
        const double tol = 1e-6 * std::max(1.0, std::fabs(w)) +
                           (act == ConvAct::kGelu ? 2e-7 * std::fabs(in[i]) : 0.0);
        bad += std::fabs(g - w) > tol;
        EXPECT_LE(std::fabs(g - w), tol) << "x=" << in[i] << " got " << g << " want " << w;
      }
    }
}

TEST(ConvActivation, ClampBoundsAndNaN) {
  // A one-sided clamp (the other bound infinite) and NaN passing through every activation.
  std::vector<float> v{-3, -1, 0, 1, 3, std::numeric_limits<float>::quiet_NaN()};
  kern::conv_activate(ConvAct::kClamp, -1.5f, std::numeric_limits<float>::infinity(), v.data(),
                      static_cast<int64_t>(v.size()));
  EXPECT_EQ(v[0], -1.5f);
  EXPECT_EQ(v[1], -1.0f);
  EXPECT_EQ(v[4], 3.0f);
  EXPECT_TRUE(std::isnan(v[5]));
}

TEST(ConvActivation, ExternAppliesFusedActAndChecksIt) {
  // 1x1 convolution with weight 1: the output is the activation of the input, on the
  // depthwise (groups 2), oneDNN / im2col (groups 1) paths.
  const Tensor x = anvil::testing::f32({1, 2, 1, 4}, {-4, -1, 0.5f, 3, 2, -2, 6, -0.25f});
  for (int64_t groups : {1, 2}) {
    ExternCase c("aten.conv2d.default");
    const Tensor w = groups == 2 ? anvil::testing::f32({2, 1, 1, 1}, {1, 1})
                                 : anvil::testing::f32({2, 2, 1, 1}, {1, 0, 0, 1});
    c.tensor("input", x).tensor("weight", w).absent().scalar("groups", groups);
    c.extern_int("fused_act", static_cast<int>(ConvAct::kHardswish));
    const std::vector<double> got = c.run_extern({1, 2, 1, 4}, DType::kFloat32).to_doubles();
    const double in[] = {-4, -1, 0.5, 3, 2, -2, 6, -0.25};
    for (size_t i = 0; i < 8; ++i) {
      const double want = in[i] * std::min(std::max(in[i] + 3, 0.0), 6.0) / 6;
      EXPECT_NEAR(got[i], want, 1e-6) << "groups " << groups << " element " << i;
    }
  }
  ExternCase bad("aten.conv2d.default");
  bad.tensor("input", x).tensor("weight", anvil::testing::f32({2, 2, 1, 1}, {1, 0, 0, 1}));
  bad.absent().extern_int("fused_act", 42);
  ANVIL_EXPECT_ERROR(bad.run_extern({1, 2, 1, 4}, DType::kFloat32), "unknown fused activation");
  ExternCase both("aten.conv2d.default");
  both.tensor("input", x).tensor("weight", anvil::testing::f32({2, 2, 1, 1}, {1, 0, 0, 1}));
  both.absent().extern_int("fused_relu", 1).extern_int("fused_act", 3);
  ANVIL_EXPECT_ERROR(both.run_extern({1, 2, 1, 4}, DType::kFloat32), "beside fused_relu");
}

}  // namespace
}  // namespace anvil::runtime::test
