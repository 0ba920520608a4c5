// Compiles are reproducible: the same .pt2 gives the same generated sources, manifest and
// constants every time, whatever the heap looks like (a pass that iterates a pointer-keyed set
// once ordered the folded constants by address, so a package's model.so and its constants table
// could come from two compiles that disagree).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "codegen/generate.h"
#include "core/error.h"
#include "frontend/pt2_reader.h"

namespace anvil::codegen {
namespace {

/// Everything a package is made of, as text.
std::string package_text(const std::string& fixture) {
  const auto graph = frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/" + fixture);
  const CpuCodegenResult r = generate_cpu(*graph, {});
  std::string out = r.manifest_json;
  for (const auto& s : r.sources) out += "\n// " + s.filename + "\n" + s.text;
  for (const auto& c : r.constants) out += "\n" + c.name + " " + c.tensor.type_str();
  return out;
}

TEST(Determinism, SameSourcesAndConstantsWhateverTheHeap) {
  // Models with several folded constants (autocast casts of weights, batch norm folded into a
  // convolution), control flow and plain layers.
  const std::vector<std::string> fixtures = {
      "aot/aot_47_autocast_bf16.pt2", "aot/aot_47_autocast_nested.pt2", "small_cnn.pt2",
      "aot/aot_66_cond_submodules.pt2", "mlp_small.pt2"};
  std::vector<std::string> first;
  for (const auto& f : fixtures) first.push_back(package_text(f));
  // Every aot fixture compiled in between, as the aot suite does, churns the heap.
  const std::string aot = std::string(ANVIL_FIXTURES_DIR) + "/aot";
  for (const auto& e : std::filesystem::directory_iterator(aot))
    if (e.path().extension() == ".pt2") {
      try {
        package_text("aot/" + e.path().filename().string());
      } catch (const Error&) {
        // unsupported fixtures (complex, cuda) are fine here
      }
    }
  for (size_t i = 0; i < fixtures.size(); ++i)
    EXPECT_EQ(package_text(fixtures[i]), first[i]) << fixtures[i] << " differs after the others";
  for (int round = 0; round < 4; ++round) {
    // Shift what the allocator hands out next.
    std::vector<std::unique_ptr<char[]>> noise;
    for (int i = 0; i < 50 + 37 * round; ++i) noise.emplace_back(new char[16 + 24 * (i % 7)]);
    for (size_t i = 0; i < fixtures.size(); ++i)
      EXPECT_EQ(package_text(fixtures[i]), first[i]) << fixtures[i] << " differs in round " << round;
  }
}

}  // namespace
}  // namespace anvil::codegen
