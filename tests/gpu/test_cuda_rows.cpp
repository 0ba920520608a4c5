// Row kernels on the GPU (codegen/cuda/emit_cuda_rows.cpp): the graph of cuda_row_graphs.inc —
// a thread per row for layer_norm / amax / amin over the channels of NCHW tensors (with their
// few-row fallbacks), a warp per row for layer_norm / softmax / sum / amax / amin over short
// rows in f32 / bf16 / f16, a block per row for long ones — against the reference interpreter,
// with rows of NaN, +-inf and mixes of them for the max / min reductions, each run three times
// (plain, then captured into a CUDA graph and replayed). The same graph compiled with
// ANVIL_CUDA_ROWS=block (a block per row everywhere) must give the same, and so must each launch
// mode (ANVIL_CUDA_PDL). Label gpu: skips
// without a GPU (ANVIL_REQUIRE_GPU=1: fails).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "codegen/harness.h"
#include "common/check.h"
#include "common/scoped_env.h"
#include "cuda_row_graphs.inc"
#include "driver/compile.h"
#include "gpu/gpu_test_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/model.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

/// The position of user input `name` in `g`'s inputs.
size_t input_index(const ir::Graph& g, const std::string& name) {
  size_t i = 0;
  for (const auto& spec : g.input_specs()) {
    if (spec.value->name == name) return i;
    ++i;
  }
  ADD_FAILURE() << "no input " << name;
  return 0;
}

/// Random inputs of `g`, its symbolic sizes `s0`.
std::vector<Tensor> random_inputs(const ir::Graph& g, int64_t s0 = 1) {
  std::vector<Tensor> ins;
  uint64_t seed = 300;
  for (const auto& spec : g.input_specs()) {
    Shape sizes;
    for (const auto& s : spec.value->type.sizes)
      sizes.push_back(s.is_constant() ? s.constant() : s0);
    ins.push_back(testing::random_tensor(sizes, spec.value->type.dtype, seed++));
  }
  return ins;
}

/// Random inputs of kRowGraph, with NaN / +-inf rows in the inputs of the max / min
/// reductions: m [2, 33, 64, 67] (reduced over dim 1), n33 [19, 33] and n128 [9, 128] (over
/// dim 1).
std::vector<Tensor> inputs(const ir::Graph& g) {
  std::vector<Tensor> ins = random_inputs(g);
  const float inf = INFINITY, nan = NAN;
  {  // m: rows (n, h, w), channels 33 elements apart by 64 * 67
    float* m = ins[input_index(g, "m")].data<float>();
    const auto at = [&](int n, int c, int h, int w) -> float& {
      return m[((n * 33 + c) * 64 + h) * 67 + w];
    };
    for (int c = 0; c < 33; ++c) {
      at(0, c, 0, 0) = -inf;  // all -inf: amax -inf
      at(0, c, 5, 5) = nan;   // all NaN
      at(1, c, 7, 66) = inf;  // all +inf: amin +inf
    }
    at(0, 5, 0, 1) = nan;                             // NaN among finite values
    at(1, 32, 63, 66) = inf;                          // +inf last
    at(1, 0, 10, 10) = nan, at(1, 1, 10, 10) = -inf;  // NaN then -inf
    at(1, 31, 2, 3) = -inf, at(1, 32, 2, 3) = nan;    // -inf then NaN last
    at(0, 0, 40, 40) = inf, at(0, 1, 40, 40) = -inf;  // both infinities
  }
  {  // n33: rows of 33
    float* n = ins[input_index(g, "n33")].data<float>();
    for (int c = 0; c < 33; ++c) n[0 * 33 + c] = -inf, n[4 * 33 + c] = nan, n[9 * 33 + c] = inf;
    n[1 * 33 + 32] = nan;
    n[2 * 33 + 0] = inf;
    n[3 * 33 + 7] = nan, n[3 * 33 + 8] = inf;
    n[18 * 33 + 17] = -inf;
    n[17 * 33 + 31] = inf, n[17 * 33 + 32] = -inf;
  }
  {  // n128 (bf16 bits): rows of 128
    auto* n = static_cast<uint16_t*>(ins[input_index(g, "n128")].data_ptr());
    const uint16_t bnan = 0x7FC0, binf = 0x7F80, bninf = 0xFF80;
    for (int c = 0; c < 128; ++c) n[2 * 128 + c] = bninf;
    n[0 * 128 + 127] = bnan;
    n[1 * 128 + 64] = binf;
    n[8 * 128 + 0] = bnan;
    n[5 * 128 + 3] = binf, n[5 * 128 + 100] = bnan;
  }
  return ins;
}

/// Compiles `g` for cuda-sm90 as NAME.anvil (no GPU needed); returns its path.
std::string compile(const ir::Graph& g, const std::string& name) {
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (gpu_test::out_dir() / "cache").string();
  const std::string pkg = (gpu_test::out_dir() / (name + ".anvil")).string();
  driver::compile_graph(g, pkg, o);  // ANVIL_CUDA_ROWS as the environment has it (unset: auto)
  return pkg;
}

/// Runs package `pkg` of `g` three times on cuda:0 (plain, captured, replayed) on `ins` against
/// the interpreter: NaN where it has NaN, infinities equal, finite values within the dtype's
/// tolerance.
void expect_matches(const ir::Graph& g, const std::string& pkg, const std::vector<Tensor>& ins) {
  interp::Interpreter ref(g);
  const auto want = ref.run(ins);
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model m = runtime::Model::load(pkg, mo);
  std::vector<Tensor> dev;
  for (const Tensor& t : ins) dev.push_back(t.to(Device::cuda(0)));
  const auto& outs = g.output_specs();
  for (int run = 0; run < 3; ++run) {
    const auto got = m.run(dev);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const DType t = want[i].dtype();
      EXPECT_TRUE(
          ::anvil::test::close(got[i].to(Device::cpu()), want[i],
                               t == DType::kFloat32 ? 1e-4 : ::anvil::test::tolerance_of(t)))
          << fs::path(pkg).stem() << " run " << run << " output " << i << " ("
          << outs[i].value->name << ")";
    }
  }
}

TEST(CudaRows, EachFormMatchesTheInterpreter) {
  const auto g = ir::parse_graph(kRowGraph);
  const std::string pkg = compile(*g, "rows");
  ANVIL_REQUIRE_GPU();
  expect_matches(*g, pkg, inputs(*g));
}

TEST(CudaRows, BlockPerRowEverywhereMatchesTheInterpreter) {
  const auto g = ir::parse_graph(kRowGraph);
  std::string pkg;
  {
    const test::ScopedEnv rows("ANVIL_CUDA_ROWS", "block");
    pkg = compile(*g, "rows_block");
  }
  ANVIL_REQUIRE_GPU();
  expect_matches(*g, pkg, inputs(*g));
}

// Vectorized rows of at most 16 vectors share a warp by default (EachFormMatchesTheInterpreter
// runs that form; CudaRowsEmit.ShortVectorRowsShareAWarp); ANVIL_CUDA_ROW_SEGMENTS=0 gives each
// a warp of its own: reductions and stores over the whole warp.
TEST(CudaRows, AWarpPerShortVectorRowMatchesTheInterpreter) {
  const auto g = ir::parse_graph(kRowGraph);
  std::string pkg;
  {
    const test::ScopedEnv seg("ANVIL_CUDA_ROW_SEGMENTS", "0");
    pkg = compile(*g, "rows_noseg");
  }
  ANVIL_REQUIRE_GPU();
  expect_matches(*g, pkg, inputs(*g));
}

// The launch modes (codegen/cuda/emit_cuda.cpp pdl_mode): plain launches, and programmatic
// launches whose kernels let the next one be scheduled at their start (the default, waiting
// only, is EachFormMatchesTheInterpreter). Every kernel of the chain reads what the one before
// wrote, in plain runs and in the captured graph's replays.
TEST(CudaRows, EveryLaunchModeMatchesTheInterpreter) {
  const auto g = ir::parse_graph(kRowGraph);
  for (const char* mode : {"0", "2"}) {
    std::string pkg;
    {
      const test::ScopedEnv pdl("ANVIL_CUDA_PDL", mode);
      pkg = compile(*g, std::string("rows_pdl") + mode);
    }
    ANVIL_REQUIRE_GPU();
    SCOPED_TRACE(std::string("ANVIL_CUDA_PDL=") + mode);
    expect_matches(*g, pkg, inputs(*g));
  }
}

TEST(CudaRows, RowCountsKnownAtRunTimeMatchTheInterpreter) {
  // 13 images: 8320 rows, the thread-per-row kernels; 2 and 1: a warp per row
  const auto g = ir::parse_graph(kSymbolicRowGraph);
  const std::string pkg = compile(*g, "rows_symbolic");
  ANVIL_REQUIRE_GPU();
  for (int64_t s0 : {13, 2, 1}) {
    std::vector<Tensor> ins = random_inputs(*g, s0);
    float* x = ins[0].data<float>();  // [s0, 48, 16, 40]: row (n, h, w), channel c
    const auto at = [&](int64_t n, int64_t c, int64_t h, int64_t w) -> float& {
      return x[((n * 48 + c) * 16 + h) * 40 + w];
    };
    for (int64_t c = 0; c < 48; ++c) at(0, c, 1, 0) = -INFINITY;  // softmax: NaN, amax: -inf
    at(0, 3, 0, 0) = NAN;
    at(s0 - 1, 47, 15, 39) = INFINITY;
    SCOPED_TRACE("s0 = " + std::to_string(s0));
    expect_matches(*g, pkg, ins);
  }
}

}  // namespace
}  // namespace anvil
