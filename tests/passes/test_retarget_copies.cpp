// Copy elision into strided extern outputs (passes/retarget_copies.cpp): a kernel that only
// permutes an extern's result into place goes when the target says the extern writes any output
// view, and stays otherwise.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "passes/pipeline.h"

namespace anvil {
namespace {

using passes::ExternStep;
using passes::Program;

// attention's [B, H, T, D] result transposed and flattened into the projection's input
const char* kAttentionThenProjection = R"(graph {
  inputs {
    %q: bf16[2, 4, 16, 8] = user_input
    %w: bf16[32, 32] = user_input
  }
  %a: bf16[2, 4, 16, 8] = aten.scaled_dot_product_attention.default(query=%q, key=%q, value=%q, is_causal=True)
  %t: bf16[2, 16, 4, 8] = aten.transpose.int(self=%a, dim0=1, dim1=2)
  %c: bf16[2, 16, 4, 8] = aten.clone.default(self=%t, memory_format=torch.contiguous_format)
  %v: bf16[2, 16, 32] = aten.view.default(self=%c, size=[2, 16, 32])
  %o: bf16[2, 16, 32] = aten.matmul.default(self=%v, other=%w)
  outputs {
    user_output %o
  }
})";

passes::PipelineOptions attention_writes_strided() {
  passes::PipelineOptions o;
  o.extern_writes_strided_output = [](const Program&, const ExternStep& e) {
    return e.target == "aten.scaled_dot_product_attention.default";
  };
  return o;
}

const ExternStep& attention_step(const Program& p) {
  for (const auto& s : p.steps)
    if (const auto* e = std::get_if<ExternStep>(&s)) return *e;
  throw std::runtime_error("no extern step");
}

TEST(RetargetCopies, TheTransposeIntoTheProjectionGoes) {
  const auto g = ir::parse_graph(kAttentionThenProjection);
  const Program plain = passes::compile_to_program(*g);
  const Program elided = passes::compile_to_program(*g, attention_writes_strided());
  EXPECT_EQ(elided.steps.size() + 1, plain.steps.size()) << "the copy kernel goes";
  EXPECT_EQ(elided.stats.loop_kernels + 1, plain.stats.loop_kernels);
  const auto& out = attention_step(elided).outputs[0];
  // (b, h, t, d) of the result lands at b*512 + t*32 + h*8 + d of the projection's input
  ASSERT_EQ(out.strides.size(), 4u);
  EXPECT_EQ(out.strides[0].constant(), 512);
  EXPECT_EQ(out.strides[1].constant(), 8);
  EXPECT_EQ(out.strides[2].constant(), 32);
  EXPECT_EQ(out.strides[3].constant(), 1);
  EXPECT_EQ(out.offset.constant(), 0);
  bool reads_it = false;  // the GEMM now reads the buffer the attention writes
  for (const auto& s : elided.steps)
    if (const auto* gm = std::get_if<passes::GemmStep>(&s)) reads_it |= gm->a.buffer == out.buffer;
  EXPECT_TRUE(reads_it);
  // without the target's word the CPU layout stays contiguous
  const auto& kept = attention_step(plain).outputs[0];
  EXPECT_EQ(kept.strides[1].constant(), 128);
}

TEST(RetargetCopies, ACopyThatComputesOrIsReadTwiceStays) {
  // a cast on the way is not a copy; a result read by a second kernel must stay where it is
  const auto g = ir::parse_graph(R"(graph {
  inputs {
    %q: bf16[2, 4, 16, 8] = user_input
  }
  %a: bf16[2, 4, 16, 8] = aten.scaled_dot_product_attention.default(query=%q, key=%q, value=%q)
  %t: bf16[2, 16, 4, 8] = aten.transpose.int(self=%a, dim0=1, dim1=2)
  %f: f32[2, 16, 4, 8] = aten._to_copy.default(self=%t, dtype=f32)
  %b: bf16[2, 4, 16, 8] = aten.scaled_dot_product_attention.default(query=%q, key=%q, value=%q)
  %u: bf16[2, 16, 4, 8] = aten.transpose.int(self=%b, dim0=1, dim1=2)
  %c: bf16[2, 16, 4, 8] = aten.clone.default(self=%u, memory_format=torch.contiguous_format)
  %s: bf16[2, 4, 16, 8] = aten.sin.default(self=%b)
  outputs {
    user_output %f
    user_output %c
    user_output %s
  }
})");
  const Program plain = passes::compile_to_program(*g);
  const Program p = passes::compile_to_program(*g, attention_writes_strided());
  EXPECT_EQ(p.steps.size(), plain.steps.size());
  for (const auto& s : p.steps)
    if (const auto* e = std::get_if<ExternStep>(&s))
      EXPECT_EQ(e->outputs[0].strides[1].constant(), 128) << e->name;
}

}  // namespace
}  // namespace anvil
