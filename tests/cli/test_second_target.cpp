// A second code-generation target defined outside src/ (here, in a test): registering it is all
// the driver needs to compile with it — no file of src/ names it. It reuses the CPU target's
// emitter and toolchain under its own name, refuses the steps it has no code for (extern calls,
// all listed at once), and its packages load and run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "codegen/target.h"
#include "common/check.h"
#include "core/error.h"
#include "core/npy.h"
#include "driver/compile.h"
#include "runtime/model.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

class EchoTarget final : public codegen::Target {
 public:
  std::string name() const override { return "echo"; }
  std::vector<std::string> target_names() const override { return {"test-echo"}; }
  Device::Type device_type() const override { return Device::Type::kCPU; }
  codegen::TargetInfo describe(const std::string&, const std::string& compiler,
                               const std::string& cache_dir) const override {
    return cpu().describe("x86_64", compiler, cache_dir);
  }
  std::vector<std::string> unsupported(const passes::Program& p) const override {
    std::vector<std::string> out;
    for (const auto& step : p.steps)
      if (std::holds_alternative<passes::ExternStep>(step))
        out.push_back(passes::step_name(step) + ": the echo target has no extern kernels");
    return out;
  }
  codegen::TargetSources emit(const passes::Program& p,
                              const codegen::CodegenOptions& o) const override {
    codegen::CodegenOptions inner = o;
    inner.target = "x86_64";
    codegen::TargetSources ts = cpu().emit(p, inner);
    ts.manifest_fields["echo"] = "built by the test target";
    return ts;
  }
  codegen::BuildResult build(const std::vector<codegen::SourceFile>& sources,
                             const std::string& output_so,
                             codegen::ToolchainOptions options) const override {
    options.target = "x86_64";
    return cpu().build(sources, output_so, options);
  }

 private:
  static const codegen::Target& cpu() { return codegen::find_target("x86_64"); }
};

const EchoTarget kEcho;
const codegen::TargetRegistration kEchoRegistration{&kEcho};

std::string fixture(const std::string& file) {
  return std::string(ANVIL_FIXTURES_DIR) + "/" + file;
}

class SecondTarget : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("anvil_echo_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    opts_.cache_dir = (dir_ / "cache").string();
    opts_.progress = codegen::ProgressMode::kQuiet;
    opts_.target = "test-echo";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
  driver::CompileOptions opts_;
};

TEST_F(SecondTarget, RegisteredFromOutsideSrcItCompilesAPackageThatRuns) {
  const auto names = codegen::target_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "test-echo"), names.end());
  opts_.emit_source_dir = (dir_ / "src").string();
  const std::string pkg = (dir_ / "m.anvil").string();
  const driver::CompileReport r = driver::compile_pt2(fixture("mlp_small.pt2"), pkg, opts_);
  EXPECT_EQ(r.target, "cpu-x86_64");
  std::ifstream manifest(dir_ / "src" / "manifest.json");
  const std::string text((std::istreambuf_iterator<char>(manifest)),
                         std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("built by the test target"), std::string::npos);
  const runtime::Model model = runtime::Model::load(pkg);
  const auto out = model.run({read_npy(fixture("mlp_small.in0.npy"))});
  ASSERT_EQ(out.size(), 1u);
  const Tensor want = read_npy(fixture("mlp_small.out0.npy"));
  ASSERT_EQ(out[0].sizes(), want.sizes());
  EXPECT_LE(test::rel_error(out[0].to_doubles(), want.to_doubles()), 1e-4);
}

TEST_F(SecondTarget, ItsUnsupportedStepsAreListedAtOnce) {
  // its two FFT extern steps, refused together before any code is generated
  try {
    driver::compile_pt2(fixture("aot/aot_44_fft_more.pt2"), (dir_ / "g.anvil").string(), opts_);
    FAIL() << "compiled extern steps for a target without extern kernels";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the echo target cannot compile 2 steps"), std::string::npos) << m;
    EXPECT_NE(m.find("ext0: the echo target has no extern kernels"), std::string::npos) << m;
    EXPECT_NE(m.find("ext1: the echo target has no extern kernels"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace anvil
