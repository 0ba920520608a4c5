// More CPU cases of spec/aot.md section 4 (fixtures of scripts/export_aot_more.py): a dict input
// (24), where packages are written (26-28), recompiling after a weight change (29) and the
// constants' original names (30). Packages are written by driver::compile_pt2, the path the
// CLI's `anvil compile` takes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include "aot_util.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "driver/compile.h"
#include "runtime/model.h"

namespace anvil::aot_test {
namespace {

namespace fs = std::filesystem;

std::string aot_fixture(const std::string& name) {
  return std::string(ANVIL_FIXTURES_DIR) + "/aot/" + name + ".pt2";
}

/// A fresh temporary directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string p = (fs::temp_directory_path() / "anvil_aot_more_XXXXXX").string();
    if (!mkdtemp(p.data())) throw std::runtime_error("mkdtemp failed");
    path = p;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

driver::CompileOptions quiet_options(const fs::path& cache) {
  driver::CompileOptions o;
  o.jobs = 2;
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = cache.string();
  return o;
}

/// Loads `package` and expects the outputs of fixture `name`'s first input set.
void expect_fixture_outputs(const std::string& package, const std::string& name) {
  runtime::Model m = runtime::Model::load(package);
  expect_outputs(m.run(read_set(name, "in", "")), read_set(name, "out", ""), package);
}

// Case 24: a dict input {"x", "y"} flattens to two inputs in key order; output [2x, y].
TEST(AotCase, C24_DictInput) {
  ANVIL_AOT_LOAD(model, "aot_24_dict_input");
  ASSERT_EQ(model.input_specs().size(), 2u);
  EXPECT_EQ(model.input_specs()[0].name, "d_x");
  EXPECT_EQ(model.input_specs()[1].name, "d_y");
  const Tensor ones = Tensor::full({5}, 1, DType::kFloat32);
  expect_outputs(model.run({ones, ones}), read_set("aot_24_dict_input", "out", ""), "dict input");
}

// Cases 26-28: a package goes exactly where it is asked to (absolute path; a relative name
// without extension, resolved against the working directory), and compiling the same model twice
// gives two packages that both load and run.
TEST(AotCase, C26_27_28_OutputPaths) {
  TempDir dir;
  const auto o = quiet_options(dir.path / "cache");
  const std::string name = "aot_29_linear_w";
  const fs::path abs = dir.path / "sub" / "model.anvil";
  fs::create_directories(abs.parent_path());
  driver::compile_pt2(aot_fixture(name), abs.string(), o);
  ASSERT_TRUE(fs::is_regular_file(abs));
  expect_fixture_outputs(abs.string(), name);

  const fs::path old_cwd = fs::current_path();
  fs::current_path(dir.path);
  driver::compile_pt2(aot_fixture(name), "tmp_output_", o);
  fs::current_path(old_cwd);
  ASSERT_TRUE(fs::is_regular_file(dir.path / "tmp_output_"));
  expect_fixture_outputs((dir.path / "tmp_output_").string(), name);

  const fs::path again = dir.path / "again.anvil";
  driver::compile_pt2(aot_fixture(name), again.string(), o);
  expect_fixture_outputs(abs.string(), name);  // the first package is still valid
  expect_fixture_outputs(again.string(), name);
}

// Case 29: the same linear model with W and with W + 1: the package cache keys on the archive's
// content, so the second compile reflects the new weight.
TEST(AotCase, C29_RecompileAfterWeightChange) {
  TempDir dir;
  const auto o = quiet_options(dir.path / "cache");
  const std::string p1 = driver::cached_package_for(aot_fixture("aot_29_linear_w"), o);
  const std::string p2 = driver::cached_package_for(aot_fixture("aot_29_linear_w_plus_1"), o);
  EXPECT_NE(p1, p2);
  expect_fixture_outputs(p1, "aot_29_linear_w");
  expect_fixture_outputs(p2, "aot_29_linear_w_plus_1");
  const auto a = runtime::Model::load(p1).run(read_set("aot_29_linear_w", "in", ""));
  const auto b = runtime::Model::load(p2).run(read_set("aot_29_linear_w", "in", ""));
  EXPECT_GT(rel_error(b[0], a[0]), 1e-3) << "the new weight must change the output";
}

// Case 30: the constants' original names are the module FQNs, every one f32.
TEST(AotCase, C30_ConstantFqnMap) {
  ANVIL_AOT_LOAD(model, "aot_30_fqn_constants");
  std::set<std::string> names;
  for (const auto& [name, fqn] : model.constant_original_names()) names.insert(fqn);
  EXPECT_EQ(names, (std::set<std::string>{"test_param", "test_buf", "foo_bar.0",
                                          "foo_bar.test_param", "foo_bar.test_buf"}));
  for (const auto& c : model.constant_specs()) EXPECT_EQ(c.dtype, DType::kFloat32) << c.name;
  expect_outputs(model.run(read_set("aot_30_fqn_constants", "in", "")),
                 read_set("aot_30_fqn_constants", "out", ""), "fqn model");
}

// Case 42: index_put with (None, None, zeros(3,14,1,1), ones(14,3).t()) and accumulate: 1,764
// values land on each [:, :, 0, 1]. Matches PyTorch and is the same bit for bit run after run.
TEST(AotCase, C42_IndexPutAccumulate) {
  ANVIL_AOT_LOAD(model, "aot_42_index_put_accumulate");
  const auto ins = read_set("aot_42_index_put_accumulate", "in", "");
  const auto first = model.run(ins);
  expect_outputs(first, read_set("aot_42_index_put_accumulate", "out", ""), "case 42");
  for (int k = 0; k < 3; ++k) EXPECT_EQ(rel_error(model.run(ins)[0], first[0]), 0.0);
}

// Case 47: Linear(10, 10) under torch.autocast("cpu", bfloat16): the importer inlines the region
// with the casts made explicit, so the output is bf16 and within bf16 tolerance of PyTorch.
TEST(AotCase, C47_AutocastBf16) {
  ANVIL_AOT_LOAD(model, "aot_47_autocast_bf16");
  ASSERT_EQ(model.output_specs().size(), 1u);
  EXPECT_EQ(model.output_specs()[0].dtype, DType::kBFloat16);
  const auto got = model.run(read_set("aot_47_autocast_bf16", "in", ""));
  EXPECT_EQ(got[0].dtype(), DType::kBFloat16);
  expect_outputs(got, read_set("aot_47_autocast_bf16", "out", ""), "case 47");
  const auto graph = frontend::load_pt2(aot_fixture("aot_47_autocast_bf16"));
  int casts = 0;
  for (const ir::Node* n : graph->nodes()) {
    EXPECT_NE(n->target, "higher_order.wrap_with_autocast");
    if (n->target == "aten._to_copy.default") ++casts;
  }
  EXPECT_EQ(casts, 3);  // x, weight and bias to bf16
}

// Case 47, nested: a bf16 region holding a disabled region and an f64 matmul. The inner region
// keeps f32 (the outer one does not cast it) and autocast never casts f64 tensors.
TEST(AotCase, C47_AutocastNestedRegions) {
  ANVIL_AOT_LOAD(model, "aot_47_autocast_nested");
  ASSERT_EQ(model.output_specs().size(), 3u);
  EXPECT_EQ(model.output_specs()[0].dtype, DType::kBFloat16);
  EXPECT_EQ(model.output_specs()[1].dtype, DType::kFloat32);
  EXPECT_EQ(model.output_specs()[2].dtype, DType::kFloat64);
  const auto ins = read_set("aot_47_autocast_nested", "in", "");
  const auto want = read_set("aot_47_autocast_nested", "out", "");
  expect_outputs(model.run(inputs_for(model, ins)), want, "case 47 nested");
  const auto graph = frontend::load_pt2(aot_fixture("aot_47_autocast_nested"));
  interp::Interpreter ref(*graph);
  expect_outputs(ref.run(ins), want, "case 47 nested (interpreter)");
}

// Case 80: a graph recorded with its example input (and weights) on cuda:0 is refused by the CPU
// compiler before code generation, naming every tensor on the other device.
TEST(AotCase, C80_DeviceMismatchIsACompileError) {
  const Built& b = build("aot_80_cuda_inputs");
  ASSERT_FALSE(b.error.empty());
  EXPECT_NE(b.error.find("Device mismatch"), std::string::npos) << b.error;
  EXPECT_NE(b.error.find("input 'x' on cuda:0"), std::string::npos) << b.error;
  EXPECT_NE(b.error.find("lin.weight"), std::string::npos) << b.error;
}

// Case 81: an input dtype the compiler cannot compute with is a compile error naming the inputs
// and the dtype: float8 inputs compile when they are only cast, copied or viewed (AotFp8.*), but
// arithmetic on them (which PyTorch does not implement either) is refused before codegen.
TEST(AotCase, C81_UnsupportedInputDtypeIsACompileError) {
  const auto graph = ir::parse_graph(R"(graph {
  inputs {
    %a: f8e4m3fn[8] = user_input
    %b: f8e4m3fn[8] = user_input
  }
  %add: f8e4m3fn[8] = aten.add.Tensor(self=%a, other=%b)
  outputs {
    user_output %add
  }
})");
  const Built& b = build_graph("c81_float8_add", *graph);
  ASSERT_FALSE(b.error.empty());
  EXPECT_NE(b.error.find("Unsupported input dtype"), std::string::npos) << b.error;
  EXPECT_NE(b.error.find("'a' f8e4m3fn"), std::string::npos) << b.error;
  EXPECT_NE(b.error.find("'b' f8e4m3fn"), std::string::npos) << b.error;
  EXPECT_NE(b.error.find("aten.add.Tensor"), std::string::npos) << b.error;
}

}  // namespace
}  // namespace anvil::aot_test
