// The model zoo (issue 18 part 3; label `zoo`): one test per model of tests/fixtures/zoo/ZOO.json.
// Each test refills the weight-stripped archive from its formulas, compiles it with
// driver::compile_pt2 (the `anvil compile` path), runs the package at every recorded shape (one
// package for the dynamic models: 2x5, 3x17, 8x128), compares with PyTorch eager's outputs
// (error relative to max |want|, within the model's tolerance from ZOO.json), and runs the
// reference interpreter against PyTorch too.
//
// Models anvil cannot compile yet are listed in EXPECTED_FAILURES.txt with their exact missing
// op targets (or error text): their test asserts the compile fails with exactly that reason, so
// it fails as soon as the ops land and the list must be updated. An "interp" line there says the
// reference interpreter fails on a model whose package is still checked against PyTorch.
//
// CI runs the models marked "ci" in ZOO.json (a CNN, a ViT-ish model, a decoder, an encoder);
// ANVIL_ZOO_ALL=1 runs every model (bench/zoo.sh).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "aot/aot_util.h"
#include "aot/formula_archive.h"
#include "driver/compile.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "runtime/model.h"
#include "zoo/zoo_fixtures.h"

namespace anvil::zoo_test {
namespace {

using aot_test::TempDir;

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : " ") + x;
  return out;
}

std::string shape_str(const Shape& s) {
  std::string out;
  for (int64_t d : s) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Compares one engine's outputs with PyTorch's for a shape set; prints the error.
void expect_matches(const std::vector<Tensor>& got, const ShapeSet& set, double tol,
                    const std::string& label) {
  ASSERT_EQ(got.size(), set.want.size()) << label << ": number of outputs";
  for (size_t k = 0; k < got.size(); ++k) {
    const double scale = max_abs(set.want[k]);
    ASSERT_GT(scale, 0.0) << label << " output " << k << ": the reference is all zeros";
    EXPECT_EQ(got[k].sizes(), set.want[k].sizes()) << label << " output " << k;
    const double err = max_rel_error(got[k].to(DType::kFloat32), set.want[k]);
    std::printf("[zoo] %s output %zu: max error %.3g of max|want| %.3g (tolerance %.0e)\n",
                label.c_str(), k, err, scale, tol);
    EXPECT_LE(err, tol) << label << " output " << k << " vs PyTorch (relative to max|want| "
                        << scale << ")";
  }
}

class Zoo : public ::testing::TestWithParam<ZooModel> {};

TEST_P(Zoo, MatchesPyTorch) {
  const ZooModel& m = GetParam();
  if (!m.ci && !run_all()) GTEST_SKIP() << "not in the CI sample; ANVIL_ZOO_ALL=1 runs it";

  TempDir dir;
  const std::string pt2 = dir / (m.name + ".pt2");
  aot_test::rebuild_formula_archive(m.name, pt2, zoo_dir());
  const std::vector<ShapeSet> sets = load_sets(m.name);
  if (m.dynamic) {
    EXPECT_EQ(sets.size(), 3u) << "dynamic models are checked at 2x5, 3x17, 8x128";
  }

  driver::CompileOptions o;
  o.jobs = 2;
  o.progress = codegen::ProgressMode::kQuiet;
  const std::string package = dir / (m.name + ".anvil");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string error = aot_test::error_of([&] { driver::compile_pt2(pt2, package, o); });

  const auto& failures = expected_failures();
  const auto it = failures.find(m.name);
  const ExpectedFailure expected = it == failures.end() ? ExpectedFailure{} : it->second;
  if (expected.compile_fails()) {
    ASSERT_FALSE(error.empty()) << m.name << " compiles now: remove it from "
                                << "tests/fixtures/zoo/EXPECTED_FAILURES.txt";
    const ExpectedFailure& want = expected;
    if (!want.missing_ops.empty()) {
      EXPECT_EQ(join(missing_ops_of(error)), join(want.missing_ops))
          << "the missing ops changed: update EXPECTED_FAILURES.txt\n"
          << error;
    } else {
      EXPECT_TRUE(aot_test::contains(error, want.error_substring))
          << "the compile error changed: update EXPECTED_FAILURES.txt\n"
          << error;
    }
    std::printf("[zoo] %s: compile fails: %s\n", m.name.c_str(), error.c_str());
    return;
  }
  ASSERT_TRUE(error.empty()) << m.name << " does not compile (list it in "
                             << "EXPECTED_FAILURES.txt only with its exact reason):\n"
                             << error;
  std::printf("[zoo] %s: compiled in %.1f s\n", m.name.c_str(), seconds_since(t0));

  const runtime::Model model = runtime::Model::load(package);
  for (const ShapeSet& set : sets) {
    const std::string label = m.name + " at " + shape_str(set.shape);
    const std::vector<Tensor> got = model.run(set.inputs);
    expect_matches(got, set, m.tolerance, label + " (anvil)");
  }

  const auto graph = frontend::load_pt2(pt2);
  interp::Interpreter interpreter(*graph);
  if (!expected.interp_error_substring.empty()) {
    const std::string why = aot_test::error_of([&] { interpreter.run(sets[0].inputs); });
    ASSERT_FALSE(why.empty()) << "the interpreter runs " << m.name << " now: remove its interp "
                              << "line from EXPECTED_FAILURES.txt";
    EXPECT_TRUE(aot_test::contains(why, expected.interp_error_substring))
        << "the interpreter's error changed: update EXPECTED_FAILURES.txt\n"
        << why;
    std::printf("[zoo] %s: the interpreter fails: %s\n", m.name.c_str(), why.c_str());
    return;
  }
  for (const ShapeSet& set : sets) {
    const std::string label = m.name + " at " + shape_str(set.shape);
    expect_matches(interpreter.run(set.inputs), set, m.tolerance, label + " (interpreter)");
  }
}

// The suite's list of models is ZOO.json itself: it must exist and agree with the fixtures.
TEST(ZooFixtures, ListIsComplete) {
  const auto& models = zoo_models();
  ASSERT_FALSE(models.empty()) << zoo_dir() << "/ZOO.json is missing or empty";
  int ci = 0;
  std::set<std::string> names;
  for (const auto& m : models) {
    names.insert(m.name);
    ci += m.ci;
    EXPECT_FALSE(m.ops.empty()) << m.name;
    EXPECT_GT(m.tolerance, 0.0) << m.name;
    EXPECT_TRUE(std::filesystem::exists(zoo_dir() + "/" + m.name + ".pt2")) << m.name;
  }
  EXPECT_GE(ci, 3) << "the CI sample should cover a CNN, a ViT-ish model and a decoder";
  for (const auto& [name, why] : expected_failures())
    EXPECT_TRUE(names.count(name)) << "EXPECTED_FAILURES.txt names unknown model " << name;
}

// The parser of the compile error the expected-failure tests rely on.
TEST(ZooFixtures, MissingOpsOfParsesTheFrontendError) {
  const std::string msg =
      "graph_module.graph.nodes: unsupported ops: aten.roll.default ×2, aten.foo.Tensor ×1 "
      "(expected targets in anvil's op table, got 3 nodes with unsupported targets)";
  EXPECT_EQ(join(missing_ops_of(msg)), "aten.foo.Tensor aten.roll.default");
  EXPECT_TRUE(missing_ops_of("a compiler failure").empty());
}

std::string model_name(const ::testing::TestParamInfo<ZooModel>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Models, Zoo, ::testing::ValuesIn(zoo_models()), model_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Zoo);

}  // namespace
}  // namespace anvil::zoo_test
