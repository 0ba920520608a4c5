// The op table's `lowering` column (src/ops/ops.def) against the code: every row names a
// lowering that fits its category, every Extern row has a CPU runtime kernel, and a compile that
// meets ops with no lowering lists every such node at once.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/error.h"
#include "ir/op_schema.h"
#include "ir/parser.h"
#include "passes/graph_passes.h"
#include "passes/pipeline.h"
#include "runtime/externs.h"

namespace anvil {
namespace {

using ir::Lowering;
using ir::OpCategory;

TEST(LoweringTable, EveryRowNamesALoweringThatFitsItsCategory) {
  int extern_rows = 0;
  for (const ir::OpSchema& op : ir::all_ops()) {
    SCOPED_TRACE(op.name);
    const Lowering l = op.lowering;
    switch (op.category) {
      case OpCategory::kSym:
        EXPECT_EQ(l, Lowering::kSym);
        break;
      case OpCategory::kMeta:
        EXPECT_EQ(l, Lowering::kMeta);
        break;
      case OpCategory::kCollective:
        EXPECT_EQ(l, Lowering::kCollective);
        break;
      case OpCategory::kControlFlow:
        EXPECT_EQ(l, Lowering::kControlFlow);
        break;
      default:
        // The rows handled by a category of their own name no other lowering, and the others
        // none of theirs.
        EXPECT_TRUE(l != Lowering::kSym && l != Lowering::kMeta && l != Lowering::kCollective &&
                    l != Lowering::kControlFlow)
            << ir::lowering_name(l);
        // InPlace exactly for the ops that write an argument.
        EXPECT_EQ(l == Lowering::kInPlace, op.mutates_arg >= 0) << ir::lowering_name(l);
    }
    if (l == Lowering::kExtern) {
      ++extern_rows;
      EXPECT_NE(runtime::find_extern(op.name), nullptr)
          << "ops.def says Extern but the CPU runtime registers no kernel for it";
    }
  }
  EXPECT_GT(extern_rows, 20);
}

TEST(LoweringTable, NamesAreTheOpsDefSpelling) {
  EXPECT_STREQ(ir::lowering_name(Lowering::kPointwise), "Pointwise");
  EXPECT_STREQ(ir::lowering_name(Lowering::kControlFlow), "ControlFlow");
  EXPECT_STREQ(ir::lowering_name(Lowering::kNone), "None");
  EXPECT_EQ(ir::find_op("aten.gelu.default")->lowering, Lowering::kPointwise);
  EXPECT_EQ(ir::find_op("aten.mm.default")->lowering, Lowering::kGemm);
  EXPECT_EQ(ir::find_op("aten.gather.default")->lowering, Lowering::kExtern);
  EXPECT_EQ(ir::find_op("aten.cross_entropy_loss.default")->lowering, Lowering::kDecompose);
}

const char* kThreeOps = R"(graph {
  inputs {
    %x: f32[4, 8] = user_input
  }
  %a: f32[4, 8] = aten.exp.default(self=%x)
  %b: f32[4, 8] = aten.relu.default(self=%a)
  %c: f32[4, 8] = aten.sin.default(self=%b)
  outputs {
    user_output %c
  }
})";

// Ops without a lowering: every such node is named in one error, before any lowering runs.
TEST(LoweringTable, ACompileListsEveryUnlowerableNodeAtOnce) {
  auto g = ir::parse_graph(kThreeOps);
  ASSERT_NO_THROW(passes::compile_to_program(*g));  // all three lower as they are
  // The same ops as interpreter-only rows (copies of their schemas with lowering None).
  ir::OpSchema exp_none = *ir::find_op("aten.exp.default");
  ir::OpSchema sin_none = *ir::find_op("aten.sin.default");
  exp_none.lowering = sin_none.lowering = Lowering::kNone;
  for (ir::Node* n : g->nodes()) {
    if (n->target == "aten.exp.default") n->schema = &exp_none;
    if (n->target == "aten.sin.default") n->schema = &sin_none;
  }
  const auto missing = passes::unlowered_nodes(*g);
  ASSERT_EQ(missing.size(), 2u);
  try {
    passes::compile_to_program(*g);
    FAIL() << "compiled a graph holding ops with no lowering";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("2 node(s) use ops the compiler cannot lower"), std::string::npos) << m;
    EXPECT_NE(m.find("a (aten.exp.default)"), std::string::npos) << m;
    EXPECT_NE(m.find("c (aten.sin.default)"), std::string::npos) << m;
    EXPECT_EQ(m.find("aten.relu.default"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace anvil
