// Acceptance: the interpreter reproduces PyTorch's outputs for the bundled torch.export
// fixtures (every shape set), keeps mutated buffers across calls, and checks inputs against the
// export's signature with errors naming the input, the dim, expected and actual.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/check.h"
#include "core/error.h"
#include "core/npy.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"

namespace anvil {
namespace {

std::string fixture(const std::string& file) {
  return std::string(ANVIL_FIXTURES_DIR) + "/" + file;
}
bool exists(const std::string& file) { return std::filesystem::exists(fixture(file)); }

/// anvil's tolerance: fp32 max|got - want| <= 1e-4 * max(1, max|want|), 16-bit floats 2e-2,
/// integers and bools exactly. `got` may be 16-bit while the reference .npy is float32.
void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const bool exact = !is_floating(got.dtype()) && !is_floating(want.dtype());
  if (exact) {
    ASSERT_EQ(is_integral(got.dtype(), true), is_integral(want.dtype(), true)) << what;
  }
  const double tol =
      (got.dtype() == DType::kBFloat16 || got.dtype() == DType::kFloat16) ? 2e-2 : 1e-4;
  EXPECT_TRUE(::anvil::test::close(got, want, exact ? 0.0 : tol)) << what;
}

/// Inputs NAME.in0SUFFIX.npy, NAME.in1SUFFIX.npy, ... that exist.
std::vector<Tensor> read_inputs(const std::string& name, const std::string& suffix) {
  std::vector<Tensor> out;
  for (int k = 0; exists(name + ".in" + std::to_string(k) + suffix + ".npy"); ++k)
    out.push_back(read_npy(fixture(name + ".in" + std::to_string(k) + suffix + ".npy")));
  return out;
}

/// Runs one shape set and compares every output with NAME.outKSUFFIX.npy.
void check_shape_set(interp::Interpreter& in, const std::string& name, const std::string& suffix) {
  const std::string set = name + (suffix.empty() ? "" : " set" + suffix);
  const std::vector<Tensor> outs = in.run(read_inputs(name, suffix));
  int k = 0;
  for (; exists(name + ".out" + std::to_string(k) + suffix + ".npy"); ++k) {
    ASSERT_LT(static_cast<size_t>(k), outs.size()) << set << ": too few outputs";
    expect_close(outs[k], read_npy(fixture(name + ".out" + std::to_string(k) + suffix + ".npy")),
                 set + " out" + std::to_string(k));
  }
  EXPECT_EQ(outs.size(), static_cast<size_t>(k)) << set;
}

class FixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTest, MatchesPyTorchOnEveryShapeSet) {
  const std::string name = GetParam();
  const auto graph = frontend::load_pt2(fixture(name + ".pt2"));
  interp::Interpreter in(*graph);
  check_shape_set(in, name, "");
  // Extra shape sets NAME.in0_J.npy (dynamic shapes), in the same interpreter.
  for (int j = 0; exists(name + ".in0_" + std::to_string(j) + ".npy"); ++j)
    check_shape_set(in, name, "_" + std::to_string(j));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTest,
                         ::testing::Values("mlp_small", "small_cnn", "const_and_buffer",
                                           "mlp_dynbatch", "llama_tiny", "gpt2_tiny", "bert_tiny",
                                           "block_tiny"));

/// Runs `fn`, expecting an Error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << msg << "\n  lacks: " << p;
  }
}

// const_and_buffer: running = running*0.9 + 0.1*mean(l(x)*scale, 0); steps += 1;
// returns (l(x)*scale - running, steps.clone()), mutating both buffers in place.
TEST(ConstAndBuffer, SecondCallSeesPersistedBuffers) {
  const auto graph = frontend::load_pt2(fixture("const_and_buffer.pt2"));
  const Tensor running0 = graph->constants.at("running").clone();
  interp::Interpreter in(*graph);
  const std::vector<Tensor> x = read_inputs("const_and_buffer", "");
  const auto first = in.run(x);
  ASSERT_EQ(first.size(), 2u);
  expect_close(first[0], read_npy(fixture("const_and_buffer.out0.npy")), "call 1 out0");
  expect_close(first[1], read_npy(fixture("const_and_buffer.out1.npy")), "call 1 out1");
  EXPECT_EQ(first[1].item(), 1);
  const Tensor running1 = in.state().at("running").clone();
  EXPECT_EQ(in.state().at("steps").item(), 1);

  // y = l(x)*scale is the same both calls: y = out0 + running1 (per column).
  const int64_t rows = first[0].size(0), cols = first[0].size(1);
  const std::vector<double> out0 = first[0].to_doubles(), r1 = running1.to_doubles(),
                            r0 = running0.to_doubles();
  std::vector<double> mean(cols, 0), r2(cols), want_out(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) mean[j] += (out0[i * cols + j] + r1[j]) / rows;
  for (int64_t j = 0; j < cols; ++j) {
    EXPECT_NEAR(r1[j], 0.9 * r0[j] + 0.1 * mean[j], 1e-5) << "running after call 1, col " << j;
    r2[j] = 0.9 * r1[j] + 0.1 * mean[j];
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) want_out[i * cols + j] = out0[i * cols + j] + r1[j] - r2[j];

  const auto second = in.run(x);
  std::vector<float> want_f(want_out.begin(), want_out.end());
  expect_close(second[0], Tensor::from_vector(want_f, {rows, cols}), "call 2 out0");
  EXPECT_EQ(second[1].dtype(), DType::kInt64);
  EXPECT_EQ(second[1].item(), 2);
  std::vector<float> r2f(r2.begin(), r2.end());
  expect_close(in.state().at("running"), Tensor::from_vector(r2f), "running after call 2");
  // The first call's results and the Graph's own constants are unchanged.
  EXPECT_EQ(first[1].item(), 1);
  expect_close(graph->constants.at("running"), running0, "graph constant running");
  EXPECT_EQ(graph->constants.at("steps").item(), 0);
}

/// Rows [begin, end) of a 2-d tensor as a new tensor.
Tensor rows_of(const Tensor& t, int64_t begin, int64_t end) {
  return t.slice(0, begin, end).clone();
}

TEST(MlpDynBatch, RowsAloneAndTiledMatchTheBatchOf5) {
  const auto graph = frontend::load_pt2(fixture("mlp_dynbatch.pt2"));
  interp::Interpreter in(*graph);
  const Tensor x = read_npy(fixture("mlp_dynbatch.in0.npy"));
  const Tensor want = read_npy(fixture("mlp_dynbatch.out0.npy"));
  ASSERT_EQ(x.size(0), 5);
  expect_close(in.run({x})[0], want, "batch 5");
  EXPECT_EQ(in.last_symbols().at("s77"), 5);
  for (int64_t r = 0; r < 5; ++r) {
    const auto out = in.run({rows_of(x, r, r + 1)});
    EXPECT_EQ(in.last_symbols().at("s77"), 1);
    expect_close(out[0], rows_of(want, r, r + 1), "row " + std::to_string(r) + " alone");
  }
  Tensor tiled = Tensor::empty({64, x.size(1)}, x.dtype());
  for (int64_t r = 0; r < 64; ++r) tiled.select(0, r).copy_from(x.select(0, r % 5));
  const Tensor out = in.run({tiled})[0];
  ASSERT_EQ(out.sizes(), (Shape{64, want.size(1)}));
  for (int64_t r = 0; r < 64; ++r)
    expect_close(rows_of(out, r, r + 1), rows_of(want, r % 5, r % 5 + 1),
                 "tiled row " + std::to_string(r));
}

TEST(MlpDynBatch, BatchOutsideRangeIsRejected) {
  const auto graph = frontend::load_pt2(fixture("mlp_dynbatch.pt2"));
  interp::Interpreter in(*graph);
  const int64_t features = read_npy(fixture("mlp_dynbatch.in0.npy")).size(1);
  for (int64_t batch : {0, 65})
    expect_error(
        [&] {
          in.run({Tensor::zeros({batch, features}, DType::kFloat32)});
        },
        {"input 0 'x'", "dim 0", "out of range", "expected [1, 64]",
         "got " + std::to_string(batch) + ")"});
}

TEST(InputChecks, MlpSmallRejectsBadInputs) {
  const auto graph = frontend::load_pt2(fixture("mlp_small.pt2"));
  interp::Interpreter in(*graph);
  const Tensor x = read_npy(fixture("mlp_small.in0.npy"));  // f32[8, 256]
  expect_error([&] { in.run({}); }, {"wrong number of inputs", "expected 1 (x)", "got 0"});
  expect_error([&] { in.run({x, x}); }, {"wrong number of inputs", "expected 1 (x)", "got 2"});
  expect_error([&] { in.run({x.to(DType::kInt64)}); },
               {"input 0 'x'", "wrong dtype", "expected f32", "got i64"});
  expect_error([&] { in.run({x.to(DType::kFloat64)}); }, {"input 0 'x'", "got f64"});
  expect_error(
      [&] {
        in.run({x.reshape({8, 16, 16})});
      },
      {"input 0 'x'", "wrong rank", "expected 2 dims [8, 256]", "got 3 dims [8, 16, 16]"});
  expect_error(
      [&] {
        in.run({x.reshape({16, 128})});
      },
      {"input 0 'x'", "dim 0", "expected 8", "got 16"});
  expect_error([&] { in.run({x.slice(1, 0, 128)}); },
               {"input 0 'x'", "dim 1", "expected 256", "got 128"});
  // After the failures the interpreter still works; a non-contiguous input is fine.
  expect_close(in.run({x.transpose(0, 1).contiguous().transpose(0, 1)})[0],
               read_npy(fixture("mlp_small.out0.npy")), "non-contiguous input");
}

TEST(InputChecks, BertTinyChecksBothInputsAndSharedSymbols) {
  const auto graph = frontend::load_pt2(fixture("bert_tiny.pt2"));
  interp::Interpreter in(*graph);
  const std::vector<Tensor> ins = read_inputs("bert_tiny", "");  // i64[2, 16] twice
  const Tensor other = read_inputs("bert_tiny", "_0")[1];        // i64[3, 7]
  expect_error(
      [&] {
        in.run({ins[0], other});
      },
      {"input 1 'mask'", "dim 0", "expected 2", "got 3"});
  expect_error(
      [&] {
        in.run({ins[0], ins[1].to(DType::kInt32)});
      },
      {"input 1 'mask'", "wrong dtype", "expected i64", "got i32"});
  // The sequence symbol's range is [2, 128]: a length of 1 is refused.
  expect_error(
      [&] {
        in.run({ins[0].slice(1, 0, 1), ins[1].slice(1, 0, 1)});
      },
      {"input 0 'ids'", "dim 1", "out of range", "expected [2, 128]", "got 1"});
}

// Collectives run in the interpreter through dist (interp/collective_kernels.cpp): without a
// live process group the run fails at the all_reduce node, naming its group.
TEST(Collectives, InterpreterWithoutAGroupNamesTheGroup) {
  const auto graph = frontend::load_pt2(fixture("tp_mlp_allreduce.pt2"));
  interp::Interpreter in(*graph);
  const Tensor x = Tensor::zeros({4, 64}, DType::kFloat32);
  expect_error([&] { in.run({x}); }, {"all_reduce", "process group", "group '0'"});
}

}  // namespace
}  // namespace anvil
