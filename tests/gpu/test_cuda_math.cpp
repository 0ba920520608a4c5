// erf and the erf GELU of the generated CUDA kernels (codegen/cuda/cuda_preamble.cpp: CUDA's
// erff) on a GPU against the reference interpreter over [-8, 8] in fine steps, with +-0, +-inf,
// NaN, the smallest normal and subnormal values and huge ones; each package runs plain,
// captured and replayed. (A branch-free erf, Abramowitz & Stegun 7.1.26 on __expf, was 8 %
// faster in bench/probe/pointwise_index_probe.cu's kernel but 0.6-1.6 % slower in ViT-B/16 and
// ConvNeXt-T on an H200: not adopted.) Label gpu: skips without a GPU (ANVIL_REQUIRE_GPU=1:
// fails).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "codegen/harness.h"
#include "common/check.h"
#include "driver/compile.h"
#include "gpu/gpu_test_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/model.h"

namespace anvil {
namespace {

constexpr int64_t kN = 16384;

constexpr const char* kErfGraph = R"(graph {
  inputs {
    %x: f32[16384] = user_input
  }
  %e: f32[16384] = aten.erf.default(self=%x)
  %g: f32[16384] = aten.gelu.default(self=%x)
  outputs {
    user_output %e
    user_output %g
  }
})";

/// [-8, 8] in kN - 12 steps, then the special values.
Tensor erf_input() {
  Tensor x = Tensor::empty({kN}, DType::kFloat32);
  float* p = x.data<float>();
  const int64_t steps = kN - 12;
  for (int64_t i = 0; i < steps; ++i)
    p[i] = -8.0f + 16.0f * static_cast<float>(i) / static_cast<float>(steps - 1);
  const float specials[12] = {0.0f,
                              -0.0f,
                              INFINITY,
                              -INFINITY,
                              NAN,
                              std::numeric_limits<float>::min(),
                              -std::numeric_limits<float>::min(),
                              std::numeric_limits<float>::denorm_min(),
                              1e-20f,
                              -30.0f,
                              30.0f,
                              std::numeric_limits<float>::max()};
  for (int i = 0; i < 12; ++i) p[steps + i] = specials[i];
  return x;
}

std::string compile(const ir::Graph& g, const std::string& name) {
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (gpu_test::out_dir() / "cache").string();
  o.emit_source_dir = (gpu_test::out_dir() / name).string();
  const std::string pkg = (gpu_test::out_dir() / (name + ".anvil")).string();
  driver::compile_graph(g, pkg, o);
  return pkg;
}

std::string preamble_of(const std::string& name) {
  std::ifstream in(gpu_test::out_dir() / name / "kernels_0.cu");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Runs `pkg` three times (plain, captured, replayed) and checks each output element: NaN where
/// the interpreter has NaN, infinities and signed zeros equal, finite values within `tol`
/// absolute.
void expect_erf_matches(const ir::Graph& g, const std::string& pkg, double tol) {
  const Tensor x = erf_input();
  interp::Interpreter ref(g);
  const auto want = ref.run({x});
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model m = runtime::Model::load(pkg, mo);
  const Tensor xd = x.to(Device::cuda(0));
  for (int run = 0; run < 3; ++run) {
    const auto got = m.run({xd});
    ASSERT_EQ(got.size(), 2u);
    for (size_t o = 0; o < 2; ++o) {
      const Tensor h = got[o].to(Device::cpu());
      const float* a = h.data<float>();
      const float* b = want[o].data<float>();
      double worst = 0;
      int64_t worst_at = 0;
      for (int64_t i = 0; i < kN; ++i) {
        const float in = x.data<float>()[i];
        if (std::isnan(b[i])) {
          EXPECT_TRUE(std::isnan(a[i])) << "output " << o << " at " << in << ": " << a[i];
          continue;
        }
        if (std::isinf(b[i])) {
          EXPECT_EQ(a[i], b[i]) << "output " << o << " at " << in;
          continue;
        }
        if (in == 0.0f) {  // erf(+-0) and gelu(+-0) are +-0
          EXPECT_EQ(a[i], 0.0f) << "output " << o << " at " << in;
          EXPECT_EQ(std::signbit(a[i]), std::signbit(in)) << "output " << o << " at " << in;
          continue;
        }
        const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
        if (d > worst) worst = d, worst_at = i;
      }
      EXPECT_LE(worst, tol) << pkg << " run " << run << " output " << o
                            << " at x = " << x.data<float>()[worst_at] << ": got " << a[worst_at]
                            << ", want " << b[worst_at];
    }
  }
}

TEST(CudaMath, ErfAndGeluMatchTheInterpreter) {
  const auto g = ir::parse_graph(kErfGraph);
  const std::string pkg = compile(*g, "erf");
  EXPECT_NE(preamble_of("erf").find("ANVIL_HD float fast_erf(float x) { return erff(x); }"),
            std::string::npos);
  ANVIL_REQUIRE_GPU();
  // erf within 1e-6 absolute; GELU = x/2 (1 + erf(x / sqrt 2)): 8 x that at |x| = 8
  expect_erf_matches(*g, pkg, 8e-6);
}

}  // namespace
}  // namespace anvil
