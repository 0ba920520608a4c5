// The services generated code calls: thread pool, GEMM, extern dispatch, errors.
#include <atomic>
#include <cmath>
#include <random>
#include <set>
#include <thread>

#include "common/check.h"
#include "core/thread_pool.h"
#include "runtime/externs.h"
#include "runtime/rt_api.h"
#include "runtime_test_util.h"

namespace anvil::runtime::test {
namespace {

TEST(ThreadPool, CoversTheRangeOnceInChunks) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.num_threads(), 4);
  std::vector<std::atomic<int>> hits(1000);
  std::atomic<int> chunks{0};
  pool.parallel_for(0, 1000, 10, [&](int64_t b, int64_t e) {
    ++chunks;
    for (int64_t i = b; i < e; ++i) ++hits[i];
  });
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
  EXPECT_LE(chunks.load(), 4);
  EXPECT_GE(chunks.load(), 2);
}

TEST(ThreadPool, SmallRangesAndNestedCallsRunSerially) {
  ThreadPool pool(4);
  std::set<std::thread::id> ids;
  std::mutex mu;
  pool.parallel_for(0, 5, 10, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 5);
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_TRUE(ids.count(std::this_thread::get_id()));
  pool.parallel_for(3, 3, 1, [&](int64_t, int64_t) { ADD_FAILURE() << "empty range ran"; });
  // Nested: the inner call runs as one chunk on the thread of the outer chunk.
  std::atomic<int> inner_chunks{0}, total{0};
  pool.parallel_for(0, 8, 1, [&](int64_t b, int64_t e) {
    EXPECT_TRUE(ThreadPool::in_parallel_region());
    pool.parallel_for(0, 100, 1, [&](int64_t ib, int64_t ie) {
      ++inner_chunks;
      total += static_cast<int>(ie - ib);
    });
  });
  EXPECT_EQ(total.load(), 100 * inner_chunks.load());
  EXPECT_LE(inner_chunks.load(), 8);
  EXPECT_FALSE(ThreadPool::in_parallel_region());
}

TEST(ThreadPool, ExceptionsPropagateAndConcurrentCallers) {
  ThreadPool pool(3);
  ANVIL_EXPECT_ERROR(pool.parallel_for(0, 300, 1,
                                       [](int64_t b, int64_t) {
                                         if (b > 0) throw Error("chunk failed");
                                       }),
                     "chunk failed");
  // Several threads calling parallel_for at once on one pool.
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&] {
      for (int r = 0; r < 200; ++r)
        pool.parallel_for(0, 64, 4, [&](int64_t b, int64_t e) {
          int64_t s = 0;
          for (int64_t i = b; i < e; ++i) s += i;
          sum += s;
        });
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(sum.load(), int64_t{6} * 200 * (63 * 64 / 2));
}

TEST(ThreadPool, ScopedPoolAndEnvironment) {
  ThreadPool pool(2);
  EXPECT_EQ(&current_thread_pool(), &ThreadPool::global());
  {
    ScopedThreadPool scope(&pool);
    EXPECT_EQ(&current_thread_pool(), &pool);
  }
  EXPECT_EQ(&current_thread_pool(), &ThreadPool::global());
  ::setenv("ANVIL_NUM_THREADS", "3", 1);
  EXPECT_EQ(ThreadPool::default_num_threads(), 3);
  ::setenv("ANVIL_NUM_THREADS", "zero", 1);
  EXPECT_GE(ThreadPool::default_num_threads(), 1);
  ::unsetenv("ANVIL_NUM_THREADS");
}

/// Reference row-major GEMM in double.
template <typename T>
std::vector<double> ref_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                             const std::vector<T>& a, int64_t lda, const std::vector<T>& b,
                             int64_t ldb, double beta, const std::vector<T>& c, int64_t ldc) {
  std::vector<double> out(c.begin(), c.end());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += double(ta ? a[p * lda + i] : a[i * lda + p]) *
               double(tb ? b[j * ldb + p] : b[p * ldb + j]);
      out[i * ldc + j] = alpha * acc + beta * double(c[i * ldc + j]);
    }
  return out;
}

TEST(Gemm, MatchesReferenceForAllTransposesAndSplits) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  ThreadPool pool(4);
  ScopedThreadPool scope(&pool);
  struct Case {
    int64_t m, n, k;
  };
  // Small (serial), tall (row split), wide (column split), ragged.
  for (Case cs : {Case{3, 5, 7}, Case{300, 40, 64}, Case{20, 333, 50}, Case{129, 127, 65}}) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        const int64_t lda = (ta ? cs.m : cs.k) + 3, ldb = (tb ? cs.k : cs.n) + 1, ldc = cs.n + 2;
        std::vector<float> a((ta ? cs.k : cs.m) * lda), b((tb ? cs.n : cs.k) * ldb), c(cs.m * ldc);
        for (float& v : a) v = dist(rng);
        for (float& v : b) v = dist(rng);
        for (float& v : c) v = dist(rng);
        const std::vector<double> want =
            ref_gemm(ta, tb, cs.m, cs.n, cs.k, 0.5, a, lda, b, ldb, 2.0, c, ldc);
        rt_api()->sgemm(ta, tb, cs.m, cs.n, cs.k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f,
                        c.data(), ldc);
        for (int64_t i = 0; i < cs.m; ++i)
          for (int64_t j = 0; j < cs.n; ++j)
            ASSERT_NEAR(c[i * ldc + j], want[i * ldc + j], 1e-4)
                << cs.m << "x" << cs.n << "x" << cs.k << " ta=" << ta << " tb=" << tb;
        std::vector<double> da(a.begin(), a.end()), db(b.begin(), b.end()), dc(cs.m * ldc, 1.0);
        const std::vector<double> dwant =
            ref_gemm(ta, tb, cs.m, cs.n, cs.k, 1.0, da, lda, db, ldb, 0.0, dc, ldc);
        rt_api()->dgemm(ta, tb, cs.m, cs.n, cs.k, 1.0, da.data(), lda, db.data(), ldb, 0.0,
                        dc.data(), ldc);
        for (int64_t i = 0; i < cs.m; ++i)
          for (int64_t j = 0; j < cs.n; ++j)
            ASSERT_NEAR(dc[i * ldc + j], dwant[i * ldc + j], 1e-10);
      }
  }
}

TEST(Gemm, DegenerateShapes) {
  // k = 0: C = beta * C; beta = 0 clears NaN.
  std::vector<float> c = {1, 2, 3, 4};
  rt_api()->sgemm(0, 0, 2, 2, 0, 1.0f, nullptr, 0, nullptr, 0, 3.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{3, 6, 9, 12}));
  c = {NAN, 1, 2, 3};
  rt_api()->sgemm(0, 0, 2, 2, 0, 1.0f, nullptr, 0, nullptr, 0, 0.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0}));
  // m = 0 touches nothing; a 1-row product with lda smaller than BLAS wants.
  rt_api()->sgemm(0, 0, 0, 2, 2, 1.0f, nullptr, 2, nullptr, 2, 0.0f, nullptr, 2);
  std::vector<float> a = {1, 2}, b = {1, 2, 3, 4}, out(2);
  rt_api()->sgemm(0, 0, 1, 2, 2, 1.0f, a.data(), 0, b.data(), 2, 0.0f, out.data(), 0);
  EXPECT_EQ(out, (std::vector<float>{7, 10}));
  // Hand-computed 2x2: [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]].
  std::vector<float> x = {1, 2, 3, 4}, y = {5, 6, 7, 8}, z(4);
  rt_api()->sgemm(0, 0, 2, 2, 2, 1.0f, x.data(), 2, y.data(), 2, 0.0f, z.data(), 2);
  EXPECT_EQ(z, (std::vector<float>{19, 22, 43, 50}));
  rt_api()->sgemm(1, 1, 2, 2, 2, 1.0f, x.data(), 2, y.data(), 2, 0.0f, z.data(), 2);
  EXPECT_EQ(z, (std::vector<float>{23, 31, 34, 46}));  // x^T @ y^T
}

int scale_extern(ExternCall& call) {
  Tensor in = call.input_tensor(0), out = call.output_tensor(0);
  const double factor = call.attr_float("factor");
  const std::vector<int64_t> dims = call.attr_ints("dims", {});
  if (call.attr_string("mode", "ok") == "fail") return call.fail("asked to fail");
  if (call.attr_int("throw", 0)) throw Error("thrown inside", "scale_extern");
  for (int64_t i = 0; i < in.numel(); ++i)
    out.data<float>()[i] = static_cast<float>(in.data<float>()[i] * factor + double(dims.size()));
  return 0;
}

// Kernels are keyed by (target, device): a kernel registered for one device is not found for
// another, and each device lists its own.
TEST(Externs, KeyedByTargetAndDevice) {
  register_extern("anvil_test.keyed.default", scale_extern, Device::Type::kCUDA);
  EXPECT_EQ(find_extern("anvil_test.keyed.default", Device::Type::kCUDA), &scale_extern);
  EXPECT_EQ(find_extern("anvil_test.keyed.default"), nullptr);  // CPU: none
  const auto cuda = registered_externs(Device::Type::kCUDA), cpu = registered_externs();
  EXPECT_TRUE(std::find(cuda.begin(), cuda.end(), "anvil_test.keyed.default") != cuda.end());
  EXPECT_TRUE(std::find(cpu.begin(), cpu.end(), "anvil_test.keyed.default") == cpu.end());
  EXPECT_TRUE(std::find(cpu.begin(), cpu.end(), "aten.gather.default") != cpu.end());
  EXPECT_TRUE(std::find(cuda.begin(), cuda.end(), "aten.gather.default") == cuda.end());
}

TEST(Externs, RegistryAndDispatchThroughTheApi) {
  register_extern("anvil_test.scale.default", scale_extern);
  EXPECT_EQ(find_extern("anvil_test.scale.default"), &scale_extern);
  EXPECT_EQ(find_extern("anvil_test.nothing"), nullptr);
  const std::vector<std::string> names = registered_externs();
  EXPECT_TRUE(std::find(names.begin(), names.end(), "anvil_test.scale.default") != names.end());
  ANVIL_EXPECT_ERROR(register_extern("", scale_extern), "register_extern: bad registration");

  std::vector<float> src = {1, 2, 3}, dst(3);
  AnvilRtTensor in{}, out{};
  in.data = src.data();
  in.dtype = static_cast<int32_t>(DType::kFloat32);
  in.ndim = 1;
  in.sizes[0] = 3;
  in.strides[0] = 1;
  out = in;
  out.data = dst.data();
  const int64_t dims[2] = {0, 1};
  std::vector<AnvilRtScalar> attrs(2);
  attrs[0].name = "factor";
  attrs[0].kind = 0;  // an int where a float is read
  attrs[0].i = 3;
  attrs[1].name = "dims";
  attrs[1].kind = 3;
  attrs[1].ints = dims;
  attrs[1].n_ints = 2;
  RunContext ctx;
  EXPECT_EQ(
      rt_api()->extern_call(&ctx, "anvil_test.scale.default", &in, 1, attrs.data(), 2, &out, 1), 0);
  EXPECT_EQ(dst, (std::vector<float>{5, 8, 11}));
  EXPECT_FALSE(ctx.failed());

  // Failures: unknown target, fail(), a thrown Error, a missing attribute; first error wins.
  RunContext c1;
  EXPECT_NE(rt_api()->extern_call(&c1, "anvil_test.nothing", &in, 1, nullptr, 0, &out, 1), 0);
  EXPECT_NE(c1.error().find("no runtime kernel is registered for extern op 'anvil_test.nothing'"),
            std::string::npos)
      << c1.error();
  AnvilRtScalar mode{};
  mode.name = "mode";
  mode.kind = 2;
  mode.s = "fail";
  std::vector<AnvilRtScalar> fail_attrs = {attrs[0], mode};
  RunContext c2;
  EXPECT_NE(
      rt_api()->extern_call(&c2, "anvil_test.scale.default", &in, 1, fail_attrs.data(), 2, &out, 1),
      0);
  EXPECT_EQ(c2.error(), "anvil_test.scale.default: asked to fail");
  rt_api()->set_error(&c2, "second error");
  EXPECT_EQ(c2.error(), "anvil_test.scale.default: asked to fail");
  AnvilRtScalar thr{};
  thr.name = "throw";
  thr.kind = 0;
  thr.i = 1;
  std::vector<AnvilRtScalar> throw_attrs = {attrs[0], thr};
  RunContext c3;
  EXPECT_NE(rt_api()->extern_call(&c3, "anvil_test.scale.default", &in, 1, throw_attrs.data(), 2,
                                  &out, 1),
            0);
  EXPECT_NE(c3.error().find("thrown inside"), std::string::npos) << c3.error();
  RunContext c4;
  EXPECT_NE(rt_api()->extern_call(&c4, "anvil_test.scale.default", &in, 1, nullptr, 0, &out, 1), 0);
  EXPECT_NE(c4.error().find("missing attribute 'factor'"), std::string::npos) << c4.error();
  rt_api()->set_error(nullptr, "ignored");  // a null context is harmless
}

TEST(Externs, CallAccessorsAndTensorViews) {
  std::vector<int64_t> data = {1, 2, 3, 4, 5, 6};
  AnvilRtTensor t{};
  t.data = data.data();
  t.dtype = static_cast<int32_t>(DType::kInt64);
  t.ndim = 2;
  t.sizes[0] = 3;
  t.sizes[1] = 2;
  t.strides[0] = 1;  // a transposed view of a 2x3 matrix
  t.strides[1] = 3;
  AnvilRtScalar s{};
  s.name = "name";
  s.kind = 2;
  s.s = "x";
  ExternCall call("t", &t, 1, &s, 1, nullptr, 0);
  Tensor v = call.input_tensor(0);
  EXPECT_EQ(v.data_ptr(), data.data());  // no copy
  EXPECT_EQ(v.to_doubles(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(call.input_dtype(0), DType::kInt64);
  EXPECT_EQ(call.attr_string("name"), "x");
  EXPECT_EQ(call.attr_int("missing", 9), 9);
  EXPECT_TRUE(call.attr_bool("missing", true));
  ANVIL_EXPECT_ERROR(call.attr_int("name"),
                     "attribute 'name' has the wrong kind (expected int, got string)");
  ANVIL_EXPECT_ERROR(call.input(1), "input index out of range");
  ANVIL_EXPECT_ERROR(call.output(0), "output index out of range");
  AnvilRtTensor back = rt_from_tensor(v);
  EXPECT_EQ(back.data, data.data());
  EXPECT_EQ(back.strides[1], 3);
  t.dtype = 99;
  ANVIL_EXPECT_ERROR(call.input_tensor(0), "unknown dtype code");
}

}  // namespace
}  // namespace anvil::runtime::test
