// Golden test: the generated C++ of one tiny graph is compared with a checked-in copy, so that a
// change of the code generator shows up as a readable diff. Regenerate after an intended change
// with ANVIL_UPDATE_GOLDEN=1 (then review the diff).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "codegen/generate.h"
#include "ir/parser.h"

namespace anvil {
namespace {

const char* kTiny = R"(graph {
  inputs {
    %w: f32[8] = parameter "w"
    %x: f32[4, 8] = user_input
  }
  %a: f32[4, 8] = aten.mul.Tensor(self=%x, other=2.0)
  %b: f32[4, 8] = aten.add.Tensor(self=%a, other=%w)
  %r: f32[4, 8] = aten.relu.default(self=%b)
  %s: f32[4] = aten.sum.dim_IntList(self=%r, dim=[1])
  outputs {
    user_output %r
    user_output %s
  }
})";

TEST(Golden, TinyGraphSource) {
  auto g = ir::parse_graph(kTiny);
  g->constants["w"] = Tensor::full({8}, 0.5, DType::kFloat32);
  codegen::CpuCodegenOptions o;
  o.target = "x86_64";
  o.num_translation_units = 1;
  const auto r = codegen::generate_cpu(*g, o);
  std::string text;
  for (const auto& s : r.sources) text += "=== " + s.filename + "\n" + s.text;
  text += "=== manifest.json\n" + r.manifest_json + "\n";
  const std::string path = std::string(ANVIL_SOURCE_DIR) + "/tests/codegen/golden/tiny_graph.txt";
  if (std::getenv("ANVIL_UPDATE_GOLDEN")) {
    std::ofstream(path) << text;
    GTEST_SKIP() << "golden file rewritten: " << path;
  }
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << "missing golden file " << path << " (run with ANVIL_UPDATE_GOLDEN=1)";
  std::stringstream want;
  want << f.rdbuf();
  if (want.str() == text) return;
  // point at the first differing line
  std::istringstream a(want.str()), b(text);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ha = static_cast<bool>(std::getline(a, la)),
               hb = static_cast<bool>(std::getline(b, lb));
    if (!ha && !hb) break;
    if (la != lb || ha != hb) {
      ADD_FAILURE() << "generated source differs from " << path << " at line " << line
                    << "\n  golden:    " << la << "\n  generated: " << lb
                    << "\n(ANVIL_UPDATE_GOLDEN=1 rewrites it)";
      break;
    }
  }
}

}  // namespace
}  // namespace anvil
