// The anvil CLI as a real subprocess (ANVIL_CLI): inspect, run --interpret, compare, --help on
// every command, and usage / runtime errors (one clear line, exit code 2 or 1, never a crash).
// The AOT verbs (compile, run on packages, bench) are in test_cli_aot.cpp.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/check.h"
#include "core/npy.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& file) {
  return std::string(ANVIL_FIXTURES_DIR) + "/" + file;
}

/// 'text' quoted for /bin/sh.
std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct CliResult {
  int code = -1;
  bool signaled = false;
  std::string out, err;
};

/// A scratch directory per test, removed afterwards.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        fs::temp_directory_path() / ("anvil_cli_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Runs the CLI with already-quoted `args`, capturing stdout and stderr.
  CliResult cli(const std::string& args) {
    const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    const std::string cmd = sh_quote(ANVIL_CLI) + " " + args + " >" + sh_quote(out.string()) +
                            " 2>" + sh_quote(err.string()) + " </dev/null";
    const int status = std::system(cmd.c_str());
    CliResult r;
    r.signaled = WIFSIGNALED(status);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  fs::path dir_;
};

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing: " << (part) << "\nin:\n" << (text)

/// A runtime or usage error: exit `code`, no signal, stderr starts "anvil: error: " and its
/// first line holds the whole message.
void expect_clean_error(const CliResult& r, int code, const std::vector<std::string>& parts) {
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.code, code) << r.err;
  EXPECT_EQ(r.err.rfind("anvil: error: ", 0), 0u) << r.err;
  const std::string first_line = r.err.substr(0, r.err.find('\n'));
  for (const auto& p : parts) EXPECT_HAS(first_line, p);
}

TEST_F(CliTest, InspectMlpSmall) {
  const CliResult r = cli("inspect " + sh_quote(fixture("mlp_small.pt2")));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "inputs:");
  EXPECT_HAS(r.out, "0  x ");
  EXPECT_HAS(r.out, "f32[8, 256]");
  EXPECT_HAS(r.out,
             "parameters: 6, 2.00 MiB (2102272 bytes)");  // 4*(512*256+512+512*512+512+256*512+256)
  EXPECT_HAS(r.out, "l2.weight");
  EXPECT_HAS(r.out, "f32[512, 512]");
  EXPECT_HAS(r.out, "1048576 bytes");
  EXPECT_HAS(r.out, "buffers: none");
  EXPECT_HAS(r.out, "linear_2");
  EXPECT_HAS(r.out, "user_output");
  EXPECT_HAS(r.out, "ops: 5 nodes\n      3  aten.linear.default\n      2  aten.gelu.default\n");
  EXPECT_HAS(r.out, "\nir:\ngraph {");
  EXPECT_HAS(r.out, "= aten.gelu.default(self=%linear)");
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST_F(CliTest, InspectMlpDynBatchShowsSymbolRange) {
  const CliResult r = cli("inspect " + sh_quote(fixture("mlp_dynbatch.pt2")));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "f32[s77, 256]");
  EXPECT_HAS(r.out, "s77 in [1, 64]");
  EXPECT_HAS(r.out, "symbols:\n  s77 in [1, 64]\n");
  EXPECT_HAS(r.out, "3  aten.linear.default");
  EXPECT_HAS(r.out, "%linear_2: f32[s77, 256] = aten.linear.default(");
}

TEST_F(CliTest, InspectConstAndBufferListsWeightKindsAndNoIrFlag) {
  const CliResult r = cli("inspect " + sh_quote(fixture("const_and_buffer.pt2")) + " --no-ir");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "buffers: 2, 40 bytes");  // running f32[8] + steps i64[]
  EXPECT_HAS(r.out, "steps");
  EXPECT_HAS(r.out, "i64[]");
  EXPECT_HAS(r.out, "constants: 1, 32 bytes");
  EXPECT_HAS(r.out, "scale");
  EXPECT_HAS(r.out, "total weight bytes: 360 bytes");
  EXPECT_HAS(r.out, "3  aten.copy_.default");  // mul_, add_, add_: functional op + copy_
  EXPECT_HAS(r.out, "3  aten.mul.Tensor");
  EXPECT_EQ(r.out.find("\nir:"), std::string::npos);
}

// `anvil ops` lists the table with each target's lowering; --filter narrows it, --json is one
// object target -> lowering.
TEST_F(CliTest, OpsListsTheTableWithLowerings) {
  const CliResult r = cli("ops --filter pad");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "aten.pad.default");
  EXPECT_HAS(r.out, "Pointwise");
  EXPECT_HAS(r.out, "aten.reflection_pad2d.default");
  EXPECT_EQ(r.out.find("aten.add.Tensor"), std::string::npos);
  const CliResult j = cli("ops --json");
  ASSERT_EQ(j.code, 0) << j.err;
  EXPECT_HAS(j.out, "\"aten.linalg_vector_norm.default\": \"Decompose\"");
  EXPECT_HAS(j.out, "\"aten.copy_.default\": \"InPlace\"");
}

TEST_F(CliTest, InspectJson) {
  const CliResult r = cli("inspect " + sh_quote(fixture("mlp_dynbatch.pt2")) + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["inputs"][0]["name"], "x");
  EXPECT_EQ(j["inputs"][0]["type"], "f32[s77, 256]");
  EXPECT_EQ(j["symbols"]["s77"]["min"], 1);
  EXPECT_EQ(j["symbols"]["s77"]["max"], 64);
  EXPECT_EQ(j["weights"].size(), 6u);
  EXPECT_EQ(j["weights"][0]["target"], "l1.weight");
  EXPECT_EQ(j["weights"][0]["bytes"], 512 * 256 * 4);
  EXPECT_EQ(j["ops"][0]["target"], "aten.linear.default");
  EXPECT_EQ(j["ops"][0]["count"], 3);
  EXPECT_EQ(j["outputs"][0]["kind"], "user_output");
  EXPECT_NE(j["ir"].get<std::string>().find("graph {"), std::string::npos);
}

TEST_F(CliTest, RunInterpretWritesOutputsMatchingPyTorch) {
  const fs::path out = dir_ / "out" / "nested";
  const CliResult r = cli("run " + sh_quote(fixture("mlp_small.pt2")) + " --interpret -i " +
                          sh_quote(fixture("mlp_small.in0.npy")) + " -o " + sh_quote(out));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;  // --interpret: no note
  EXPECT_HAS(r.out, "out0  linear_2");
  EXPECT_HAS(r.out, "f32[8, 256]  min ");
  ASSERT_TRUE(fs::exists(out / "out0.npy"));
  EXPECT_FALSE(fs::exists(out / "out1.npy"));
  const Tensor got = read_npy((out / "out0.npy").string());
  const Tensor want = read_npy(fixture("mlp_small.out0.npy"));
  ASSERT_EQ(got.sizes(), want.sizes());
  ASSERT_EQ(got.dtype(), DType::kFloat32);
  EXPECT_TRUE(::anvil::test::close(got, want, 1e-4));
  // The compare command agrees; and flags a different array.
  const CliResult c =
      cli("compare " + sh_quote(out / "out0.npy") + " " + sh_quote(fixture("mlp_small.out0.npy")));
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_HAS(c.out, "match: f32[8, 256]");
  write_npy((dir_ / "off.npy").string(), Tensor::full({8, 256}, 1.0, DType::kFloat32));
  const CliResult bad =
      cli("compare " + sh_quote(dir_ / "off.npy") + " " + sh_quote(fixture("mlp_small.out0.npy")));
  EXPECT_EQ(bad.code, 1);
  EXPECT_HAS(bad.out, "MISMATCH");
}

TEST_F(CliTest, RunRepeatKeepsBufferState) {
  const CliResult r =
      cli("run " + sh_quote(fixture("const_and_buffer.pt2")) + " --interpret -i " +
          sh_quote(fixture("const_and_buffer.in0.npy")) + " --repeat 3 -o " + sh_quote(dir_));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "run 1/3:");
  EXPECT_HAS(r.out, "run 3/3:");
  const Tensor steps = read_npy((dir_ / "out1.npy").string());
  EXPECT_EQ(steps.dtype(), DType::kInt64);
  EXPECT_EQ(steps.dim(), 0);
  EXPECT_EQ(steps.item(), 3);  // steps += 1 on each of the 3 calls
}

TEST_F(CliTest, UsageErrorsExitWith2) {
  CliResult r = cli("");
  expect_clean_error(r, 2, {"no command given"});
  r = cli("frobnicate");
  expect_clean_error(r, 2, {"unknown command 'frobnicate'", "inspect", "run"});
  r = cli("--frob");
  expect_clean_error(r, 2, {"unknown option '--frob'"});
  r = cli("run " + sh_quote(fixture("mlp_small.pt2")) + " --bogus");
  expect_clean_error(r, 2, {"unknown option '--bogus'"});
  r = cli("run " + sh_quote(fixture("mlp_small.pt2")) + " -i");
  expect_clean_error(r, 2, {"-i needs a value"});
  r = cli("run");
  expect_clean_error(r, 2, {"needs MODEL"});
  r = cli("inspect a.pt2 b.pt2");
  expect_clean_error(r, 2, {"unexpected argument 'b.pt2'"});
  r = cli("run " + sh_quote(fixture("mlp_small.pt2")) + " --repeat 0");
  expect_clean_error(r, 2, {"--repeat", "got '0'"});
  EXPECT_HAS(r.err, "anvil run --help");
}

TEST_F(CliTest, RuntimeErrorsExitWith1) {
  const std::string model = sh_quote(fixture("mlp_small.pt2"));
  CliResult r = cli("run " + model + " --interpret -i " + sh_quote(dir_ / "missing.npy"));
  expect_clean_error(r, 1, {"missing.npy", "not found"});
  r = cli("inspect " + sh_quote(dir_ / "nope.pt2"));
  expect_clean_error(r, 1, {"nope.pt2", "not found"});
  // A .npy of the wrong shape: the interpreter's error names the input, dim, expected, actual.
  write_npy((dir_ / "wrong.npy").string(), Tensor::zeros({8, 128}, DType::kFloat32));
  r = cli("run " + model + " --interpret -i " + sh_quote(dir_ / "wrong.npy"));
  expect_clean_error(r, 1, {"input 0 'x'", "dim 1", "expected 256", "got 128"});
  write_npy((dir_ / "ints.npy").string(), Tensor::zeros({8, 256}, DType::kInt64));
  r = cli("run " + model + " --interpret -i " + sh_quote(dir_ / "ints.npy"));
  expect_clean_error(r, 1, {"input 0 'x'", "wrong dtype", "expected f32", "got i64"});
  r = cli("run " + model + " --interpret");
  expect_clean_error(r, 1, {"wrong number of inputs", "expected 1 (x)", "got 0"});
  // Out of range for the dynamic batch.
  write_npy((dir_ / "big.npy").string(), Tensor::zeros({65, 256}, DType::kFloat32));
  r = cli("run " + sh_quote(fixture("mlp_dynbatch.pt2")) + " --interpret -i " +
          sh_quote(dir_ / "big.npy"));
  expect_clean_error(r, 1, {"input 0 'x'", "dim 0", "expected [1, 64]", "got 65"});
  // Not a zip / not a .npy.
  std::ofstream(dir_ / "junk.pt2") << "not a zip";
  r = cli("inspect " + sh_quote(dir_ / "junk.pt2"));
  expect_clean_error(r, 1, {"junk.pt2"});
  r = cli("run " + model + " --interpret -i " + sh_quote(dir_ / "junk.pt2"));
  expect_clean_error(r, 1, {"junk.pt2"});
}

TEST_F(CliTest, HelpForEveryCommand) {
  for (const char* args : {"--help", "-h", "help"}) {
    const CliResult r = cli(args);
    EXPECT_EQ(r.code, 0) << args;
    for (const char* part :
         {"usage: anvil inspect", "usage: anvil run", "usage: anvil compare", "exit codes"})
      EXPECT_HAS(r.out, part);
  }
  for (const std::string cmd : {"inspect", "run", "compare"}) {
    for (const std::string& args : {cmd + " --help", cmd + " -h", "help " + cmd}) {
      const CliResult r = cli(args);
      EXPECT_EQ(r.code, 0) << args << r.err;
      EXPECT_EQ(r.out.rfind("usage: anvil " + cmd, 0), 0u) << args << "\n" << r.out;
    }
  }
  const CliResult run = cli("run --help");
  EXPECT_HAS(run.out, "-i, --input FILE");
  EXPECT_HAS(run.out, "-o, --output OUTDIR");
  EXPECT_HAS(run.out, "--interpret");
  EXPECT_HAS(run.out, "--repeat N");
  EXPECT_HAS(run.out, ".npy has no bfloat16: outputs of 16-bit float types are written as float32");
  EXPECT_HAS(run.out, "float32 .npy is accepted (and converted) for a bfloat16 or float16 input");
  const CliResult inspect = cli("inspect --help");
  EXPECT_HAS(inspect.out, "--no-ir");
  EXPECT_HAS(inspect.out, "--json");
  expect_clean_error(cli("help frob"), 2, {"unknown command 'frob'"});
}

}  // namespace
}  // namespace anvil

namespace anvil {
namespace {

// float8 through `anvil run` (.npy has no float8): an input is a uint8 array of the tensor's
// bytes or a float32 array converted as .to() does; float8 outputs are written as float32.
TEST_F(CliTest, RunTakesFloat8InputsAsBytesOrFloat32) {
  const std::string cache = " --cache-dir " + sh_quote((dir_ / "cache").string());
  std::string ins;
  for (int k = 0; k < 4; ++k)
    ins += " -i " + sh_quote(fixture("aot/aot_88_fp8_sum.in" + std::to_string(k) + ".npy"));
  const CliResult r = cli("run " + sh_quote(fixture("aot/aot_88_fp8_sum.pt2")) + ins + " -o " +
                          sh_quote(dir_ / "out") + cache);
  ASSERT_EQ(r.code, 0) << r.err;
  const Tensor want = read_npy(fixture("aot/aot_88_fp8_sum.out0.npy"));
  EXPECT_TRUE(::anvil::test::close(read_npy((dir_ / "out" / "out0.npy").string()), want, 1e-6));
  // x0 given as float32 values (those of its e4m3fn bytes): the same sum
  const Tensor b0 = read_npy(fixture("aot/aot_88_fp8_sum.in0.npy")).contiguous();
  const Tensor x0 = Tensor(b0.storage(), DType::kFloat8E4M3FN, b0.sizes(), b0.strides(), 0);
  write_npy((dir_ / "x0.npy").string(), x0.to(DType::kFloat32));
  std::string ins2 = " -i " + sh_quote(dir_ / "x0.npy");
  for (int k = 1; k < 4; ++k)
    ins2 += " -i " + sh_quote(fixture("aot/aot_88_fp8_sum.in" + std::to_string(k) + ".npy"));
  const CliResult r2 = cli("run " + sh_quote(fixture("aot/aot_88_fp8_sum.pt2")) + ins2 + " -o " +
                           sh_quote(dir_ / "out2") + cache);
  ASSERT_EQ(r2.code, 0) << r2.err;
  EXPECT_TRUE(::anvil::test::close(read_npy((dir_ / "out2" / "out0.npy").string()), want, 1e-6));
  // identity outputs of float8 inputs come back as float32 values
  std::string ins3;
  for (int k = 0; k < 4; ++k)
    ins3 += " -i " + sh_quote(fixture("aot/aot_88_fp8_identity.in" + std::to_string(k) + ".npy"));
  const CliResult r3 = cli("run " + sh_quote(fixture("aot/aot_88_fp8_identity.pt2")) + ins3 +
                           " -o " + sh_quote(dir_ / "out3") + cache);
  ASSERT_EQ(r3.code, 0) << r3.err;
  EXPECT_HAS(r3.out, "f8e5m2[8, 8, 8]");
  const Tensor o1 = read_npy((dir_ / "out3" / "out1.npy").string());
  const Tensor b1 = read_npy(fixture("aot/aot_88_fp8_identity.out1.npy")).contiguous();
  EXPECT_EQ(o1.dtype(), DType::kFloat32);
  EXPECT_TRUE(::anvil::test::close(
      o1, Tensor(b1.storage(), DType::kFloat8E5M2, b1.sizes(), b1.strides(), 0).to(DType::kFloat32),
      0.0));
}

// `anvil check`: the compiled package beside the interpreter, node by node. On the CPU the two
// agree on mlp_small; with a zero tolerance the last-bit differences of the GEMMs are reported
// at the first node that has one, with its op, element and both values, and exit status 1.
TEST_F(CliTest, CheckNamesTheFirstNodeThatDiffers) {
  const std::string in = sh_quote(fixture("mlp_small.in0.npy"));
  const CliResult ok = cli("check " + sh_quote(fixture("mlp_small.pt2")) + " -i " + in +
                           " --cache-dir " + sh_quote((dir_ / "cache").string()));
  ASSERT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_HAS(ok.out, "with 4 node values exposed");  // 5 nodes, the last already an output
  EXPECT_HAS(ok.out, "all 4 node values agree with the interpreter");

  const CliResult strict = cli("check " + sh_quote(fixture("mlp_small.pt2")) + " -i " + in +
                               " --tol 0 --all --cache-dir " + sh_quote((dir_ / "cache").string()));
  EXPECT_EQ(strict.code, 1) << strict.out << strict.err;
  EXPECT_HAS(strict.out, "first difference: node ");
  EXPECT_HAS(strict.out, "(aten.");
  EXPECT_HAS(strict.out, ": got ");
  EXPECT_HAS(strict.out, ", want ");
  EXPECT_HAS(strict.out, "DIFF ");  // --all lists every node

  const CliResult bad = cli("check " + sh_quote(fixture("mlp_small.pt2")) + " --tol -1");
  expect_clean_error(bad, 2, {"--tol needs a number >= 0"});
}

}  // namespace
}  // namespace anvil
