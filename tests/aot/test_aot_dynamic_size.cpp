// Data-dependent sizes, spec/aot.md section 4 cases 60-62 (fixtures of scripts/export_aot_cf.py,
// PyTorch 2.11): nonzero and boolean-mask indexing compile into an extern writing at most the
// count's capacity plus a run-time symbol; buffers and outputs are planned at the capacity and
// outputs get their actual shape after the run.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "aot_util.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "runtime/model.h"

namespace anvil::aot_test {
namespace {

std::vector<Tensor> interpret(const std::string& name, const std::vector<Tensor>& ins) {
  const auto graph =
      frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/aot/" + name + ".pt2");
  interp::Interpreter ref(*graph);
  return ref.run(ins);
}

// 60: nonzero([1, 1, 1]) -> ones(u0, 1) fp16 @ y(1, 32) -> sum = 3 * sum(y).
TEST(AotDynamicSize, C60_NonzeroThenMatmul) {
  ANVIL_AOT_LOAD(model, "aot_60_nonzero_mm");
  EXPECT_NE(model_built.program_text.find("anvil.nonzero"), std::string::npos)
      << model_built.program_text;
  const auto ins = read_set("aot_60_nonzero_mm", "in", "");
  const auto want = read_set("aot_60_nonzero_mm", "out", "");
  expect_outputs(model.run(inputs_for(model, ins)), want, "case 60");
  // a different count on the same package: nonzero([1, 0, 1, ...]) has 2 rows
  std::vector<Tensor> two = inputs_for(model, ins);
  two[0] = Tensor::from_vector<int64_t>({1, 0, 1}, {3});
  const auto got = model.run(two);
  const auto ref = interpret("aot_60_nonzero_mm", two);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LT(rel_error(got[0], ref[0]), 5e-3) << got[0].item() << " vs " << ref[0].item();
}

// 61: sin(x[m]) / x[m] with m = |x| >= 0.001: a 1-D output whose length only the data gives.
TEST(AotDynamicSize, C61_MaskSelectOutput) {
  ANVIL_AOT_LOAD(model, "aot_61_mask_select");
  EXPECT_NE(model_built.program_text.find("anvil.mask_rows"), std::string::npos);
  const auto ins = read_set("aot_61_mask_select", "in", "");
  const auto want = read_set("aot_61_mask_select", "out", "");
  const auto got = model.run(ins);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].sizes(), want[0].sizes());
  expect_outputs(got, want, "case 61");
  expect_outputs(interpret("aot_61_mask_select", ins), want, "case 61 (interpreter)");
  // The output's length follows each run's data: all 256, then none, then the fixture again.
  const auto all = model.run({Tensor::full({4, 4, 4, 4}, 0.5, DType::kFloat32)});
  ASSERT_EQ(all[0].sizes(), (Shape{256}));
  EXPECT_NEAR(all[0].to_doubles()[255], std::sin(0.5) / 0.5, 1e-6);
  const auto none = model.run({Tensor::full({4, 4, 4, 4}, 0.0, DType::kFloat32)});
  EXPECT_EQ(none[0].sizes(), (Shape{0}));
  expect_outputs(model.run(ins), want, "case 61 again");
}

// 62: all-ones input with torch._check(len == 256): the count is fixed to 256 by the export;
// data with another count is a clear error, not a wrong answer.
TEST(AotDynamicSize, C62_AssertedCount) {
  ANVIL_AOT_LOAD(model, "aot_62_mask_select_256");
  const auto ins = read_set("aot_62_mask_select_256", "in", "");
  const auto want = read_set("aot_62_mask_select_256", "out", "");
  const auto got = model.run(ins);
  ASSERT_EQ(got[0].sizes(), (Shape{256}));
  expect_outputs(got, want, "case 62");
  Tensor some_zero = Tensor::full({4, 4, 4, 4}, 1.0, DType::kFloat32);
  static_cast<float*>(some_zero.data_ptr())[7] = 0.0f;
  try {
    model.run({some_zero});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("asserted"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("255"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace anvil::aot_test
