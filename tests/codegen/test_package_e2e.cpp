// End to end with the real runtime: generate_cpu -> toolchain (c++ -O3, object cache) ->
// write_package -> runtime::Model::load -> run (OpenBLAS GEMM, thread pool, extern kernels).
// Every fixture reproduces PyTorch's outputs within 1e-4 on every shape set.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

#include "codegen/generate.h"
#include "codegen/toolchain.h"
#include "core/npy.h"
#include "frontend/pt2_reader.h"
#include "harness.h"
#include "runtime/model.h"
#include "runtime/package.h"

namespace anvil {
namespace {

std::string fixture(const std::string& file) {
  return std::string(ANVIL_FIXTURES_DIR) + "/" + file;
}
bool exists(const std::string& file) { return std::filesystem::exists(fixture(file)); }

std::vector<Tensor> read_set(const std::string& name, const char* kind, const std::string& suffix) {
  std::vector<Tensor> out;
  for (int k = 0; exists(name + "." + kind + std::to_string(k) + suffix + ".npy"); ++k)
    out.push_back(read_npy(fixture(name + "." + kind + std::to_string(k) + suffix + ".npy")));
  return out;
}

/// Compiles a fixture into a package under a temporary folder and loads it.
runtime::Model compile_fixture(const std::string& name, const runtime::ModelOptions& mo = {}) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("anvil_e2e_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::create_directories(dir);
  auto g = frontend::load_pt2(fixture(name + ".pt2"));
  codegen::CpuCodegenOptions o;
  const auto gen = codegen::generate_cpu(*g, o);
  std::vector<codegen::SourceFile> sources;
  for (const auto& s : gen.sources) sources.push_back({s.filename, s.text});
  codegen::ToolchainOptions to;
  to.target = o.target;
  to.extra_flags = gen.compile_flags;
  to.progress = codegen::ProgressMode::kQuiet;
  to.include_dir = std::string(ANVIL_SOURCE_DIR) + "/include";
  const auto built = codegen::build_shared_library(sources, (dir / "model.so").string(), to);
  runtime::PackageContents pc;
  pc.manifest_json = gen.manifest_json;
  pc.model_so_path = built.so_path;
  for (const auto& c : gen.constants) pc.constants.push_back(c.tensor);
  for (const auto& s : gen.sources) pc.sources.emplace_back(s.filename, s.text);
  const std::string pkg = (dir / (name + ".anvil")).string();
  runtime::write_package(pkg, pc);
  return runtime::Model::load(pkg, mo);
}

class PackageEndToEnd : public ::testing::TestWithParam<const char*> {};

TEST_P(PackageEndToEnd, MatchesPyTorch) {
  const std::string name = GetParam();
  runtime::Model model = compile_fixture(name);
  const int runs = name == "const_and_buffer" ? 1 : 2;  // mutated buffers: first call only
  for (const std::string suffix : {"", "_0", "_1"}) {
    const auto ins = read_set(name, "in", suffix);
    if (ins.empty()) continue;
    const auto want = read_set(name, "out", suffix);
    for (int r = 0; r < runs; ++r) {
      const auto got = model.run(ins);
      ASSERT_EQ(got.size(), want.size()) << name << suffix;
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LE(testing::rel_error(got[i], want[i]), 1e-4) << name << suffix << " output " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PackageEndToEnd,
                         ::testing::Values("mlp_small", "mlp_dynbatch", "small_cnn",
                                           "const_and_buffer", "llama_tiny", "gpt2_tiny",
                                           "bert_tiny", "block_tiny"));

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.sizes() == cb.sizes() && ca.dtype() == cb.dtype() &&
         std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// Issue 4: 8 threads x 500 runs on one compiled Model (4 runners, each run itself split over the
// model's pool) give bit-identical results to a single-threaded run, at two batch sizes at once.
TEST(PackageEndToEndThreads, EightThreadsTimes500RunsEqualSerialRuns) {
  runtime::ModelOptions mo;
  mo.num_runners = 4;
  mo.num_threads = 2;
  runtime::Model model = compile_fixture("block_tiny", mo);
  const std::vector<std::vector<Tensor>> inputs = {read_set("block_tiny", "in", ""),
                                                   read_set("block_tiny", "in", "_0")};
  ASSERT_FALSE(inputs[0].empty());
  ASSERT_FALSE(inputs[1].empty());
  std::vector<Tensor> serial;
  for (const auto& in : inputs) serial.push_back(model.run(in).at(0).clone());
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 500; ++r) {
        const size_t which = static_cast<size_t>((t + r) % 2);
        try {
          if (!same_bytes(model.run(inputs[which]).at(0), serial[which])) ++mismatches;
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace anvil
