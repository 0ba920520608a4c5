// driver::compile_pt2 / cached_package_for as a library (what `anvil compile` and `anvil run
// m.pt2` call): the report's figures, the package against PyTorch through runtime::Model, the
// package cache (hit on the second call, a separate entry per target), emitted sources and
// clean errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/check.h"
#include "core/error.h"
#include "core/npy.h"
#include "driver/compile.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "runtime/model.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& file) {
  return std::string(ANVIL_FIXTURES_DIR) + "/" + file;
}

/// The suite's comparison (tests/common/check.h): +inf on a shape mismatch or misplaced NaN.
double max_rel_diff(const Tensor& got, const Tensor& want) {
  if (got.sizes() != want.sizes()) return INFINITY;
  return ::anvil::test::rel_error(got.to_doubles(), want.to_doubles());
}

class DriverCompile : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("anvil_driver_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A private object and package cache.
    opts_.cache_dir = (dir_ / "cache").string();
    opts_.progress = codegen::ProgressMode::kQuiet;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
  driver::CompileOptions opts_;
};

TEST_F(DriverCompile, CompilePt2ReportsAndRuns) {
  opts_.emit_source_dir = (dir_ / "src").string();
  const std::string pkg = (dir_ / "sub" / "m.anvil").string();  // parent folder created
  const driver::CompileReport r = driver::compile_pt2(fixture("mlp_small.pt2"), pkg, opts_);
  EXPECT_EQ(r.package_path, pkg);
  EXPECT_EQ(r.target.rfind("cpu-", 0), 0u) << r.target;
  EXPECT_EQ(r.num_kernels, r.num_loop_kernels + r.num_gemms + r.num_externs);
  EXPECT_EQ(r.num_gemms, 3);  // three linear layers
  EXPECT_GT(r.planned_peak_bytes, 0);
  EXPECT_EQ(r.num_constants, 6);
  // Weights: 256*512 + 512 + 512*512 + 512 + 512*256 + 256 floats, each 64-byte aligned.
  EXPECT_GE(r.weights_bytes, (256 * 512 + 512 + 512 * 512 + 512 + 512 * 256 + 256) * 4);
  EXPECT_GT(r.package_bytes, r.weights_bytes);
  EXPECT_EQ(r.package_bytes, static_cast<int64_t>(fs::file_size(pkg)));
  EXPECT_GT(r.total_s, 0);
  EXPECT_GE(r.total_s, r.build_s);
  EXPECT_FALSE(r.compile_flags.empty());
  EXPECT_GE(r.emitted_files.size(), 4u);  // model.cpp, kernels, manifest.json, program.txt
  for (const auto& f : r.emitted_files) EXPECT_TRUE(fs::is_regular_file(f)) << f;

  const runtime::Model model = runtime::Model::load(pkg);
  EXPECT_EQ(model.manifest().target, r.target);
  const auto out = model.run({read_npy(fixture("mlp_small.in0.npy"))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_LE(max_rel_diff(out[0], read_npy(fixture("mlp_small.out0.npy"))), 1e-4);
}

// A tiny HF BLOOM exported by PyTorch 2.11 with Dim.AUTO batch and sequence (ranges up to
// infinity). It crashed the compiler (std::regex over a long kernel's text overflowed the stack)
// and then planned its arena as nested Max expressions that made megabytes of C++.
TEST_F(DriverCompile, BloomWithUnboundedDynamicShapesMatchesPyTorchAndServesOtherSizes) {
  opts_.emit_source_dir = (dir_ / "src").string();
  const std::string pkg = (dir_ / "bloom.anvil").string();
  const driver::CompileReport r = driver::compile_pt2(fixture("bloom_dyn_auto.pt2"), pkg, opts_);
  for (const auto& f : r.emitted_files)
    EXPECT_LT(fs::file_size(f), 512u * 1024) << f << ": generated source this large is a plan bug";
  const runtime::Model model = runtime::Model::load(pkg);
  const Tensor ids = read_npy(fixture("bloom_dyn_auto.in0.npy"));
  const auto out = model.run({ids});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(::anvil::test::close(out[0], read_npy(fixture("bloom_dyn_auto.out0.npy")), 1e-4));
  // other batch and sequence sizes against the interpreter
  const auto graph = frontend::load_pt2(fixture("bloom_dyn_auto.pt2"));
  interp::Interpreter ref(*graph);
  for (const auto& [b, t] : std::vector<std::pair<int64_t, int64_t>>{{2, 2}, {3, 7}, {5, 33}}) {
    std::vector<int64_t> v(static_cast<size_t>(b * t));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 7919 + b) % 1000);
    const Tensor x = Tensor::from_vector(v, {b, t});
    const auto got = model.run({x});
    const auto want = ref.run({x});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].sizes(), (Shape{b, t, 1000}));
    EXPECT_TRUE(::anvil::test::close(got[0], want[0], 1e-4)) << b << " x " << t;
  }
}

TEST_F(DriverCompile, CachedPackageHitsOnSecondCallAndKeysOnTarget) {
  driver::CompileReport first, second, avx2;
  const std::string a = driver::cached_package_for(fixture("mlp_dynbatch.pt2"), opts_, &first);
  EXPECT_FALSE(first.cache_hit);
  EXPECT_GT(first.num_kernels, 0);
  const std::string b = driver::cached_package_for(fixture("mlp_dynbatch.pt2"), opts_, &second);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, driver::package_cache_path(fixture("mlp_dynbatch.pt2"), opts_));
  // Another target is another entry, recorded in its manifest.
  driver::CompileOptions o = opts_;
  o.target = "x86_64-avx2";
  const std::string c = driver::cached_package_for(fixture("mlp_dynbatch.pt2"), o, &avx2);
  EXPECT_NE(a, c);
  EXPECT_FALSE(avx2.cache_hit);
  EXPECT_EQ(avx2.target, "cpu-x86_64-avx2");
  // The avx2 package runs here only when this CPU has the features; otherwise load refuses.
  try {
    const runtime::Model m = runtime::Model::load(c);
    const auto out = m.run({read_npy(fixture("mlp_dynbatch.in0.npy"))});
    EXPECT_LE(max_rel_diff(out[0], read_npy(fixture("mlp_dynbatch.out0.npy"))), 1e-4);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("avx2"), std::string::npos) << e.what();
  }
}

TEST_F(DriverCompile, ErrorsAreClean) {
  ANVIL_EXPECT_ERROR(
      driver::compile_pt2((dir_ / "none.pt2").string(), (dir_ / "x.anvil").string(), opts_),
      "none.pt2");
  std::ofstream(dir_ / "junk.pt2") << "not a zip";
  ANVIL_EXPECT_ERROR(
      driver::compile_pt2((dir_ / "junk.pt2").string(), (dir_ / "x.anvil").string(), opts_),
      "junk.pt2");
  driver::CompileOptions o = opts_;
  o.target = "riscv128";
  ANVIL_EXPECT_ERROR(driver::compile_pt2(fixture("mlp_small.pt2"), (dir_ / "x.anvil").string(), o),
                     "riscv128");
  EXPECT_FALSE(fs::exists(dir_ / "x.anvil"));
  ANVIL_EXPECT_ERROR(driver::package_cache_path((dir_ / "none.pt2").string(), opts_), "none.pt2");
}

}  // namespace
}  // namespace anvil
