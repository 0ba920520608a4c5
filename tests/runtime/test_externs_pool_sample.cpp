// Runtime extern kernels for pooling with indices and 3-D pooling, grid sampling, im2col /
// col2im and pairwise distances (src/runtime/kernels/pool_nd.cpp, sample.cpp, dist.cpp), compared
// with the op table's reference kernels on strided inputs (channels-last, transposed, every other
// element, broadcast), plus the refused arguments the kernels check themselves.
#include <cmath>

#include "test_externs_util.h"

namespace anvil::runtime::test {
namespace {

/// The values and indices of a max pooling with indices extern on `x`, next to the reference's.
void check_with_indices(const char* target, const Tensor& x, const std::vector<int64_t>& kernel,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& pad,
                        bool ceil_mode) {
  OpRunner ref(target);
  ref.tensor("self", x)
      .ints("kernel_size", kernel)
      .ints("stride", stride)
      .ints("padding", pad)
      .scalar("ceil_mode", ceil_mode);
  const auto want = ref.run();
  const Tensor wv = std::get<Tensor>(want.at(0)), wi = std::get<Tensor>(want.at(1));
  Tensor v = Tensor::full(wv.sizes(), -777.0, wv.dtype());
  Tensor i = Tensor::full(wi.sizes(), -777.0, DType::kInt64);
  AnvilRtTensor in = rt_from_tensor(x);
  AnvilRtTensor outs[2] = {rt_from_tensor(v), rt_from_tensor(i)};
  AnvilRtScalar at[4] = {};
  const std::vector<int64_t>* lists[3] = {&kernel, &stride, &pad};
  const char* names[3] = {"kernel_size", "stride", "padding"};
  for (int k = 0; k < 3; ++k) {
    at[k].name = names[k];
    at[k].kind = 3;
    at[k].ints = lists[k]->data();
    at[k].n_ints = static_cast<int32_t>(lists[k]->size());
  }
  at[3].name = "ceil_mode";
  at[3].i = ceil_mode ? 1 : 0;
  ExternCall call(target, &in, 1, at, 4, outs, 2);
  ASSERT_EQ(find_extern(target)(call), 0) << call.error();
  EXPECT_TRUE(matches(v, wv)) << target;
  EXPECT_TRUE(matches(i, wi)) << target;
}

TEST(ExternPoolNd, MaxPoolWithIndicesOnStridedInputs) {
  check_with_indices("aten.max_pool2d_with_indices.default",
                     rand_tensor(DType::kFloat32, {2, 7, 9, 3}, 1).permute({0, 3, 1, 2}), {3, 2},
                     {2, 1}, {1, 1}, true);
  check_with_indices("aten.max_pool2d_with_indices.default",
                     rand_strided(DType::kBFloat16, {3, 6, 5}, 2), {2, 2}, {}, {0, 0}, false);
  check_with_indices("aten.max_pool3d_with_indices.default",
                     rand_strided(DType::kFloat32, {2, 3, 5, 6, 7}, 3), {2, 3, 2}, {2, 2, 1},
                     {1, 1, 0}, true);
  check_with_indices("aten.max_pool3d_with_indices.default",
                     rand_tensor(DType::kInt64, {2, 4, 4, 5}, 4, -50, 50), {2, 2, 2}, {1, 1, 1},
                     {0, 0, 0}, false);
}

TEST(ExternPoolNd, Pool3dOnStridedInputs) {
  const Tensor x = rand_tensor(DType::kFloat32, {2, 5, 6, 7, 3}, 5).permute({0, 4, 1, 2, 3});
  ExternCase("aten.max_pool3d.default")
      .tensor("self", x)
      .ints("kernel_size", {3})
      .ints("stride", {2})
      .ints("padding", {1})
      .ints("dilation", {1, 2, 1})
      .check();
  ExternCase("aten.avg_pool3d.default")
      .tensor("self", x)
      .ints("kernel_size", {3, 2, 3})
      .ints("stride", {2, 2, 2})
      .ints("padding", {1, 1, 1})
      .scalar("ceil_mode", true)
      .scalar("count_include_pad", false)
      .check();
  ExternCase("aten.avg_pool3d.default")
      .tensor("self", rand_strided(DType::kBFloat16, {3, 4, 4, 6}, 6))
      .ints("kernel_size", {2, 2, 2})
      .scalar("divisor_override", 5)
      .check();
  for (const char* target :
       {"aten.adaptive_avg_pool3d.default", "aten._adaptive_avg_pool3d.default"})
    ExternCase(target).tensor("self", x).ints("output_size", {2, 4, 5}).check();
}

TEST(ExternSample, GridSamplerEveryModeOnStridedInputs) {
  const Tensor x = rand_tensor(DType::kFloat32, {2, 6, 7, 3}, 7).permute({0, 3, 1, 2});
  const Tensor g = rand_strided(DType::kFloat32, {2, 4, 5, 2}, 8, -1.3, 1.3);
  for (const char* target : {"aten.grid_sampler_2d.default", "aten.grid_sampler.default"})
    for (int m = 0; m < 3; ++m)
      for (int p = 0; p < 3; ++p)
        for (bool a : {false, true})
          ExternCase(target)
              .tensor("input", x)
              .tensor("grid", g)
              .scalar("interpolation_mode", m)
              .scalar("padding_mode", p)
              .scalar("align_corners", a)
              .check();
}

TEST(ExternSample, Im2colCol2imOnStridedInputs) {
  ExternCase("aten.im2col.default")
      .tensor("self", rand_strided(DType::kFloat32, {2, 3, 6, 7}, 9))
      .ints("kernel_size", {2, 3})
      .ints("dilation", {2, 1})
      .ints("padding", {1, 0})
      .ints("stride", {1, 2})
      .check();
  ExternCase("aten.col2im.default")
      .tensor("self", rand_strided(DType::kFloat32, {2, 12, 18}, 10))
      .ints("output_size", {4, 6})
      .ints("kernel_size", {2, 2})
      .ints("dilation", {1, 2})
      .ints("padding", {0, 1})
      .ints("stride", {1, 1})
      .check();
}

TEST(ExternDist, CdistPdistOnStridedAndBroadcastInputs) {
  const Tensor a = rand_strided(DType::kFloat32, {3, 5, 4}, 11);
  const Tensor b = rand_tensor(DType::kFloat32, {1, 6, 4}, 12).expand({3, 6, 4});
  for (double p : {0.0, 1.0, 2.0, 3.5, double(INFINITY)}) {
    ExternCase("aten._cdist_forward.default")
        .tensor("x1", a)
        .tensor("x2", b)
        .scalar("p", p)
        .none("compute_mode")
        .check();
    ExternCase("aten.cdist.default")
        .tensor("x1", a)
        .tensor("x2", b)
        .scalar("p", p)
        .scalar("compute_mode", int64_t{1})
        .check();
  }
  ExternCase("aten._pdist_forward.default")
      .tensor("self", rand_strided(DType::kFloat64, {7, 5}, 13))
      .scalar("p", 1.5)
      .check();
  ExternCase("aten.pdist.default").tensor("self", rand_tensor(DType::kFloat32, {6, 3}, 14)).check();
}

TEST(ExternPoolSampleDist, BadArgumentsAreRefused) {
  using anvil::testing::expect_error;
  expect_error(
      [] {
        ExternCase("aten.max_pool3d.default")
            .tensor("self", rand_tensor(DType::kFloat32, {4, 4, 4}, 1))
            .ints("kernel_size", {2, 2, 2})
            .run_extern({1, 1, 1}, DType::kFloat32);
      },
      {"3-D pooling needs a 4-D or 5-D input"});
  expect_error(
      [] {
        ExternCase("aten.grid_sampler_2d.default")
            .tensor("input", rand_tensor(DType::kFloat32, {1, 1, 3, 3}, 2))
            .tensor("grid", rand_tensor(DType::kFloat32, {1, 2, 2, 2}, 3))
            .scalar("interpolation_mode", 4)
            .scalar("padding_mode", 0)
            .scalar("align_corners", false)
            .run_extern({1, 1, 2, 2}, DType::kFloat32);
      },
      {"unknown interpolation_mode", "4"});
  expect_error(
      [] {
        ExternCase("aten.col2im.default")
            .tensor("self", rand_tensor(DType::kFloat32, {1, 8, 5}, 4))
            .ints("output_size", {3, 4})
            .ints("kernel_size", {2, 2})
            .ints("dilation", {1, 1})
            .ints("padding", {0, 0})
            .ints("stride", {1, 1})
            .run_extern({1, 2, 3, 4}, DType::kFloat32);
      },
      {"number of sliding blocks"});
  expect_error(
      [] {
        ExternCase("aten._cdist_forward.default")
            .tensor("x1", rand_tensor(DType::kFloat32, {3, 4}, 5))
            .tensor("x2", rand_tensor(DType::kFloat32, {2, 4}, 6))
            .scalar("p", -1.0)
            .none("compute_mode")
            .run_extern({3, 2}, DType::kFloat32);
      },
      {"non-negative p"});
  // An output buffer of the wrong size is a compiler bug the kernel reports, not a crash.
  expect_error(
      [] {
        ExternCase("aten.im2col.default")
            .tensor("self", rand_tensor(DType::kFloat32, {1, 2, 4, 4}, 7))
            .ints("kernel_size", {2, 2})
            .ints("dilation", {1, 1})
            .ints("padding", {0, 0})
            .ints("stride", {1, 1})
            .run_extern({1, 8, 8}, DType::kFloat32);
      },
      {"aten.im2col.default"});
}

}  // namespace
}  // namespace anvil::runtime::test
