// Runtime extern kernels under different thread pools (serial, a few threads, more threads than
// work items), from several caller threads at once, and on zero-size inputs / outputs.
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/thread_pool.h"
#include "test_externs_util.h"
#include "common/scoped_env.h"

namespace anvil::runtime::test {
namespace {

/// A set of calls that take every parallel path of the kernels (batch-, group-, plane-, row-
/// block- and element-parallel loops, parallel GEMM).
std::vector<ExternCase> parallel_cases() {
  std::vector<ExternCase> cs;
  cs.emplace_back("aten.conv2d.default");
  cs.back()
      .tensor("input", rand_tensor(DType::kFloat32, {2, 8, 20, 20}, 1))
      .tensor("weight", rand_tensor(DType::kFloat32, {64, 8, 3, 3}, 2))
      .tensor("bias", rand_tensor(DType::kFloat32, {64}, 3))
      .ints("padding", {1, 1});
  cs.emplace_back("aten.conv2d.default");
  cs.back()
      .tensor("input", rand_strided(DType::kBFloat16, {5, 16, 9, 9}, 4))
      .tensor("weight", rand_tensor(DType::kBFloat16, {16, 1, 3, 3}, 5))
      .scalar("groups", 16);
  cs.emplace_back("aten.max_pool2d.default");
  cs.back()
      .tensor("self", rand_tensor(DType::kFloat32, {3, 7, 12, 12}, 6))
      .ints("kernel_size", {3});
  cs.emplace_back("aten.scaled_dot_product_attention.default");
  cs.back()
      .tensor("query", rand_tensor(DType::kFloat32, {2, 2, 70, 16}, 7))
      .tensor("key", rand_tensor(DType::kFloat32, {2, 2, 70, 16}, 8))
      .tensor("value", rand_tensor(DType::kFloat32, {2, 2, 70, 16}, 9))
      .absent()
      .scalar("is_causal", true);
  cs.emplace_back("aten.bmm.default");
  cs.back()
      .tensor("self", rand_tensor(DType::kBFloat16, {12, 40, 30}, 10))
      .tensor("mat2", rand_tensor(DType::kBFloat16, {12, 30, 20}, 11));
  cs.emplace_back("aten.mm.default");
  cs.back()
      .tensor("self", rand_tensor(DType::kFloat16, {200, 64}, 12))
      .tensor("mat2", rand_tensor(DType::kFloat16, {64, 300}, 13));
  cs.emplace_back("aten.gather.default");
  cs.back()
      .tensor("self", rand_tensor(DType::kFloat32, {300, 300}, 14))
      .scalar("dim", 0)
      .tensor("index", rand_tensor(DType::kInt64, {300, 300}, 15, 0, 300));
  cs.emplace_back("aten.cat.default");
  cs.back()
      .tensors("tensors", {rand_tensor(DType::kFloat32, {100, 400}, 16),
                           rand_strided(DType::kFloat32, {100, 500}, 17)})
      .scalar("dim", 1);
  cs.emplace_back("aten.cumsum.default");
  cs.back().tensor("self", rand_strided(DType::kFloat32, {50, 300}, 18)).scalar("dim", 0);
  return cs;
}

TEST(ExternThreads, EveryPoolSizeMatchesTheReference) {
  for (int threads : {1, 3, 8}) {
    ThreadPool pool(threads);
    ScopedThreadPool scope(&pool);
    for (ExternCase& c : parallel_cases()) c.check();
  }
}

using anvil::test::ScopedEnv;

/// The calls of the vision models' kernel families, each large enough to be split over a few
/// threads (bands, channel blocks, planes, images, GEMM blocks): depthwise (NCHW and
/// channels-last input), grouped and dense convolutions (early and late stages), 1x1
/// convolutions of 1x1 images over a batch (squeeze-excitation: one GEMM), max / avg /
/// adaptive pooling, concatenation. `exact`: the split cannot change a single bit (each output
/// element is computed the same way on any thread).
struct SplitCase {
  ExternCase call;
  bool exact;
};

std::vector<SplitCase> vision_split_cases() {
  std::vector<SplitCase> cs;
  auto add = [&](const char* target, bool exact) -> ExternCase& {
    cs.push_back({ExternCase(target), exact});
    return cs.back().call;
  };
  add("aten.conv2d.default", true)
      .tensor("input", rand_tensor(DType::kFloat32, {2, 32, 28, 28}, 40))
      .tensor("weight", rand_tensor(DType::kFloat32, {32, 1, 3, 3}, 41))
      .tensor("bias", rand_tensor(DType::kFloat32, {32}, 42))
      .ints("padding", {1, 1})
      .scalar("groups", 32);
  add("aten.conv2d.default", true)
      .tensor("input", rand_tensor(DType::kFloat32, {1, 28, 28, 48}, 43).permute({0, 3, 1, 2}))
      .tensor("weight", rand_tensor(DType::kFloat32, {48, 1, 5, 5}, 44))
      .ints("stride", {2, 2})
      .ints("padding", {2, 2})
      .scalar("groups", 48);
  for (int64_t n : {1, 8})
    add("aten.conv2d.default", false)
        .tensor("input", rand_tensor(DType::kFloat32, {n, 48, 28, 28}, 45))
        .tensor("weight", rand_tensor(DType::kFloat32, {48, 8, 3, 3}, 46))
        .tensor("bias", rand_tensor(DType::kFloat32, {48}, 47))
        .ints("padding", {1, 1})
        .scalar("groups", 6);
  add("aten.conv2d.default", false)
      .tensor("input", rand_tensor(DType::kFloat32, {1, 64, 14, 14}, 48))
      .tensor("weight", rand_tensor(DType::kFloat32, {96, 64, 1, 1}, 49));
  // Late stages, whose weights outweigh one image (oneDNN splits them by channel blocks /
  // groups when the batch is smaller than the pool).
  add("aten.conv2d.default", false)
      .tensor("input", rand_tensor(DType::kFloat32, {1, 256, 7, 7}, 60))
      .tensor("weight", rand_tensor(DType::kFloat32, {200, 256, 1, 1}, 61))
      .tensor("bias", rand_tensor(DType::kFloat32, {200}, 62));
  add("aten.conv2d.default", false)
      .tensor("input", rand_tensor(DType::kFloat32, {2, 7, 7, 208}, 63).permute({0, 3, 1, 2}))
      .tensor("weight", rand_tensor(DType::kFloat32, {208, 8, 3, 3}, 64))
      .tensor("bias", rand_tensor(DType::kFloat32, {208}, 65))
      .ints("padding", {1, 1})
      .scalar("groups", 26);
  for (int64_t c : {96, 512})  // the squeeze-excitation 1x1 convolutions
    add("aten.conv2d.default", false)
        .tensor("input", rand_tensor(DType::kFloat32, {16, c, 1, 1}, 50))
        .tensor("weight", rand_tensor(DType::kFloat32, {c / 2, c, 1, 1}, 51))
        .tensor("bias", rand_tensor(DType::kFloat32, {c / 2}, 52));
  add("aten.max_pool2d.default", true)
      .tensor("self", rand_tensor(DType::kFloat32, {2, 64, 56, 56}, 53))
      .ints("kernel_size", {3, 3})
      .ints("stride", {2, 2})
      .ints("padding", {1, 1});
  add("aten.avg_pool2d.default", true)
      .tensor("self", rand_tensor(DType::kFloat32, {2, 64, 28, 28}, 54))
      .ints("kernel_size", {2, 2})
      .ints("stride", {2, 2});
  add("aten.adaptive_avg_pool2d.default", true)
      .tensor("self", rand_tensor(DType::kFloat32, {8, 96, 28, 28}, 55))
      .ints("output_size", {1, 1});
  add("aten.cat.default", true)
      .tensors("tensors", {rand_tensor(DType::kFloat32, {8, 64, 14, 14}, 56),
                           rand_tensor(DType::kFloat32, {8, 32, 14, 14}, 57)})
      .scalar("dim", 1);
  return cs;
}

/// Every bit equal where `exact`, else within 1e-5 of the 1-thread result's magnitude.
::testing::AssertionResult same_as_one_thread(const Tensor& got, const Tensor& want, bool exact) {
  if (got.sizes() != want.sizes()) return ::testing::AssertionFailure() << "sizes differ";
  const Tensor g = got.contiguous(), w = want.contiguous();
  if (exact) {
    if (std::memcmp(g.data_ptr(), w.data_ptr(), w.nbytes()) == 0)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "not bit-identical to the 1-thread result";
  }
  const std::vector<double> gv = g.to_doubles(), wv = w.to_doubles();
  double scale = 1, err = 0;
  for (size_t i = 0; i < wv.size(); ++i) {
    scale = std::max(scale, std::abs(wv[i]));
    err = std::max(err, std::abs(gv[i] - wv[i]));
  }
  if (err <= 1e-5 * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max abs difference " << err << " (scale " << scale
                                       << ")";
}

TEST(ExternThreads, VisionKernelFamiliesGiveTheOneThreadResult) {
  for (const char* path : {"", "im2col"}) {  // default paths (oneDNN where built), then im2col
    std::unique_ptr<ScopedEnv> env;
    if (*path) env = std::make_unique<ScopedEnv>("ANVIL_CONV", path);
    std::vector<SplitCase> cs = vision_split_cases();
    std::vector<Tensor> one;
    {
      ThreadPool pool(1);
      ScopedThreadPool scope(&pool);
      for (SplitCase& c : cs) one.push_back(c.call.check());  // and against the reference
    }
    for (int threads : {2, 3, 8}) {
      ThreadPool pool(threads);
      ScopedThreadPool scope(&pool);
      for (size_t i = 0; i < cs.size(); ++i)
        EXPECT_TRUE(same_as_one_thread(cs[i].call.run_extern(one[i].sizes(), one[i].dtype()),
                                       one[i], cs[i].exact))
            << "case " << i << ", " << threads << " threads, ANVIL_CONV '" << path << "'";
    }
  }
}

TEST(ExternThreads, FusedResidualAndActivationOverChannelBlocks) {
  // A late-stage 1x1 convolution with the residual add and relu fused (fused_add: input 3), its
  // blocks of output channels on 2, 3 and 8 threads: relu(conv + residual), the conv from 1
  // thread (checked against the reference) and the add done here.
  const Tensor x = rand_tensor(DType::kFloat32, {1, 256, 7, 7}, 70);
  const Tensor w = rand_tensor(DType::kFloat32, {96, 256, 1, 1}, 71);
  const Tensor b = rand_tensor(DType::kFloat32, {96}, 72);
  const Tensor r = rand_tensor(DType::kFloat32, {1, 7, 7, 96}, 73).permute({0, 3, 1, 2});
  Tensor plain;
  {
    ThreadPool pool(1);
    ScopedThreadPool scope(&pool);
    plain = ExternCase("aten.conv2d.default").tensor("input", x).tensor("weight", w)
                .tensor("bias", b).check();
  }
  const std::vector<double> pv = plain.to_doubles(), rv = r.contiguous().to_doubles();
  std::vector<double> want(pv.size());
  for (size_t i = 0; i < pv.size(); ++i) want[i] = std::max(pv[i] + rv[i], 0.0);
  for (const char* split : {"", "channels"}) {
    std::unique_ptr<ScopedEnv> env;
    if (*split) env = std::make_unique<ScopedEnv>("ANVIL_CONV_SPLIT", split);
    for (int threads : {2, 3, 8}) {
      ThreadPool pool(threads);
      ScopedThreadPool scope(&pool);
      const Tensor got = ExternCase("aten.conv2d.default")
                             .tensor("input", x)
                             .tensor("weight", w)
                             .tensor("bias", b)
                             .tensor("residual", r)
                             .extern_int("fused_add", 1)
                             .extern_int("fused_relu", 1)
                             .run_extern(plain.sizes(), DType::kFloat32);
      EXPECT_TRUE(same_as_one_thread(got, Tensor::from_vector(want, plain.sizes()), false))
          << threads << " threads, ANVIL_CONV_SPLIT '" << split << "'";
    }
  }
}

TEST(ExternThreads, ConcurrentCallers) {
  std::vector<ExternCase> cs = parallel_cases();
  std::vector<Tensor> want;
  for (ExternCase& c : cs) want.push_back(c.reference());
  std::vector<std::thread> callers;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      bool all = true;
      for (size_t i = 0; i < cs.size(); ++i) {
        const Tensor got = cs[i].run_extern(want[i].sizes(), want[i].dtype());
        all = all && matches(got, want[i]);
      }
      ok[t] = all ? 1 : 0;
    });
  for (std::thread& th : callers) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 1) << "caller " << t;
}

TEST(ExternThreads, ZeroSizeInputsAndOutputs) {
  ExternCase("aten.conv2d.default")
      .tensor("input", rand_tensor(DType::kFloat32, {0, 3, 5, 5}, 20))
      .tensor("weight", rand_tensor(DType::kFloat32, {4, 3, 3, 3}, 21))
      .check();
  ExternCase("aten.max_pool2d.default")
      .tensor("self", rand_tensor(DType::kFloat32, {0, 3, 4, 4}, 22))
      .ints("kernel_size", {2, 2})
      .check();
  ExternCase("aten.scaled_dot_product_attention.default")
      .tensor("query", rand_tensor(DType::kFloat32, {2, 0, 8}, 23))
      .tensor("key", rand_tensor(DType::kFloat32, {2, 4, 8}, 24))
      .tensor("value", rand_tensor(DType::kFloat32, {2, 4, 8}, 25))
      .check();
  ExternCase("aten.embedding.default")
      .tensor("weight", rand_tensor(DType::kFloat32, {4, 3}, 26))
      .tensor("indices", rand_tensor(DType::kInt64, {0}, 27, 0, 4))
      .check();
  ExternCase("aten.index_select.default")
      .tensor("self", rand_tensor(DType::kFloat32, {4, 3}, 28))
      .scalar("dim", 0)
      .tensor("index", rand_tensor(DType::kInt64, {0}, 29, 0, 4))
      .check();
  ExternCase("aten.index.Tensor")
      .tensor("self", rand_tensor(DType::kFloat32, {4, 3}, 30))
      .opt_tensors("indices", {anvil::testing::boolean({4}, {0, 0, 0, 0})})
      .check();
  ExternCase("aten.gather.default")
      .tensor("self", rand_tensor(DType::kFloat32, {4, 3}, 31))
      .scalar("dim", 1)
      .tensor("index", rand_tensor(DType::kInt64, {4, 0}, 32, 0, 3))
      .check();
  ExternCase("aten.cat.default")
      .tensors("tensors",
               {rand_tensor(DType::kFloat32, {2, 0}, 33), rand_tensor(DType::kFloat32, {2, 0}, 34)})
      .scalar("dim", 1)
      .check();
  ExternCase("aten.repeat.default")
      .tensor("self", rand_tensor(DType::kFloat32, {2, 3}, 35))
      .ints("repeats", {0, 1})
      .check();
  ExternCase("aten.cumsum.default")
      .tensor("self", rand_tensor(DType::kFloat32, {0, 3}, 36))
      .scalar("dim", 1)
      .check();
  ExternCase("aten.bmm.default")
      .tensor("self", rand_tensor(DType::kBFloat16, {0, 2, 3}, 37))
      .tensor("mat2", rand_tensor(DType::kBFloat16, {0, 3, 4}, 38))
      .check();
}

}  // namespace
}  // namespace anvil::runtime::test
