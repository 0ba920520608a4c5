// float8 on the CPU target (spec/aot.md case 88's fp8 parts and F14's fp8 pass-through; the GPU
// runs the same models in tests/gpu/test_cuda_fp8.cpp): fp8 inputs and outputs, casts to and
// from float32 / bfloat16 / float16 in the generated kernels bit for bit as PyTorch 2.15, four
// fp8 inputs summed as float32 over a dynamic dim, and aten._scaled_mm refused by the CPU
// compiler (the reference interpreter runs it). Fixtures: tests/fixtures/gen/export_fp8.py.
#include <gtest/gtest.h>

#include "aot/aot_util.h"
#include "common/fp8_fixture.h"
#include "core/npy.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"

namespace anvil::aot_test {
namespace {

/// The fixture's inputs as the package's input specs want them (float8 ones are bytes).
std::vector<Tensor> fp8_inputs(const runtime::Model& m, const std::string& name) {
  const auto raw = read_set(name, "in", "");
  std::vector<Tensor> out;
  for (size_t i = 0; i < raw.size(); ++i)
    out.push_back(test::fixture_as(raw[i], m.input_specs().at(i).dtype));
  return out;
}

/// Runs fixture `name` compiled for the CPU and in the interpreter; every output must equal
/// PyTorch's (float8 bit for bit, others within `tol`).
void check_fp8_fixture(const std::string& name, double tol, int nan_free_output = -1) {
  ANVIL_AOT_LOAD(model, name);
  const auto ins = fp8_inputs(model, name);
  const auto want = read_set(name, "out", "");
  ASSERT_FALSE(want.empty());
  const auto got = model.run(ins);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].dtype(), model.output_specs().at(i).dtype);
    test::expect_fixture_output(got[i], want[i], name + " output " + std::to_string(i), tol,
                                static_cast<int>(i) != nan_free_output);
  }
  auto graph = frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/aot/" + name + ".pt2");
  interp::Interpreter ref(*graph);
  const auto iref = ref.run(ins);
  ASSERT_EQ(iref.size(), want.size());
  for (size_t i = 0; i < iref.size(); ++i)
    test::expect_fixture_output(iref[i], want[i],
                                name + " output " + std::to_string(i) + " (interpreter)", tol,
                                static_cast<int>(i) != nan_free_output);
}

TEST(AotFp8, CastsMatchPyTorchBitForBit) {
  // a float32 table with NaN, +-inf, out-of-range values, ties and subnormals to each format
  // (e4m3fn saturates, e5m2 overflows to inf, fnuz gives NaN), back to float32, and through
  // bfloat16 / float16 / another fp8 format
  // (output 8, bf16 -> e4m3fn: NaN codes match as NaN — anvil's bfloat16 NaN is c10's canonical
  // +NaN where torch's vectorized CPU cast keeps -NaN's sign)
  check_fp8_fixture("aot_88_fp8_casts", 0.0, 8);
}

TEST(AotFp8, FourFp8InputsSummedAsF32) {
  // x0..x3 of e4m3fn, e5m2, e4m3fnuz, e5m2fnuz, (s0, 8, 8) with s0 in [2, 1024]
  check_fp8_fixture("aot_88_fp8_sum", 1e-6);
}

TEST(AotFp8, Fp8InputsPassThroughAndAreChecked) {
  // F14: identity outputs of the four formats, bit for bit; the runtime checks their dtypes
  check_fp8_fixture("aot_88_fp8_identity", 0.0);
  ANVIL_AOT_LOAD(model, "aot_88_fp8_identity");
  auto ins = fp8_inputs(model, "aot_88_fp8_identity");
  ins[1] = ins[1].to(DType::kFloat32);  // e5m2 expected
  ANVIL_EXPECT_ERROR(model.run(ins), "f8e5m2");
}

TEST(AotFp8, ScaledMmIsRefusedByTheCpuCompilerAndRunsInTheInterpreter) {
  const Built& b = build("aot_88_fp8_scaled_mm");
  ASSERT_FALSE(b.error.empty());
  EXPECT_NE(b.error.find("aten._scaled_mm"), std::string::npos) << b.error;
  EXPECT_NE(b.error.find("CUDA target"), std::string::npos) << b.error;
  // the interpreter (the GPU test's oracle) matches the fixture's float64 reference
  const std::string name = "aot_88_fp8_scaled_mm";
  auto graph = frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/aot/" + name + ".pt2");
  const auto raw = read_set(name, "in", "");
  std::vector<Tensor> ins;
  for (size_t i = 0; i < raw.size(); ++i)
    ins.push_back(test::fixture_as(raw[i], graph->input_specs().at(i).value->type.dtype));
  interp::Interpreter ref(*graph);
  const auto got = ref.run(ins);
  const auto want = read_set(name, "out", "");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].dtype(), DType::kFloat16);
  test::expect_fixture_output(got[0], want[0], name + " (interpreter)", 2e-3);
}

}  // namespace
}  // namespace anvil::aot_test
