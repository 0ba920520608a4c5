// The AOT verbs of the anvil CLI as real subprocesses: compile (summary, --emit-source), run on a
// package and on a .pt2 through the package cache, dynamic batch sizes and their range error,
// bench's JSON line, inspect on a package, corrupt packages and usage errors. One mlp_small and
// one mlp_dynbatch package are compiled once per test process (SetUpTestSuite).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/check.h"
#include "core/npy.h"
#include "runtime/cpu_features.h"
#include "runtime/package.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& file) {
  return std::string(ANVIL_FIXTURES_DIR) + "/" + file;
}

/// `s` quoted for /bin/sh.
std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
std::string q(const fs::path& p) { return q(p.string()); }

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct CliResult {
  int code = -1;
  bool signaled = false;
  std::string out, err;
};

/// max|got - want| <= tol * max(1, max|want|), shapes equal (the suite's comparison).
::testing::AssertionResult close(const Tensor& got, const Tensor& want, double tol = 1e-4) {
  return ::anvil::test::close(got, want, tol);
}

/// Random f32 input of `rows` x 256.
Tensor random_rows(int64_t rows, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(rows * 256));
  uint64_t x = seed * 2654435761u + 1;
  for (auto& f : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    f = static_cast<float>(static_cast<int64_t>(x >> 40) % 2000 - 1000) / 1000.0f;
  }
  return Tensor::from_vector(v, {rows, 256});
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing: " << (part) << "\nin:\n" << (text)

/// Suite state: a folder with a private cache and the two packages compiled once.
class CliAotTest : public ::testing::Test {
 protected:
  static fs::path suite_dir_;
  static CliResult compile_small_, compile_dyn_;

  static fs::path small_pkg() { return suite_dir_ / "mlp_small.anvil"; }
  static fs::path dyn_pkg() { return suite_dir_ / "mlp_dynbatch.anvil"; }
  static fs::path emit_dir() { return suite_dir_ / "src_small"; }

  /// Runs the CLI with already quoted `args` (and `env` assignments before it).
  static CliResult cli(const std::string& args, const std::string& env = "") {
    static int n = 0;
    const fs::path out = suite_dir_ / ("stdout" + std::to_string(n) + ".txt");
    const fs::path err = suite_dir_ / ("stderr" + std::to_string(n++) + ".txt");
    const std::string cmd = env + (env.empty() ? "" : " ") + q(std::string(ANVIL_CLI)) + " " +
                            args + " >" + q(out) + " 2>" + q(err) + " </dev/null";
    const int status = std::system(cmd.c_str());
    CliResult r;
    r.signaled = WIFSIGNALED(status);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    fs::remove(out);
    fs::remove(err);
    return r;
  }

  static void SetUpTestSuite() {
    suite_dir_ = fs::temp_directory_path() / ("anvil_cli_aot_" + std::to_string(getpid()));
    fs::remove_all(suite_dir_);
    fs::create_directories(suite_dir_);
    // Every CLI run of this suite uses the build tree's test cache (not the user's): ctest runs
    // each test in its own process, and the object cache makes the compiles below cheap after
    // the first. Packages themselves go to the per-process suite folder.
    const fs::path cache = fs::path(ANVIL_CLI).parent_path().parent_path() / "test_cache" / "cli";
    fs::create_directories(cache);
    ::setenv("ANVIL_CACHE_DIR", cache.c_str(), 1);
    compile_small_ = cli("compile " + q(fixture("mlp_small.pt2")) + " -o " + q(small_pkg()) +
                         " --emit-source " + q(emit_dir()));
    compile_dyn_ = cli("compile " + q(fixture("mlp_dynbatch.pt2")) + " -o " + q(dyn_pkg()) + " -q");
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(suite_dir_, ec);
  }

  void SetUp() override {
    ASSERT_EQ(compile_small_.code, 0) << compile_small_.err;
    ASSERT_EQ(compile_dyn_.code, 0) << compile_dyn_.err;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = suite_dir_ / info->name();
    fs::create_directories(dir_);
  }

  fs::path dir_;
};

fs::path CliAotTest::suite_dir_;
CliResult CliAotTest::compile_small_, CliAotTest::compile_dyn_;

/// A runtime or usage error: exit `code`, no signal, one "anvil: error: " line holding `parts`.
void expect_clean_error(const CliResult& r, int code, const std::vector<std::string>& parts) {
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.code, code) << r.err;
  EXPECT_EQ(r.err.rfind("anvil: error: ", 0), 0u) << r.err;
  const std::string first_line = r.err.substr(0, r.err.find('\n'));
  for (const auto& p : parts) EXPECT_HAS(first_line, p);
}

TEST_F(CliAotTest, CompilePrintsSummary) {
  const std::string& out = compile_small_.out;
  for (const char* part : {"compiled ", "target:       cpu-", "kernels:", "gemm",
                           "peak memory:", "package:", "weights:", "time:", "import", "passes",
                           "codegen", "build", "sources:"})
    EXPECT_HAS(out, part);
  EXPECT_TRUE(compile_dyn_.out.empty()) << compile_dyn_.out;  // -q
  EXPECT_TRUE(fs::is_regular_file(small_pkg()));
  // No temporary file is left next to the package.
  for (const auto& e : fs::directory_iterator(suite_dir_))
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST_F(CliAotTest, EmitSourceWritesReadableSources) {
  int cpp = 0;
  for (const auto& e : fs::directory_iterator(emit_dir())) cpp += e.path().extension() == ".cpp";
  EXPECT_GE(cpp, 2);
  const std::string model = slurp(emit_dir() / "model.cpp");
  EXPECT_HAS(model, "anvil_model_entry");
  EXPECT_TRUE(fs::is_regular_file(emit_dir() / "manifest.json"));
  EXPECT_TRUE(fs::is_regular_file(emit_dir() / "program.txt"));
}

// --emit-only writes the same sources and stops: no package, and no translation unit is
// compiled (a fresh object cache stays without objects); without --emit-source it is a usage
// error.
TEST_F(CliAotTest, EmitOnlyWritesTheSourcesAndNoPackage) {
  const fs::path src = dir_ / "src", pkg = dir_ / "m.anvil", cache = dir_ / "cache";
  const CliResult r =
      cli("compile " + q(fixture("mlp_small.pt2")) + " -o " + q(pkg.string()) + " --emit-source " +
          q(src.string()) + " --emit-only --cache-dir " + q(cache.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "not compiled, no package");
  EXPECT_FALSE(fs::exists(pkg));
  EXPECT_FALSE(fs::exists(cache / "obj"));
  EXPECT_EQ(slurp(src / "model.cpp"), slurp(emit_dir() / "model.cpp"));
  EXPECT_TRUE(fs::is_regular_file(src / "manifest.json"));
  expect_clean_error(cli("compile " + q(fixture("mlp_small.pt2")) + " --emit-only"), 2,
                     {"--emit-only needs --emit-source"});
}

TEST_F(CliAotTest, RunPackageMatchesPyTorch) {
  const CliResult r = cli("run " + q(small_pkg()) + " -i " + q(fixture("mlp_small.in0.npy")) +
                          " -o " + q(dir_) + " --threads 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;  // a package: nothing to compile
  EXPECT_HAS(r.out, "out0");
  EXPECT_TRUE(
      close(read_npy((dir_ / "out0.npy").string()), read_npy(fixture("mlp_small.out0.npy"))));
}

// spec/aot.md case 84 from the CLI: `anvil run --check-nan` on an input with an Inf is a clean
// error naming the step, the buffer and the element (exit 1, no signal); the clean input passes;
// without the flag the Inf runs through.
TEST_F(CliAotTest, RunCheckNanStopsAtTheFirstInf) {
  Tensor x = read_npy(fixture("mlp_small.in0.npy")).clone();
  x.data<float>()[0] = std::numeric_limits<float>::infinity();
  write_npy((dir_ / "inf.npy").string(), x);
  const std::string run = "run " + q(small_pkg()) + " --check-nan -i ";
  expect_clean_error(cli(run + q(dir_ / "inf.npy")), 1,
                     {"NaN/Inf check: step ", "inf into buffer '", "at element "});
  const CliResult ok = cli(run + q(fixture("mlp_small.in0.npy")) + " -o " + q(dir_));
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(
      close(read_npy((dir_ / "out0.npy").string()), read_npy(fixture("mlp_small.out0.npy"))));
  const CliResult off = cli("run " + q(small_pkg()) + " -i " + q(dir_ / "inf.npy") + " -q");
  EXPECT_EQ(off.code, 0) << off.err;
  expect_clean_error(cli("run " + q(fixture("mlp_small.pt2")) + " --interpret --check-nan"), 2,
                     {"--check-nan"});
}

TEST_F(CliAotTest, RunPt2CompilesOnceIntoThePackageCache) {
  const fs::path cache = dir_ / "cache";
  const std::string args = "run " + q(fixture("mlp_small.pt2")) + " -i " +
                           q(fixture("mlp_small.in0.npy")) + " --cache-dir " + q(cache) + " -o ";
  const CliResult first = cli(args + q(dir_ / "a"));
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_HAS(first.err, "anvil: note: compiling");
  auto count_packages = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(cache / "packages"))
      n += e.path().extension() == ".anvil";
    return n;
  };
  EXPECT_EQ(count_packages(), 1);
  const CliResult second = cli(args + q(dir_ / "b"));
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_EQ(second.err.find("compiling"), std::string::npos) << second.err;  // cache hit
  EXPECT_EQ(count_packages(), 1);
  const Tensor want = read_npy(fixture("mlp_small.out0.npy"));
  EXPECT_TRUE(close(read_npy((dir_ / "a" / "out0.npy").string()), want));
  EXPECT_TRUE(close(read_npy((dir_ / "b" / "out0.npy").string()), want));
}

TEST_F(CliAotTest, DynBatchPackageServesTheRangeAndRejectsOutside) {
  // The fixture's own batch against PyTorch.
  CliResult r = cli("run " + q(dyn_pkg()) + " -q -i " + q(fixture("mlp_dynbatch.in0.npy")) +
                    " -o " + q(dir_ / "fx"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(close(read_npy((dir_ / "fx" / "out0.npy").string()),
                    read_npy(fixture("mlp_dynbatch.out0.npy"))));
  // Batch 1 and 64 against the interpreter.
  for (int64_t batch : {1, 64}) {
    const fs::path in = dir_ / ("x" + std::to_string(batch) + ".npy");
    write_npy(in.string(), random_rows(batch, static_cast<uint64_t>(batch)));
    const fs::path got = dir_ / ("got" + std::to_string(batch));
    const fs::path want = dir_ / ("want" + std::to_string(batch));
    r = cli("run " + q(dyn_pkg()) + " -q -i " + q(in) + " -o " + q(got));
    ASSERT_EQ(r.code, 0) << r.err;
    r = cli("run " + q(fixture("mlp_dynbatch.pt2")) + " --interpret -q -i " + q(in) + " -o " +
            q(want));
    ASSERT_EQ(r.code, 0) << r.err;
    const Tensor g = read_npy((got / "out0.npy").string());
    EXPECT_EQ(g.sizes()[0], batch);
    EXPECT_TRUE(close(g, read_npy((want / "out0.npy").string()))) << "batch " << batch;
  }
  // Out of range: a clear error naming the input, the dim, the expected range and the value.
  write_npy((dir_ / "big.npy").string(), random_rows(65, 3));
  r = cli("run " + q(dyn_pkg()) + " -i " + q(dir_ / "big.npy"));
  expect_clean_error(r, 1, {"input 'x'", "dim 0", "[1, 64]", "got 65"});
  // A wrong static dim and a wrong dtype.
  write_npy((dir_ / "narrow.npy").string(), Tensor::zeros({4, 128}, DType::kFloat32));
  r = cli("run " + q(dyn_pkg()) + " -i " + q(dir_ / "narrow.npy"));
  expect_clean_error(r, 1, {"input 'x'", "dim 1", "expected 256", "got 128"});
  write_npy((dir_ / "ints.npy").string(), Tensor::zeros({4, 256}, DType::kInt64));
  r = cli("run " + q(small_pkg()) + " -i " + q(dir_ / "ints.npy"));
  expect_clean_error(r, 1, {"input 'x'", "dtype", "f32", "i64"});
  r = cli("run " + q(small_pkg()));
  expect_clean_error(r, 1, {"wrong number of inputs", "expected 1", "got 0"});
}

TEST_F(CliAotTest, RunUnderLaunchWritesPerRankFolders) {
  const CliResult r =
      cli("run " + q(small_pkg()) + " -q -i " + q(fixture("mlp_small.in0.npy")) + " -o " + q(dir_),
          "WORLD_SIZE=2 RANK=1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(close(read_npy((dir_ / "rank1" / "out0.npy").string()),
                    read_npy(fixture("mlp_small.out0.npy"))));
}

TEST_F(CliAotTest, BenchPrintsJsonLastLine) {
  for (const std::string& extra : {std::string(" --iters 5 --warmup 1 --threads 1"),
                                   " -n 3 --warmup 0 -i " + q(fixture("mlp_small.in0.npy"))}) {
    const CliResult r = cli("bench " + q(small_pkg()) + extra);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_HAS(r.out, "p50");
    std::string text = r.out;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    const std::string last = text.substr(text.rfind('\n') + 1);
    const nlohmann::json j = nlohmann::json::parse(last);
    for (const char* key :
         {"p50_ms", "p90_ms", "min_ms", "mean_ms", "iters", "threads", "load_ms", "model"})
      EXPECT_TRUE(j.contains(key)) << key << " in " << last;
    EXPECT_LE(j["min_ms"].get<double>(), j["p50_ms"].get<double>());
    EXPECT_LE(j["p50_ms"].get<double>(), j["p90_ms"].get<double>());
    EXPECT_EQ(j["iters"].get<int>(), extra.find("-n 3") != std::string::npos ? 3 : 5);
    if (extra.find("--threads 1") != std::string::npos) {
      EXPECT_EQ(j["threads"].get<int>(), 1);
    }
  }
  // Random inputs of a dynamic spec: the symbol's lower bound, said so; --dim picks another.
  CliResult r = cli("bench " + q(dyn_pkg()) + " --iters 2 --warmup 0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "lower bound");
  EXPECT_HAS(r.out, "f32[1, 256]");
  const std::string sym =
      r.out.substr(r.out.find("  s") + 2, r.out.find(" = ") - r.out.find("  s") - 2);
  r = cli("bench " + q(dyn_pkg()) + " --iters 2 --warmup 0 --dim " + sym + "=7");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "f32[7, 256]");
  r = cli("bench " + q(dyn_pkg()) + " --iters 2 --dim " + sym + "=65");
  expect_clean_error(r, 1, {sym, "[1, 64]", "65"});
  expect_clean_error(cli("bench " + q(small_pkg()) + " --iters 0"), 2, {"--iters"});
}

// --profile: a per-step table (one row per step of mlp_small: 3 GEMMs and 3 loop kernels) and
// the same steps in the JSON line, each with a time and its bytes.
TEST_F(CliAotTest, BenchProfilePrintsEachStep) {
  const CliResult r = cli("bench " + q(small_pkg()) + " --iters 20 --warmup 1 --profile");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "profile (20 runs, 6 steps)");
  EXPECT_HAS(r.out, "GB/s");
  std::string text = r.out;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const nlohmann::json j = nlohmann::json::parse(text.substr(text.rfind('\n') + 1));
  ASSERT_TRUE(j.contains("profile")) << text;
  ASSERT_EQ(j["profile"].size(), 6u);
  int gemms = 0;
  for (const auto& s : j["profile"]) {
    EXPECT_GT(s["bytes"].get<int64_t>(), 0) << s.dump();
    EXPECT_GE(s["ms_per_call"].get<double>(), 0.0) << s.dump();
    if (s["kind"] == "gemm") ++gemms;
  }
  EXPECT_EQ(gemms, 3);
}

TEST_F(CliAotTest, InspectPackage) {
  CliResult r = cli("inspect " + q(small_pkg()));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* part :
       {"target: cpu-", "compile flags:", "-O3", "inputs:", "outputs:", "constants:", "weight",
        "kernels:", "gemm", "planned memory:", "sources:", "model.cpp"})
    EXPECT_HAS(r.out, part);
  r = cli("inspect " + q(dyn_pkg()) + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["inputs"].size(), 1u);
  EXPECT_EQ(j["inputs"][0]["name"], "x");
  EXPECT_EQ(j["inputs"][0]["sizes"][1], "256");
  ASSERT_EQ(j["symbols"].size(), 1u);
  EXPECT_EQ(j["symbols"][0]["min"], 1);
  EXPECT_EQ(j["symbols"][0]["max"], 64);
  ASSERT_FALSE(j["constants"].empty());
  for (const auto& c : j["constants"]) {
    EXPECT_TRUE(c.contains("original_name"));
    EXPECT_GT(c["bytes"].get<int64_t>(), 0);
  }
  EXPECT_FALSE(j["kernels"].empty());
  EXPECT_FALSE(j["compile_flags"].empty());
  EXPECT_TRUE(j.contains("planned_peak_bytes"));
  // inspect on a .pt2 keeps working.
  r = cli("inspect " + q(fixture("mlp_small.pt2")) + " --no-ir");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "ops:");
}

TEST_F(CliAotTest, CorruptPackagesAreCleanErrors) {
  std::ofstream(dir_ / "junk.anvil") << "not a zip at all";
  const std::string bytes = slurp(small_pkg());
  std::ofstream(dir_ / "cut.anvil", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::string flipped = bytes;
  flipped[flipped.size() / 3] ^= 0x5a;  // inside weights or model.so
  std::ofstream(dir_ / "flip.anvil", std::ios::binary) << flipped;
  for (const char* name : {"junk.anvil", "cut.anvil"}) {
    const std::string p = q(dir_ / name);
    expect_clean_error(cli("run " + p + " -i " + q(fixture("mlp_small.in0.npy"))), 1, {name});
    expect_clean_error(cli("inspect " + p), 1, {name});
    expect_clean_error(cli("bench " + p + " --iters 1"), 1, {name});
  }
  // A flipped byte: either caught (CRC of manifest / model.so) or harmless in weights; never a
  // crash.
  const CliResult r =
      cli("run " + q(dir_ / "flip.anvil") + " -q -i " + q(fixture("mlp_small.in0.npy")));
  EXPECT_FALSE(r.signaled);
  EXPECT_TRUE(r.code == 0 || r.code == 1) << r.err;
}

TEST_F(CliAotTest, PackageForAnIsaThisCpuLacksIsAClearError) {
  std::string missing;
  for (const auto& f : runtime::known_cpu_features())
    if (!runtime::cpu_supports(f)) missing = f;
  if (missing.empty()) GTEST_SKIP() << "this CPU has every feature the runtime knows";
  // The mlp_small package, its manifest claiming one more feature.
  const auto pkg = runtime::Package::open(small_pkg().string());
  nlohmann::json manifest = nlohmann::json::parse(pkg->manifest().json);
  manifest["cpu_features"].push_back(missing);
  runtime::PackageContents pc;
  pc.manifest_json = manifest.dump();
  pc.model_so_bytes = std::string(pkg->model_so());
  for (size_t i = 0; i < pkg->manifest().constants.size(); ++i)
    pc.constants.push_back(pkg->constant(i));
  const fs::path other = dir_ / "other_cpu.anvil";
  runtime::write_package(other.string(), pc);
  const CliResult r = cli("run " + q(other) + " -i " + q(fixture("mlp_small.in0.npy")));
  expect_clean_error(r, 1, {"other_cpu.anvil", "this CPU cannot run the package", missing});
  const CliResult i = cli("inspect " + q(other));
  ASSERT_EQ(i.code, 0) << i.err;  // inspect reads the manifest only
  EXPECT_HAS(i.out, "this CPU lacks " + missing);
}

TEST_F(CliAotTest, UsageAndInputErrors) {
  const std::string pt2 = q(fixture("mlp_small.pt2"));
  expect_clean_error(cli("compile " + pt2 + " --target pdp11 -o " + q(dir_ / "x.anvil")), 2,
                     {"unknown --target 'pdp11'", "x86_64-avx2"});
  expect_clean_error(cli("compile " + pt2 + " --frob"), 2, {"unknown option '--frob'"});
  expect_clean_error(cli("compile"), 2, {"needs MODEL.pt2"});
  expect_clean_error(cli("compile " + q(dir_ / "none.pt2")), 1, {"none.pt2", "not found"});
  expect_clean_error(cli("run " + q(small_pkg()) + " --backend carrier-pigeon"), 2,
                     {"--backend", "gloo, mpi or nccl"});
  expect_clean_error(cli("run " + q(small_pkg()) + " --threads 0"), 2, {"--threads"});
  expect_clean_error(cli("run " + q(small_pkg()) + " --interpret"), 1, {"--interpret runs a .pt2"});
  expect_clean_error(cli("bench"), 2, {"needs MODEL"});
  std::ofstream(dir_ / "bad.npy") << "garbage";
  expect_clean_error(cli("run " + q(small_pkg()) + " -i " + q(dir_ / "bad.npy")), 1, {"bad.npy"});
  for (const std::string cmd : {"compile", "run", "bench", "inspect"}) {
    const CliResult h = cli(cmd + " --help");
    EXPECT_EQ(h.code, 0) << cmd;
    EXPECT_EQ(h.out.rfind("usage: anvil " + cmd, 0), 0u) << h.out;
  }
  const CliResult all = cli("--help");
  for (const char* part : {"usage: anvil compile", "usage: anvil bench", "--emit-source"})
    EXPECT_HAS(all.out, part);
}

}  // namespace
}  // namespace anvil
