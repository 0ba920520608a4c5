// Integration: the bundled torch.export fixtures compiled to C++, built into one shared library
// with the system compiler, and run through the minimal AnvilRtApi of harness.h. Outputs match
// PyTorch's (fixture .npy files) and the interpreter within 1e-4; buffer mutations persist
// across runs; one library serves every batch size of a dynamic-shape model.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/npy.h"
#include "frontend/pt2_reader.h"
#include "harness.h"
#include "interp/interpreter.h"

namespace anvil {
namespace {

std::string fixture(const std::string& file) {
  return std::string(ANVIL_FIXTURES_DIR) + "/" + file;
}
bool exists(const std::string& file) { return std::filesystem::exists(fixture(file)); }

std::vector<Tensor> read_inputs(const std::string& name, const std::string& suffix) {
  std::vector<Tensor> out;
  for (int k = 0; exists(name + ".in" + std::to_string(k) + suffix + ".npy"); ++k)
    out.push_back(read_npy(fixture(name + ".in" + std::to_string(k) + suffix + ".npy")));
  return out;
}

std::vector<Tensor> read_outputs(const std::string& name, const std::string& suffix) {
  std::vector<Tensor> out;
  for (int k = 0; exists(name + ".out" + std::to_string(k) + suffix + ".npy"); ++k)
    out.push_back(read_npy(fixture(name + ".out" + std::to_string(k) + suffix + ".npy")));
  return out;
}

const char* kModels[] = {"mlp_small",  "mlp_dynbatch", "small_cnn", "const_and_buffer",
                         "llama_tiny", "gpt2_tiny",    "bert_tiny", "block_tiny"};

/// All fixtures in one library, built once for the suite.
class FixtureCodegen : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<std::pair<std::string, const ir::Graph*>> graphs;
    for (const char* m : kModels) {
      graphs_[m] = frontend::load_pt2(fixture(std::string(m) + ".pt2"));
      graphs.emplace_back(m, graphs_[m].get());
    }
    codegen::CpuCodegenOptions o;
    o.num_translation_units = 1;
    o.parallel_min_work = 256;  // exercise the parallel_for path on small shapes
    lib_ = testing::build_library(graphs, o);
  }
  static void TearDownTestSuite() {
    lib_.reset();
    graphs_.clear();
  }

  /// Runs every shape set of `name` and compares with PyTorch and the interpreter.
  void check_model(const std::string& name) {
    auto& model = lib_->model(name);
    interp::Interpreter ref(*graphs_[name]);
    for (const std::string suffix : {"", "_0", "_1"}) {
      auto ins = read_inputs(name, suffix);
      if (ins.empty()) continue;
      const auto want = read_outputs(name, suffix);
      const auto got = model.run(ins);
      const auto interp = ref.run(ins);
      ASSERT_EQ(got.size(), want.size()) << name << suffix;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_LE(testing::rel_error(got[i], want[i]), 1e-4) << name << suffix << " output " << i;
        EXPECT_LE(testing::rel_error(got[i], interp[i]), 1e-4) << name << suffix << " output " << i;
      }
    }
  }

  static std::map<std::string, std::unique_ptr<ir::Graph>> graphs_;
  static std::unique_ptr<testing::TestLibrary> lib_;
};

std::map<std::string, std::unique_ptr<ir::Graph>> FixtureCodegen::graphs_;
std::unique_ptr<testing::TestLibrary> FixtureCodegen::lib_;

TEST_F(FixtureCodegen, MlpSmall) { check_model("mlp_small"); }

TEST_F(FixtureCodegen, MlpDynbatchEveryBatch) {
  check_model("mlp_dynbatch");
  auto& model = lib_->model("mlp_dynbatch");
  interp::Interpreter ref(*graphs_["mlp_dynbatch"]);
  for (int64_t b : {1, 2, 7, 33, 64}) {
    const Tensor x = testing::random_tensor({b, 256}, DType::kFloat32, static_cast<uint64_t>(b));
    const auto got = model.run({x});
    const auto want = ref.run({x});
    ASSERT_EQ(got[0].sizes(), (Shape{b, 256}));
    EXPECT_LE(testing::rel_error(got[0], want[0]), 1e-4) << "batch " << b;
  }
}

TEST_F(FixtureCodegen, SmallCnnConvThroughExtern) {
  check_model("small_cnn");
  const auto& gen = lib_->model("small_cnn").generated();
  EXPECT_EQ(gen.stats.batch_norms_folded, 1);
  EXPECT_NE(gen.manifest_json.find("\"aten.conv2d.default\""), std::string::npos);
  // The folded conv weight is an immutable constant: the extern call says so, so the runtime
  // may keep oneDNN's reordered copy of it (runtime/kernels/conv.h).
  int flagged = 0;
  for (const auto& s : gen.sources)
    for (size_t at = s.text.find("\"weight_constant\""); at != std::string::npos;
         at = s.text.find("\"weight_constant\"", at + 1))
      ++flagged;
  EXPECT_GE(flagged, 1);
}

TEST_F(FixtureCodegen, ConstAndBufferMutationPersists) {
  auto& model = lib_->model("const_and_buffer");
  interp::Interpreter ref(*graphs_["const_and_buffer"]);
  const auto ins = read_inputs("const_and_buffer", "");
  const auto want = read_outputs("const_and_buffer", "");
  for (int run = 0; run < 3; ++run) {
    const auto got = model.run(ins);
    const auto interp = ref.run(ins);
    ASSERT_EQ(got.size(), 2u);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_LE(testing::rel_error(got[i], interp[i]), 1e-4) << "run " << run << " output " << i;
      if (run == 0) {
        EXPECT_LE(testing::rel_error(got[i], want[i]), 1e-4) << "output " << i;
      }
    }
  }
  // steps (an int64 buffer) counted three runs
  EXPECT_EQ(model.run(ins)[1].item(), 4.0);
}

TEST_F(FixtureCodegen, LlamaTiny) { check_model("llama_tiny"); }
TEST_F(FixtureCodegen, Gpt2Tiny) { check_model("gpt2_tiny"); }
TEST_F(FixtureCodegen, BertTiny) { check_model("bert_tiny"); }
TEST_F(FixtureCodegen, BlockTiny) { check_model("block_tiny"); }

}  // namespace
}  // namespace anvil
