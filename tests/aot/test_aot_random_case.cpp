// spec/aot.md section 4, case 46: x + torch.randn(4, 1, 4, 4) (aot_46_randn, outputs computed by
// PyTorch after torch.manual_seed(0)). The compiled package reproduces PyTorch's values on the
// first run of a fresh Model (seed 0), continues the stream on later runs (new values each
// time, as torch does), restarts it for a new Model, follows ANVIL_SEED, and is not folded into
// a constant. The interpreter gives the same values from the process-wide generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "aot_util.h"
#include "core/random.h"
#include "common/check.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "ir/parser.h"

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

// randperm: an extern on the Model's generator (anvil's own algorithm, not PyTorch's values): a
// permutation of 0..n-1 of the requested dtype, the same for every fresh Model under one seed
// and equal to the interpreter's under that seed, new on the next run, changed by ANVIL_SEED.
TEST(AotRandom, RandpermIsASeededPermutation) {
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[10] = user_input
  }
  %p: i64[10] = aten.randperm.default(n=10)
  %q: i32[7] = aten.randperm.default(n=7, *dtype=i32)
  %y: f32[10] = aten.index.Tensor(self=%x, indices=[%p])
  outputs {
    user_output %p
    user_output %q
    user_output %y
  }
})");
  const Built& b = build_graph("randperm", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  EXPECT_NE(b.program_text.find("aten.randperm.default"), std::string::npos)
      << "randperm must stay a run-time extern call:\n" << b.program_text;
  std::vector<double> xv;
  for (int i = 0; i < 10; ++i) xv.push_back(10.0 * i);
  const std::vector<Tensor> ins = {Tensor::from_vector(xv, {10}).to(DType::kFloat32, true)};
  runtime::Model m = load(b);
  const auto r1 = m.run(ins);
  ASSERT_EQ(r1.size(), 3u);
  EXPECT_EQ(r1[0].dtype(), DType::kInt64);
  EXPECT_EQ(r1[1].dtype(), DType::kInt32);
  for (const auto& [t, n] : {std::pair{r1[0], 10}, std::pair{r1[1], 7}}) {
    std::vector<double> v = t.to_doubles();
    std::sort(v.begin(), v.end());
    for (int i = 0; i < n; ++i) EXPECT_EQ(v[static_cast<size_t>(i)], i);
  }
  const std::vector<double> p1 = r1[0].to_doubles(), y1 = r1[2].to_doubles();
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(y1[i], 10.0 * p1[i]) << "the permutation indexes x";
  EXPECT_NE(m.run(ins)[0].to_doubles(), p1) << "the stream goes on";
  EXPECT_EQ(load(b).run(ins)[0].to_doubles(), p1) << "a fresh Model restarts at seed 0";
  interp::Interpreter ref(*g);
  default_generator().manual_seed(0);
  EXPECT_EQ(ref.run(ins)[0].to_doubles(), p1) << "the interpreter draws the same permutation";
  ::setenv("ANVIL_SEED", "5", 1);
  runtime::Model seeded = load(b);
  ::unsetenv("ANVIL_SEED");
  EXPECT_NE(seeded.run(ins)[0].to_doubles(), p1);
}

}  // namespace
}  // namespace anvil::aot_test
