// The public C++ API (include/anvil/anvil.h, header-only over the C ABI): the same package as
// test_c_api.cpp through anvil::api::Model — specs, runs on borrowed views (strided included),
// owned outputs, constant updates, and runtime errors as anvil::api::Error with anvil's message.
#include "anvil/anvil.h"
#include "runtime_test_util.h"

namespace anvil::runtime::test {
namespace {

/// The message of the anvil::api::Error `f` throws ("" when none).
template <typename F>
std::string api_error(F&& f) {
  try {
    f();
  } catch (const api::Error& e) {
    return e.what();
  }
  return "";
}

TEST(CppApi, LoadRunConstantsAndErrors) {
  const std::string path = write_test_package("cpp_api");
  api::LoadOptions lo;
  lo.num_runners = 2;
  api::Model model = api::Model::load(path, lo);
  EXPECT_EQ(api::c_api_version(), ANVIL_C_API_VERSION);

  const std::vector<api::TensorSpec> ins = model.input_specs(), outs = model.output_specs();
  ASSERT_EQ(ins.size(), 2u);
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(ins[0].name, "x");
  EXPECT_EQ(ins[0].sizes, (std::vector<std::string>{"s0", "4"}));
  EXPECT_EQ(ins[0].min_sizes[0], 1);
  EXPECT_EQ(ins[0].max_sizes[0], 64);
  EXPECT_EQ(ins[0].dtype.code, kDLFloat);
  EXPECT_EQ(outs[2].name, "count");
  EXPECT_EQ(outs[2].dtype.code, kDLInt);
  EXPECT_EQ(model.constant_names().at(0), "p_w");
  EXPECT_EQ(model.constant_original_names().at(1), "lin.bias");

  // x as a transposed view (strides), z compact.
  const int64_t n = 3;
  std::vector<float> x = make_x(n), xt(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < 4; ++k) xt[k * n + i] = x[i * 4 + k];
  std::vector<float> z = {1, 2, 3, 4};
  api::TensorView vx = api::TensorView::of(xt.data(), {n, 4});
  vx.strides = {1, n};
  const api::TensorView vz = api::TensorView::of(z.data(), {n + 1});
  std::vector<api::Tensor> got = model.run({vx, vz});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].shape(), (std::vector<int64_t>{n, 4}));
  EXPECT_EQ(got[0].numel(), n * 4);
  const std::vector<double> want = expected_y(x, default_weight(), default_bias());
  const float* y = got[0].data<float>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-4) << i;
  EXPECT_EQ(std::vector<float>(got[1].data<float>(), got[1].data<float>() + 4),
            (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(got[2].data<int64_t>()[0], 101);
  EXPECT_NE(api_error([&] { got[2].data<float>(); }).find("does not match the tensor's dtype"),
            std::string::npos);

  // An output outlives the model's next run; release() hands its DLPack tensor over.
  api::Tensor kept = std::move(got[0]);
  got.clear();
  std::vector<float> b2 = {10, 20, 30, 40};
  model.update_constants({{"p_b", api::TensorView::of(b2.data(), {4})}}, /*inactive=*/true);
  EXPECT_FLOAT_EQ(model.run({vx, vz})[0].data<float>()[0], -10.5f);  // not swapped yet
  model.swap_constants();
  EXPECT_FLOAT_EQ(model.run({vx, vz})[0].data<float>()[0], -11.0f + 10.0f);
  EXPECT_FLOAT_EQ(kept.data<float>()[0], -10.5f);
  DLManagedTensor* raw = kept.release();
  ASSERT_NE(raw, nullptr);
  raw->deleter(raw);

  // The runtime's errors, with its message: input, dim, expected, actual.
  const api::TensorView bad = api::TensorView::of(xt.data(), {n, 5});
  EXPECT_NE(api_error([&] {
              model.run({bad, vz});
            }).find("input 'x' (#0): unmatched dim value at dim 1 (expected 4, got 5)"),
            std::string::npos);
  EXPECT_NE(api_error([&] { model.run({vx}); }).find("wrong number of inputs"), std::string::npos);
  std::vector<int64_t> ints = {1, 2, 3, 4};
  EXPECT_NE(api_error([&] {
              model.run({vx, api::TensorView::of(ints.data(), {4})});
            }).find("unmatched dtype (expected f32, got i64)"),
            std::string::npos);
  api::TensorView odd = vx;
  odd.strides = {1};
  EXPECT_NE(api_error([&] {
              model.run({odd, vz});
            }).find("1 strides for 2 dims"),
            std::string::npos);
  EXPECT_NE(api_error([&] {
              model.update_constants({{"p_b", api::TensorView::of(b2.data(), {4})}}, false, true);
            }).find("full update"),
            std::string::npos);
  EXPECT_NE(api_error([] { api::Model::load("/nonexistent.anvil"); }).find("cannot open package"),
            std::string::npos);
  api::LoadOptions tpu;
  tpu.device = "tpu";
  EXPECT_NE(api_error([&] { api::Model::load(path, tpu); }).find("unknown device"),
            std::string::npos);

  // Moving a model hands its handle over; the moved-from one frees nothing.
  api::Model moved = std::move(model);
  EXPECT_EQ(moved.run({vx, vz}).size(), 3u);
}

}  // namespace
}  // namespace anvil::runtime::test
