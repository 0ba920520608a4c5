// Steps where the host waits for the run's values (passes::host_syncs), and what a CPU package's
// manifest records for the runtime: the host syncs (graph_capturable) and the extern kernels it
// calls (checked against the runtime's (target, device) registry at load).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "codegen/generate.h"
#include "frontend/pt2_reader.h"
#include "passes/pipeline.h"

namespace anvil {
namespace {

struct Compiled {
  passes::Program program;
  nlohmann::json manifest;
};

Compiled compile(const std::string& fixture) {
  auto graph = frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/" + fixture + ".pt2");
  Compiled c;
  c.program = passes::compile_to_program(*graph, codegen::pipeline_for({}));
  c.manifest = nlohmann::json::parse(codegen::generate_program(c.program).manifest_json);
  return c;
}

std::string whys(const std::vector<passes::HostSync>& s) {
  std::string out;
  for (const auto& h : s) out += h.why + "; ";
  return out;
}

TEST(HostSyncs, AStaticModelHasNoneAndIsCapturable) {
  const Compiled c = compile("mlp_small");
  EXPECT_TRUE(passes::host_syncs(c.program).empty()) << whys(passes::host_syncs(c.program));
  EXPECT_TRUE(c.manifest.at("graph_capturable").get<bool>());
  EXPECT_TRUE(c.manifest.at("host_syncs").empty());
  EXPECT_TRUE(c.manifest.at("externs").empty());  // linear + gelu: GEMMs and loop kernels
}

TEST(HostSyncs, ItemNonzeroAndControlFlowAreFlagged) {
  struct Case {
    const char* fixture;
    const char* why;
  } cases[] = {
      {"aot/aot_63_item_check", "anvil.item: reads a tensor value on the host"},
      {"aot/aot_60_nonzero_mm", "anvil.item: reads a tensor value on the host"},
      {"aot/aot_64_cond_simple", "anvil.cond: the host reads the predicate"},
      {"aot/aot_72_while_simple", "anvil.while: the host reads the predicate"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.fixture);
    const Compiled c = compile(k.fixture);
    const auto syncs = passes::host_syncs(c.program);
    ASSERT_FALSE(syncs.empty());
    EXPECT_NE(whys(syncs).find(k.why), std::string::npos) << whys(syncs);
    for (const auto& h : syncs) EXPECT_LE(h.step, c.program.steps.size());
    EXPECT_FALSE(c.manifest.at("graph_capturable").get<bool>());
    EXPECT_EQ(c.manifest.at("host_syncs").size(), syncs.size());
  }
}

TEST(HostSyncs, TheManifestListsTheExternsAPackageCalls) {
  const Compiled c = compile("aot/aot_60_nonzero_mm");
  const auto externs = c.manifest.at("externs").get<std::vector<std::string>>();
  EXPECT_NE(std::find(externs.begin(), externs.end(), "anvil.nonzero"), externs.end())
      << c.manifest.at("externs").dump();
  // generated-code steps (item, assert, control flow, collectives) are not runtime kernels
  for (const auto& e : externs) EXPECT_NE(e, "anvil.item");
}

}  // namespace
}  // namespace anvil
