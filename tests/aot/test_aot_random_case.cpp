// spec/aot.md section 4, case 46: x + torch.randn(4, 1, 4, 4) (aot_46_randn, outputs computed by
// PyTorch after torch.manual_seed(0)). The compiled package reproduces PyTorch's values on the
// first run of a fresh Model (seed 0), continues the stream on later runs (new values each
// time, as torch does), restarts it for a new Model, follows ANVIL_SEED, and is not folded into
// a constant. The interpreter gives the same values from the process-wide generator.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "aot_util.h"
#include "core/random.h"
#include "common/check.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"

namespace anvil::aot_test {
namespace {

constexpr const char* kCase = "aot_46_randn";

/// The suite's comparison (tests/common/check.h): largest |a - b| relative to max(1, max |b|),
/// +inf on a shape mismatch or a NaN / infinity in one and not the other.
double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return INFINITY;
  return ::anvil::test::rel_error(a.to_doubles(), b.to_doubles());
}

TEST(AotRandom, C46_FirstRunMatchesTorchSeed0) {
  ANVIL_AOT_LOAD(model, kCase);
  EXPECT_NE(model_built.program_text.find("aten.randn.default"), std::string::npos)
      << "randn must stay a run-time extern call, not a folded constant:\n"
      << model_built.program_text;
  const auto ins = read_set(kCase, "in", "");
  const auto want = read_set(kCase, "out", "");
  const auto got1 = model.run(ins);
  ASSERT_EQ(got1.size(), 1u);
  EXPECT_EQ(got1[0].sizes(), (Shape{4, 1, 4, 4}));
  EXPECT_LE(max_abs_diff(got1[0], want[0]), 1e-5);

  // Run 2 continues the stream: new, finite values (torch's second randn would differ too).
  const auto got2 = model.run(ins);
  EXPECT_GT(max_abs_diff(got2[0], got1[0]), 1e-3);
  for (double v : got2[0].to_doubles()) EXPECT_TRUE(std::isfinite(v));

  // A fresh Model restarts at seed 0.
  runtime::Model fresh = load(model_built);
  EXPECT_LE(max_abs_diff(fresh.run(ins)[0], want[0]), 1e-5);
}

TEST(AotRandom, C46_AnvilSeedChangesTheStream) {
  ANVIL_AOT_LOAD(model, kCase);
  const auto ins = read_set(kCase, "in", "");
  const auto want = read_set(kCase, "out", "");
  ::setenv("ANVIL_SEED", "1", 1);
  runtime::Model seeded = load(model_built);
  runtime::Model seeded2 = load(model_built);
  ::unsetenv("ANVIL_SEED");
  const Tensor a = seeded.run(ins)[0], b = seeded2.run(ins)[0];
  EXPECT_GT(max_abs_diff(a, want[0]), 1e-3);
  EXPECT_EQ(max_abs_diff(a, b), 0.0) << "the same seed gives the same stream";
  ::setenv("ANVIL_SEED", "not-a-seed", 1);
  ANVIL_EXPECT_ERROR(load(model_built), "ANVIL_SEED is not a seed");
  ::unsetenv("ANVIL_SEED");
}

TEST(AotRandom, C46_ConcurrentRunnersShareOneStream) {
  ANVIL_AOT_LOAD(model, kCase);
  runtime::ModelOptions options;
  options.num_runners = 2;
  runtime::Model m = load(model_built, options);
  const auto ins = read_set(kCase, "in", "");
  const auto want = read_set(kCase, "out", "");
  // Two runs at once: each randn fill holds the generator's lock, so one run gets torch's first
  // draw and the other the next one, whichever order the threads take.
  Tensor a, b;
  std::thread t1([&] { a = m.run(ins)[0]; });
  std::thread t2([&] { b = m.run(ins)[0]; });
  t1.join();
  t2.join();
  ASSERT_TRUE(a.defined() && b.defined());
  const double da = max_abs_diff(a, want[0]), db = max_abs_diff(b, want[0]);
  EXPECT_LE(std::min(da, db), 1e-5);
  EXPECT_GT(std::max(da, db), 1e-3);
  for (const Tensor& t : {a, b})
    for (double v : t.to_doubles()) EXPECT_TRUE(std::isfinite(v));
}

TEST(AotRandom, C46_InterpreterMatchesTorchSeed0) {
  auto graph = frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/aot/" + kCase + ".pt2");
  interp::Interpreter ref(*graph);
  const auto ins = read_set(kCase, "in", "");
  const auto want = read_set(kCase, "out", "");
  default_generator().manual_seed(0);
  const auto got = ref.run(ins);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LE(max_abs_diff(got[0], want[0]), 1e-5);
  EXPECT_GT(max_abs_diff(ref.run(ins)[0], want[0]), 1e-3) << "the stream goes on";
}

}  // namespace
}  // namespace anvil::aot_test
