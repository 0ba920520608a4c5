// The text-IR graphs of tests/codegen (pointwise chains with broadcasting, reductions, softmax /
// layer_norm / RMSNorm, views, GEMMs in every layout, ints and bools, bf16, f64, zero sizes, NaN,
// symbolic sizes) compiled for cuda-sm90 and run on the GPU against the reference interpreter.
// Compiling needs no GPU (it runs, and checks refusals, everywhere); running skips without one
// (ANVIL_REQUIRE_GPU=1: fails).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "codegen/harness.h"
#include "common/check.h"
#include "core/error.h"
#include "driver/compile.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/device_backend.h"
#include "runtime/model.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

struct Case {
  const char* name;
  const char* text;
};

#include "codegen/graph_cases.inc"
// clang-format on

/// Graphs the CUDA target refuses today, with the phrase of the refusal (an extern op it has no
/// kernel for yet). A listed graph that compiles fails too, so the list cannot go stale.
const std::map<std::string, std::string> kRefused = {
#include "cuda_refused_graphs.inc"
};

std::vector<Tensor> make_inputs(const ir::Graph& g, int64_t s0, uint64_t seed) {
  std::vector<Tensor> ins;
  for (const auto& spec : g.input_specs()) {
    if (spec.kind != ir::InputKind::kUserInput) continue;
    Shape sizes;
    for (const auto& s : spec.value->type.sizes)
      sizes.push_back(s.is_constant() ? s.constant() : s0);
    ins.push_back(testing::random_tensor(sizes, spec.value->type.dtype, seed++));
  }
  return ins;
}

class CudaGraph : public ::testing::TestWithParam<Case> {};

TEST_P(CudaGraph, MatchesTheInterpreterOnTheGpu) {
  const Case& c = GetParam();
  auto g = ir::parse_graph(c.text);
  ir::verify(*g);
  uint64_t seed = 100;
  for (const auto& spec : g->input_specs())
    if (spec.kind != ir::InputKind::kUserInput) {
      Shape sizes;
      for (const auto& s : spec.value->type.sizes) sizes.push_back(s.constant());
      g->constants[spec.target] = testing::random_tensor(sizes, spec.value->type.dtype, seed++);
    }
  const char* outdir = std::getenv("ANVIL_TEST_OUTDIR");
  const fs::path dir = fs::path(outdir && *outdir ? outdir : fs::temp_directory_path().c_str()) /
                       ("anvil_gpu_graphs_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (dir / "cache").string();
  const std::string pkg = (dir / (std::string(c.name) + ".anvil")).string();
  const std::string err = ::anvil::test::error_message([&] { driver::compile_graph(*g, pkg, o); });
  const auto refused = kRefused.find(c.name);
  if (refused != kRefused.end()) {
    EXPECT_TRUE(::anvil::test::error_says(err, refused->second)) << c.name << " is listed as refused";
    return;
  }
  ASSERT_EQ(err, "") << c.name;

  try {
    runtime::require_device(Device::cuda(0), "tests/gpu");
  } catch (const Error& e) {
    const char* req = std::getenv("ANVIL_REQUIRE_GPU");
    if (req && std::string(req) == "1") FAIL() << "ANVIL_REQUIRE_GPU=1 but: " << e.what();
    GTEST_SKIP() << "compiled; no GPU to run it: " << e.what();
  }
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model m = runtime::Model::load(pkg, mo);
  const std::vector<Tensor> ins = make_inputs(*g, 1, 7);
  std::vector<Tensor> dev;
  for (const Tensor& t : ins) dev.push_back(t.to(Device::cuda(0)));
  interp::Interpreter ref(*g);
  const int runs = std::string(c.name) == "buffer_update" ? 3 : 1;  // state persists across runs
  for (int r = 0; r < runs; ++r) {
    const auto want = ref.run(ins);
    const auto got = m.run(dev);
    ASSERT_EQ(got.size(), want.size()) << c.name;
    for (size_t i = 0; i < got.size(); ++i) {
      const Tensor h = got[i].to(Device::cpu());
      ASSERT_EQ(h.sizes(), want[i].sizes()) << c.name << " output " << i;
      ASSERT_EQ(h.dtype(), want[i].dtype()) << c.name << " output " << i;
      const bool exact = !is_floating(want[i].dtype()) && !is_complex(want[i].dtype());
      const bool low = want[i].dtype() == DType::kBFloat16 || want[i].dtype() == DType::kFloat16 ||
                       want[i].dtype() == DType::kComplex32 ||
                       std::string(c.name) == "bf16";
      const double tol = exact ? 0.0 : low ? 2e-2 : 1e-4;
      EXPECT_LE(testing::rel_error(h, want[i]), tol) << c.name << " run " << r << " output " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Graphs, CudaGraph, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.name);
                         });

}  // namespace
}  // namespace anvil
