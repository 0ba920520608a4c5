// Compiled collectives (issue 5 deliverable 6, spec/collectives.md §3): graphs with
// `_c10d_functional` ops compile without a live group and run as packages on real ranks.
// - program checks (no processes): in-place on an owned buffer, graph inputs copied, the wait of
//   tp_overlap's all_reduce placed after branch b's kernels, bucketing of coll_bucket;
// - packages run on 2 ranks (gloo and mpi) against the interpreter with the live group, the
//   graph input checked unchanged after the run;
// - tp_mlp_allreduce under `anvil launch -n 2 / -n 4 -- anvil run` against the interpreter's
//   result scaled by the world size; loading without the launcher's environment fails clearly.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/check.h"
#include "core/npy.h"
#include "dist/fake_process_group.h"
#include "dist/world.h"
#include "compiled_util.h"
#include "dist_check.h"
#include "dist_harness.h"
#include "driver/compile.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "passes/collectives.h"
#include "passes/pipeline.h"
#include "runtime/model.h"

namespace anvil::dist::test {
namespace {

namespace fs = std::filesystem;
using passes::ExternStep;
using passes::Program;

/// Deterministic rank-dependent input.
Tensor input_for(const std::vector<int64_t>& sizes, int rank) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + rank));
  return Tensor::from_vector(v, sizes);
}

// ---- program checks: no processes, no group --------------------------------------------------

TEST(CompiledCollectives, EveryFixtureCompilesWithoutAGroup) {
  for (const char* name : {"tp_mlp_allreduce", "tp_overlap", "coll_allgather", "coll_reduce_scatter",
                           "coll_bucket", "coll_legacy_inplace", "coll_mixed", "sp_block"}) {
    SCOPED_TRACE(name);
    Program p = program_of(name);
    EXPECT_FALSE(issues(p).empty());
    EXPECT_FALSE(dist::world_initialized());
    // every issue is followed by a wait of the same collective
    for (size_t i : issues(p)) EXPECT_LT(first_wait(p, passes::collective_id(*issue_at(p, i))), p.steps.size());
  }
}

TEST(CompiledCollectives, AllReduceStealsIntermediateAndCopiesGraphInput) {
  // tp_mlp: all_reduce(linear_1) runs in place on linear_1's own buffer (no copy kernel).
  Program p = program_of("tp_mlp_allreduce");
  auto is = issues(p);
  ASSERT_EQ(is.size(), 1u);
  const ExternStep& e = *issue_at(p, is[0]);
  ASSERT_EQ(e.inputs.size(), 1u);
  EXPECT_EQ(e.inputs[0].buffer, e.outputs[0].buffer);
  const auto& b = p.buffers[static_cast<size_t>(e.outputs[0].buffer)];
  EXPECT_NE(b.kind, passes::BufferKind::kInput);
  EXPECT_TRUE(step_has_node(p, is[0] - 1, "linear_1")) << passes::print_program(p);
  // coll_mixed: all_reduce(x) on the graph input x runs on a copy, never on x itself.
  Program m = program_of("coll_mixed");
  bool saw_input_collective = false;
  for (size_t i : issues(m)) {
    const ExternStep& c = *issue_at(m, i);
    for (const auto& v : c.outputs)
      EXPECT_NE(m.buffers[static_cast<size_t>(v.buffer)].kind, passes::BufferKind::kInput);
    if (c.target == std::string(passes::kCollectivePrefix) + "all_reduce") {
      saw_input_collective = true;
      EXPECT_NE(c.outputs[0].buffer, m.inputs[0].buffer);
    }
  }
  EXPECT_TRUE(saw_input_collective);
}

TEST(CompiledCollectives, OverlapPutsBranchBBetweenIssueAndWait) {
  Program p = program_of("tp_overlap");
  auto is = issues(p);
  ASSERT_EQ(is.size(), 1u);
  const size_t w = first_wait(p, passes::collective_id(*issue_at(p, is[0])));
  ASSERT_LT(w, p.steps.size());
  // branch b: linear_2 -> gelu -> linear_3 (independent of the all_reduce)
  for (const char* node : {"linear_2", "linear_3"}) {
    bool between = false;
    for (size_t i = is[0] + 1; i < w; ++i) between = between || step_has_node(p, i, node);
    EXPECT_TRUE(between) << node << " not between issue and wait:\n" << passes::print_program(p);
  }
  // the wait stays before the first reader (the final add)
  for (size_t i = 0; i < w; ++i) EXPECT_FALSE(step_has_node(p, i, "add"));
  EXPECT_GT(p.stats.collective_moves, 0);
  // without reordering the wait follows the issue at once; the peak never grows by reordering
  Program q = program_of("tp_overlap", /*reorder=*/false);
  auto qi = issues(q);
  ASSERT_EQ(qi.size(), 1u);
  EXPECT_EQ(first_wait(q, passes::collective_id(*issue_at(q, qi[0]))), qi[0] + 1);
  EXPECT_LE(p.planned_peak_bytes, q.planned_peak_bytes);
}

TEST(CompiledCollectives, BucketingMakesOneCoalescedAllReduce) {
  Program p = program_of("coll_bucket");
  auto is = issues(p);
  ASSERT_EQ(is.size(), 1u) << passes::print_program(p);
  EXPECT_EQ(issue_at(p, is[0])->outputs.size(), 4u);
  EXPECT_EQ(p.stats.collectives_bucketed, 3);
  Program q = program_of("coll_bucket", true, /*bucket=*/false);
  EXPECT_EQ(issues(q).size(), 4u);
  // the issue order (by node) is the graph's on every configuration
  std::vector<std::string> order;
  for (size_t i : issues(q)) order.push_back(passes::step_nodes(q.steps[i])[0]);
  EXPECT_EQ(order, (std::vector<std::string>{"all_reduce", "all_reduce_1", "all_reduce_2",
                                             "all_reduce_3"}));
}

TEST(CompiledCollectives, ReadersOfAGatherInputRunWhileItIsInFlight) {
  // the mm only reads x, which the all_gather also only reads: it may run between issue and
  // wait; the add reads the gathered tensor: after the wait.
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %w: f32[8, 8] = parameter "w"
    %x: f32[4, 8] = user_input
  }
  %ag: f32[8, 8] = _c10d_functional.all_gather_into_tensor.default(input=%x, group_size=2, group_name="0")
  %m: f32[4, 8] = aten.mm.default(self=%x, mat2=%w)
  %wt: f32[8, 8] = _c10d_functional.wait_tensor.default(tensor=%ag)
  %o: f32[8, 8] = aten.add.Tensor(self=%wt, other=1)
  outputs {
    user_output %o
    user_output %m
  }
})");
  g->constants["w"] = Tensor::full({8, 8}, 1.0, DType::kFloat32);
  Program p = passes::compile_to_program(*g);
  auto is = issues(p);
  ASSERT_EQ(is.size(), 1u);
  const size_t w = first_wait(p, passes::collective_id(*issue_at(p, is[0])));
  bool mm_between = false;
  for (size_t i = is[0] + 1; i < w; ++i) mm_between = mm_between || step_has_node(p, i, "m");
  EXPECT_TRUE(mm_between) << passes::print_program(p);
  for (size_t i = 0; i < w; ++i) EXPECT_FALSE(step_has_node(p, i, "o"));
  // no copy of the graph input: the all_gather reads x where it is (rule B.8)
  EXPECT_EQ(issue_at(p, is[0])->inputs[0].buffer, p.inputs[0].buffer);
}

// ---- packages on real ranks --------------------------------------------------------------------

/// Loads ANVIL_TEST_PACKAGE, runs it on a rank-dependent input and compares with the
/// interpreter (collectives through the live world group); checks the input is unchanged.
DIST_WORKER(compiled_vs_interp) {
  const std::string pkg = std::getenv("ANVIL_TEST_PACKAGE");
  const std::string fx = std::getenv("ANVIL_TEST_FIXTURE");
  auto g = frontend::load_pt2(fx);
  runtime::Model model = runtime::Model::load(pkg);
  ASSERT_EQ(model.input_specs().size(), 1u);
  std::vector<int64_t> sizes;
  for (const auto& in : g->input_specs())
    if (in.kind == ir::InputKind::kUserInput)
      for (const auto& s : in.value->type.sizes) sizes.push_back(*s.maybe_constant());
  const Tensor x = input_for(sizes, ctx.rank);
  const Tensor before = x.clone();
  for (int iter = 0; iter < 2; ++iter) {  // a second run reuses arena and handles
    const auto got = model.run({x});
    interp::Interpreter interp(*g);
    const auto want = interp.run({x.clone()});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(::anvil::test::matches_reference(got[i], want[i])) << "output " << i;
    EXPECT_TRUE(values_equal(x, before.to_doubles())) << "graph input mutated";
  }
}

/// One package run: fixture, backend, passes, world size.
struct CollCase {
  std::string fixture, backend;
  bool reorder = true, bucket = true;
  int world = 2;
};

/// Prints "tp_overlap on gloo x 2" in gtest messages.
[[maybe_unused]] void PrintTo(const CollCase& c, std::ostream* os) {
  *os << c.fixture << " on " << c.backend << " x " << c.world << (c.reorder ? "" : " no reorder")
      << (c.bucket ? "" : " no bucketing");
}

class CompiledPackages : public ::testing::TestWithParam<CollCase> {};

TEST_P(CompiledPackages, MatchInterpreter) {
  const CollCase& c = GetParam();
  if (!backend_available(c.backend)) GTEST_SKIP() << c.backend << " not available";
  const std::string pkg = compile_fixture(c.fixture, c.reorder, c.bucket);
  JobOptions o;
  o.env["ANVIL_TEST_PACKAGE"] = pkg;
  o.env["ANVIL_TEST_FIXTURE"] = fixture(c.fixture);
  o.deadline = std::chrono::milliseconds(90000);
  const auto r = run_job(c.backend, c.world, "compiled_vs_interp", o);
  EXPECT_TRUE(r.ok()) << r.all_output();
}

/// Every fixture on both backends, plus the passes switched off, plus 4 ranks where possible.
std::vector<CollCase> coll_cases() {
  std::vector<CollCase> v;
  for (const char* b : {"gloo", "mpi"})
    for (const char* f : {"coll_allgather", "coll_reduce_scatter", "coll_bucket",
                          "coll_legacy_inplace", "coll_mixed", "tp_overlap", "sp_block"})
      v.push_back({f, b});
  v.push_back({"coll_bucket", "gloo", true, false});  // unbucketed
  v.push_back({"sp_block", "gloo", true, false});
  v.push_back({"tp_overlap", "gloo", false, true});   // not reordered
  // graphs without a group size or splits baked in also run on 4 ranks
  for (const char* b : {"gloo", "mpi"})
    for (const char* f : {"tp_overlap", "coll_bucket", "coll_legacy_inplace", "sp_block_w4"})
      v.push_back({f, b, true, true, 4});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Coll, CompiledPackages, ::testing::ValuesIn(coll_cases()),
                         [](const ::testing::TestParamInfo<CollCase>& i) {
                           return i.param.fixture + "_" + i.param.backend + "_x" +
                                  std::to_string(i.param.world) +
                                  (i.param.reorder ? "" : "_noreorder") +
                                  (i.param.bucket ? "" : "_nobucket");
                         });

// A package compiled for group_size 2 run on 3 ranks: a clear error from run(), no hang.
DIST_WORKER(compiled_wrong_world) {
  runtime::Model model = runtime::Model::load(std::getenv("ANVIL_TEST_PACKAGE"));
  try {
    model.run({input_for({4, 8}, ctx.rank)});
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("group_size the model was compiled for differs"), std::string::npos) << m;
    EXPECT_NE(m.find("all_gather_into_tensor"), std::string::npos) << m;
  }
}

TEST(CompiledCollectivesErrors, GroupSizeMismatchIsAClearError) {
  if (!backend_available("gloo")) GTEST_SKIP() << "gloo not available";
  JobOptions o;
  o.env["ANVIL_TEST_PACKAGE"] = compile_fixture("coll_allgather");
  const auto r = run_job("gloo", 3, "compiled_wrong_world", o);
  EXPECT_TRUE(r.ok()) << r.all_output();
}

// ---- rules of §3 on a hand-written graph (values tell the cases apart) ------------------------

// Case 33 (shared intermediate): x = inp + 1 is all-reduced while y = x + 2 still reads it: y
// must see the pre-collective x. The in-place all_reduce_ (max) of b = 2 inp is rewritten to
// functional + wait + copy into b, which z then reads.
constexpr const char* kRulesGraph = R"(graph {
  inputs {
    %inp: f32[2, 3] = user_input
  }
  %x: f32[2, 3] = aten.add.Tensor(self=%inp, other=1)
  %ar: f32[2, 3] = _c10d_functional.all_reduce.default(input=%x, reduce_op="sum", group_name="0")
  %y: f32[2, 3] = aten.add.Tensor(self=%x, other=2)
  %w: f32[2, 3] = _c10d_functional.wait_tensor.default(tensor=%ar)
  %b: f32[2, 3] = aten.mul.Tensor(self=%inp, other=2)
  %c: f32[2, 3] = _c10d_functional.all_reduce_.default(input=%b, reduce_op="max", group_name="0")
  %w2: f32[2, 3] = _c10d_functional.wait_tensor.default(tensor=%c)
  %z: f32[2, 3] = aten.add.Tensor(self=%b, other=%w)
  outputs {
    user_output %w
    user_output %y
    user_output %z
  }
})";

DIST_WORKER(compiled_rules) {
  runtime::Model model = runtime::Model::load(std::getenv("ANVIL_TEST_PACKAGE"));
  const double r = ctx.rank, W = ctx.world;
  const Tensor inp = Tensor::full({2, 3}, 2 + r, DType::kFloat32);
  const auto out = model.run({inp});
  ASSERT_EQ(out.size(), 3u);
  const double ar = 3 * W + W * (W - 1) / 2;  // sum over ranks of 3 + r
  EXPECT_TRUE(all_equal(out[0], ar));
  EXPECT_TRUE(all_equal(out[1], 5 + r));  // a mutated x would give ar + 2
  EXPECT_TRUE(all_equal(out[2], 4 + 2 * (W - 1) + ar));
  EXPECT_TRUE(all_equal(inp, 2 + r)) << "graph input mutated";
}

/// Compiles a text-IR graph into temp_dir()/NAME.anvil (once per process) and runs `worker`
/// on it with 2 and 3 ranks over gloo and mpi.
void run_graph_on_ranks(const char* text, const std::string& name, const char* worker) {
  const std::string pkg = temp_dir() + "/" + name + ".anvil";
  if (!fs::exists(pkg)) {
    driver::CompileOptions o;
    o.jobs = 2;
    o.progress = codegen::ProgressMode::kQuiet;
    driver::compile_graph(*ir::parse_graph(text), pkg, o);
  }
  for (const char* backend : {"gloo", "mpi"}) {
    if (!backend_available(backend)) continue;  // says why (a failure where the build has it)
    JobOptions jo;
    jo.env["ANVIL_TEST_PACKAGE"] = pkg;
    for (int world : {2, 3}) {
      const auto res = run_job(backend, world, worker, jo);
      EXPECT_TRUE(res.ok()) << backend << " x " << world << "\n" << res.all_output();
    }
  }
}

TEST(CompiledCollectivesRules, SharedIntermediateAndInPlaceForm) {
  run_graph_on_ranks(kRulesGraph, "rules", "compiled_rules");
}

// dist.all_reduce(x) of a graph input, as exported (in-place form on the input): readers of x
// before the collective (a lazy y = x + 1, and k = clone(x), lowered as an alias of x) keep the
// old value; x itself ends up reduced in the caller's tensor, as in eager.
constexpr const char* kInputInPlaceGraph = R"(graph {
  inputs {
    %x: f32[2, 3] = user_input
  }
  %k: f32[2, 3] = aten.clone.default(self=%x)
  %y: f32[2, 3] = aten.add.Tensor(self=%x, other=1)
  %c: f32[2, 3] = _c10d_functional.all_reduce_.default(input=%x, reduce_op="sum", group_name="0")
  %w: f32[2, 3] = _c10d_functional.wait_tensor.default(tensor=%c)
  %z: f32[2, 3] = aten.sub.Tensor(self=%x, other=%k)
  outputs {
    user_output %y
    user_output %k
    user_output %z
  }
})";

DIST_WORKER(compiled_input_inplace) {
  runtime::Model model = runtime::Model::load(std::getenv("ANVIL_TEST_PACKAGE"));
  const double r = ctx.rank, W = ctx.world;
  Tensor x = Tensor::full({2, 3}, 2 + r, DType::kFloat32);
  const auto out = model.run({x});
  ASSERT_EQ(out.size(), 3u);
  const double sum = 2 * W + W * (W - 1) / 2;  // sum over ranks of 2 + r
  EXPECT_TRUE(all_equal(out[0], 3 + r)) << "y read the reduced x";
  EXPECT_TRUE(all_equal(out[1], 2 + r)) << "the clone saw the write";
  EXPECT_TRUE(all_equal(out[2], sum - (2 + r)));
  EXPECT_TRUE(all_equal(x, sum)) << "the input is not reduced as in eager";
}

TEST(CompiledCollectivesRules, InPlaceCollectiveOnAnInputKeepsEarlierReadersAndClones) {
  run_graph_on_ranks(kInputInPlaceGraph, "input_inplace", "compiled_input_inplace");
}

// ---- the CLI under `anvil launch` --------------------------------------------------------------

/// `anvil launch -n W -- anvil run tp.anvil` and a check of every rank's output.
void run_tp_mlp_launch(int world) {
  const std::string pkg = compile_fixture("tp_mlp_allreduce");
  const std::string dir = temp_dir() + "/launch" + std::to_string(world);
  fs::create_directories(dir);
  const Tensor x = input_for({4, 64}, 0);
  write_npy(dir + "/x.npy", x);
  bool timed_out = false;
  const auto r = run_command({ANVIL_CLI, "launch", "-n", std::to_string(world), "--", ANVIL_CLI,
                              "run", pkg, "-i", dir + "/x.npy", "-o", dir + "/out", "--backend",
                              "gloo", "-q"},
                             {{"ANVIL_DIST_TIMEOUT", "30"}}, std::chrono::milliseconds(90000),
                             &timed_out);
  ASSERT_FALSE(timed_out) << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Tensor want = world_scaled_reference("tp_mlp_allreduce", x, world);
  for (int rank = 0; rank < world; ++rank) {
    const std::string f = dir + "/out/rank" + std::to_string(rank) + "/out0.npy";
    ASSERT_TRUE(fs::exists(f)) << f << "\n" << r.output;
    EXPECT_TRUE(::anvil::test::matches_reference(read_npy(f), want)) << "rank " << rank;
  }
}

TEST(CompiledCollectivesCli, TpMlpUnderLaunchTwoRanks) { run_tp_mlp_launch(2); }
TEST(CompiledCollectivesCli, TpMlpUnderLaunchFourRanks) { run_tp_mlp_launch(4); }

TEST(CompiledCollectivesCli, BenchUnderLaunchJoinsTheWorldWithTheNamedBackend) {
  // `anvil bench --backend gloo` on every rank: each joins the world and times its runs (the
  // all_reduce needs the other rank: a rank that did not join would fail or hang)
  const std::string pkg = compile_fixture("tp_mlp_allreduce");
  bool timed_out = false;
  const auto r = run_command({ANVIL_CLI, "launch", "-n", "2", "--", ANVIL_CLI, "bench", pkg,
                              "--backend", "gloo", "-n", "5", "--warmup", "1", "-q"},
                             {{"ANVIL_DIST_TIMEOUT", "30"}}, std::chrono::milliseconds(90000),
                             &timed_out);
  ASSERT_FALSE(timed_out) << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  size_t lines = 0;
  for (size_t at = r.output.find("\"p50_ms\""); at != std::string::npos;
       at = r.output.find("\"p50_ms\"", at + 1))
    ++lines;
  EXPECT_EQ(lines, 2u) << "one JSON line per rank\n" << r.output;
  const auto bad = run_command({ANVIL_CLI, "bench", pkg, "--backend", "carrier-pigeon"}, {},
                               std::chrono::milliseconds(30000), &timed_out);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--backend needs gloo, mpi or nccl"), std::string::npos) << bad.output;
}

TEST(CompiledCollectivesCli, LoadWithoutLauncherEnvironmentSaysWhatToSet) {
  const std::string pkg = compile_fixture("tp_mlp_allreduce");
  const std::string dir = temp_dir() + "/noenv";
  fs::create_directories(dir);
  write_npy(dir + "/x.npy", input_for({4, 64}, 0));
  bool timed_out = false;
  // the parent's environment has no RANK / WORLD_SIZE (cleared explicitly for safety)
  const auto r = run_command({"env", "-u", "RANK", "-u", "WORLD_SIZE", "-u", "OMPI_COMM_WORLD_RANK",
                              "-u", "OMPI_COMM_WORLD_SIZE", "-u", "PMI_RANK", "-u", "PMI_SIZE",
                              ANVIL_CLI, "run", pkg, "-i", dir + "/x.npy", "-q"},
                             {}, std::chrono::milliseconds(30000), &timed_out);
  EXPECT_FALSE(timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("uses collectives"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT"), std::string::npos)
      << r.output;
}

// ---- spec/collectives.md section 4, lowering / buffer plan and scheduling cases (program
// checks on hand-written graphs; no processes, no group) ---------------------------------------

/// Parses `body` (nodes and outputs) after one user input x: f32[4, 8].
Program program_of_text(const std::string& body, bool reorder = true, bool bucket = true) {
  auto g = ir::parse_graph("graph {\n  inputs {\n    %x: f32[4, 8] = user_input\n  }\n" + body +
                           "}\n");
  passes::PipelineOptions o;
  o.collectives.reorder = reorder;
  o.collectives.bucket = bucket;
  return passes::compile_to_program(*g, o);
}

size_t count_loops(const Program& p) {
  size_t n = 0;
  for (const auto& st : p.steps) n += std::holds_alternative<passes::LoopKernel>(st) ? 1 : 0;
  return n;
}

/// The buffer a user output is returned in (its own buffer or the one it views).
int output_buffer(const Program& p, size_t i) { return p.outputs.at(i).buffer; }

// Case 28: wait(all_reduce(x + 42)): the add writes B, the all_reduce runs in place on B, the
// wait is on B and B is returned; no copy kernel.
TEST(CollectivesSpec, Case28_PointwiseWritesTheBufferTheAllReduceRunsOn) {
  Program p = program_of_text(R"(  %a: f32[4, 8] = aten.add.Tensor(self=%x, other=42)
  %ar: f32[4, 8] = _c10d_functional.all_reduce.default(input=%a, reduce_op="sum", group_name="0")
  %w: f32[4, 8] = _c10d_functional.wait_tensor.default(tensor=%ar)
  outputs {
    user_output %w
  }
)");
  auto is = issues(p);
  ASSERT_EQ(is.size(), 1u) << passes::print_program(p);
  const ExternStep& e = *issue_at(p, is[0]);
  EXPECT_EQ(e.inputs[0].buffer, e.outputs[0].buffer) << "not in place";
  EXPECT_EQ(count_loops(p), 1u) << "a copy kernel was added:\n" << passes::print_program(p);
  EXPECT_EQ(output_buffer(p, 0), e.outputs[0].buffer) << passes::print_program(p);
}

// Case 29: wait(all_reduce(x)) on the graph input: a copy into a new B, in place on B, the
// input is never written.
TEST(CollectivesSpec, Case29_GraphInputIsCopiedNeverWritten) {
  Program p = program_of_text(R"(  %ar: f32[4, 8] = _c10d_functional.all_reduce.default(input=%x, reduce_op="sum", group_name="0")
  %w: f32[4, 8] = _c10d_functional.wait_tensor.default(tensor=%ar)
  outputs {
    user_output %w
  }
)");
  auto is = issues(p);
  ASSERT_EQ(is.size(), 1u);
  const ExternStep& e = *issue_at(p, is[0]);
  EXPECT_NE(e.outputs[0].buffer, p.inputs[0].buffer);
  EXPECT_NE(p.buffers[static_cast<size_t>(e.outputs[0].buffer)].kind, passes::BufferKind::kInput);
  EXPECT_EQ(output_buffer(p, 0), e.outputs[0].buffer) << "a copy on return";
}

// Case 30 (28 and 29 in one graph) and case 35 (an unrelated output never gets a collective's
// buffer); case 37: every wait targets its issue's buffers, no new buffer is bound.
TEST(CollectivesSpec, Case30_35_37_TwoInPlaceCollectivesAndAnUnrelatedOutput) {
  Program p = program_of_text(R"(  %a: f32[4, 8] = aten.add.Tensor(self=%x, other=42)
  %ar0: f32[4, 8] = _c10d_functional.all_reduce.default(input=%a, reduce_op="sum", group_name="0")
  %ar1: f32[4, 8] = _c10d_functional.all_reduce.default(input=%x, reduce_op="sum", group_name="0")
  %w0: f32[4, 8] = _c10d_functional.wait_tensor.default(tensor=%ar0)
  %w1: f32[4, 8] = _c10d_functional.wait_tensor.default(tensor=%ar1)
  %other: f32[4, 8] = aten.add.Tensor(self=%x, other=22)
  outputs {
    user_output %w0
    user_output %w1
    user_output %other
  }
)", /*reorder=*/true, /*bucket=*/false);
  auto is = issues(p);
  ASSERT_EQ(is.size(), 2u) << passes::print_program(p);
  std::set<int> coll_buffers;
  for (size_t i : is) {
    const ExternStep& e = *issue_at(p, i);
    EXPECT_EQ(e.inputs[0].buffer, e.outputs[0].buffer) << "not in place";
    coll_buffers.insert(e.outputs[0].buffer);
    const size_t w = first_wait(p, passes::collective_id(e));
    ASSERT_LT(w, p.steps.size());
    for (const auto& v : std::get<ExternStep>(p.steps[w]).outputs)
      EXPECT_TRUE(v.buffer == e.outputs[0].buffer) << "case 37: the wait binds a new buffer";
  }
  EXPECT_EQ(coll_buffers.size(), 2u);
  EXPECT_EQ(coll_buffers.count(output_buffer(p, 0)), 1u);
  EXPECT_EQ(coll_buffers.count(output_buffer(p, 1)), 1u);
  EXPECT_EQ(coll_buffers.count(output_buffer(p, 2)), 0u) << "case 35";
}

// Case 38: all_gather on a graph input reads the input in place (no copy); the op creates its
// output buffer.
TEST(CollectivesSpec, Case38_AllGatherReadsTheGraphInputInPlace) {
  Program p = program_of_text(R"(  %ag: f32[8, 8] = _c10d_functional.all_gather_into_tensor.default(input=%x, group_size=2, group_name="0")
  %w: f32[8, 8] = _c10d_functional.wait_tensor.default(tensor=%ag)
  outputs {
    user_output %w
  }
)");
  auto is = issues(p);
  ASSERT_EQ(is.size(), 1u);
  const ExternStep& e = *issue_at(p, is[0]);
  EXPECT_EQ(e.inputs[0].buffer, p.inputs[0].buffer);
  EXPECT_NE(e.outputs[0].buffer, p.inputs[0].buffer);
  EXPECT_EQ(count_loops(p), 0u) << passes::print_program(p);
}

// Case 44: two independent collectives are both issued before the first wait. Case 46: with
// bucketing on they become exactly one collective, also when the graph waits for the first
// before issuing the second.
TEST(CollectivesSpec, Case44_46_IndependentCollectivesIssueTogetherAndBucket) {
  const std::string body = R"(  %a: f32[4, 8] = aten.mul.Tensor(self=%x, other=2)
  %b: f32[4, 8] = aten.add.Tensor(self=%x, other=1)
  %ar0: f32[4, 8] = _c10d_functional.all_reduce.default(input=%a, reduce_op="sum", group_name="0")
  %ar1: f32[4, 8] = _c10d_functional.all_reduce.default(input=%b, reduce_op="sum", group_name="0")
  %w0: f32[4, 8] = _c10d_functional.wait_tensor.default(tensor=%ar0)
  %w1: f32[4, 8] = _c10d_functional.wait_tensor.default(tensor=%ar1)
  %o: f32[4, 8] = aten.add.Tensor(self=%w0, other=%w1)
  outputs {
    user_output %o
  }
)";
  Program p = program_of_text(body, /*reorder=*/true, /*bucket=*/false);
  auto is = issues(p);
  ASSERT_EQ(is.size(), 2u) << passes::print_program(p);
  size_t first = p.steps.size();
  for (size_t i = 0; i < p.steps.size(); ++i)
    if (wait_at(p, i)) first = std::min(first, i);
  EXPECT_LT(is[1], first) << passes::print_program(p);
  Program q = program_of_text(body, true, /*bucket=*/true);
  EXPECT_EQ(issues(q).size(), 1u) << passes::print_program(q);
  // the same two all_reduces, waited one by one in the graph
  const std::string one_by_one = R"(  %a: f32[4, 8] = aten.mul.Tensor(self=%x, other=2)
  %b: f32[4, 8] = aten.add.Tensor(self=%x, other=1)
  %ar0: f32[4, 8] = _c10d_functional.all_reduce.default(input=%a, reduce_op="sum", group_name="0")
  %w0: f32[4, 8] = _c10d_functional.wait_tensor.default(tensor=%ar0)
  %ar1: f32[4, 8] = _c10d_functional.all_reduce.default(input=%b, reduce_op="sum", group_name="0")
  %w1: f32[4, 8] = _c10d_functional.wait_tensor.default(tensor=%ar1)
  %o: f32[4, 8] = aten.add.Tensor(self=%w0, other=%w1)
  outputs {
    user_output %o
  }
)";
  Program r = program_of_text(one_by_one, true, /*bucket=*/true);
  EXPECT_EQ(issues(r).size(), 1u) << passes::print_program(r);
  EXPECT_EQ(issues(program_of_text(one_by_one, true, false)).size(), 2u);
}

// Case 45 and case 46's dependent pair: gather -> wait -> gather -> wait keeps its order and is
// not bucketed.
TEST(CollectivesSpec, Case45_46_DependentChainKeepsItsOrder) {
  Program p = program_of_text(R"(  %ag0: f32[8, 8] = _c10d_functional.all_gather_into_tensor.default(input=%x, group_size=2, group_name="0")
  %w0: f32[8, 8] = _c10d_functional.wait_tensor.default(tensor=%ag0)
  %ag1: f32[16, 8] = _c10d_functional.all_gather_into_tensor.default(input=%w0, group_size=2, group_name="0")
  %w1: f32[16, 8] = _c10d_functional.wait_tensor.default(tensor=%ag1)
  outputs {
    user_output %w1
  }
)");
  auto is = issues(p);
  ASSERT_EQ(is.size(), 2u) << passes::print_program(p);
  const size_t w0 = first_wait(p, passes::collective_id(*issue_at(p, is[0])));
  EXPECT_LT(w0, is[1]) << passes::print_program(p);
  EXPECT_TRUE(step_has_node(p, is[0], "ag0"));
  EXPECT_TRUE(step_has_node(p, is[1], "ag1"));
}

// Case 36: wait(all_reduce((x + 10)[:2])): the collective runs on the slice of the add's buffer
// (in place, same buffer, offset 0, 2 rows), and the output is that slice.
TEST(CollectivesSpec, Case36_CollectiveOnAViewRunsOnTheUnderlyingBuffer) {
  Program p = program_of_text(R"(  %a: f32[4, 8] = aten.add.Tensor(self=%x, other=10)
  %s: f32[2, 8] = aten.slice.Tensor(self=%a, dim=0, start=0, end=2)
  %ar: f32[2, 8] = _c10d_functional.all_reduce.default(input=%s, reduce_op="sum", group_name="0")
  %w: f32[2, 8] = _c10d_functional.wait_tensor.default(tensor=%ar)
  outputs {
    user_output %w
  }
)");
  auto is = issues(p);
  ASSERT_EQ(is.size(), 1u) << passes::print_program(p);
  const ExternStep& e = *issue_at(p, is[0]);
  EXPECT_EQ(e.inputs[0].buffer, e.outputs[0].buffer) << passes::print_program(p);
  EXPECT_EQ(e.outputs[0].sizes, (std::vector<SymInt>{SymInt(2), SymInt(8)}));
  EXPECT_EQ(output_buffer(p, 0), e.outputs[0].buffer) << passes::print_program(p);
}

// Case 40: the planner never reuses a collective's buffer before its wait: no step between the
// issue and the wait writes memory overlapping the collective's buffer.
TEST(CollectivesSpec, Case40_NoReuseOfACollectiveBufferBeforeItsWait) {
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %w: f32[8, 8] = parameter "w"
    %x: f32[8, 8] = user_input
  }
  %a: f32[8, 8] = aten.mul.Tensor(self=%x, other=3)
  %ar0: f32[8, 8] = _c10d_functional.all_reduce.default(input=%a, reduce_op="sum", group_name="0")
  %m1: f32[8, 8] = aten.mm.default(self=%x, mat2=%w)
  %m2: f32[8, 8] = aten.mm.default(self=%m1, mat2=%w)
  %w0: f32[8, 8] = _c10d_functional.wait_tensor.default(tensor=%ar0)
  %m3: f32[8, 8] = aten.mm.default(self=%x, mat2=%w0)
  %m4: f32[8, 8] = aten.mm.default(self=%m3, mat2=%m2)
  outputs {
    user_output %m4
  }
})");
  g->constants["w"] = Tensor::full({8, 8}, 1.0, DType::kFloat32);
  Program p = passes::compile_to_program(*g);
  auto is = issues(p);
  ASSERT_EQ(is.size(), 1u);
  const ExternStep& e = *issue_at(p, is[0]);
  const size_t w = first_wait(p, passes::collective_id(e));
  ASSERT_LT(w, p.steps.size());
  const std::string text = passes::print_program(p);
  // [first, last) byte range of a buffer in the arena (static shapes here), or none.
  auto range = [&](int b) -> std::pair<int64_t, int64_t> {
    const auto& buf = p.buffers[static_cast<size_t>(b)];
    if (buf.kind != passes::BufferKind::kArena || buf.local) return {-1, -1};
    const auto off = buf.offset.maybe_constant(), n = buf.numel.maybe_constant();
    if (!off || !n) return {-1, -1};
    return {*off, *off + *n * static_cast<int64_t>(dtype_size(buf.dtype))};
  };
  ASSERT_GT(w, is[0] + 1) << "nothing runs while the all_reduce is in flight\n" << text;
  const int coll = e.outputs[0].buffer;
  const auto cr = range(coll);
  ASSERT_GE(cr.first, 0) << text;
  for (size_t i = is[0] + 1; i < w; ++i) {
    std::vector<int> written;
    if (const auto* g = std::get_if<passes::GemmStep>(&p.steps[i])) written.push_back(g->c.buffer);
    if (const auto* x = std::get_if<ExternStep>(&p.steps[i]))
      for (const auto& v : x->outputs) written.push_back(v.buffer);
    if (const auto* k = std::get_if<passes::LoopKernel>(&p.steps[i]))
      for (const auto& pass : k->passes)
        for (const auto* list : {&pass.pre, &pass.loop, &pass.post})
          for (const auto& st : *list) written.push_back(st.buffer);
    for (int b : written) {
      if (b < 0) continue;
      EXPECT_NE(b, coll) << "step " << i << " writes the collective's buffer\n" << text;
      const auto r = range(b);
      if (r.first >= 0) {
        EXPECT_TRUE(r.second <= cr.first || cr.second <= r.first)
            << "step " << i << " reuses the collective's memory\n" << text;
      }
    }
  }
}

}  // namespace
}  // namespace anvil::dist::test
