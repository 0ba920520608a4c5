// The compiler's decompositions of the training ops (passes/decompose_backward.cpp,
// decompose_norm_backward.cpp): what they become, and the forms they refuse with the reason.
// Their values are checked end to end by tests/aot (AotOps.BackwardOps, BatchNormInTraining).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"
#include "ir/parser.h"
#include "passes/graph_passes.h"
#include "passes/pipeline.h"

namespace anvil {
namespace {

/// How many nodes of each target the graph holds.
std::map<std::string, int> targets(const ir::Graph& g) {
  std::map<std::string, int> t;
  for (const ir::Node* n : g.nodes()) ++t[n->target];
  return t;
}

const char* kConvBackward = R"(graph {%s
  inputs {
    %gy: f32[%B, 4, 3, 3] = user_input
    %x: f32[%B, 2, 5, 5] = user_input
    %w: f32[4, 2, 3, 3] = user_input
  }
  [%gx: f32[%B, 2, 5, 5], %gw: f32[4, 2, 3, 3], %gb: f32[4]] = aten.convolution_backward.default(grad_output=%gy, input=%x, weight=%w, bias_sizes=[4], stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=False, output_padding=[0, 0], groups=1, output_mask=[True, True, True])
  outputs {
    user_output %gx
    user_output %gw
    user_output %gb
  }
})";

std::string conv_graph(const std::string& batch, const std::string& symbols) {
  std::string s = kConvBackward;
  s.replace(s.find("%s"), 2, symbols);
  for (size_t at; (at = s.find("%B")) != std::string::npos;) s.replace(at, 2, batch);
  return s;
}

TEST(DecomposeBackward, ConvolutionBackwardBecomesConvolutionsAndASum) {
  auto g = ir::parse_graph(conv_graph("2", ""));
  ASSERT_EQ(passes::decompose_losses(g), 1);
  const auto t = targets(*g);
  EXPECT_EQ(t.count("aten.convolution_backward.default"), 0u);
  EXPECT_EQ(t.at("aten.convolution.default"), 2);  // grad_input (transposed) and grad_weight
  EXPECT_EQ(t.at("aten.sum.dim_IntList"), 1);      // grad_bias
  ASSERT_NO_THROW(passes::compile_to_program(*ir::parse_graph(conv_graph("2", ""))));
}

TEST(DecomposeBackward, ConvolutionBackwardOverASymbolicBatchIsRefused) {
  auto g = ir::parse_graph(conv_graph("s0", "\n  symbols {\n    s0 in [1, 8]\n  }"));
  try {
    passes::compile_to_program(*g);
    FAIL() << "compiled convolution_backward over a symbolic batch";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("is not supported by the compiler"), std::string::npos) << m;
    EXPECT_NE(m.find("aten.convolution_backward.default"), std::string::npos) << m;
  }
}

// batch_norm in training: batch statistics, and the running statistics written back with copy_.
TEST(DecomposeBackward, TrainingBatchNormWritesTheRunningStatsBack) {
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[4, 3, 5] = user_input
    %rm: f32[3] = user_input
    %rv: f32[3] = user_input
  }
  %y: f32[4, 3, 5] = aten.batch_norm.default(input=%x, weight=None, bias=None, running_mean=%rm, running_var=%rv, training=True, momentum=0.1, eps=1e-05, cudnn_enabled=False)
  outputs {
    user_output %y
  }
})");
  ASSERT_EQ(passes::decompose_losses(g), 1);
  const auto t = targets(*g);
  EXPECT_EQ(t.count("aten.batch_norm.default"), 0u);
  EXPECT_EQ(t.at("aten.copy_.default"), 2);
  EXPECT_EQ(t.at("aten.rsqrt.default"), 1);
}

}  // namespace
}  // namespace anvil
