// spec/aot.md section 4, CPU cases 63, 78, 79 and 84 on compiled packages (runtime checks and
// their messages, a failed call leaving the Model usable, nan / inf passing through), aliased
// outputs of inputs, and a load / run / unload loop that the LeakSanitizer step of
// scripts/test.sh runs (AotLeak.*).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "aot_util.h"
#include "core/error.h"
#include "interp/interpreter.h"
#include "ir/parser.h"

namespace anvil::aot_test {
namespace {

// Case 63: u = x.item(); check u > 3; ones(u)[0:1] -> [1.0]; with x = 2 the run fails with an
// error (not a crash) and the Model stays usable.
TEST(AotCheck, C63_ItemAssertion) {
  ANVIL_AOT_LOAD(model, "aot_63_item_check");
  const auto ins = read_set("aot_63_item_check", "in", "");
  expect_outputs(model.run(ins), read_set("aot_63_item_check", "out", ""), "x = 23");
  const std::string e = error_of([&] { model.run({Tensor::scalar(2, DType::kInt64)}); });
  EXPECT_TRUE(contains(e, "Runtime assertion failed for expression u0 >= 4")) << e;
  // The run-time symbol is compiled (an item step, two assert steps), not interpreted.
  EXPECT_TRUE(contains(model_built.program_text, "anvil.item")) << model_built.program_text;
  EXPECT_TRUE(contains(model_built.program_text, "anvil.assert")) << model_built.program_text;
  for (int64_t x : {4, 5, 1000})
    expect_outputs(model.run({Tensor::scalar(x, DType::kInt64)}),
                   read_set("aot_63_item_check", "out", ""), str("x = ", x));
  EXPECT_FALSE(error_of([&] { model.run({Tensor::scalar(3, DType::kInt64)}); }).empty());
  expect_outputs(model.run(ins), read_set("aot_63_item_check", "out", ""), "after the failure");
}

// An output sized by a run-time symbol without a bound cannot be planned before the run: run()
// allocates it once the value is known (layout base_kind 3, api->output_alloc), and the runtime
// shapes it from run_symbols. Sizes 0, 1 and 100000 on one package, then a failed assertion
// leaves the Model usable.
TEST(AotCheck, RunTimeSymbolSizesAnOutputAllocatedDuringTheRun) {
  const std::string text = R"(graph {
  symbols {
    u0 in [0, inf]
  }
  inputs {
    %a_0: i64[] = user_input
  }
  %item: SymInt(u0) = aten.item.default(self=%a_0)
  %ones: f32[u0] = aten.ones.default(size=SymInt[%item], *device=device(cpu), *pin_memory=False)
  %mul: f32[u0] = aten.mul.Tensor(self=%ones, other=2.0)
  outputs {
    user_output %mul
  }
})";
  const Built& b = build_graph("run_time_sized_output", *ir::parse_graph(text));
  ASSERT_TRUE(b.error.empty()) << b.error;
  EXPECT_TRUE(contains(b.program_text, "run-time sized")) << b.program_text;
  runtime::Model model = runtime::Model::load(b.package);
  for (int64_t n : {0, 1, 100000, 3}) {
    const auto out = model.run({Tensor::scalar(n, DType::kInt64)});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].sizes(), Shape{n});
    for (double v : out[0].to_doubles()) ASSERT_EQ(v, 2.0) << "n = " << n;
  }
  const std::string e = error_of([&] { model.run({Tensor::scalar(-1, DType::kInt64)}); });
  EXPECT_FALSE(e.empty());
  EXPECT_EQ(model.run({Tensor::scalar(2, DType::kInt64)})[0].sizes(), Shape{2});
}

// A buffer sized by an expression of a bounded count (s0 - u0 after a boolean mask): the
// capacity bounds u0, not s0 - u0, so that buffer is allocated during the run as well. Matches
// the interpreter for masks selecting none, some and all rows.
TEST(AotCheck, ExpressionOfACountSizesABufferAllocatedDuringTheRun) {
  const std::string text = R"(graph {
  symbols {
    s0 in [1, 64]
    u0 in [0, inf]
  }
  inputs {
    %x: f32[s0, 3] = user_input
    %m: bool[s0] = user_input
  }
  %n: SymInt(s0) = aten.sym_size.int(self=%x, dim=0)
  %sel: f32[u0, 3] = aten.index.Tensor(self=%x, indices=[%m])
  %sz: SymInt(u0) = aten.sym_size.int(self=%sel, dim=0)
  %rest: SymInt(s0 - u0) = _operator.sub(a=SymInt(%n), b=SymInt(%sz))
  %z: f32[s0 - u0, 3] = aten.zeros.default(size=SymInt[%rest, 3], *device=device(cpu), *pin_memory=False)
  %cat: f32[s0, 3] = aten.cat.default(tensors=[%sel, %z])
  %e: f32[s0 - u0, 3] = aten.add.Tensor(self=%z, other=1.5)
  outputs {
    user_output %cat
    user_output %e
  }
})";
  auto g = ir::parse_graph(text);
  const Built& b = build_graph("count_expression_sized", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  EXPECT_TRUE(contains(b.program_text, "run-time sized")) << b.program_text;
  runtime::Model model = runtime::Model::load(b.package);
  for (const std::vector<double>& mask :
       {std::vector<double>{0, 0, 0, 0}, {1, 0, 1, 0}, {1, 1, 1, 1}, {0, 1, 0, 0, 0, 1, 1}}) {
    const int64_t n = static_cast<int64_t>(mask.size());
    std::vector<double> xv;
    for (int64_t i = 0; i < n * 3; ++i) xv.push_back(0.5 * static_cast<double>(i) - 2);
    const std::vector<Tensor> ins = {Tensor::from_vector(xv, {n, 3}).to(DType::kFloat32, true),
                                     Tensor::from_vector(mask, {n}).to(DType::kBool, true)};
    const auto got = model.run(ins);
    interp::Interpreter interp(*g);
    const auto want = interp.run(ins);
    ASSERT_EQ(got.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_EQ(got[i].sizes(), want[i].sizes()) << "output " << i;
      EXPECT_EQ(got[i].to_doubles(), want[i].to_doubles()) << "output " << i;
    }
  }
}

// Case 85: profiling on (per-step timing) leaves results unchanged, for a linear model and for a
// permute-only model (no steps at all: its output views the input). Each step of the linear
// model is counted once per profiled run, with a time and the bytes it moves.
TEST(AotCheck, C85_ProfilingLeavesResultsUnchanged) {
  ANVIL_AOT_LOAD(model, "aot_02_add_linear");
  const auto ins = inputs_for(model, read_set("aot_02_add_linear", "in", ""));
  const auto want = read_set("aot_02_add_linear", "out", "");
  const auto plain = model.run(ins);
  model.set_profiling(true);
  for (int i = 0; i < 3; ++i) {
    const auto got = model.run(ins);
    ASSERT_EQ(got.size(), plain.size());
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_EQ(got[k].to_doubles(), plain[k].to_doubles()) << "output " << k;
    expect_outputs(got, want, "profiled");
  }
  model.set_profiling(false);
  model.run(ins);  // not counted
  const auto steps = model.profile();
  ASSERT_EQ(steps.size(), model.manifest().kernels.size());
  ASSERT_FALSE(steps.empty());
  for (const auto& s : steps) {
    EXPECT_EQ(s.calls, 3) << s.name;
    EXPECT_GT(s.total_ms, 0.0) << s.name;
    EXPECT_GT(s.bytes, 0) << s.name;
  }
  model.reset_profile();
  EXPECT_EQ(model.profile().at(0).calls, 0);

  const auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[4, 3] = user_input
  }
  %p: f32[3, 4] = aten.permute.default(self=%x, dims=[1, 0])
  outputs {
    user_output %p
  }
})");
  const Built& b = build_graph("permute_only", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model perm = runtime::Model::load(b.package);
  const Tensor x = Tensor::from_vector(std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
                                       {4, 3})
                       .to(DType::kFloat32, true);
  const auto off = perm.run({x});
  perm.set_profiling(true);
  const auto on = perm.run({x});
  ASSERT_EQ(on.size(), 1u);
  EXPECT_EQ(on[0].sizes(), (Shape{3, 4}));
  EXPECT_EQ(on[0].to_doubles(), off[0].to_doubles());
  EXPECT_EQ(on[0].to_doubles(), (std::vector<double>{0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}));
  EXPECT_TRUE(perm.profile().empty()) << "no steps: nothing to time";
}

// relu of a convolution that nothing else reads runs inside the convolution extern
// (fused_relu); when the convolution's result is also returned, relu stays a separate kernel.
// Both match the interpreter, negative values included.
TEST(AotCheck, ReluFusedIntoConvolution) {
  const std::string text = R"(graph {
  inputs {
    %x: f32[2, 3, 9, 20] = user_input
    %w: f32[4, 3, 3, 3] = user_input
    %b: f32[4] = user_input
  }
  %c: f32[2, 4, 5, 10] = aten.conv2d.default(input=%x, weight=%w, bias=%b, stride=[2, 2], padding=[1, 1])
  %r: f32[2, 4, 5, 10] = aten.relu.default(self=%c)
  outputs {
    user_output %r
  }
})";
  std::string both = text;
  both.replace(both.find("    user_output %r"), 18, "    user_output %r\n    user_output %c");
  std::vector<Tensor> ins;
  uint32_t seed = 7;
  for (const Shape& s : {Shape{2, 3, 9, 20}, Shape{4, 3, 3, 3}, Shape{4}}) {
    std::vector<float> v(static_cast<size_t>(shape_numel(s)));
    for (float& e : v) e = static_cast<float>((seed = seed * 1103515245u + 12345u) % 2001) / 1000.0f - 1.0f;
    ins.push_back(Tensor::from_vector(v, s));
  }
  for (const auto& [name, src, fused] : {std::tuple{"conv_relu", text, true},
                                         std::tuple{"conv_relu_both", both, false}}) {
    auto g = ir::parse_graph(src);
    const Built& b = build_graph(name, *g);
    ASSERT_TRUE(b.error.empty()) << b.error;
    EXPECT_EQ(contains(b.program_text, "fused_relu"), fused) << b.program_text;
    EXPECT_EQ(b.stats.loop_kernels, fused ? 0 : 1) << b.program_text;
    runtime::Model m = load(b);
    interp::Interpreter ref(*g);
    const auto want = ref.run(ins);
    expect_outputs(m.run(ins), want, name);
    int zeros = 0;
    for (double v : want[0].to_doubles()) zeros += v == 0.0;
    EXPECT_GT(zeros, 0) << "the test input must make relu clip something";
  }
}

// Case 78: compiled for fp16 (1,4); an fp32 input fails naming the input and both dtypes;
// nothing is returned and the Model stays usable.
TEST(AotCheck, C78_DtypeMismatch) {
  ANVIL_AOT_LOAD(model, "aot_78_fp16_in");
  const Tensor x32 = read_set("aot_78_fp16_in", "in", "")[0];
  ASSERT_EQ(x32.dtype(), DType::kFloat32);
  const std::string name = model.input_specs()[0].name;
  const std::string e = error_of([&] { model.run({x32}); });
  ASSERT_FALSE(e.empty());
  EXPECT_TRUE(contains(e, "'" + name + "'")) << e;
  EXPECT_TRUE(contains(e, dtype_name(DType::kFloat16))) << e;
  EXPECT_TRUE(contains(e, dtype_name(DType::kFloat32))) << e;
  EXPECT_TRUE(contains(e, "dtype")) << e;
  expect_outputs(model.run(inputs_for(model, {x32})), read_set("aot_78_fp16_in", "out", ""),
                 "fp16 after the failure");
}

// Case 79: compiled for (d0 in [4,1024], 4, 4) fp16.
TEST(AotCheck, C79_ShapeChecks) {
  ANVIL_AOT_LOAD(model, "aot_79_dyn_fp16");
  const std::string name = "'" + model.input_specs()[0].name + "'";
  const auto f16 = [](const Shape& s) { return Tensor::full(s, 0.5, DType::kFloat16); };
  // (8,4,4) and (4,4,4): ok, equal to PyTorch.
  for (const std::string suffix : {"", "_0"})
    expect_outputs(model.run(inputs_for(model, read_set("aot_79_dyn_fp16", "in", suffix))),
                   read_set("aot_79_dyn_fp16", "out", suffix), "shape set " + suffix);
  // (4,8,4): static-dim error naming the input, dim 1, expected 4 and actual 8.
  std::string e = error_of([&] { model.run({f16({4, 8, 4})}); });
  EXPECT_TRUE(contains(e, name)) << e;
  EXPECT_TRUE(contains(e, "dim 1")) << e;
  EXPECT_TRUE(contains(e, "expected 4, got 8")) << e;
  // (2048,4,4): too large, naming the dim, the bound and the value.
  e = error_of([&] { model.run({f16({2048, 4, 4})}); });
  EXPECT_TRUE(contains(e, name)) << e;
  EXPECT_TRUE(contains(e, "dim 0")) << e;
  EXPECT_TRUE(contains(e, "too large")) << e;
  EXPECT_TRUE(contains(e, "1024")) << e;
  EXPECT_TRUE(contains(e, "got 2048")) << e;
  // (2048,3,4): an error as well.
  EXPECT_FALSE(error_of([&] { model.run({f16({2048, 3, 4})}); }).empty());
  // Below the range.
  e = error_of([&] { model.run({f16({3, 4, 4})}); });
  EXPECT_TRUE(contains(e, "too small")) << e;
  // Strides (16,1,4): the runtime takes non-contiguous inputs and copies them (documented in
  // runtime/model.h), so this is a correct run rather than a stride error.
  Tensor base = Tensor::empty({64}, DType::kFloat16);
  for (int64_t i = 0; i < 64; ++i) base.data<Half>()[i] = Half(static_cast<float>(i) / 8);
  const Tensor strided = base.as_strided({4, 4, 4}, {16, 1, 4}, 0);
  const Tensor y = model.run({strided})[0];
  const Tensor want = strided.contiguous();
  for (int64_t i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(y.item_at(i), want.item_at(i) + 1) << i;
}

// Case 84: an Inf and a NaN in x pass through: NaNs at the same positions as PyTorch's.
TEST(AotCheck, C84_NanInfPassThrough) {
  ANVIL_AOT_LOAD(model, "aot_84_nan_inf");
  const auto ins = read_set("aot_84_nan_inf", "in", "");
  const auto want = read_set("aot_84_nan_inf", "out", "");
  const auto got = model.run(ins);
  expect_outputs(got, want, "aot_84_nan_inf");
  int nans = 0;
  for (int64_t i = 0; i < got[0].numel(); ++i) {
    EXPECT_EQ(std::isnan(got[0].item_at(i)), std::isnan(want[0].item_at(i))) << i;
    nans += std::isnan(got[0].item_at(i));
  }
  EXPECT_EQ(nans, 8);
}

// A linear layer's weight is the B of a GEMM the runtime packs on first use and keeps with the
// active constant set: every update (at once, or inactive then swapped) must be seen by the
// next run, including updates to a value of the same size as the one before.
TEST(AotCheck, PackedWeightsFollowConstantUpdates) {
  ANVIL_AOT_LOAD(model, "aot_33_linear_f32");
  const auto ins = read_set("aot_33_linear_f32", "in", "");
  const Tensor y0 = model.run(ins)[0];
  std::string wname, bname;
  for (const auto& c : model.constant_specs()) {
    if (c.sizes.size() == 2) wname = c.name;
    if (c.sizes.size() == 1) bname = c.name;
  }
  ASSERT_FALSE(wname.empty());
  const Tensor w = model.constant(wname);
  const Tensor b = bname.empty() ? Tensor() : model.constant(bname);
  // y0 = x W^T + b, so with W * s: s * (y0 - b) + b.
  auto expect_scaled = [&](const Tensor& got, double s) {
    const int64_t n = y0.size(y0.dim() - 1);
    std::vector<double> want;
    for (int64_t i = 0; i < y0.numel(); ++i) {
      const double bias = b.defined() ? b.item_at(i % n) : 0.0;
      want.push_back(s * (y0.item_at(i) - bias) + bias);
    }
    EXPECT_TRUE(::anvil::test::close(got.to_doubles(), want, 1e-5)) << "scale " << s;
  };
  auto scaled = [&](double s) {
    std::vector<float> v;
    for (double x : w.to_doubles()) v.push_back(static_cast<float>(x * s));
    return Tensor::from_vector(v, w.sizes());
  };
  for (double s : {2.0, -1.0, 3.0, 0.5}) {
    model.update_constants({{wname, scaled(s)}}, /*inactive=*/false);
    expect_scaled(model.run(ins)[0], s);
  }
  model.update_constants({{wname, scaled(5.0)}}, /*inactive=*/true);
  expect_scaled(model.run(ins)[0], 0.5);
  model.swap_constants();
  expect_scaled(model.run(ins)[0], 5.0);
  model.update_constants({{wname, w}}, /*inactive=*/false);
  expect_outputs(model.run(ins), {y0}, "restored weight");
}

// Outputs that are views of an input share the input's storage (PyTorch's aliasing); outputs
// that are views of one computed value share its storage (docs/package_format.md, Outputs).
TEST(AotAlias, OutputsViewInputsAndEachOther) {
  const auto graph = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[3, 4] = user_input
  }
  %t: f32[4, 3] = aten.t.default(self=%x)
  %s: f32[2, 4] = aten.slice.Tensor(self=%x, dim=0, start=1, end=3)
  %y: f32[3, 4] = aten.mul.Tensor(self=%x, other=2.0)
  %v: f32[12] = aten.view.default(self=%y, size=[12])
  %yt: f32[4, 3] = aten.t.default(self=%y)
  outputs {
    user_output %t
    user_output %x
    user_output %s
    user_output %y
    user_output %v
    user_output %yt
  }
})");
  const Built& b = build_graph("alias_views", *graph);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = load(b);
  Tensor x = Tensor::empty({3, 4}, DType::kFloat32);
  for (int64_t i = 0; i < 12; ++i) x.data<float>()[i] = static_cast<float>(i) - 5.5f;
  const auto out = model.run({x});
  ASSERT_EQ(out.size(), 6u);
  const float* xp = x.data<float>();
  EXPECT_EQ(out[0].data_ptr(), xp);
  EXPECT_EQ(out[0].strides(), (Shape{1, 4}));
  EXPECT_EQ(out[1].data_ptr(), xp);
  EXPECT_EQ(out[2].data_ptr(), xp + 4);
  EXPECT_EQ(out[3].storage(), out[4].storage());
  EXPECT_EQ(out[3].storage(), out[5].storage());
  EXPECT_EQ(out[5].strides(), (Shape{1, 4}));
  EXPECT_NE(out[3].data_ptr(), static_cast<const void*>(xp));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      const double v = xp[i * 4 + j];
      EXPECT_EQ(out[0].item_at(j * 3 + i), v);
      EXPECT_EQ(out[1].item_at(i * 4 + j), v);
      if (i >= 1) {
        EXPECT_EQ(out[2].item_at((i - 1) * 4 + j), v);
      }
      EXPECT_EQ(out[3].item_at(i * 4 + j), 2 * v);
      EXPECT_EQ(out[4].item_at(i * 4 + j), 2 * v);
      EXPECT_EQ(out[5].item_at(j * 3 + i), 2 * v);
    }
  // A non-contiguous input is copied first: the views are of the copy, with the same values.
  const Tensor xt = x.transpose(0, 1).contiguous().transpose(0, 1);
  const auto out2 = model.run({xt});
  EXPECT_NE(out2[1].data_ptr(), xt.data_ptr());
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(out2[1].item_at(i), x.item_at(i));
}

// Load, run (including failing runs and aliased outputs) and unload packages repeatedly; the
// LeakSanitizer step of scripts/test.sh runs this.
TEST(AotLeak, LoadRunUnloadRepeatedly) {
  const std::vector<std::string> names = {"aot_16_alias_outputs", "aot_37_buffer_persist",
                                          "aot_58_zero_size", "aot_02_add_linear"};
  for (const auto& n : names) {
    const Built& b = build(n);
    ASSERT_TRUE(b.error.empty()) << b.error;
  }
  for (int iter = 0; iter < 10; ++iter) {
    for (const auto& n : names) {
      runtime::ModelOptions o;
      o.num_runners = 2;
      runtime::Model model = load(build(n), o);
      for (const std::string suffix : {"", "_0"}) {
        const auto ins = read_set(n, "in", suffix);
        if (ins.empty()) continue;
        for (int r = 0; r < 3; ++r) ASSERT_EQ(model.run(ins).size(), model.output_specs().size());
      }
      EXPECT_FALSE(error_of([&] { model.run({}); }).empty());  // wrong count: the error path
    }
  }
}

}  // namespace
}  // namespace anvil::aot_test
