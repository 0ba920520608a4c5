// Unit tests of the compiler middle end: DCE, CSE, constant folding, batch_norm folding, shape
// propagation, fusion into loop kernels, and memory planning (no C++ compiler involved).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "common/check.h"
#include "common/scoped_env.h"
#include "common/text.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "passes/graph_passes.h"
#include "passes/pipeline.h"

namespace anvil {
namespace {

using passes::LoopKernel;
using passes::Program;

/// Parses `text` and gives every non-user input a tensor of ones (or `value`).
std::unique_ptr<ir::Graph> graph(const std::string& text, double value = 1.0) {
  auto g = ir::parse_graph(text);
  for (const auto& spec : g->input_specs())
    if (spec.kind != ir::InputKind::kUserInput) {
      Shape sizes;
      for (const auto& s : spec.value->type.sizes) sizes.push_back(s.constant());
      g->constants[spec.target] = Tensor::full(sizes, value, spec.value->type.dtype);
    }
  ir::verify(*g);
  return g;
}

int count_kernels(const Program& p) {
  return static_cast<int>(std::count_if(p.steps.begin(), p.steps.end(), [](const passes::Step& s) {
    return std::holds_alternative<LoopKernel>(s);
  }));
}

const char* kRmsNorm = R"(graph {
  inputs {
    %w: f32[64] = parameter "w"
    %x: f32[8, 64] = user_input
    %r: f32[8, 64] = user_input
  }
  %h: f32[8, 64] = aten.add.Tensor(self=%x, other=%r)
  %p: f32[8, 64] = aten.pow.Tensor_Scalar(self=%h, exponent=2)
  %m: f32[8, 1] = aten.mean.dim(self=%p, dim=[-1], keepdim=True)
  %e: f32[8, 1] = aten.add.Tensor(self=%m, other=1e-06)
  %rs: f32[8, 1] = aten.rsqrt.default(self=%e)
  %n: f32[8, 64] = aten.mul.Tensor(self=%h, other=%rs)
  %o: f32[8, 64] = aten.mul.Tensor(self=%w, other=%n)
  outputs {
    user_output %o
  }
})";

TEST(Fusion, RmsNormChainIsOneKernel) {
  auto g = graph(kRmsNorm);
  const Program p = passes::compile_to_program(*g);
  EXPECT_LE(count_kernels(p), 2);
  EXPECT_EQ(count_kernels(p), 1);
  const auto& k = std::get<LoopKernel>(p.steps[0]);
  // one pass reduces, the next writes: the mean never reaches memory
  ASSERT_EQ(k.passes.size(), 2u);
  EXPECT_EQ(k.passes[0].loop.size(), 1u);
  EXPECT_EQ(k.passes[0].loop[0].kind, passes::Stmt::Kind::kReduce);
  EXPECT_TRUE(p.buffers[static_cast<size_t>(k.passes[0].loop[0].buffer)].local);
  EXPECT_EQ(p.planned_peak_bytes, 0);  // nothing but the output needs memory
  EXPECT_EQ(k.outer.size(), 1u);
  EXPECT_EQ(k.inner.size(), 1u);
  for (const char* n : {"h", "p", "m", "e", "rs", "n", "o"})
    EXPECT_NE(std::find(k.nodes.begin(), k.nodes.end(), n), k.nodes.end()) << n;
}

TEST(Fusion, WithoutFusionEveryRealisedValueIsAKernel) {
  auto g = graph(kRmsNorm);
  passes::PipelineOptions o;
  o.fuse = false;
  const Program p = passes::compile_to_program(*g, o);
  EXPECT_EQ(count_kernels(p), 2);  // the reduction and its consumer
}

TEST(Fusion, SoftmaxAndLayerNormAreOneKernelEach) {
  auto g = graph(R"(graph {
  inputs {
    %x: f32[4, 32] = user_input
  }
  %s: f32[4, 32] = aten.softmax.int(self=%x, dim=-1)
  %l: f32[4, 32] = aten.layer_norm.default(input=%s, normalized_shape=[32])
  outputs {
    user_output %l
  }
})");
  const Program p = passes::compile_to_program(*g);
  EXPECT_EQ(count_kernels(p), 1);
  const auto& k = std::get<LoopKernel>(p.steps[0]);
  int reductions = 0;
  for (const auto& ps : k.passes)
    for (const auto& s : ps.loop) reductions += s.kind == passes::Stmt::Kind::kReduce;
  EXPECT_EQ(reductions, 4);  // max, sum(exp), mean, variance
}

TEST(Fusion, LinearBiasAndActivationRunInPlaceAfterTheGemm) {
  auto g = graph(R"(graph {
  inputs {
    %w: f32[16, 8] = parameter "w"
    %b: f32[16] = parameter "b"
    %x: f32[4, 8] = user_input
  }
  %l: f32[4, 16] = aten.linear.default(input=%x, weight=%w, bias=%b)
  %g: f32[4, 16] = aten.gelu.default(self=%l)
  outputs {
    user_output %g
  }
})");
  const Program p = passes::compile_to_program(*g);
  ASSERT_EQ(p.steps.size(), 2u);
  const auto& gemm = std::get<passes::GemmStep>(p.steps[0]);
  EXPECT_TRUE(gemm.b.trans);  // weight [N, K] used as B^T, no copy
  // the GEMM writes straight into the output, which the epilogue updates in place
  EXPECT_EQ(p.buffers[static_cast<size_t>(gemm.c.buffer)].alias_of, p.outputs[0].buffer);
  EXPECT_EQ(p.planned_peak_bytes, 0);
}

TEST(GraphPasses, DeadCodeIsRemoved) {
  auto g = graph(R"(graph {
  inputs {
    %x: f32[4] = user_input
  }
  %a: f32[4] = aten.exp.default(self=%x)
  %b: f32[4] = aten.sin.default(self=%a)
  %c: f32[4] = aten.cos.default(self=%x)
  outputs {
    user_output %c
  }
})");
  EXPECT_EQ(passes::dce(*g), 2);
  EXPECT_EQ(g->num_nodes(), 1u);
  ir::verify(*g);
}

TEST(GraphPasses, CommonSubexpressionsAreShared) {
  auto g = graph(R"(graph {
  inputs {
    %x: f32[4] = user_input
  }
  %a: f32[4] = aten.mul.Tensor(self=%x, other=2.0)
  %b: f32[4] = aten.mul.Tensor(self=%x, other=2.0)
  %c: f32[4] = aten.mul.Tensor(self=%x, other=3.0)
  %d: f32[4] = aten.add.Tensor(self=%a, other=%b)
  %e: f32[4] = aten.add.Tensor(self=%a, other=%b)
  %f: f32[4] = aten.add.Tensor(self=%d, other=%e)
  %g: f32[4] = aten.add.Tensor(self=%f, other=%c)
  outputs {
    user_output %g
  }
})");
  EXPECT_EQ(passes::cse(*g), 2);  // b -> a, then e -> d
  EXPECT_EQ(g->num_nodes(), 5u);
  ir::verify(*g);
}

TEST(GraphPasses, CseKeepsReadsAroundInPlaceWrites) {
  auto g = graph(R"(graph {
  inputs {
    %b_s: f32[4] = buffer "s" persistent
    %x: f32[4] = user_input
  }
  %a: f32[4] = aten.mul.Tensor(self=%b_s, other=2.0)
  %u: f32[4] = aten.add_.Tensor(self=%b_s, other=%x)
  %b: f32[4] = aten.mul.Tensor(self=%b_s, other=2.0)
  %c: f32[4] = aten.add.Tensor(self=%a, other=%b)
  outputs {
    user_output %c
  }
})");
  EXPECT_EQ(passes::cse(*g), 0);
}

TEST(GraphPasses, CseKeepsReadsAroundAListWrite) {
  // all_reduce_coalesced_ writes every tensor of its list argument: x * 2 before and after it
  // are different values.
  auto g = graph(R"(graph {
  inputs {
    %x: f32[4] = user_input
    %z: f32[4] = user_input
  }
  %a: f32[4] = aten.mul.Tensor(self=%x, other=2.0)
  [%c0: f32[4], %c1: f32[4]] = _c10d_functional.all_reduce_coalesced_.default(inputs=[%x, %z], reduce_op="sum", group_name="0")
  %b: f32[4] = aten.mul.Tensor(self=%x, other=2.0)
  %d: f32[4] = aten.add.Tensor(self=%a, other=%b)
  outputs {
    user_output %d
  }
})");
  EXPECT_EQ(passes::cse(*g), 0);
}

TEST(GraphPasses, WeightOnlySubgraphsFoldAtCompileTime) {
  auto g = graph(R"(graph {
  inputs {
    %w: f32[4, 3] = parameter "w"
    %b: f32[3] = parameter "b"
    %x: f32[2, 4] = user_input
  }
  %wt: f32[3, 4] = aten.t.default(self=%w)
  %r: f32[3, 4] = aten.relu.default(self=%wt)
  %s: f32[3, 4] = aten.mul.Tensor(self=%r, other=2.0)
  %l: f32[2, 3] = aten.linear.default(input=%x, weight=%s, bias=%b)
  %v: f32[4, 3] = aten.t.default(self=%s)
  %y: f32[2, 3] = aten.mm.default(self=%x, mat2=%w)
  outputs {
    user_output %l
    user_output %y
    user_output %v
  }
})",
                 1.5);
  const auto res = passes::fold_constants(*g);
  EXPECT_EQ(res.nodes_folded, 3);  // t, relu, mul
  ASSERT_EQ(res.folded_targets.size(), 1u);
  const std::string t = *res.folded_targets.begin();
  EXPECT_EQ(t, "folded.s_folded");
  const Tensor& f = g->constants.at(t);
  EXPECT_EQ(f.sizes(), (Shape{3, 4}));
  for (double v : f.to_doubles()) EXPECT_EQ(v, 3.0);
  EXPECT_EQ(g->num_nodes(), 3u);  // linear, the view t(s) of the folded constant, mm
  ir::verify(*g);
  const Program p = passes::compile_to_program(*g);
  int folded = 0;
  for (const auto& c : p.constants) folded += c.kind == "folded";
  EXPECT_EQ(folded, 1);
}

/// Distinct per-channel values for the batch_norm folding test: a swapped mean and variance,
/// or a scale applied to the wrong channel, changes the result.
void set_bn_params(ir::Graph& g) {
  std::vector<double> w;
  for (int o = 0; o < 4; ++o)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 9; ++k) w.push_back(0.1 * (o + 1) - 0.05 * i + 0.01 * k);
  auto vec = [](std::vector<double> v) {
    return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}).to(DType::kFloat32, true);
  };
  g.constants["w"] = Tensor::from_vector(w, {4, 2, 3, 3}).to(DType::kFloat32, true);
  g.constants["cb"] = vec({0.5, -0.25, 0.125, 1.5});
  g.constants["g"] = vec({1.0, 1.5, 0.5, 2.0});
  g.constants["bb"] = vec({-0.3, 0.2, 0.7, -1.1});
  g.constants["rm"] = vec({0.1, -0.4, 0.9, 0.3});
  g.constants["rv"] = vec({0.5, 1.25, 3.0, 0.2});
}

TEST(GraphPasses, BatchNormFoldsIntoConv) {
  const char* text = R"(graph {
  inputs {
    %w: f32[4, 2, 3, 3] = parameter "w"
    %cb: f32[4] = parameter "cb"
    %g: f32[4] = parameter "g"
    %bb: f32[4] = parameter "bb"
    %rm: f32[4] = buffer "rm" persistent
    %rv: f32[4] = buffer "rv" persistent
    %x: f32[1, 2, 5, 5] = user_input
  }
  %c: f32[1, 4, 3, 3] = aten.conv2d.default(input=%x, weight=%w, bias=%cb)
  %n: f32[1, 4, 3, 3] = aten.batch_norm.default(input=%c, weight=%g, bias=%bb, running_mean=%rm, running_var=%rv, training=False, momentum=0.1, eps=1e-05, cudnn_enabled=False)
  outputs {
    user_output %n
  }
})";
  auto g = graph(text);
  set_bn_params(*g);
  auto original = graph(text);
  set_bn_params(*original);
  std::set<std::string> folded;
  EXPECT_EQ(passes::fold_batch_norm(*g, folded), 1);
  EXPECT_EQ(folded.size(), 2u);
  EXPECT_EQ(g->num_nodes(), 1u);
  ir::verify(*g);
  // w'[o] = w[o] * g[o] / sqrt(rv[o] + eps); b'[o] = (cb[o] - rm[o]) * g[o] / sqrt(rv[o] + eps) + bb[o]
  const auto w = original->constants.at("w").to_doubles(), cb = original->constants.at("cb").to_doubles(),
             gm = original->constants.at("g").to_doubles(), bb = original->constants.at("bb").to_doubles(),
             rm = original->constants.at("rm").to_doubles(), rv = original->constants.at("rv").to_doubles();
  for (const auto& t : folded) {
    const auto v = g->constants.at(t).to_doubles();
    const bool bias = t.find("bias") != std::string::npos;
    ASSERT_EQ(v.size(), bias ? 4u : w.size()) << t;
    for (size_t k = 0; k < v.size(); ++k) {
      const size_t o = bias ? k : k / 18;
      const double scale = gm[o] / std::sqrt(rv[o] + 1e-5);
      const double want = bias ? (cb[o] - rm[o]) * scale + bb[o] : w[k] * scale;
      EXPECT_NEAR(v[k], want, 1e-6) << t << " element " << k;
    }
  }
  // and the folded graph computes what the original one does
  std::vector<double> xs;
  for (int i = 0; i < 50; ++i) xs.push_back(std::sin(0.7 * i));
  const Tensor x = Tensor::from_vector(xs, {1, 2, 5, 5}).to(DType::kFloat32, true);
  const Tensor want = interp::Interpreter(*original).run({x})[0];
  const Tensor got = interp::Interpreter(*g).run({x})[0];
  EXPECT_TRUE(::anvil::test::close(got, want, 1e-5));
}

// DenseNet's layers: batch_norm (+ relu_, which the frontend writes as relu then copy_) over
// a channel concatenation becomes a norm and a relu per part, then the concatenation.
const char* kNormOverCat = R"(graph {
  inputs {
    %g: f32[8] = parameter "g"
    %bb: f32[8] = parameter "bb"
    %rm: f32[8] = buffer "rm" persistent
    %rv: f32[8] = buffer "rv" persistent
    %a: f32[2, 3, 2, 2] = user_input
    %b: f32[2, 5, 2, 2] = user_input
  }
  %c: f32[2, 8, 2, 2] = aten.cat.default(tensors=[%a, %b], dim=1)
  %n: f32[2, 8, 2, 2] = aten.batch_norm.default(input=%c, weight=%g, bias=%bb, running_mean=%rm, running_var=%rv, training=False, momentum=0.1, eps=1e-05, cudnn_enabled=False)
  %v: f32[2, 8, 2, 2] = aten.relu.default(self=%n)
  %r: f32[2, 8, 2, 2] = aten.copy_.default(self=%n, src=%v)
  %y: f32[2, 8, 2, 2] = aten.mul.Tensor(self=%r, other=2.0)
  outputs {
    user_output %y
  }
})";

std::unique_ptr<ir::Graph> norm_over_cat(const std::string& text) {
  auto g = graph(text);
  auto vec = [](std::vector<double> v) {
    return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}).to(DType::kFloat32, true);
  };
  g->constants["g"] = vec({1.0, 1.5, 0.5, 2.0, -1.0, 0.25, 3.0, 0.75});
  g->constants["bb"] = vec({-0.3, 0.2, 0.7, -1.1, 0.0, 0.4, -0.6, 0.1});
  g->constants["rm"] = vec({0.1, -0.4, 0.9, 0.3, -0.2, 0.5, 0.0, -0.7});
  g->constants["rv"] = vec({0.5, 1.25, 3.0, 0.2, 0.9, 2.0, 0.1, 1.5});
  return g;
}

int count_target(const ir::Graph& g, const std::string& target) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->target == target;
  return n;
}

TEST(GraphPasses, BatchNormAndReluOverAConcatenationRunPerPart) {
  auto g = norm_over_cat(kNormOverCat);
  const auto original = norm_over_cat(kNormOverCat);
  EXPECT_EQ(passes::norm_through_cat(g), 1);
  ir::verify(*g);
  EXPECT_EQ(count_target(*g, "aten.batch_norm.default"), 2);  // one per part
  EXPECT_EQ(count_target(*g, "aten.relu.default"), 2);
  EXPECT_EQ(count_target(*g, "aten.copy_.default"), 0);
  EXPECT_EQ(count_target(*g, "aten.slice.Tensor"), 8);  // 4 parameters x 2 parts
  for (const ir::Node* n : g->nodes()) {
    if (n->target == "aten.batch_norm.default") {
      EXPECT_NE(n->arg("input")->value->producer ? n->arg("input")->value->producer->target : "",
                "aten.cat.default");
    }
  }
  // the same values, bit for bit (each element computed by the same formula)
  std::vector<double> av, bv;
  for (int i = 0; i < 24; ++i) av.push_back(std::sin(0.7 * i) * 2);
  for (int i = 0; i < 40; ++i) bv.push_back(std::cos(0.3 * i) * 2);
  const std::vector<Tensor> in = {Tensor::from_vector(av, {2, 3, 2, 2}).to(DType::kFloat32, true),
                                  Tensor::from_vector(bv, {2, 5, 2, 2}).to(DType::kFloat32, true)};
  const Tensor want = interp::Interpreter(*original).run(in)[0];
  EXPECT_EQ(interp::Interpreter(*g).run(in)[0].to_doubles(), want.to_doubles());
  // and compiled: each part's kernel writes its normalized values into its slice of the
  // concatenation, reading the parameters at the part's channels (no copy of a part first)
  const std::string text = passes::print_program(passes::compile_to_program(*g));
  EXPECT_EQ(::anvil::test::count(text, " = relu(add(mul(sub(load(b4, "), 1u) << text;
  EXPECT_EQ(::anvil::test::count(text, " = relu(add(mul(sub(load(b5, "), 1u) << text;
  EXPECT_NE(text.find("load(b2, o1 + 3)"), std::string::npos) << text;  // b's running mean
  EXPECT_EQ(::anvil::test::count(text, " = load(b4, "), 0u) << text;
  EXPECT_EQ(::anvil::test::count(text, " = load(b5, "), 0u) << text;
}

TEST(GraphPasses, NormOverAConcatenationStaysWhenThePartsCannotTakeIt) {
  using Edits = std::vector<std::pair<std::string, std::string>>;
  const auto rewrites = [](const Edits& edits) {
    std::string text = kNormOverCat;
    for (const auto& [from, to] : edits) {
      const size_t at = text.find(from);
      EXPECT_NE(at, std::string::npos) << from;
      if (at != std::string::npos) text.replace(at, from.size(), to);
    }
    auto g = norm_over_cat(text);
    return passes::norm_through_cat(g);
  };
  EXPECT_EQ(rewrites({}), 1);  // the control
  // one part (a dense block's first layer): the norm writes the concatenation's buffer
  EXPECT_EQ(rewrites({{"%a: f32[2, 3, 2, 2]", "%a: f32[2, 8, 2, 2]"},
                      {"tensors=[%a, %b]", "tensors=[%a]"}}),
            1);
  // the concatenation read by another node too (here: a graph output)
  EXPECT_EQ(rewrites({{"user_output %y", "user_output %y\n    user_output %c"}}), 0);
  // the norm in training mode
  EXPECT_EQ(rewrites({{"training=False", "training=True"}}), 0);
  // a concatenation along the batch (the parameters index channels)
  EXPECT_EQ(rewrites({{"%a: f32[2, 3, 2, 2]", "%a: f32[1, 8, 2, 2]"},
                      {"%b: f32[2, 5, 2, 2]", "%b: f32[1, 8, 2, 2]"},
                      {"dim=1)", "dim=0)"}}),
            0);
  // a norm whose parameters some node writes in place
  EXPECT_EQ(rewrites({{"  outputs {", "  %w2: f32[8] = aten.add_.Tensor(self=%g, other=1.0)\n  outputs {"}}),
            0);
  // the switch
  const test::ScopedEnv off("ANVIL_NORM_THROUGH_CAT", "0");
  EXPECT_EQ(rewrites({}), 0);
}

TEST(GraphPasses, ShapePropagationFillsMissingTypes) {
  auto g = graph(R"(graph {
  symbols {
    s0 in [1, 8]
  }
  inputs {
    %x: f32[s0, 4] = user_input
  }
  %a: f32[s0, 4] = aten.exp.default(self=%x)
  %s: f32[s0] = aten.sum.dim_IntList(self=%a, dim=[1])
  outputs {
    user_output %s
  }
})");
  auto nodes = g->nodes();
  nodes[1]->outputs[0]->type = ir::TensorType{};  // a pass created it without a type
  EXPECT_EQ(passes::propagate_shapes(*g), 1);
  EXPECT_EQ(nodes[1]->outputs[0]->type.str(), "f32[s0]");
  ir::verify(*g);
}

/// A chain whose intermediates must be materialised (each feeds a GEMM).
const char* kChain = R"(graph {
  inputs {
    %w: f32[64, 64] = parameter "w"
    %x: f32[SIZE, 64] = user_input
  }
  %a: f32[SIZE, 64] = aten.mm.default(self=%x, mat2=%w)
  %b: f32[SIZE, 64] = aten.relu.default(self=%a)
  %c: f32[SIZE, 64] = aten.mm.default(self=%b, mat2=%w)
  %d: f32[SIZE, 64] = aten.relu.default(self=%c)
  %e: f32[SIZE, 64] = aten.mm.default(self=%d, mat2=%w)
  %f: f32[SIZE, 64] = aten.relu.default(self=%e)
  %g: f32[SIZE, 64] = aten.mm.default(self=%f, mat2=%w)
  outputs {
    user_output %g
  }
})";

std::string with_size(std::string text, const std::string& size, const std::string& symbols) {
  for (size_t pos; (pos = text.find("SIZE")) != std::string::npos;) text.replace(pos, 4, size);
  if (!symbols.empty())
    text.replace(text.find("graph {") + 7, 0, "\n  symbols {\n    " + symbols + "\n  }");
  return text;
}

TEST(MemoryPlan, BuffersAreReusedByLifetime) {
  auto g = graph(with_size(kChain, "16", ""));
  const Program p = passes::compile_to_program(*g);
  // Three intermediates of 4 KiB each (relu runs in place on its GEMM result) are live one or
  // two at a time: two slots.
  int64_t total = 0;
  std::vector<const passes::Buffer*> planned;
  for (const auto& b : p.buffers)
    if (b.kind == passes::BufferKind::kArena && !b.local && b.alias_of < 0) {
      total += b.numel.constant() * 4;
      planned.push_back(&b);
    }
  EXPECT_EQ(total, 3 * 16 * 64 * 4);
  EXPECT_EQ(p.planned_peak_bytes, 2 * 16 * 64 * 4);
  EXPECT_EQ(p.arena_bytes, SymInt(2 * 16 * 64 * 4));
  // consecutive intermediates never share memory
  for (size_t i = 0; i + 1 < planned.size(); ++i)
    EXPECT_NE(planned[i]->offset, planned[i + 1]->offset);
}

TEST(MemoryPlan, BoundedSymbolsPlanAtTheirMaximum) {
  auto g = graph(with_size(kChain, "s0", "s0 in [1, 32]"));
  const Program p = passes::compile_to_program(*g);
  EXPECT_EQ(p.planned_peak_bytes, 2 * 32 * 64 * 4);
  EXPECT_TRUE(p.arena_bytes.is_constant());
}

TEST(MemoryPlan, UnboundedSymbolsGiveAFormula) {
  auto g = graph(with_size(kChain, "s0", "s0 in [1, inf]"));
  const Program p = passes::compile_to_program(*g);
  EXPECT_EQ(p.planned_peak_bytes, -1);
  ASSERT_FALSE(p.arena_bytes.is_constant());
  for (int64_t s : {1, 7, 100}) EXPECT_GE(p.arena_bytes.evaluate({{"s0", s}}), 2 * s * 64 * 4);
}

TEST(LoopIr, ProgramPrintsReadably) {
  auto g = graph(R"(graph {
  inputs {
    %x: f32[2, 3] = user_input
  }
  %a: f32[2, 3] = aten.mul.Tensor(self=%x, other=2.0)
  %s: f32[2] = aten.sum.dim_IntList(self=%a, dim=[1])
  outputs {
    user_output %s
  }
})");
  const std::string text = passes::print_program(passes::compile_to_program(*g));
  EXPECT_NE(text.find("loop k0  # a, s"), std::string::npos) << text;
  EXPECT_NE(text.find("acc0 sum= mul(load(b0, 3*o0 + r0), 2)"), std::string::npos) << text;
}

// Two stores' indices are apart when their residues modulo w are (store_residues_apart, the
// fusion pass's rule for symbolic sizes). Each case: two indices over o0 (extent s0), o1
// (extent s1) and r0 (extent 8), and what is true of them for some sizes: apart (the rule proves
// it, and no two points give one index), shared (some sizes give one index from both: the rule
// must not say apart) or unproven (apart, but not by this rule at this w).
TEST(LoopIr, StoreResiduesApartOnlyWhenNoIndexIsShared) {
  const SymInt s0 = SymInt::symbol("s0"), s1 = SymInt::symbol("s1");
  const SymInt o0 = SymInt::symbol("o0"), o1 = SymInt::symbol("o1"), r0 = SymInt::symbol("r0");
  const std::vector<std::string> vars = {"o0", "o1", "r0"};
  const std::vector<SymInt> ext = {s0, s1, SymInt(8)};
  const SymInt row = SymInt(16) * s1 * o0 + SymInt(16) * o1;  // rows of 16, symbolic strides
  enum class Is { kApart, kShared, kUnproven };
  struct Case {
    const char* what;
    SymInt x, y;
    int64_t w;
    Is is;
  };
  const std::vector<Case> cases = {
      {"rotate_half's halves", row + r0, row + r0 + SymInt(8), 16, Is::kApart},
      {"the halves modulo 8", row + r0, row + r0 + SymInt(8), 8, Is::kUnproven},
      {"overlapping columns", row + r0, row + r0 + SymInt(4), 16, Is::kShared},
      {"other outer strides, still multiples of 16", row + r0,
       SymInt(32) * s1 * o0 + SymInt(48) * o1 + r0 + SymInt(8), 16, Is::kApart},
      {"a symbolic offset of whole rows", row + r0, row + r0 + SymInt(16) * s0 + SymInt(8), 16,
       Is::kApart},
      {"a symbolic offset not of whole rows (s0 = 8)", row + r0, row + r0 + s0 + SymInt(8), 16,
       Is::kShared},
      {"a symbolic stride not of whole rows (s1 = 8)", s1 * o0 + r0, s1 * o0 + r0 + SymInt(8), 16,
       Is::kShared},
      {"a flipped half", row + SymInt(7) - r0, row + SymInt(8) + r0, 16, Is::kApart},
      // x: columns 12..15 and 0..3 of the next row (residues wrap), y: 4..11
      {"residues wrapping apart", row + r0 + SymInt(12), row + r0 + SymInt(4), 16, Is::kApart},
      {"residues wrapping onto the other", row + r0 + SymInt(12), row + r0 + SymInt(2), 16,
       Is::kShared},
      {"even and odd elements", SymInt(2) * r0 + SymInt(16) * o1,
       SymInt(2) * r0 + SymInt(16) * o1 + SymInt(1), 2, Is::kApart},
      {"even elements twice", SymInt(2) * r0, SymInt(2) * r0 + SymInt(2), 2, Is::kShared},
      {"a variable stepping past the block", SymInt(8) * r0 + o1 * SymInt(64),
       SymInt(8) * r0 + o1 * SymInt(64) + SymInt(8), 16, Is::kShared},
      {"an index that is not affine", (o1.floordiv(SymInt(2))) * SymInt(16) + r0,
       (o1.floordiv(SymInt(2))) * SymInt(16) + r0 + SymInt(8), 16, Is::kUnproven},
  };
  for (const Case& c : cases) {
    const bool apart = c.is == Is::kApart;
    EXPECT_EQ(passes::store_residues_apart(c.x, c.y, vars, ext, c.w), apart)
        << c.what << ": " << c.x.str() << " / " << c.y.str() << " mod " << c.w;
    EXPECT_EQ(passes::store_residues_apart(c.y, c.x, vars, ext, c.w), apart) << c.what;
    bool shared = false;  // over every point for a few sizes
    for (const int64_t v0 : {1, 2, 3, 8})
      for (const int64_t v1 : {1, 2, 5, 8}) {
        std::set<int64_t> xs;
        auto each = [&](auto&& f) {
          for (int64_t i = 0; i < v0; ++i)
            for (int64_t j = 0; j < v1; ++j)
              for (int64_t k = 0; k < 8; ++k)
                f(SymEnv{{"s0", v0}, {"s1", v1}, {"o0", i}, {"o1", j}, {"r0", k}});
        };
        each([&](const SymEnv& env) { xs.insert(c.x.evaluate(env)); });
        each([&](const SymEnv& env) { shared = shared || xs.count(c.y.evaluate(env)) > 0; });
      }
    EXPECT_EQ(shared, c.is == Is::kShared) << c.what;
  }
}

TEST(Lowering, InPlaceCollectiveOnAUserInputRunsOnACopyAndWritesTheInputBack) {
  // dist.all_reduce(x) of a graph input: the collective never runs on the caller's memory
  // (rule A.5); its result is copied into the input after the wait, as eager leaves x.
  auto g = graph(R"(graph {
  inputs {
    %x: f32[4] = user_input
  }
  %a: f32[4] = _c10d_functional.all_reduce_.default(input=%x, reduce_op="sum", group_name="0")
  outputs {
    user_output %a
  }
})");
  const passes::Program p = passes::compile_to_program(*g);
  const std::string text = passes::print_program(p);
  ASSERT_EQ(p.inputs.size(), 1u);
  EXPECT_TRUE(p.inputs[0].mutated) << text;
  const int in = p.inputs[0].buffer;
  bool issued = false, written_after_wait = false, waited = false;
  for (const auto& step : p.steps) {
    if (const auto* e = std::get_if<passes::ExternStep>(&step)) {
      if (e->target.find("all_reduce") != std::string::npos) {
        issued = true;
        for (const auto& v : e->inputs) EXPECT_NE(v.buffer, in) << "runs on the input\n" << text;
      }
      if (e->target.find("wait") != std::string::npos) waited = true;
    }
    if (const auto* k = std::get_if<passes::LoopKernel>(&step))
      for (const auto& pass : k->passes)
        for (const auto& st : pass.loop) written_after_wait |= waited && st.buffer == in;
  }
  EXPECT_TRUE(issued) << text;
  EXPECT_TRUE(written_after_wait) << text;
}

}  // namespace
}  // namespace anvil

namespace anvil {
namespace {

TEST(Lowering, ReshapeOfATransposeCopiesWithoutIndexDivisions) {
  auto g = graph(R"(graph {
  inputs {
    %w: f32[6, 15] = parameter "w"
    %x: f32[2, 3, 4, 5] = user_input
  }
  %t: f32[2, 4, 3, 5] = aten.transpose.int(self=%x, dim0=1, dim1=2)
  %r: f32[2, 4, 15] = aten.reshape.default(self=%t, shape=[2, 4, 15])
  %l: f32[2, 4, 6] = aten.linear.default(input=%r, weight=%w)
  outputs {
    user_output %l
  }
})");
  const std::string text = passes::print_program(passes::compile_to_program(*g));
  EXPECT_EQ(text.find("FloorDiv"), std::string::npos) << text;
  EXPECT_EQ(text.find("Mod("), std::string::npos) << text;
  EXPECT_NE(text.find("outer [2, 4, 3] inner [5]"), std::string::npos) << text;
}

}  // namespace
}  // namespace anvil

#include "frontend/pt2_reader.h"

namespace anvil {
namespace {

TEST(Pipeline, VerifierPassesAfterEveryPassOnTheFixtures) {
  for (const char* m : {"mlp_small", "mlp_dynbatch", "small_cnn", "const_and_buffer", "llama_tiny",
                        "gpt2_tiny", "bert_tiny", "block_tiny"}) {
    auto g = frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/" + m + ".pt2");
    passes::PipelineOptions o;
    o.verify = true;
    Program p;
    ASSERT_NO_THROW(p = passes::compile_to_program(*g, o)) << m;
    EXPECT_GT(p.steps.size(), 0u) << m;
    EXPECT_GE(p.planned_peak_bytes, 0) << m;  // every fixture's symbols are bounded
  }
}

}  // namespace
}  // namespace anvil
