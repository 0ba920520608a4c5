// Control flow, spec/aot.md section 4 cases 64-75 (fixtures of scripts/export_aot_cf.py, exported
// with PyTorch 2.11): torch.cond and while_loop compile into "anvil.cond" / "anvil.while" steps
// running compiled sub-programs. Every input set of a fixture (each predicate combination or
// loop counter, and other sizes of the dynamic dims) runs on ONE package and must match
// PyTorch's outputs; the interpreter must match them too.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "aot_util.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "ir/op_schema.h"
#include "runtime/model.h"

namespace anvil::aot_test {
namespace {

namespace fs = std::filesystem;

/// Suffixes of every input set the fixture has: "", "_0", "_1", ...
std::vector<std::string> input_sets(const std::string& name) {
  std::vector<std::string> out = {""};
  for (int k = 0;; ++k) {
    const std::string suffix = "_" + std::to_string(k);
    if (!fs::exists(std::string(ANVIL_FIXTURES_DIR) + "/aot/" + name + ".in0" + suffix + ".npy"))
      break;
    out.push_back(suffix);
  }
  return out;
}

/// Runs every input set through `model` and the interpreter; both must match PyTorch.
void expect_every_set(runtime::Model& model, const std::string& name, size_t want_sets) {
  const auto sets = input_sets(name);
  EXPECT_EQ(sets.size(), want_sets) << name;
  const auto graph =
      frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/aot/" + name + ".pt2");
  interp::Interpreter ref(*graph);
  for (const std::string& suffix : sets) {
    const std::vector<Tensor> ins = read_set(name, "in", suffix);
    const std::vector<Tensor> want = read_set(name, "out", suffix);
    expect_outputs(model.run(inputs_for(model, ins)), want, name + suffix + " (compiled)");
    expect_outputs(ref.run(ins), want, name + suffix + " (interpreter)");
  }
}

/// Number of steps of `target` ("anvil.cond") in a program text.
int count_steps(const std::string& program_text, const std::string& target) {
  int n = 0;
  for (size_t p = program_text.find(target); p != std::string::npos;
       p = program_text.find(target, p + 1))
    ++n;
  return n;
}

#define ANVIL_CF_TEST(TestName, NAME, SETS, TARGET, STEPS)            \
  TEST(AotControlFlow, TestName) {                                     \
    ANVIL_AOT_LOAD(model, NAME);                                       \
    EXPECT_EQ(count_steps(model_built.program_text, TARGET), STEPS)    \
        << model_built.program_text;                                   \
    expect_every_set(model, NAME, SETS);                               \
  }

// 64: p in {F, T} at d0 = 10, then both again at d0 = 50 (same package).
ANVIL_CF_TEST(C64_CondSimple, "aot_64_cond_simple", 4u, "anvil.cond", 1)
// 65: three nested predicates, all 8 combinations; the nested conds live in the sub-programs.
ANVIL_CF_TEST(C65_CondNested, "aot_65_cond_nested", 8u, "anvil.cond", 1)
// 66: the branches are submodules whose parameters are passed as operands.
ANVIL_CF_TEST(C66_CondSubmodules, "aot_66_cond_submodules", 4u, "anvil.cond", 1)
// 67: cond on views a[:-1], b[:-1] returning (z1[2:], z2[:, 4:]); torch.export 2.11 fails on the
// spec's d0 range [3, 1024] (an internal range assertion), so the fixture uses [5, 1024].
ANVIL_CF_TEST(C67_CondViewOperands, "aot_67_cond_views_min5", 4u, "anvil.cond", 1)
// 68: three outputs, one with its own dynamic dim.
ANVIL_CF_TEST(C68_CondMultipleOutputs, "aot_68_cond_multi_out", 2u, "anvil.cond", 1)
// 69: code before and after the cond.
ANVIL_CF_TEST(C69_CondOuterCode, "aot_69_cond_outer_code", 2u, "anvil.cond", 1)
// 70: branches read intermediates of the outer graph.
ANVIL_CF_TEST(C70_CondOuterBuffers, "aot_70_cond_outer_buffers", 2u, "anvil.cond", 1)
// 71: a shape predicate; static shapes specialise it away (no cond step at all), dynamic dims
// keep it as a comparison of symbols evaluated at run time (10 vs 15, then 10 vs 5).
ANVIL_CF_TEST(C71_CondShapePredicateStatic, "aot_71_cond_shape_pred_static", 1u, "anvil.cond", 0)
ANVIL_CF_TEST(C71_CondShapePredicateDynamic, "aot_71_cond_shape_pred_dynamic", 2u, "anvil.cond",
              1)
// 72: counters 0, 1, 5 (0: the inputs pass through unchanged).
ANVIL_CF_TEST(C72_WhileSimple, "aot_72_while_simple", 3u, "anvil.while", 1)
// 73: nested loops, (i, j) in {0, 1, 5}^2.
ANVIL_CF_TEST(C73_WhileNested, "aot_73_while_nested", 9u, "anvil.while", 1)
// 74: a body with parameters (Linear 20->30->20), and a loop with code around it.
ANVIL_CF_TEST(C74_WhileParameters, "aot_74_while_parameters", 3u, "anvil.while", 1)
ANVIL_CF_TEST(C74_WhileOuterCode, "aot_74_while_outer_code", 3u, "anvil.while", 1)
// 75: the body reads closure values of the outer graph (static shapes).
ANVIL_CF_TEST(C75_WhileOuterBuffers, "aot_75_while_outer_buffers", 3u, "anvil.while", 1)

// Case 72 with counter 0 returns the inputs' values, in fresh memory (never the caller's).
TEST(AotControlFlow, C72_ZeroIterationsCopyTheInputs) {
  ANVIL_AOT_LOAD(model, "aot_72_while_simple");
  std::vector<Tensor> ins = read_set("aot_72_while_simple", "in", "");
  ASSERT_EQ(ins.size(), 3u);
  ASSERT_EQ(static_cast<int64_t>(ins[0].item()), 0);
  const auto out = model.run(ins);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(rel_error(out[1], ins[1]), 0.0);
  EXPECT_EQ(rel_error(out[2], ins[2]), 0.0);
  EXPECT_NE(out[1].data_ptr(), ins[1].data_ptr());
}

// The branch taken changes from run to run on one model, and runs on several threads agree
// with single-threaded results.
TEST(AotControlFlow, AlternatingPredicatesAcrossThreads) {
  ANVIL_AOT_LOAD(model, "aot_65_cond_nested");
  const auto sets = input_sets("aot_65_cond_nested");
  std::vector<std::vector<Tensor>> want;
  for (const auto& s : sets) want.push_back(model.run(read_set("aot_65_cond_nested", "in", s)));
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int it = 0; it < 40; ++it) {
        const size_t k = static_cast<size_t>(t + it) % sets.size();
        const auto got = model.run(read_set("aot_65_cond_nested", "in", sets[k]));
        if (got.size() != want[k].size() || rel_error(got[0], want[k][0]) != 0.0) ++bad[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

// A branch that writes an operand in place (add -> add_) is a compile error naming the node,
// not a write behind the parent program's back (it passes operands as read-only).
TEST(AotControlFlow, BranchWritingAnOperandIsAClearError) {
  auto g = frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/aot/aot_64_cond_simple.pt2");
  int changed = 0;
  for (ir::Node* n : g->nodes())
    for (auto& sub : n->subgraphs)
      for (ir::Node* s : sub->nodes())
        if (s->target == "aten.add.Tensor" && s->arg("other") &&
            s->arg("other")->kind == ir::Arg::Kind::kTensor) {
          s->target = "aten.copy_.default";  // add(self, other) -> copy_(self, src=other)
          s->schema = ir::find_op(s->target);
          for (ir::Arg& a : s->args)
            if (a.name == "other") a.name = "src";
          ++changed;
        }
  ASSERT_GT(changed, 0);
  const Built& b = build_graph("cond_branch_writes_operand", *g);
  EXPECT_NE(b.error.find("in-place writes to an operand inside a control-flow subgraph"),
            std::string::npos)
      << b.error;
  EXPECT_NE(b.error.find("node cond"), std::string::npos) << b.error;
}

// A dynamic dim outside its range is rejected before any branch runs.
TEST(AotControlFlow, OutOfRangeDimIsAClearError) {
  ANVIL_AOT_LOAD(model, "aot_64_cond_simple");
  std::vector<Tensor> ins = read_set("aot_64_cond_simple", "in", "");
  ins[1] = Tensor::full({1, 20}, 1.0, DType::kFloat32);
  ins[2] = Tensor::full({1, 20}, 1.0, DType::kFloat32);
  try {
    model.run(ins);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("range"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace anvil::aot_test
