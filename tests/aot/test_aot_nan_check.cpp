// spec/aot.md section 4, case 84 (debug NaN/Inf): the opt-in check of a run
// (Model::set_check_nan_inf, the C ABI's anvil_model_set_check_nan_inf, `anvil run --check-nan`)
// scans what every step wrote and fails at the first NaN or infinity with a clean Error naming
// the step, its graph nodes, the buffer, the element and its value (the seed's test_inf /
// test_nan abort the process instead). Off by default: C84_NanInfPassThrough
// (test_aot_checks.cpp) runs NaN and Inf through unchecked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "anvil/anvil_c.h"
#include "aot_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/dlpack.h"

namespace anvil::aot_test {
namespace {

/// The fixture's inputs of case 2 (x + lin(y) on 10x10, the seed's test_inf / test_nan model)
/// with x[0][0] set to `v`.
std::vector<Tensor> case2_inputs(double v) {
  std::vector<Tensor> ins = read_set("aot_02_add_linear", "in", "");
  Tensor x = ins[0].clone();
  x.data<float>()[0] = static_cast<float>(v);
  ins[0] = x;
  return ins;
}

// x with an Inf, then a NaN, at [0][0]: the run fails naming the step that wrote the output,
// the output's buffer and graph node, element 0 [0, 0] and the value; a clean input passes and
// matches PyTorch, before and after the failures (the Model stays usable).
TEST(AotCheck, C84_NanInfCheckNamesTheBuffer) {
  ANVIL_AOT_LOAD(model, "aot_02_add_linear");
  const auto want = read_set("aot_02_add_linear", "out", "");
  EXPECT_FALSE(model.check_nan_inf()) << "off by default";
  model.set_check_nan_inf(true);
  EXPECT_TRUE(model.check_nan_inf());
  expect_outputs(model.run(read_set("aot_02_add_linear", "in", "")), want, "checked, clean");

  const std::string out_name = model.output_specs()[0].name;
  for (const auto& [v, text] : {std::pair{std::numeric_limits<double>::infinity(), "inf"},
                                std::pair{std::numeric_limits<double>::quiet_NaN(), "nan"},
                                std::pair{-std::numeric_limits<double>::infinity(), "-inf"}}) {
    const std::string e = error_of([&] { model.run(case2_inputs(v)); });
    ASSERT_FALSE(e.empty()) << text;
    EXPECT_TRUE(contains(e, "NaN/Inf check")) << e;
    EXPECT_TRUE(contains(e, str("wrote ", text, " into buffer '"))) << e;
    EXPECT_TRUE(contains(e, "at element 0 [0, 0]")) << e;
    EXPECT_TRUE(contains(e, "holding " + out_name)) << e;
    EXPECT_TRUE(contains(e, "f32[10, 10]")) << e;
    EXPECT_TRUE(contains(e, str("got ", text, ")"))) << e;
    // The step named is one that lists the buffer in the manifest.
    bool named = false;
    for (size_t i = 0; i < model.manifest().kernels.size(); ++i) {
      const auto& k = model.manifest().kernels[i];
      if (!contains(e, str("step ", i, " '", k.name, "'"))) continue;
      named = true;
      bool lists = false;
      for (const auto& c : k.checks) lists |= contains(e, "buffer '" + c.buffer + "'");
      EXPECT_TRUE(lists) << e;
    }
    EXPECT_TRUE(named) << e;
  }
  expect_outputs(model.run(read_set("aot_02_add_linear", "in", "")), want, "after the failures");

  // ANVIL_CHECK_NAN_INF=1 at load turns it on for a new Model.
  ::setenv("ANVIL_CHECK_NAN_INF", "1", 1);
  runtime::Model from_env = load(model_built);
  ::unsetenv("ANVIL_CHECK_NAN_INF");
  EXPECT_TRUE(from_env.check_nan_inf());
  EXPECT_TRUE(contains(
      error_of([&] { from_env.run(case2_inputs(std::numeric_limits<double>::infinity())); }),
      "NaN/Inf check"));
  EXPECT_FALSE(load(model_built).check_nan_inf());

  // Off again: the Inf passes through (PyTorch's x + lin(y) has inf at [0][0]).
  model.set_check_nan_inf(false);
  const auto out = model.run(case2_inputs(std::numeric_limits<double>::infinity()));
  EXPECT_TRUE(std::isinf(out[0].item_at(0))) << out[0].item_at(0);
  EXPECT_NEAR(out[0].item_at(1), want[0].item_at(1), 1e-4);
}

// The first offending buffer can be an intermediate: exp(x) overflows at [2, 1] into a buffer
// the GEMM reads; the check stops after the exp step, naming its node, not the GEMM's output
// (where the Inf times the zero weights becomes NaN). Finite inputs pass and match the
// interpreter.
TEST(AotCheck, C84_NanInfCheckNamesAnIntermediate) {
  const auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[4, 4] = user_input
    %w: f32[4, 3] = user_input
  }
  %e: f32[4, 4] = aten.exp.default(self=%x)
  %m: f32[4, 3] = aten.mm.default(self=%e, mat2=%w)
  outputs {
    user_output %m
  }
})");
  const Built& b = build_graph("nan_check_intermediate", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = load(b);
  model.set_check_nan_inf(true);
  std::vector<float> xv(16), wv(12, 0.0f);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.25f * static_cast<float>(i) - 2.0f;
  const Tensor w = Tensor::from_vector(wv, {4, 3});
  interp::Interpreter interp(*g);
  const Tensor x = Tensor::from_vector(xv, {4, 4});
  expect_outputs(model.run({x, w}), interp.run({x, w}), "finite");
  xv[2 * 4 + 1] = 1000.0f;  // exp overflows
  const std::string e = error_of([&] { model.run({Tensor::from_vector(xv, {4, 4}), w}); });
  EXPECT_TRUE(contains(e, "wrote inf into buffer '")) << e;
  EXPECT_TRUE(contains(e, "holding e)")) << e;
  EXPECT_TRUE(contains(e, "at element 9 [2, 1]")) << e;
  EXPECT_FALSE(contains(e, "holding m")) << e;
  model.set_check_nan_inf(false);
  const Tensor m = model.run({Tensor::from_vector(xv, {4, 4}), w})[0];
  EXPECT_TRUE(std::isnan(m.item_at(2 * 3))) << "inf * 0 in the unchecked run";
}

/// True when every element of every tensor is finite (integers and bool always are).
bool all_finite(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts)
    if (!is_integral(t.dtype(), true))
      for (double v : t.to_doubles())
        if (!std::isfinite(v)) return false;
  return true;
}

// No false alarms: every fixture of tests/fixtures/aot whose PyTorch inputs and outputs are
// finite runs with the check on and gives the same outputs as without it (buffers are scanned
// only after their last writer, so partly written buffers and reused arena memory are not read
// early).
TEST(AotCheck, C84_CheckPassesEveryFiniteFixture) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(std::string(ANVIL_FIXTURES_DIR) + "/aot"))
    if (e.path().extension() == ".pt2" &&
        !fs::exists(fs::path(e.path()).replace_extension(".weights.json")))
      names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  int checked = 0;
  for (const std::string& name : names) {
    const Built& b = build(name);
    if (!b.error.empty() || known_unsupported(name)) continue;
    const auto raw = read_set(name, "in", "");
    const auto want = read_set(name, "out", "");
    if (want.empty() || !all_finite(raw) || !all_finite(want)) continue;
    runtime::Model plain = load(b);
    runtime::Model checked_model = load(b);
    checked_model.set_check_nan_inf(true);
    std::vector<Tensor> ins;
    try {
      ins = inputs_for(plain, raw);
    } catch (const Error&) {
      continue;  // inputs the fixture's own test builds differently
    }
    std::vector<Tensor> a;
    try {
      a = plain.run(ins);
    } catch (const Error&) {
      continue;  // a fixture whose stored inputs are not its run's (its test says why)
    }
    if (!all_finite(a)) continue;
    std::vector<Tensor> c;
    const std::string e = error_of([&] { c = checked_model.run(ins); });
    EXPECT_EQ(e, "") << name;
    ASSERT_EQ(c.size(), a.size()) << name;
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(c[i].to_doubles(), a[i].to_doubles()) << name << " output " << i;
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

/// A borrowed DLPack view of a host tensor (no deleter).
DLManagedTensor borrow(const Tensor& t, std::vector<int64_t>& shape) {
  DLManagedTensor m{};
  shape = t.sizes();
  m.dl_tensor.data = t.data_ptr();
  m.dl_tensor.device = {kDLCPU, 0};
  m.dl_tensor.ndim = static_cast<int32_t>(shape.size());
  m.dl_tensor.dtype = runtime::dlpack_dtype(t.dtype());
  m.dl_tensor.shape = shape.data();
  return m;
}

// The same check through the C ABI: off by default, on with anvil_model_set_check_nan_inf, the
// message through err; a NULL model is an error, not a crash.
TEST(AotCheck, C84_NanInfCheckThroughTheCApi) {
  const Built& b = build("aot_02_add_linear");
  ASSERT_TRUE(b.error.empty()) << b.error;
  anvil_model_t* model = nullptr;
  char* err = nullptr;
  ASSERT_EQ(anvil_model_load(b.package.c_str(), nullptr, &model, &err), 0) << (err ? err : "");
  const std::vector<Tensor> ins = case2_inputs(std::numeric_limits<double>::quiet_NaN());
  std::vector<int64_t> s0, s1;
  DLManagedTensor m0 = borrow(ins[0], s0), m1 = borrow(ins[1], s1);
  DLManagedTensor* inputs[2] = {&m0, &m1};
  DLManagedTensor** outputs = nullptr;
  size_t n = 0;
  ASSERT_EQ(anvil_model_run(model, inputs, 2, &outputs, &n, &err), 0) << (err ? err : "");
  EXPECT_TRUE(std::isnan(static_cast<const float*>(outputs[0]->dl_tensor.data)[0]));
  anvil_tensors_free(outputs, n);
  ASSERT_EQ(anvil_model_set_check_nan_inf(model, 1, &err), 0) << (err ? err : "");
  ASSERT_NE(anvil_model_run(model, inputs, 2, &outputs, &n, &err), 0);
  ASSERT_NE(err, nullptr);
  const std::string e = err;
  anvil_free(err);
  EXPECT_TRUE(contains(e, "wrote nan into buffer '")) << e;
  EXPECT_TRUE(contains(e, "at element 0 [0, 0]")) << e;
  EXPECT_TRUE(contains(anvil_last_error(), "NaN/Inf check")) << anvil_last_error();
  ASSERT_EQ(anvil_model_set_check_nan_inf(model, 0, nullptr), 0);
  ASSERT_EQ(anvil_model_run(model, inputs, 2, &outputs, &n, nullptr), 0);
  anvil_tensors_free(outputs, n);
  EXPECT_NE(anvil_model_set_check_nan_inf(nullptr, 1, nullptr), 0);
  anvil_model_free(model);
}

}  // namespace
}  // namespace anvil::aot_test
