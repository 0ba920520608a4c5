// The mixed GEMM form (passes/lower_matmul.cpp, PipelineOptions::mixed_gemm; spec B.4.1
// "mixed_mm", B.5 case 21): mm / addmm / linear of a float16 / bfloat16 A and an int8 matrix
// converted to A's dtype, with a transpose before or after the conversion, lower to one GEMM
// step reading the int8 matrix (GemmStep::b_dtype) and no conversion kernel; anything else, or
// the option off, keeps the conversion kernel and a GEMM of one dtype.
#include <gtest/gtest.h>

#include <string>

#include "ir/parser.h"
#include "passes/pipeline.h"

namespace anvil {
namespace {

using passes::GemmStep;
using passes::Program;

/// A graph with inputs %a: `adt`[8, 16], %w: `wdt`[24, 16], %v: `wdt`[16, 24], %bias:
/// `adt`[24] and the statements `body` whose last value %y is the output.
std::string graph_text(const std::string& adt, const std::string& wdt, const std::string& body) {
  return "graph {\n  inputs {\n    %a: " + adt + "[8, 16] = user_input\n    %w: " + wdt +
         "[24, 16] = user_input\n    %v: " + wdt + "[16, 24] = user_input\n    %bias: " + adt +
         "[24] = user_input\n  }\n" + body + "  outputs {\n    user_output %y\n  }\n}\n";
}

struct Lowered {
  Program program;
  const GemmStep* gemm = nullptr;
  int gemms = 0, kernels = 0;
};

Lowered lower(const std::string& text, bool mixed) {
  const auto g = ir::parse_graph(text);
  passes::PipelineOptions o;
  o.mixed_gemm = mixed;
  Lowered l{passes::compile_to_program(*g, o)};
  for (const auto& s : l.program.steps) {
    if (const auto* gs = std::get_if<GemmStep>(&s)) {
      l.gemm = gs;
      ++l.gemms;
    }
    l.kernels += std::holds_alternative<passes::LoopKernel>(s);
  }
  return l;
}

/// The index of the user input named `name`'s buffer.
int input_buffer(const Program& p, int input_index) {
  for (size_t i = 0; i < p.buffers.size(); ++i)
    if (p.buffers[i].kind == passes::BufferKind::kInput && p.buffers[i].index == input_index)
      return static_cast<int>(i);
  return -1;
}

struct Form {
  const char* what;
  std::string body;
  int input;      // the int8 input B reads: 1 (%w, [N, K]) or 2 (%v, [K, N])
  bool trans;     // B column-major (w^T)
  int kernels;    // loop kernels left (a bias add)
};

std::vector<Form> forms(const std::string& dt) {
  const std::string T = ": " + dt;
  return {
      {"mm(a, t(to(w)))",
       "  %wf" + T + "[24, 16] = aten._to_copy.default(self=%w, dtype=" + dt + ")\n"
       "  %wt" + T + "[16, 24] = aten.t.default(self=%wf)\n"
       "  %y" + T + "[8, 24] = aten.mm.default(self=%a, mat2=%wt)\n", 1, true, 0},
      {"mm(a, to(t(w)))",
       "  %wt: i8[16, 24] = aten.permute.default(self=%w, dims=[1, 0])\n"
       "  %wf" + T + "[16, 24] = aten._to_copy.default(self=%wt, dtype=" + dt + ")\n"
       "  %y" + T + "[8, 24] = aten.mm.default(self=%a, mat2=%wf)\n", 1, true, 0},
      {"mm(a, to(v))",
       "  %vf" + T + "[16, 24] = aten.to.dtype(self=%v, dtype=" + dt + ")\n"
       "  %y" + T + "[8, 24] = aten.mm.default(self=%a, mat2=%vf)\n", 2, false, 0},
      {"mm(a, transpose(to(w), 0, 1))",
       "  %wf" + T + "[24, 16] = aten._to_copy.default(self=%w, dtype=" + dt + ")\n"
       "  %wt" + T + "[16, 24] = aten.transpose.int(self=%wf, dim0=-1, dim1=0)\n"
       "  %y" + T + "[8, 24] = aten.mm.default(self=%a, mat2=%wt)\n", 1, true, 0},
      {"linear(a, to(w), bias)",
       "  %wf" + T + "[24, 16] = aten._to_copy.default(self=%w, dtype=" + dt + ")\n"
       "  %y" + T + "[8, 24] = aten.linear.default(input=%a, weight=%wf, bias=%bias)\n", 1, true,
       1},
      {"addmm(bias, a, t(to(w)))",
       "  %wf" + T + "[24, 16] = aten._to_copy.default(self=%w, dtype=" + dt + ")\n"
       "  %wt" + T + "[16, 24] = aten.t.default(self=%wf)\n"
       "  %y" + T + "[8, 24] = aten.addmm.default(self=%bias, mat1=%a, mat2=%wt)\n", 1, true, 1},
  };
}

TEST(MixedGemm, AnInt8MatrixConvertedToAsDtypeBecomesTheGemmsOwnOperand) {
  for (const std::string dt : {"f16", "bf16"}) {
    for (const Form& f : forms(dt)) {
      SCOPED_TRACE(dt + " " + f.what);
      const Lowered l = lower(graph_text(dt, "i8", f.body), true);
      ASSERT_EQ(l.gemms, 1) << passes::print_program(l.program);
      ASSERT_TRUE(l.gemm->b_dtype.has_value()) << passes::print_program(l.program);
      EXPECT_EQ(*l.gemm->b_dtype, DType::kInt8);
      EXPECT_EQ(l.gemm->dtype, dt == "f16" ? DType::kFloat16 : DType::kBFloat16);
      EXPECT_EQ(l.gemm->b.buffer, input_buffer(l.program, f.input));  // the int8 input itself
      EXPECT_EQ(l.gemm->b.trans, f.trans);
      EXPECT_EQ(l.gemm->b.ld.maybe_constant(), f.trans ? 16 : 24);
      EXPECT_EQ(*l.gemm->k.maybe_constant(), 16);
      EXPECT_EQ(*l.gemm->n.maybe_constant(), 24);
      EXPECT_EQ(l.kernels, f.kernels) << passes::print_program(l.program);  // no conversion
      EXPECT_NE(passes::print_program(l.program).find("b_dtype=i8"), std::string::npos);
      // without the option: the conversion kernel and a GEMM of one dtype, as before
      const Lowered two = lower(graph_text(dt, "i8", f.body), false);
      ASSERT_EQ(two.gemms, 1);
      EXPECT_FALSE(two.gemm->b_dtype.has_value());
      EXPECT_EQ(two.kernels, f.kernels + 1) << passes::print_program(two.program);
      EXPECT_NE(two.gemm->b.buffer, input_buffer(two.program, f.input));
    }
  }
}

TEST(MixedGemm, OtherConversionsKeepTheConversionKernel) {
  struct Case {
    const char* what;
    std::string adt, wdt, body;
  };
  const std::vector<Case> cases = {
      {"uint8 source", "f16", "u8",
       "  %wf: f16[24, 16] = aten._to_copy.default(self=%w, dtype=f16)\n"
       "  %wt: f16[16, 24] = aten.t.default(self=%wf)\n"
       "  %y: f16[8, 24] = aten.mm.default(self=%a, mat2=%wt)\n"},
      {"float32 GEMM", "f32", "i8",
       "  %wf: f32[24, 16] = aten._to_copy.default(self=%w, dtype=f32)\n"
       "  %wt: f32[16, 24] = aten.t.default(self=%wf)\n"
       "  %y: f32[8, 24] = aten.mm.default(self=%a, mat2=%wt)\n"},
      {"a computation on the converted matrix", "f16", "i8",
       "  %wf: f16[24, 16] = aten._to_copy.default(self=%w, dtype=f16)\n"
       "  %ws: f16[24, 16] = aten.mul.Tensor(self=%wf, other=0.5)\n"
       "  %wt: f16[16, 24] = aten.t.default(self=%ws)\n"
       "  %y: f16[8, 24] = aten.mm.default(self=%a, mat2=%wt)\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Lowered l = lower(graph_text(c.adt, c.wdt, c.body), true);
    ASSERT_EQ(l.gemms, 1) << passes::print_program(l.program);
    EXPECT_FALSE(l.gemm->b_dtype.has_value()) << passes::print_program(l.program);
  }
}

}  // namespace
}  // namespace anvil
