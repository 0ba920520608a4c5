// Kernel de-duplication (codegen/cpu/emit_dedup.cpp): step functions that compute the same thing
// on different buffers share one implementation; the shared code runs and gives PyTorch's /
// the interpreter's answers; kernels that differ are not merged.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "frontend/pt2_reader.h"
#include "harness.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "passes/pipeline.h"

namespace anvil {
namespace {

std::string fixture(const std::string& file) {
  return std::string(ANVIL_FIXTURES_DIR) + "/" + file;
}

std::string all_sources(const codegen::CpuCodegenResult& r) {
  std::string text;
  for (const auto& s : r.sources) text += s.text;
  return text;
}

int manifest_shared(const codegen::CpuCodegenResult& r) {
  return nlohmann::json::parse(r.manifest_json).value("kernels_shared", -1);
}

// spec/aot.md section 4 case 57: the two symmetric bmm branches share one GEMM implementation;
// the package still matches PyTorch at d = 2 and at the second shape set.
TEST(KernelDedup, Case57SharedBranchesShareKernels) {
  const std::string name = "aot/aot_57_shared_branches";
  auto graph = frontend::load_pt2(fixture(name + ".pt2"));
  codegen::CpuCodegenOptions o;
  o.num_translation_units = 1;
  auto lib = testing::build_library({{"c57", graph.get()}}, o);
  auto& model = lib->model("c57");
  const auto& gen = model.generated();
  EXPECT_GE(gen.kernels_shared, 1);
  EXPECT_EQ(manifest_shared(gen), gen.kernels_shared);
  EXPECT_NE(all_sources(gen).find("kshared0("), std::string::npos);
  int sets = 0;
  for (const std::string suffix : {"", "_0"}) {
    if (!std::filesystem::exists(fixture(name + ".in0" + suffix + ".npy"))) continue;
    std::vector<Tensor> ins = {read_npy(fixture(name + ".in0" + suffix + ".npy")),
                               read_npy(fixture(name + ".in1" + suffix + ".npy"))};
    const Tensor want = read_npy(fixture(name + ".out0" + suffix + ".npy"));
    const auto got = model.run(ins);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].sizes(), want.sizes()) << suffix;
    EXPECT_LE(testing::rel_error(got[0], want), 1e-4) << suffix;
    ++sets;
  }
  EXPECT_EQ(sets, 2);
}

// mlp_small: the two linear + gelu epilogues (8 x 512, own bias each) are one loop kernel
// implementation, run through the parallel path (the pointers travel in the chunk context).
TEST(KernelDedup, MlpSmallSharesTheGeluKernel) {
  auto graph = frontend::load_pt2(fixture("mlp_small.pt2"));
  codegen::CpuCodegenOptions o;
  o.num_translation_units = 2;
  o.parallel_min_work = 256;
  auto lib = testing::build_library({{"mlp", graph.get()}}, o);
  auto& model = lib->model("mlp");
  const auto& gen = model.generated();
  EXPECT_EQ(gen.kernels_shared, 1) << gen.program_text;
  EXPECT_EQ(gen.kernel_bodies + gen.kernels_shared,
            gen.stats.loop_kernels + gen.stats.gemms + gen.stats.externs);
  const std::string src = all_sources(gen);
  EXPECT_NE(src.find("static void kshared0_chunk("), std::string::npos);
  EXPECT_NE(src.find("ANVIL_HIDDEN void k1(const RunState& s) {"), std::string::npos);
  const std::vector<Tensor> ins = {read_npy(fixture("mlp_small.in0.npy"))};
  const Tensor want = read_npy(fixture("mlp_small.out0.npy"));
  const auto got = model.run(ins);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LE(testing::rel_error(got[0], want), 1e-4);
}

// Two GEMMs with the same shapes share one body; the loop kernel that updates its buffer in
// place (tanh(m) * 3 over the GEMM result) differs from the one reading an input and keeps its
// own.
const char* kTwins = R"(graph {
  inputs {
    %w: f32[16, 16] = parameter "w"
    %x: f32[16, 16] = user_input
  }
  %a: f32[16, 16] = aten.tanh.default(self=%x)
  %a2: f32[16, 16] = aten.mul.Tensor(self=%a, other=3.0)
  %m: f32[16, 16] = aten.mm.default(self=%a2, mat2=%w)
  %b: f32[16, 16] = aten.tanh.default(self=%m)
  %b2: f32[16, 16] = aten.mul.Tensor(self=%b, other=3.0)
  %n: f32[16, 16] = aten.mm.default(self=%b2, mat2=%w)
  outputs {
    user_output %n
  }
})";

TEST(KernelDedup, SameShapeGemmsShareInPlaceKernelDoesNot) {
  auto g = ir::parse_graph(kTwins);
  g->constants["w"] = testing::random_tensor({16, 16}, DType::kFloat32, 7);
  codegen::CpuCodegenOptions o;
  o.num_translation_units = 2;
  o.parallel_min_work = 16;
  auto lib = testing::build_library({{"twins", g.get()}}, o);
  auto& model = lib->model("twins");
  const auto& gen = model.generated();
  EXPECT_EQ(gen.kernels_shared, 1) << gen.program_text;  // gemm1 uses gemm0's body
  EXPECT_EQ(gen.kernel_bodies, 3);                       // k0, k1, the shared GEMM
  const Tensor x = testing::random_tensor({16, 16}, DType::kFloat32, 3);
  const auto got = model.run({x});
  interp::Interpreter ref(*g);
  const auto want = ref.run({x});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LE(testing::rel_error(got[0], want[0]), 1e-5);
}

/// Two linear layers, each followed by "* c": (x @ w1 + b1) * c1 then (h @ w2 + b2) * c2.
std::unique_ptr<ir::Graph> two_linears(const std::string& c1, const std::string& c2) {
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %w1: f32[16, 16] = parameter "w1"
    %b1: f32[16] = parameter "b1"
    %w2: f32[16, 16] = parameter "w2"
    %b2: f32[16] = parameter "b2"
    %x: f32[8, 16] = user_input
  }
  %m1: f32[8, 16] = aten.mm.default(self=%x, mat2=%w1)
  %a1: f32[8, 16] = aten.add.Tensor(self=%m1, other=%b1)
  %h: f32[8, 16] = aten.mul.Tensor(self=%a1, other=)" + c1 + R"()
  %m2: f32[8, 16] = aten.mm.default(self=%h, mat2=%w2)
  %a2: f32[8, 16] = aten.add.Tensor(self=%m2, other=%b2)
  %y: f32[8, 16] = aten.mul.Tensor(self=%a2, other=)" + c2 + R"()
  outputs {
    user_output %y
  }
})");
  for (const char* w : {"w1", "w2"}) g->constants[w] = Tensor::full({16, 16}, 0.25, DType::kFloat32);
  for (const char* b : {"b1", "b2"}) g->constants[b] = Tensor::full({16}, 0.5, DType::kFloat32);
  return g;
}

// The epilogue kernels merge when they are the same computation and stay apart when they
// differ only in a constant; kernels of different kinds never merge.
TEST(KernelDedup, DifferentKernelsAreNotMerged) {
  const auto same = codegen::generate_cpu(*two_linears("2.0", "2.0"));
  EXPECT_EQ(same.kernels_shared, 2) << same.program_text;  // the GEMM and the epilogue
  const auto differ = codegen::generate_cpu(*two_linears("2.0", "3.0"));
  EXPECT_EQ(differ.kernels_shared, 1) << differ.program_text;  // the GEMM only
  EXPECT_EQ(manifest_shared(differ), 1);
  const std::string src = all_sources(differ);
  EXPECT_NE(src.find("static_cast<float>(2.0)"), std::string::npos);
  EXPECT_NE(src.find("static_cast<float>(3.0)"), std::string::npos);

  const char* kDiffer = R"(graph {
  inputs {
    %x: f32[4, 8] = user_input
    %y: f32[4, 8] = user_input
  }
  %a: f32[4, 8] = aten.mul.Tensor(self=%x, other=2.0)
  %s: f32[4] = aten.sum.dim_IntList(self=%a, dim=[1])
  %b: f32[4, 8] = aten.mul.Tensor(self=%y, other=3.0)
  %t: f32[4] = aten.amax.default(self=%b, dim=[1])
  outputs {
    user_output %s
    user_output %t
  }
})";
  const auto r = codegen::generate_cpu(*ir::parse_graph(kDiffer));
  EXPECT_EQ(r.kernels_shared, 0);
  EXPECT_EQ(manifest_shared(r), 0);
  EXPECT_EQ(all_sources(r).find("kshared"), std::string::npos);
}

}  // namespace
}  // namespace anvil

namespace anvil {
namespace {

// The grouping criterion itself (passes::structural_key): the two symmetric bmm branches of case
// 57 have one key though they touch other buffers; any change of shape, layout or scale, or of
// a loop kernel's bounds, gives another key.
TEST(KernelDedup, StructuralKeysCompareLoopIrNotBuffers) {
  auto graph = frontend::load_pt2(fixture("aot/aot_57_shared_branches.pt2"));
  const passes::Program p = passes::compile_to_program(*graph);
  std::vector<const passes::GemmStep*> gemms;
  const passes::LoopKernel* loop = nullptr;
  for (const auto& s : p.steps) {
    if (const auto* g = std::get_if<passes::GemmStep>(&s)) gemms.push_back(g);
    if (const auto* k = std::get_if<passes::LoopKernel>(&s); k && !loop) loop = k;
  }
  ASSERT_GE(gemms.size(), 2u);
  const std::string k0 = passes::structural_key(p, passes::Step(*gemms[0]));
  EXPECT_FALSE(k0.empty());
  int same = 0;
  for (size_t i = 1; i < gemms.size(); ++i)
    if (passes::structural_key(p, passes::Step(*gemms[i])) == k0) {
      ++same;
      EXPECT_NE(gemms[i]->c.buffer, gemms[0]->c.buffer);
    }
  EXPECT_GE(same, 1);
  passes::GemmStep scaled = *gemms[0];
  scaled.alpha = 0.5;
  EXPECT_NE(passes::structural_key(p, passes::Step(scaled)), k0);
  passes::GemmStep transposed = *gemms[0];
  transposed.a.trans = !transposed.a.trans;
  EXPECT_NE(passes::structural_key(p, passes::Step(transposed)), k0);
  ASSERT_NE(loop, nullptr);
  passes::LoopKernel wider = *loop;
  wider.outer.push_back(SymInt(2));
  EXPECT_NE(passes::structural_key(p, passes::Step(wider)), passes::structural_key(p, *loop));
  EXPECT_EQ(passes::structural_key(p, passes::Step(passes::ExternStep{})), "");
}

}  // namespace
}  // namespace anvil
