// Runtime extern kernels under different thread pools (serial, a few threads, more threads than
// work items), from several caller threads at once, and on zero-size inputs / outputs.
#include <thread>

#include "core/thread_pool.h"
#include "test_externs_util.h"

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
