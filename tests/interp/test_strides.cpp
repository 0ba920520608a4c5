// Strides as PyTorch has them (issue 18): every exported fixture records, for each value, the
// strides PyTorch's kernels gave it when the model was exported (graph.tensor_values). The
// reference interpreter runs each fixture with that stride audit on and must give every node
// result the same strides over its dims of size > 1 — contiguous results, channels-last kept
// where PyTorch keeps it, views as views — across every op the fixtures use. The collective
// fixtures (tests/fixtures/coll, inputs built in code) run on random inputs of their specs as
// rank 0 of a fake group of the export's world size: the values are not a real run's, the
// shapes and strides are.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "core/npy.h"
#include "dist/fake_process_group.h"
#include "dist/world.h"
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

/// The collective fixtures and the world size each was exported for (2, or the _wN suffix).
std::vector<std::pair<std::string, int>> collective_fixtures() {
  std::vector<std::pair<std::string, int>> out;
  const fs::path folder = fs::path(ANVIL_FIXTURES_DIR) / "coll";
  for (const auto& e : fs::directory_iterator(folder)) {
    if (e.path().extension() != ".pt2") continue;
    const std::string stem = e.path().stem().string();
    const size_t w = stem.rfind("_w");
    int size = 2;
    if (w != std::string::npos && w + 2 < stem.size() &&
        stem.find_first_not_of("0123456789", w + 2) == std::string::npos)
      size = std::stoi(stem.substr(w + 2));
    out.emplace_back(e.path().string(), size);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Strides, InterpreterResultsHavePyTorchsStridesOnEveryFixture) {
  std::map<std::string, int> by_target;  // op target -> results audited
  std::vector<std::string> differences;
  int fixtures = 0, skipped = 0;
  // Collective graphs as rank 0 of a fake group (every rank holding rank 0's data).
  ASSERT_FALSE(dist::world_initialized());  // the audit builds its own worlds
  for (const auto& [pt2, size] : collective_fixtures()) {
    std::unique_ptr<ir::Graph> g;
    try {
      g = frontend::load_pt2(pt2);
    } catch (const Error&) {
      ++skipped;
      continue;
    }
    std::vector<Tensor> inputs;
    bool static_shapes = true;
    for (const auto& spec : g->input_specs()) {
      if (spec.kind != ir::InputKind::kUserInput) continue;
      Shape sizes;
      for (const auto& d : spec.value->type.sizes) {
        static_shapes = static_shapes && d.is_constant();
        sizes.push_back(d.is_constant() ? d.constant() : 1);
      }
      inputs.push_back(Tensor::zeros(sizes, spec.value->type.dtype));
    }
    if (!static_shapes) {
      ++skipped;
      continue;
    }
    dist::clear_world();
    dist::set_world(std::make_shared<dist::FakeProcessGroup>(0, size));
    interp::Interpreter ref(*g);
    std::vector<std::string> found;
    ref.audit_strides(&found);
    try {
      ref.run(inputs);
    } catch (const Error&) {
      ++skipped;  // point-to-point graphs and other fixtures a fake group cannot run
      continue;
    }
    ++fixtures;
    for (const ir::Node* n : g->nodes())
      for (const ir::Value* v : n->outputs)
        if (v && v->is_tensor() && (!v->type.strides.empty() || v->type.sizes.empty()))
          ++by_target[n->target];
    for (const auto& d : found) differences.push_back(fs::path(pt2).filename().string() + ": " + d);
  }
  dist::clear_world();
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
