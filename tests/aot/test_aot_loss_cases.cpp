// spec/aot.md section 4 cases 23 (addmm with grad-requiring inputs) and 25 (cross-entropy loss
// with soft targets returned as (loss, {"dl": loss.float()})), and compiled cross_entropy_loss
// variants (passes/decompose_loss.cpp) checked against the interpreter's reference kernel and
// against PyTorch 1.13 values (F.cross_entropy in float64) pasted as literals.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "aot_util.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "passes/graph_passes.h"

namespace anvil::aot_test {
namespace {

// Case 23: addmm(b, w, x) exported from inputs that require grad; the package computes the
// values (no autograd state is involved at run time).
TEST(AotCase, C23_GradInputs) {
  const Built& b = build("aot_23_grad_inputs");
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = load(b);
  ASSERT_EQ(model.input_specs().size(), 3u);
  ASSERT_EQ(model.output_specs().size(), 1u);
  expect_outputs(model.run(read_set("aot_23_grad_inputs", "in", "")),
                 read_set("aot_23_grad_inputs", "out", ""), "addmm with grad inputs");
}

// Case 25: cross_entropy_loss(x, soft target, reduction="sum") returned as (loss, {"dl": loss}):
// two scalar outputs with PyTorch's values; the loss is decomposed into fused loop kernels.
TEST(AotCase, C25_StructuredLossOutput) {
  const Built& b = build("aot_25_struct_out");
  ASSERT_TRUE(b.error.empty()) << b.error;
  EXPECT_FALSE(contains(b.program_text, "aten.cross_entropy_loss")) << b.program_text;
  EXPECT_GT(b.stats.loop_kernels, 0);
  EXPECT_EQ(b.stats.externs, 0) << b.program_text;
  runtime::Model model = load(b);
  ASSERT_EQ(model.input_specs().size(), 2u);
  ASSERT_EQ(model.output_specs().size(), 2u);
  const auto want = read_set("aot_25_struct_out", "out", "");
  ASSERT_EQ(want.size(), 2u);
  const auto got = model.run(read_set("aot_25_struct_out", "in", ""));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].dim(), 0);
  EXPECT_EQ(got[1].dim(), 0);
  EXPECT_EQ(got[1].dtype(), DType::kFloat32);
  expect_outputs(got, want, "cross entropy (loss, {dl})");
  // The interpreter's reference kernel agrees.
  const auto graph =
      frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/aot/aot_25_struct_out.pt2");
  interp::Interpreter ref(*graph);
  expect_outputs(ref.run(read_set("aot_25_struct_out", "in", "")), want, "interpreter");
}

// cross_entropy_loss variants in one compiled graph: class-index targets with weight,
// ignore_index (outside and inside the class range), label_smoothing and every reduction;
// probability targets; a 1-d input with a 0-d target. Outputs match the interpreter and
// PyTorch.
TEST(AotLoss, CrossEntropyVariantsCompiled) {
  const std::string text = R"(graph {
  inputs {
    %x: f32[2, 3, 2, 2] = user_input
    %t: i64[2, 2, 2] = user_input
    %tc: i64[2, 2, 2] = user_input
    %w: f32[3] = user_input
    %p: f32[2, 3, 2, 2] = user_input
    %x1: f32[4] = user_input
    %t1: i64[] = user_input
    %w4: f32[4] = user_input
  }
  %o1: f32[] = aten.cross_entropy_loss.default(self=%x, target=%t, weight=%w, reduction=1)
  %o2: f32[2, 2, 2] = aten.cross_entropy_loss.default(self=%x, target=%t, weight=%w, reduction=0, ignore_index=-100, label_smoothing=0.2)
  %o3: f32[] = aten.cross_entropy_loss.default(self=%x, target=%tc, reduction=2, ignore_index=2, label_smoothing=0.1)
  %o4: f32[] = aten.cross_entropy_loss.default(self=%x, target=%t, weight=%w, reduction=1, ignore_index=-100, label_smoothing=0.3)
  %o5: f32[] = aten.cross_entropy_loss.default(self=%x, target=%p, weight=%w, reduction=1, ignore_index=-100, label_smoothing=0.1)
  %o6: f32[2, 2, 2] = aten.cross_entropy_loss.default(self=%x, target=%p, reduction=0)
  %o7: f32[] = aten.cross_entropy_loss.default(self=%x, target=%p, reduction=2)
  %o8: f32[] = aten.cross_entropy_loss.default(self=%x, target=%t)
  %o9: f32[] = aten.cross_entropy_loss.default(self=%x1, target=%t1, reduction=1, ignore_index=-100, label_smoothing=0.1)
  %o10: f32[] = aten.cross_entropy_loss.default(self=%x1, target=%t1, weight=%w4, reduction=2)
  %o11: f32[] = aten.cross_entropy_loss.default(self=%x, target=%t, weight=%w, reduction=2)
  %o12: f32[2, 2, 2] = aten.cross_entropy_loss.default(self=%x, target=%t, weight=%w, reduction=0)
  outputs {
    user_output %o1
    user_output %o2
    user_output %o3
    user_output %o4
    user_output %o5
    user_output %o6
    user_output %o7
    user_output %o8
    user_output %o9
    user_output %o10
    user_output %o11
    user_output %o12
  }
})";
  auto graph = ir::parse_graph(text);
  std::vector<float> xv, pv;
  for (int i = 0; i < 24; ++i) {
    xv.push_back(static_cast<float>((i * 7) % 13) * 0.25f - 1.5f);
    pv.push_back(static_cast<float>((i * 3) % 8) * 0.125f);
  }
  const std::vector<Tensor> ins = {
      Tensor::from_vector(xv, {2, 3, 2, 2}),
      Tensor::from_vector(std::vector<int64_t>{0, 2, -100, 1, 2, 2, 0, -100}, {2, 2, 2}),
      Tensor::from_vector(std::vector<int64_t>{0, 2, 0, 1, 2, 2, 0, 0}, {2, 2, 2}),
      Tensor::from_vector(std::vector<float>{0.5f, 2.0f, 1.25f}, {3}),
      Tensor::from_vector(pv, {2, 3, 2, 2}),
      Tensor::from_vector(std::vector<float>{0.5f, -1.0f, 2.0f, 0.25f}, {4}),
      Tensor::from_vector(std::vector<int64_t>{2}, {}),
      Tensor::from_vector(std::vector<float>{1.0f, 0.5f, 2.0f, 1.5f}, {4}),
  };
  // PyTorch 1.13, F.cross_entropy in float64 on the same values.
  auto scalar = [](double v) { return Tensor::scalar(v, DType::kFloat32); };
  auto vec8 = [](std::vector<float> v) { return Tensor::from_vector(v, {2, 2, 2}); };
  const std::vector<Tensor> torch_values = {
      scalar(0.976565966938031),
      vec8({0.9421752859171275f, 0.9503370883021682f, 0.0f, 2.158498890687209f, 0.9503370883021682f,
            0.9503370883021682f, 0.9421752859171275f, 0.0f}),
      scalar(7.701348353208674),
      scalar(1.0436860670705332),
      scalar(1.7301193943871531),
      vec8({0.5901348353208673f, 1.9179382147928186f, 2.0654719236230354f, 1.032735961811518f,
            1.1802696706417346f, 2.508073050113686f, 1.4753370883021684f, 1.6228707971323852f}),
      scalar(12.392831541738214),
      scalar(1.0969363373084013),
      scalar(0.5255289984482534),
      scalar(0.7385579968965067),
      scalar(6.591820276831709),
      vec8({0.8401348353208673f, 0.8503370883021683f, 0.0f, 2.360539341283469f, 0.8503370883021683f,
            0.8503370883021683f, 0.8401348353208673f, 0.0f}),
  };
  interp::Interpreter ref(*graph);
  expect_outputs(ref.run(ins), torch_values, "interpreter vs torch");

  // The decomposed graph verifies and computes the same values in the interpreter.
  auto decomposed = passes::clone_graph(*graph);
  EXPECT_EQ(passes::decompose_losses(decomposed), 12);
  ir::verify(*decomposed);
  for (const ir::Node* n : decomposed->nodes())
    EXPECT_NE(n->target, "aten.cross_entropy_loss.default");
  interp::Interpreter ref_decomposed(*decomposed);
  expect_outputs(ref_decomposed.run(ins), torch_values, "decomposed graph in the interpreter");

  const Built& b = build_graph("cross_entropy_variants", *graph);
  ASSERT_TRUE(b.error.empty()) << b.error;
  EXPECT_FALSE(contains(b.program_text, "aten.cross_entropy_loss")) << b.program_text;
  EXPECT_EQ(b.stats.externs, 0) << b.program_text;
  runtime::Model model = load(b);
  const auto got = model.run(ins);
  expect_outputs(got, torch_values, "compiled vs torch");
  expect_outputs(got, ref.run(ins), "compiled vs interpreter");
}

// All targets ignored: mean is 0 / 0 = NaN in the compiled code too, like torch; sum is 0.
TEST(AotLoss, CrossEntropyAllIgnoredCompiled) {
  auto graph = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[3, 4] = user_input
    %t: i64[3] = user_input
  }
  %m: f32[] = aten.cross_entropy_loss.default(self=%x, target=%t)
  %s: f32[] = aten.cross_entropy_loss.default(self=%x, target=%t, reduction=2)
  outputs {
    user_output %m
    user_output %s
  }
})");
  std::vector<float> xv;
  for (int i = 0; i < 12; ++i) xv.push_back(static_cast<float>(i) * 0.5f - 2.0f);
  const std::vector<Tensor> ins = {
      Tensor::from_vector(xv, {3, 4}),
      Tensor::from_vector(std::vector<int64_t>{-100, -100, -100}, {3})};
  const Built& b = build_graph("cross_entropy_all_ignored", *graph);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = load(b);
  const auto got = model.run(ins);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(std::isnan(got[0].to_doubles()[0]));
  EXPECT_EQ(got[1].to_doubles()[0], 0.0);
  interp::Interpreter ref(*graph);
  expect_outputs(got, ref.run(ins), "compiled vs interpreter");
}

}  // namespace
}  // namespace anvil::aot_test
