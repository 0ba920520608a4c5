// Strides as PyTorch has them (issue 18): every exported fixture records, for each value, the
// strides PyTorch's kernels gave it when the model was exported (graph.tensor_values). The
// reference interpreter runs each fixture with that stride audit on and must give every node
// result the same strides over its dims of size > 1 — contiguous results, channels-last kept
// where PyTorch keeps it, views as views — across every op the fixtures use. Fixtures whose
// inputs the tests build in code (no .npy files) are not covered here.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "core/npy.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "ir/op_schema.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

/// (archive, input .npy files of its first set) of every fixture with stored inputs.
std::vector<std::pair<std::string, std::vector<std::string>>> fixtures_with_inputs() {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const char* dir : {"", "aot"}) {
    const fs::path folder = fs::path(ANVIL_FIXTURES_DIR) / dir;
    std::set<std::string> stems;
    for (const auto& e : fs::directory_iterator(folder))
      if (e.path().extension() == ".pt2") stems.insert(e.path().stem().string());
    for (const std::string& stem : stems) {
      if (!fs::exists(folder / (stem + ".out0.npy"))) continue;  // inputs built in code
      std::vector<std::string> ins;
      for (int k = 0; fs::exists(folder / (stem + ".in" + std::to_string(k) + ".npy")); ++k)
        ins.push_back((folder / (stem + ".in" + std::to_string(k) + ".npy")).string());
      out.emplace_back((folder / (stem + ".pt2")).string(), ins);
    }
  }
  return out;
}

TEST(Strides, InterpreterResultsHavePyTorchsStridesOnEveryFixture) {
  std::map<std::string, int> by_target;  // op target -> results audited
  std::vector<std::string> differences;
  int fixtures = 0, skipped = 0;
  for (const auto& [pt2, ins] : fixtures_with_inputs()) {
    std::unique_ptr<ir::Graph> g;
    std::vector<Tensor> inputs;
    try {
      g = frontend::load_pt2(pt2);
      for (const auto& f : ins) inputs.push_back(read_npy(f));
    } catch (const Error&) {
      ++skipped;  // fixtures that test load errors or need a process group
      continue;
    }
    if (g->attributes.count("needs_process_group")) continue;
    interp::Interpreter ref(*g);
    std::vector<std::string> found;
    ref.audit_strides(&found);
    try {
      ref.run(inputs);
    } catch (const Error&) {
      ++skipped;  // collectives without a group, inputs converted by the AOT tests
      continue;
    }
    ++fixtures;
    for (const ir::Node* n : g->nodes())
      for (const ir::Value* v : n->outputs)
        if (v && v->is_tensor() && (!v->type.strides.empty() || v->type.sizes.empty()))
          ++by_target[n->target];  // recorded strides, or a 0-d result (nothing to differ)
    for (const auto& d : found) differences.push_back(fs::path(pt2).filename().string() + ": " + d);
  }
  std::cout << "[ strides  ] " << fixtures << " fixtures run, " << skipped << " skipped, "
            << by_target.size() << " op targets audited\n";
  std::string uncovered;
  int n_uncovered = 0;
  for (const auto& op : ir::all_ops())
    if (!by_target.count(op.name) && op.category != ir::OpCategory::kSym &&
        op.category != ir::OpCategory::kMeta) {
      uncovered += std::string(n_uncovered++ ? ", " : "") + op.name;
    }
  std::cout << "[ strides  ] table targets no fixture exercises (" << n_uncovered
            << "): " << uncovered << "\n";
  EXPECT_GT(fixtures, 50);
  EXPECT_GT(by_target.size(), 60u);
  std::string all;
  for (const auto& d : differences) all += "  " + d + "\n";
  EXPECT_TRUE(differences.empty()) << differences.size() << " results differ from PyTorch's strides:\n" << all;
}

}  // namespace
}  // namespace anvil
