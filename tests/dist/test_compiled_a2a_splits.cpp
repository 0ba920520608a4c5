// spec/collectives.md §4 cases 61 and 63: all_to_all_single whose split sizes come from tensor
// data (`.tolist()` -> unbacked symbols without a bound). The output's rows are known only once
// the splits are read, so its buffers are allocated during the run (Buffer::run_time_sized,
// api->run_alloc / api->output_alloc). Fixtures: scripts/export_coll_cases.py (PyTorch 2.11,
// exported for 2 ranks).
//
// Program checks run without processes; the packages (exported for 2, 3 and 4 ranks) run on
// real ranks over gloo and mpi and are compared with the closed form and with the interpreter
// on the live group, with two different split sets on one package (rows and output sizes change
// between runs).
#include <cmath>
#include <numeric>

#include "compiled_util.h"
#include "dist/functional.h"
#include "dist_check.h"
#include "dist_harness.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "passes/collectives.h"
#include "runtime/model.h"

namespace anvil::dist::test {
namespace {

using passes::ExternStep;
using passes::Program;

constexpr const char* kCase61 = "coll_c61_a2a_split_lists";
constexpr const char* kCase63 = "coll_c63_a2a_native_splits";

/// True when `s` uses one of the program's run-time symbols.
bool uses_run_time_symbol(const Program& p, const SymInt& s) {
  std::set<std::string> syms;
  s.collect_symbols(syms);
  for (const auto& u : p.unbacked_symbols)
    if (syms.count(u)) return true;
  return false;
}

/// Cases 61 and 63 as programs: one issue whose split lists are run-time symbols, a wait after
/// it, the result buffers allocated during the run (never in the planned arena), and the issue
/// placed after the steps that read and check its splits.
void check_program(const std::string& fixture_name) {
  const Program p = program_of(fixture_name);
  const std::string text = passes::print_program(p);
  const auto is = issues(p);
  ASSERT_EQ(is.size(), 1u) << text;
  const auto& issue = std::get<ExternStep>(p.steps[is[0]]);
  EXPECT_EQ(issue.target, std::string(passes::kCollectivePrefix) + "all_to_all_single");
  int lists = 0;
  for (const auto& a : issue.attrs) {
    if (a.name != "output_split_sizes" && a.name != "input_split_sizes") continue;
    ASSERT_EQ(a.ints.size(), 2u) << text;
    for (const SymInt& s : a.ints)
      EXPECT_TRUE(s.as_symbol() && uses_run_time_symbol(p, s)) << a.name << " " << s.str();
    ++lists;
  }
  EXPECT_EQ(lists, 2) << "2 symbolic lists of unbacked ints\n" << text;
  EXPECT_LT(first_wait(p, passes::collective_id(issue)), p.steps.size()) << "a wait follows\n"
                                                                         << text;
  EXPECT_GT(first_wait(p, passes::collective_id(issue)), is[0]);
  // every split value is read (anvil.item) and checked (anvil.assert) before the issue
  for (size_t i = is[0] + 1; i < p.steps.size(); ++i) {
    if (const auto* e = std::get_if<ExternStep>(&p.steps[i])) {
      EXPECT_TRUE(e->target != "anvil.item" && e->target != "anvil.assert")
          << e->name << " after the issue\n"
          << text;
    }
  }
  // the collective's result buffer and the output: allocated during the run
  ASSERT_EQ(issue.outputs.size(), 1u);
  const auto& out = p.buffers[static_cast<size_t>(issue.outputs[0].buffer)];
  EXPECT_TRUE(out.run_time_sized) << out.name;
  EXPECT_TRUE(uses_run_time_symbol(p, out.numel)) << out.numel.str();
  ASSERT_EQ(p.outputs.size(), 1u);
  EXPECT_TRUE(p.buffers[static_cast<size_t>(p.outputs[0].buffer)].run_time_sized);
  EXPECT_EQ(p.run_allocs.size(), 2u) << text;
  EXPECT_EQ(p.planned_peak_bytes, 0) << "nothing else needs the arena\n" << text;
}

TEST(CollectivesSpecCases, Case61_SplitListsFromTensorsAreUnbackedSymbols) { check_program(kCase61); }
TEST(CollectivesSpecCases, Case63_NativeA2aWithDataDependentSplitsCompiles) { check_program(kCase63); }

// ---- on 2 ranks --------------------------------------------------------------------------------

/// Inputs of rank r: x (rows, 5) where block j (in_splits[j] rows) is filled with j + 1 + 10 r
/// plus a small column ramp, and the split tensors.
std::vector<Tensor> a2a_inputs(int rank, const std::vector<int64_t>& in_splits,
                               const std::vector<int64_t>& out_splits) {
  const int64_t rows = std::accumulate(in_splits.begin(), in_splits.end(), int64_t{0});
  std::vector<double> x;
  for (size_t j = 0; j < in_splits.size(); ++j)
    for (int64_t i = 0; i < in_splits[j]; ++i)
      for (int c = 0; c < 5; ++c) x.push_back(static_cast<double>(j) + 1 + 10 * rank + 0.25 * c);
  std::vector<double> in(in_splits.begin(), in_splits.end()), out(out_splits.begin(), out_splits.end());
  const int64_t w = static_cast<int64_t>(in_splits.size());
  return {Tensor::from_vector(x, {rows, 5}).to(DType::kFloat32, true),
          Tensor::from_vector(in, {w}).to(DType::kInt64, true),
          Tensor::from_vector(out, {w}).to(DType::kInt64, true)};
}

/// The all_to_all's result on rank r: block j has out_splits[j] rows from rank j, chunk r of
/// its input, filled with r + 1 + 10 j + 0.25 c.
std::vector<double> exchanged(int rank, const std::vector<int64_t>& out_splits) {
  std::vector<double> y;
  for (size_t j = 0; j < out_splits.size(); ++j)
    for (int64_t i = 0; i < out_splits[j]; ++i)
      for (int c = 0; c < 5; ++c) y.push_back(rank + 1 + 10.0 * static_cast<double>(j) + 0.25 * c);
  return y;
}

/// Runs the package of ANVIL_TEST_FIXTURE on two split sets (send[r][j]: rows rank r sends to
/// rank j): spec case 61's send[r][j] = (j + 1)(r + 1), then (r + 2 j) mod 3, which has empty
/// chunks. Checks the closed form of the fixture's output (case 61: y / column sums; case 63:
/// 2 y + 1) and the interpreter on the live group.
DIST_WORKER(a2a_split_lists) {
  const std::string name = std::getenv("ANVIL_TEST_FIXTURE");
  const bool normalized = name.find("c61") != std::string::npos;
  auto g = frontend::load_pt2(name);
  runtime::Model model = runtime::Model::load(std::getenv("ANVIL_TEST_PACKAGE"));
  const int r = ctx.rank, w = ctx.world;
  for (int set = 0; set < 2; ++set) {
    auto send = [&](int from, int to) -> int64_t {
      return set == 0 ? (to + 1) * (from + 1) : (from + 2 * to) % 3;
    };
    std::vector<int64_t> in, out;
    for (int j = 0; j < w; ++j) {
      in.push_back(send(r, j));
      out.push_back(send(j, r));
    }
    SCOPED_TRACE("rank " + std::to_string(r) + " of " + std::to_string(w) + ", split set " +
                 std::to_string(set));
    const auto xs = a2a_inputs(r, in, out);
    const auto got = model.run(xs);
    ASSERT_EQ(got.size(), 1u);
    const int64_t rows = std::accumulate(out.begin(), out.end(), int64_t{0});
    ASSERT_EQ(got[0].sizes(), (Shape{rows, 5}));
    std::vector<double> want = exchanged(r, out);
    if (normalized) {
      for (int c = 0; c < 5; ++c) {
        double sum = 0;
        for (int64_t i = 0; i < rows; ++i) sum += want[static_cast<size_t>(i * 5 + c)];
        for (int64_t i = 0; i < rows; ++i) want[static_cast<size_t>(i * 5 + c)] /= sum;
      }
    } else {
      for (double& v : want) v = 2 * v + 1;
    }
    const auto values = got[0].to_doubles();
    ASSERT_EQ(values.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(values[i], want[i], 1e-5 * std::max(1.0, std::fabs(want[i]))) << "element " << i;
    std::vector<Tensor> copies;
    for (const auto& x : xs) copies.push_back(x.clone());
    interp::Interpreter interp(*g);
    const auto ref = interp.run(copies);
    ASSERT_EQ(ref.size(), 1u);
    functional::wait_tensor(ref[0]);
    ASSERT_EQ(ref[0].sizes(), got[0].sizes());
    const auto rv = ref[0].to_doubles();
    for (size_t i = 0; i < rv.size(); ++i)
      ASSERT_NEAR(values[i], rv[i], 1e-5 * std::max(1.0, std::fabs(rv[i]))) << "vs interpreter";
  }
  // splits that do not add up to the rows: the export's own check fails, on every rank, and
  // the model stays usable
  const auto bad = a2a_inputs(r, std::vector<int64_t>(static_cast<size_t>(w), 1),
                              std::vector<int64_t>(static_cast<size_t>(w), 1));
  const Tensor more_rows = Tensor::zeros({w + 1, 5}, DType::kFloat32);
  try {
    model.run({more_rows, bad[1], bad[2]});
    ADD_FAILURE() << "splits summing to " << w << " for " << w + 1 << " rows ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("u0 + u1"), std::string::npos) << e.what();
  }
}

/// One a2a fixture (exported for `world` ranks) on one backend.
struct A2aRun {
  std::string fixture, backend;
  int world = 2;
};

class A2aSplitPackages : public ::testing::TestWithParam<A2aRun> {};

TEST_P(A2aSplitPackages, MatchClosedFormAndInterpreter) {
  const A2aRun& c = GetParam();
  if (!backend_available(c.backend)) GTEST_SKIP() << c.backend << " not available";
  JobOptions o;
  o.env["ANVIL_TEST_PACKAGE"] = compile_fixture(c.fixture);
  o.env["ANVIL_TEST_FIXTURE"] = fixture(c.fixture);
  o.deadline = std::chrono::milliseconds(90000);
  const auto r = run_job(c.backend, c.world, "a2a_split_lists", o);
  EXPECT_TRUE(r.ok()) << r.all_output();
}

/// Cases 61 and 63 on both backends with 2, 3 and 4 ranks.
std::vector<A2aRun> a2a_runs() {
  std::vector<A2aRun> v;
  for (const char* f : {kCase61, kCase63})
    for (int w : {2, 3, 4})
      for (const char* b : {"gloo", "mpi"})
        v.push_back({w == 2 ? std::string(f) : f + std::string("_w") + std::to_string(w), b, w});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Coll, A2aSplitPackages, ::testing::ValuesIn(a2a_runs()),
                         [](const ::testing::TestParamInfo<A2aRun>& i) {
                           return std::string(i.param.fixture.find("c61") != std::string::npos
                                                  ? "Case61_"
                                                  : "Case63_") +
                                  i.param.backend + "_w" + std::to_string(i.param.world);
                         });

}  // namespace
}  // namespace anvil::dist::test
