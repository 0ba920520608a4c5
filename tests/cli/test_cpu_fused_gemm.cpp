// The CPU's untimed rule (driver/gemm_default.h): with --autotune off, a Linear whose result goes
// through its bias and a GELU (erf or tanh), SiLU or ReLU runs anvil's packed kernel
// (own_packed_f32_auto) with that epilogue in its store, and no loop kernel is left for it; the
// package matches the reference interpreter. A residual add stays a loop kernel; a weight that
// is a user input (not a constant) and ANVIL_CPU_FUSED_GEMM=0 keep the default path.
// bf16: in a native package built on a CPU with AVX-512 and no AMX, bf16 Linears of M >= 8 run
// the widening template default_bf16_template() (GELU fused in its store) and match the
// interpreter; a smaller M, a named target and ANVIL_CPU_BF16_TEMPLATE=0 keep oneDNN.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "codegen/gemm/cpu_templates.h"
#include "codegen/toolchain.h"
#include "core/zip_reader.h"
#include "driver/compile.h"
#include "driver/gemm_default.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/cpu_features.h"
#include "runtime/model.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

/// [rows, cols] of values in [-scale, scale] from `seed`.
Tensor random(int64_t rows, int64_t cols, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (float& x : v) x = d(rng);
  return Tensor::from_vector(v, {rows, cols});
}

/// An MLP block as ViT / ConvNeXt have it: fc1 + bias + ACT, fc2 + bias + the residual x.
std::string mlp(const std::string& act, bool weight_is_input) {
  std::string t = R"(graph {
  inputs {
    %w1: f32[96, 40] = W1
    %b1: f32[96] = parameter "b1"
    %w2: f32[40, 96] = parameter "w2"
    %b2: f32[40] = parameter "b2"
    %x: f32[37, 40] = user_input
  }
  %h: f32[37, 96] = aten.linear.default(input=%x, weight=%w1, bias=%b1)
  ACT
  %o: f32[37, 40] = aten.linear.default(input=%g, weight=%w2, bias=%b2)
  %r: f32[37, 40] = aten.add.Tensor(self=%o, other=%x)
  outputs {
    user_output %r
  }
})";
  t.replace(t.find("W1"), 2, weight_is_input ? "user_input" : "parameter \"w1\"");
  t.replace(t.find("ACT"), 3, act);
  return t;
}

class CpuFusedGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("anvil_fused_gemm_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    ::unsetenv("ANVIL_CPU_FUSED_GEMM");
    ::unsetenv("ANVIL_CPU_BF16_TEMPLATE");
  }
  /// Compiles `text` (--autotune off), checks it against the interpreter and returns the
  /// generated sources.
  std::string compile_and_check(const std::string& name, const std::string& text,
                                const std::string& target = "native", bool bf16 = false) {
    auto g = ir::parse_graph(text);
    std::vector<Tensor> ins;
    for (const auto& s : g->input_specs()) {
      if (s.kind != ir::InputKind::kUserInput) continue;
      const auto& sz = s.value->type.sizes;
      ins.push_back(random(sz[0].constant(), sz[1].constant(), 11 + ins.size(), 2.0f));
    }
    g->constants["w1"] = random(96, 40, 1, 0.4f);
    g->constants["b1"] = random(1, 96, 2, 1.0f).view({96});
    g->constants["w2"] = random(40, 96, 3, 0.2f);
    g->constants["b2"] = random(1, 40, 4, 1.0f).view({40});
    if (bf16) {
      for (auto& [k, v] : g->constants) v = v.to(DType::kBFloat16);
      for (Tensor& t : ins) t = t.to(DType::kBFloat16);
    }
    driver::CompileOptions o;
    o.target = target;
    o.cache_dir = (dir_ / "cache").string();
    o.progress = codegen::ProgressMode::kQuiet;
    const std::string pkg = (dir_ / (name + ".anvil")).string();
    driver::compile_graph(*g, pkg, o);
    const auto want = interp::Interpreter(*g).run(ins);
    runtime::Model model = runtime::Model::load(pkg);
    const auto got = model.run(ins);
    EXPECT_TRUE(anvil::test::matches_reference(got[0], want[0])) << name;
    if (bf16) {  // a template keeps its packed weight with the constants: an update packs anew
      const Tensor w1 = random(96, 40, 9, 0.4f).to(DType::kBFloat16);
      model.update_constants({{"w1", w1}}, /*inactive=*/false);
      g->constants["w1"] = w1;
      EXPECT_TRUE(anvil::test::matches_reference(model.run(ins)[0],
                                                 interp::Interpreter(*g).run(ins)[0]))
          << name << " after w1 was updated";
    }
    const ZipReader zip = ZipReader::open(pkg);
    std::string src;
    for (const ZipEntry& e : zip.entries())
      if (e.name.rfind("src/", 0) == 0) src += zip.read(e);
    return src;
  }
  static int count(const std::string& s, const std::string& part) {
    int n = 0;
    for (size_t p = s.find(part); p != std::string::npos; p = s.find(part, p + 1)) ++n;
    return n;
  }
  fs::path dir_;
};

TEST_F(CpuFusedGemm, GeluSiluReluFuseIntoTheLinearsStore) {
  const char* acts[][2] = {
      {"gelu_erf", "%g: f32[37, 96] = aten.gelu.default(self=%h)"},
      {"gelu_tanh", "%g: f32[37, 96] = aten.gelu.default(self=%h, approximate=\"tanh\")"},
      {"silu", "%g: f32[37, 96] = aten.silu.default(self=%h)"},
      {"relu", "%g: f32[37, 96] = aten.relu.default(self=%h)"}};
  for (const auto& a : acts) {
    const std::string src = compile_and_check(a[0], mlp(a[1], false));
    // fc1 with its bias and activation in the store; fc2's residual stays a loop kernel
    EXPECT_EQ(count(src, "kernel own_packed_f32_auto, epilogue"), 1) << a[0] << "\n" << src;
    EXPECT_EQ(count(src, "call.library = 2; call.variant = 0;"), 1) << a[0];
    EXPECT_EQ(count(src, "computed in the store of a GEMM kernel"), 1) << a[0];
  }
}

TEST_F(CpuFusedGemm, DefaultPathWithoutAConstantWeightOrWhenTurnedOff) {
  const std::string gelu = "%g: f32[37, 96] = aten.gelu.default(self=%h)";
  std::string src = compile_and_check("weight_input", mlp(gelu, true));
  EXPECT_EQ(count(src, "own_packed_f32_auto"), 0) << src;
  ::setenv("ANVIL_CPU_FUSED_GEMM", "0", 1);
  src = compile_and_check("turned_off", mlp(gelu, false));
  EXPECT_EQ(count(src, "own_packed_f32_auto"), 0) << src;
  EXPECT_EQ(count(src, "computed in the store of a GEMM kernel"), 0) << src;
}

TEST_F(CpuFusedGemm, Bf16LinearsRunTheWideningTemplateWithoutAmx) {
  // the rule's tile is one of the tuner's own bf16 AVX-512 candidates
  namespace cg = codegen::gemm;
  const std::string name = cg::cpu_template_name(driver::default_bf16_template(false, true));
  bool listed = false;
  for (auto c : cg::cpu_template_configs(cg::CpuGemmTypes::kBf16, cg::CpuIsa::kAvx512)) {
    c.trans_b = true;
    listed = listed || cg::cpu_template_name(c) == name;
  }
  EXPECT_TRUE(listed) << name << " is not among the tuner's bf16 AVX-512 templates";
  // the MLP in bf16 at the rule's smallest M; fc1's GELU goes into the template's store
  auto bf16_mlp = [](int64_t m) {
    std::string text = mlp("%g: f32[37, 96] = aten.gelu.default(self=%h)", false);
    for (size_t p = text.find("f32["); p != std::string::npos; p = text.find("f32[", p))
      text.replace(p, 3, "bf16");
    for (size_t p = text.find("[37,"); p != std::string::npos; p = text.find("[37,", p))
      text.replace(p + 1, 2, std::to_string(m));
    return text;
  };
  const auto native = codegen::resolve_target("native").cpu_features;
  const bool rule =
      cg::has_cpu_features(native, {"avx512f"}) && !cg::has_cpu_features(native, {"amx-bf16"});
  std::string src = compile_and_check("bf16", bf16_mlp(driver::kDefaultBf16MinM), "native", true);
  // both Linears (fc1 with its bias and GELU in the store), the kernel's source once
  EXPECT_EQ(count(src, "(bf16 GEMM, kernel " + name), rule ? 2 : 0) << src;
  EXPECT_EQ(count(src, "// anvil CPU GEMM template " + name), rule ? 1 : 0);
  EXPECT_EQ(count(src, "computed in the store of a GEMM kernel"), rule ? 1 : 0) << src;
  src = compile_and_check("bf16_below", bf16_mlp(driver::kDefaultBf16MinM - 1), "native", true);
  EXPECT_EQ(count(src, name), 0) << "M below kDefaultBf16MinM keeps oneDNN";
  ::setenv("ANVIL_CPU_BF16_TEMPLATE", "0", 1);
  src = compile_and_check("bf16_off", bf16_mlp(driver::kDefaultBf16MinM), "native", true);
  EXPECT_EQ(count(src, name), 0) << "ANVIL_CPU_BF16_TEMPLATE=0";
  ::unsetenv("ANVIL_CPU_BF16_TEMPLATE");
  // a named target's features say nothing of AMX: oneDNN
  const char* named = runtime::cpu_supports("avx512f") ? "x86_64-avx512"
                      : runtime::cpu_supports("avx2") ? "x86_64-avx2"
                                                       : nullptr;
  if (named) {
    src = compile_and_check("bf16_named", bf16_mlp(driver::kDefaultBf16MinM), named, true);
    EXPECT_EQ(count(src, name), 0) << named;
  }
  if (!rule) GTEST_SKIP() << "the native target has no AVX-512 or has AMX: only the negative "
                             "cases ran";
}

}  // namespace
}  // namespace anvil
