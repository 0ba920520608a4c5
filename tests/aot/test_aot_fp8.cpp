// float8 on the CPU target (spec/aot.md case 88's fp8 parts and F14's fp8 pass-through; the GPU
// runs the same models in tests/gpu/test_cuda_fp8.cpp): fp8 inputs and outputs, casts to and
// from float32 / bfloat16 / float16 in the generated kernels bit for bit as PyTorch 2.15, four
// fp8 inputs summed as float32 over a dynamic dim, and aten._scaled_mm (the CPU runtime's extern).
// Fixtures: tests/fixtures/gen/export_fp8.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "aot/aot_util.h"
#include "common/fp8_fixture.h"
#include "core/npy.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "ir/parser.h"

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

TEST(AotFp8, ScaledMmMatchesPyTorch) {
  // spec aot case 88's fp8 scaled matmul on the CPU target (the runtime's extern, which shares
  // core/scaled_mm.h with the interpreter): x e4m3fn (16, 16) by weight.T cast to e4m3fn in the
  // graph, fp16 bias, scales 2 and 1 -> fp16 (16, 32), against PyTorch's arithmetic in float64
  check_fp8_fixture("aot_88_fp8_scaled_mm", 2e-3);
}

TEST(AotFp8, ScaledMmRowwiseScalesE5m2AndF32Out) {
  // row-wise scales, e4m3fn x e5m2 (a row-major mat2: the CPU extern takes any strides), a
  // float32 result with a bfloat16 bias; the package against the interpreter, then against
  // float64 arithmetic done here from the decoded operands
  const auto graph = ir::parse_graph(R"(graph {
  inputs {
    %a: f32[5, 32] = user_input
    %b: f32[32, 3] = user_input
    %sa: f32[5, 1] = user_input
    %sb: f32[1, 3] = user_input
    %bias: bf16[3] = user_input
  }
  %a8: f8e4m3fn[5, 32] = aten._to_copy.default(self=%a, *dtype=f8e4m3fn)
  %b8: f8e5m2[32, 3] = aten._to_copy.default(self=%b, *dtype=f8e5m2)
  %c: f32[5, 3] = aten._scaled_mm.default(self=%a8, mat2=%b8, scale_a=%sa, scale_b=%sb, bias=%bias, out_dtype=f32, use_fast_accum=True)
  outputs {
    user_output %c
  }
})");
  const Built& b = build_graph("fp8_rowwise", *graph);
  ASSERT_TRUE(b.error.empty()) << b.error;
  const runtime::Model m = load(b);
  std::vector<Tensor> ins;
  for (size_t i = 0; i < graph->input_specs().size(); ++i) {
    const auto& t = graph->input_specs()[i].value->type;
    Shape sizes;
    for (const auto& s : t.sizes) sizes.push_back(s.constant());
    Tensor x = Tensor::empty(sizes, DType::kFloat32);
    float* p = static_cast<float*>(x.data_ptr());
    for (int64_t k = 0; k < x.numel(); ++k)
      p[k] = static_cast<float>(((k * 37 + static_cast<int64_t>(i) * 11) % 23) - 11) * 0.37f;
    ins.push_back(x.to(t.dtype));
  }
  const auto got = m.run(ins);
  interp::Interpreter ref(*graph);
  const auto want = ref.run(ins);
  ASSERT_EQ(got.size(), 1u);
  test::expect_fixture_output(got[0], want[0], "rowwise (package vs interpreter)", 0.0);
  // independently: (a8 * sa) @ (b8 * sb) + bias from the decoded values
  const auto a8 = ins[0].to(DType::kFloat8E4M3FN).to_doubles();
  const auto b8 = ins[1].to(DType::kFloat8E5M2).to_doubles();
  const auto sa = ins[2].to_doubles(), sb = ins[3].to_doubles(), bias = ins[4].to_doubles();
  const auto g = got[0].to_doubles();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) {
      double s = 0;
      for (int k = 0; k < 32; ++k) s += a8[static_cast<size_t>(i * 32 + k)] *
                                        b8[static_cast<size_t>(k * 3 + j)];
      const double w = s * sa[static_cast<size_t>(i)] * sb[static_cast<size_t>(j)] +
                       bias[static_cast<size_t>(j)];
      EXPECT_NEAR(g[static_cast<size_t>(i * 3 + j)], w, 1e-5 * std::max(1.0, std::fabs(w)))
          << i << ", " << j;
    }
}

}  // namespace
}  // namespace anvil::aot_test
