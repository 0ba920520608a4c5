// Every fixture archive in tests/fixtures/*.pt2, read with frontend::load_pt2: the text form
// parses back to an equal graph and prints identically, and the graph verifies (structure, then
// the shape rules' types against the types torch.export recorded).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "frontend/pt2_reader.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace anvil::irtest {
namespace {

/// Names (without .pt2) of every archive in the fixtures folder, sorted.
std::vector<std::string> fixture_names() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(ANVIL_FIXTURES_DIR))
    if (entry.path().extension() == ".pt2") out.push_back(entry.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::unique_ptr<ir::Graph> load(const std::string& name) {
  frontend::LoadOptions opts;
  opts.load_weights = false;
  return frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/" + name + ".pt2", opts);
}

class IrFixture : public ::testing::TestWithParam<std::string> {};

TEST(IrFixtures, AllArchivesFound) {
  auto names = fixture_names();
  EXPECT_GE(names.size(), 10u);
  for (const char* want : {"mlp_small", "mlp_dynbatch", "small_cnn", "const_and_buffer",
                           "llama_tiny", "gpt2_tiny", "bert_tiny", "block_tiny"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

TEST_P(IrFixture, TextRoundTrip) {
  auto g = load(GetParam());
  ASSERT_GT(g->num_nodes(), 0u);
  std::string text = ir::print_graph(*g);
  ir::ParseOptions opts;
  opts.source_name = GetParam() + ".ir";
  std::unique_ptr<ir::Graph> back;
  try {
    back = ir::parse_graph(text, opts);
  } catch (const Error& e) {
    FAIL() << e.what() << "\n" << text;
  }
  std::string diff;
  EXPECT_TRUE(ir::graphs_equal(*g, *back, &diff)) << diff;
  EXPECT_EQ(ir::print_graph(*back), text);
  EXPECT_TRUE(back->constants.empty());
}

TEST_P(IrFixture, VerifiesStructure) {
  auto g = load(GetParam());
  try {
    ir::verify(*g, {/*check_types=*/false});
  } catch (const Error& e) {
    FAIL() << e.what();
  }
}

TEST_P(IrFixture, VerifiesTypes) {
  auto g = load(GetParam());
  try {
    ir::verify(*g);
  } catch (const Error& e) {
    FAIL() << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, IrFixture, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace anvil::irtest
