// The C ABI with DLPack tensors.
#include "anvil/anvil_c.h"
#include "runtime_test_util.h"

namespace anvil::runtime::test {
namespace {

/// A borrowed DLManagedTensor over caller memory (no deleter: the caller keeps ownership).
struct DlBox {
  DLManagedTensor m{};
  std::vector<int64_t> shape, strides;
  DlBox(void* data, DLDataType dtype, std::vector<int64_t> sh, std::vector<int64_t> st = {})
      : shape(std::move(sh)), strides(std::move(st)) {
    m.dl_tensor.data = data;
    m.dl_tensor.device = {kDLCPU, 0};
    m.dl_tensor.ndim = static_cast<int32_t>(shape.size());
    m.dl_tensor.dtype = dtype;
    m.dl_tensor.shape = shape.data();
    m.dl_tensor.strides = strides.empty() ? nullptr : strides.data();
  }
};

constexpr DLDataType kF32{kDLFloat, 32, 1};

TEST(CApi, RoundTripWithDLPack) {
  const std::string path = write_test_package("c_api");
  anvil_load_options_t opts{};
  opts.num_runners = 2;
  anvil_model_t* model = nullptr;
  char* err = nullptr;
  ASSERT_EQ(anvil_model_load(path.c_str(), &opts, &model, &err), 0) << (err ? err : "");
  EXPECT_EQ(err, nullptr);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(anvil_c_api_version(), ANVIL_C_API_VERSION);

  ASSERT_EQ(anvil_model_num_inputs(model), 2u);
  ASSERT_EQ(anvil_model_num_outputs(model), 3u);
  anvil_tensor_spec_t spec{};
  ASSERT_EQ(anvil_model_input_spec(model, 0, &spec, nullptr), 0);
  EXPECT_STREQ(spec.name, "x");
  EXPECT_EQ(spec.ndim, 2);
  EXPECT_STREQ(spec.sizes[0], "s0");
  EXPECT_STREQ(spec.sizes[1], "4");
  EXPECT_EQ(spec.min_sizes[0], 1);
  EXPECT_EQ(spec.max_sizes[0], 64);
  EXPECT_EQ(spec.dtype.code, kDLFloat);
  EXPECT_EQ(spec.dtype.bits, 32);
  ASSERT_EQ(anvil_model_output_spec(model, 2, &spec, nullptr), 0);
  EXPECT_STREQ(spec.name, "count");
  EXPECT_EQ(spec.dtype.code, kDLInt);
  EXPECT_EQ(spec.dtype.bits, 64);
  EXPECT_NE(anvil_model_output_spec(model, 3, &spec, nullptr), 0);
  ASSERT_EQ(anvil_model_num_constants(model), 3u);
  EXPECT_STREQ(anvil_model_constant_name(model, 0), "p_w");
  EXPECT_STREQ(anvil_model_constant_original_name(model, 1), "lin.bias");
  EXPECT_EQ(anvil_model_constant_name(model, 3), nullptr);

  // x: a transposed (non-contiguous) view passed through strides; z contiguous.
  const int64_t n = 3;
  std::vector<float> x = make_x(n), xt(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < 4; ++k) xt[k * n + i] = x[i * 4 + k];
  std::vector<float> z = {1, 2, 3, 4};
  DlBox bx(xt.data(), kF32, {n, 4}, {1, n}), bz(z.data(), kF32, {n + 1});
  DLManagedTensor* inputs[2] = {&bx.m, &bz.m};
  DLManagedTensor** outputs = nullptr;
  size_t n_out = 0;
  ASSERT_EQ(anvil_model_run(model, inputs, 2, &outputs, &n_out, &err), 0) << (err ? err : "");
  ASSERT_EQ(n_out, 3u);
  const DLTensor& y = outputs[0]->dl_tensor;
  EXPECT_EQ(y.ndim, 2);
  EXPECT_EQ(y.shape[0], n);
  EXPECT_EQ(y.shape[1], 4);
  EXPECT_EQ(y.strides[0], 4);
  EXPECT_EQ(y.strides[1], 1);
  EXPECT_EQ(y.device.device_type, kDLCPU);
  const std::vector<double> want = expected_y(x, default_weight(), default_bias());
  const float* yd = static_cast<const float*>(y.data);
  EXPECT_FLOAT_EQ(yd[0], -10.5f);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(yd[i], want[i], 1e-4);
  const float* z1 = static_cast<const float*>(outputs[1]->dl_tensor.data);
  EXPECT_EQ(std::vector<float>(z1, z1 + 4), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(static_cast<const int64_t*>(outputs[2]->dl_tensor.data)[0], 101);
  // Outputs outlive the model's next runs and the model itself.
  DLManagedTensor* keep = outputs[0];
  outputs[0] = nullptr;
  anvil_tensors_free(outputs, n_out);

  // Constants through DLPack: inactive update + swap.
  std::vector<float> b2 = {10, 20, 30, 40};
  DlBox bb(b2.data(), kF32, {4});
  const char* names[1] = {"p_b"};
  DLManagedTensor* values[1] = {&bb.m};
  ASSERT_EQ(anvil_model_update_constants(model, names, values, 1, 1, 0, &err), 0)
      << (err ? err : "");
  ASSERT_EQ(anvil_model_swap_constants(model, &err), 0);
  ASSERT_EQ(anvil_model_run(model, inputs, 2, &outputs, &n_out, nullptr), 0);
  EXPECT_FLOAT_EQ(static_cast<const float*>(outputs[0]->dl_tensor.data)[0], -11.0f + 10.0f);
  anvil_tensors_free(outputs, n_out);

  // Errors come back as codes and messages, never exceptions.
  DlBox bad(xt.data(), kF32, {n, 5});
  DLManagedTensor* bad_inputs[2] = {&bad.m, &bz.m};
  EXPECT_NE(anvil_model_run(model, bad_inputs, 2, &outputs, &n_out, &err), 0);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(
      std::string(err).find("input 'x' (#0): unmatched dim value at dim 1 (expected 4, got 5)"),
      std::string::npos)
      << err;
  EXPECT_STREQ(anvil_last_error(), err);
  EXPECT_EQ(outputs, nullptr);
  EXPECT_EQ(n_out, 0u);
  anvil_free(err);
  EXPECT_NE(anvil_model_run(model, inputs, 1, &outputs, &n_out, nullptr), 0);
  EXPECT_NE(std::string(anvil_last_error()).find("wrong number of inputs"), std::string::npos);
  DlBox i8(z.data(), DLDataType{kDLInt, 8, 1}, {4});
  DLManagedTensor* wrong_dtype[2] = {&bx.m, &i8.m};
  EXPECT_NE(anvil_model_run(model, wrong_dtype, 2, &outputs, &n_out, nullptr), 0);
  EXPECT_NE(std::string(anvil_last_error()).find("unmatched dtype (expected f32, got i8)"),
            std::string::npos)
      << anvil_last_error();
  DlBox vec(z.data(), DLDataType{kDLFloat, 32, 4}, {1});
  DLManagedTensor* lanes[2] = {&bx.m, &vec.m};
  EXPECT_NE(anvil_model_run(model, lanes, 2, &outputs, &n_out, nullptr), 0);
  EXPECT_NE(std::string(anvil_last_error()).find("unsupported DLPack dtype"), std::string::npos);
  DlBox gpu(z.data(), kF32, {4});
  gpu.m.dl_tensor.device = {kDLCUDA, 0};
  DLManagedTensor* on_gpu[2] = {&bx.m, &gpu.m};
  EXPECT_NE(anvil_model_run(model, on_gpu, 2, &outputs, &n_out, nullptr), 0);
  // a CUDA tensor is borrowed as device memory; a CPU package refuses it as on the wrong device
  EXPECT_NE(std::string(anvil_last_error()).find("input is on the wrong device (expected cpu, got cuda:0)"),
            std::string::npos)
      << anvil_last_error();
  gpu.m.dl_tensor.device = {kDLVulkan, 0};
  EXPECT_NE(anvil_model_run(model, on_gpu, 2, &outputs, &n_out, nullptr), 0);
  EXPECT_NE(std::string(anvil_last_error()).find("neither in host memory nor on a CUDA device"),
            std::string::npos)
      << anvil_last_error();
  DLManagedTensor* nulls[2] = {&bx.m, nullptr};
  EXPECT_NE(anvil_model_run(model, nulls, 2, &outputs, &n_out, nullptr), 0);
  EXPECT_NE(anvil_model_run(nullptr, inputs, 2, &outputs, &n_out, nullptr), 0);
  EXPECT_NE(anvil_model_update_constants(model, names, values, 1, 0, 1, nullptr), 0);
  EXPECT_NE(std::string(anvil_last_error()).find("full update"), std::string::npos);
  EXPECT_NE(anvil_model_swap_constants(model, nullptr), 0);

  anvil_model_free(model);
  // The kept output is still valid after the model is gone.
  EXPECT_FLOAT_EQ(static_cast<const float*>(keep->dl_tensor.data)[0], -10.5f);
  keep->deleter(keep);

  EXPECT_NE(anvil_model_load("/nonexistent.anvil", nullptr, &model, &err), 0);
  EXPECT_EQ(model, nullptr);
  EXPECT_NE(std::string(err).find("cannot open package"), std::string::npos);
  anvil_free(err);
  EXPECT_NE(anvil_model_load(nullptr, nullptr, &model, nullptr), 0);
  opts.device = "tpu";
  EXPECT_NE(anvil_model_load(path.c_str(), &opts, &model, nullptr), 0);
  EXPECT_NE(std::string(anvil_last_error()).find("unknown device"), std::string::npos);
  anvil_model_free(nullptr);
}

}  // namespace
}  // namespace anvil::runtime::test
