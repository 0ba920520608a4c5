// runtime::Model: load, run, input checks, mutable buffers, concurrency, constant updates.
#include <atomic>
#include <thread>

#include "core/thread_pool.h"
#include "runtime/model.h"
#include "runtime_test_util.h"

namespace anvil::runtime::test {
namespace {

Tensor f32(const std::vector<float>& v, Shape sizes) { return Tensor::from_vector(v, sizes); }

std::vector<Tensor> inputs_for(int64_t n) {
  std::vector<float> z(static_cast<size_t>(n + 1));
  for (int64_t i = 0; i <= n; ++i) z[i] = 0.5f * static_cast<float>(i) - 1.0f;
  return {f32(make_x(n), {n, 4}), f32(z, {n + 1})};
}

/// The error message of `fn`, or "" when it does not throw.
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Model, RunsHandWrittenModel) {
  Model m = Model::load(write_test_package("basic"));
  std::vector<Tensor> out = m.run(inputs_for(3));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].sizes(), (Shape{3, 4}));
  EXPECT_EQ(out[0].dtype(), DType::kFloat32);
  // Row 0 by hand: x0 = [0.25, -0.25, -0.75, -1.25]; (x0 @ W)[j] = -5.5 - 8j; y = 2 * that + b.
  const std::vector<double> y = out[0].to_doubles();
  EXPECT_DOUBLE_EQ(y[0], -10.5);
  EXPECT_DOUBLE_EQ(y[1], -28.0);
  EXPECT_DOUBLE_EQ(y[2], -41.0);
  EXPECT_DOUBLE_EQ(y[3], -59.0);
  const std::vector<double> want = expected_y(make_x(3), default_weight(), default_bias());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-4) << i;
  // z1 = z + 1 through the extern kernel: z = [-1, -0.5, 0, 0.5].
  EXPECT_EQ(out[1].to_doubles(), (std::vector<double>{0, 0.5, 1, 1.5}));
  // The counter buffer started at 100 and is incremented in place by each run.
  EXPECT_EQ(out[2].dtype(), DType::kInt64);
  EXPECT_EQ(out[2].to_doubles(), (std::vector<double>{101}));
  EXPECT_EQ(m.run(inputs_for(1))[2].to_doubles(), (std::vector<double>{102}));
  EXPECT_EQ(m.constant("b_counter").to_doubles(), (std::vector<double>{102}));
  EXPECT_NE(m.metadata_json().find("k1_pointwise"), std::string::npos);
}

TEST(Model, BufferStateIsPerModelAndStartsFromThePackage) {
  const std::string path = write_test_package("buffers");
  Model a = Model::load(path);
  a.run(inputs_for(2));
  a.run(inputs_for(2));
  Model b = Model::load(path);
  EXPECT_EQ(b.run(inputs_for(2))[2].to_doubles(), (std::vector<double>{101}));
  EXPECT_EQ(a.run(inputs_for(2))[2].to_doubles(), (std::vector<double>{103}));
}

// Two different model.so loaded one after the other, both alive: each Model runs its own code.
// (model.so is dlopened from an in-memory file as /proc/self/fd/N; when that descriptor was
// closed after loading, the next model reused N, and dlopen returned the first model's library
// for the second package: the stateless model ran the counter code of the stateful one.)
TEST(Model, TwoPackagesLoadedTogetherRunTheirOwnCode) {
  const std::string stateful = write_test_package("own_code_a");
  const std::string stateless = write_test_package("own_code_b", /*stateless=*/true);
  for (bool stateful_first : {true, false}) {
    SCOPED_TRACE(stateful_first ? "stateful first" : "stateless first");
    Model first = Model::load(stateful_first ? stateful : stateless);
    Model second = Model::load(stateful_first ? stateless : stateful);
    const Model& a = stateful_first ? first : second;
    const Model& b = stateful_first ? second : first;
    EXPECT_EQ(a.run(inputs_for(2))[2].to_doubles(), (std::vector<double>{101}));
    EXPECT_EQ(b.run(inputs_for(2))[2].to_doubles(), (std::vector<double>{0}));
    EXPECT_EQ(a.run(inputs_for(2))[2].to_doubles(), (std::vector<double>{102}));
    EXPECT_EQ(b.run(inputs_for(2))[2].to_doubles(), (std::vector<double>{0}));
  }
}

TEST(Model, SpecsAndConstantNames) {
  Model m = Model::load(write_test_package("specs"));
  ASSERT_EQ(m.input_specs().size(), 2u);
  const IOSpec& x = m.input_specs()[0];
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.dtype, DType::kFloat32);
  EXPECT_EQ(x.sizes, (std::vector<std::string>{"s0", "4"}));
  EXPECT_EQ(x.ranges[0], (SymRange{1, 64}));
  EXPECT_EQ(x.ranges[1], (SymRange{4, 4}));
  const IOSpec& z = m.input_specs()[1];
  EXPECT_EQ(z.ranges[0], (SymRange{2, 65}));
  ASSERT_EQ(m.output_specs().size(), 3u);
  EXPECT_EQ(m.output_specs()[2].name, "count");
  EXPECT_EQ(m.output_specs()[2].dtype, DType::kInt64);
  EXPECT_EQ(m.constant_names(), (std::vector<std::string>{"p_w", "p_b", "b_counter"}));
  const auto orig = m.constant_original_names();
  EXPECT_EQ(orig.at("p_w"), "lin.weight");
  EXPECT_EQ(orig.at("b_counter"), "counter");
  EXPECT_TRUE(m.constant_specs()[2].is_mutable);
  EXPECT_EQ(m.constant("p_b").to_doubles(), (std::vector<double>{0.5, -1, 2, 0}));
}

TEST(Model, DynamicBatchAcrossTheRange) {
  Model m = Model::load(write_test_package("dyn", true));
  for (int64_t n : {1, 2, 7, 33, 64}) {
    std::vector<Tensor> out = m.run(inputs_for(n));
    EXPECT_EQ(out[0].sizes(), (Shape{n, 4}));
    EXPECT_EQ(out[1].sizes(), (Shape{n + 1}));
    const std::vector<double> want = expected_y(make_x(n), default_weight(), default_bias());
    const std::vector<double> got = out[0].to_doubles();
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << n << " " << i;
  }
}

TEST(Model, InputChecksNameInputDimExpectedActual) {
  Model m = Model::load(write_test_package("checks", true));
  auto run = [&](std::vector<Tensor> in) { return error_of([&] { m.run(in); }); };
  std::string e = run({inputs_for(2)[0]});
  EXPECT_NE(e.find("wrong number of inputs (expected 2, got 1)"), std::string::npos) << e;

  std::vector<Tensor> in = inputs_for(2);
  in[0] = in[0].to(DType::kFloat64);
  e = run(in);
  EXPECT_NE(e.find("input 'x' (#0)"), std::string::npos) << e;
  EXPECT_NE(e.find("unmatched dtype (expected f32, got f64)"), std::string::npos) << e;

  in = inputs_for(2);
  in[0] = f32(std::vector<float>(10, 1.f), {2, 5});
  e = run(in);
  EXPECT_NE(e.find("input 'x' (#0): unmatched dim value at dim 1 (expected 4, got 5)"),
            std::string::npos)
      << e;

  in = inputs_for(2);
  in[0] = f32(std::vector<float>(8, 1.f), {8});
  e = run(in);
  EXPECT_NE(e.find("wrong number of dims (expected 2 dims [s0, 4], got 1 dims [8])"),
            std::string::npos)
      << e;

  in = inputs_for(65);
  e = run(in);
  EXPECT_NE(e.find("input 'x' (#0): dim 0 (symbol s0) value is too large (expected <= 64 "
                   "(range [1, 64]), got 65)"),
            std::string::npos)
      << e;

  in = {f32({}, {0, 4}), f32({1.f}, {1})};
  e = run(in);
  EXPECT_NE(e.find("dim 0 (symbol s0) value is too small (expected >= 1"), std::string::npos) << e;

  in = inputs_for(3);
  in[1] = f32(std::vector<float>(3, 0.f), {3});  // needs s0 + 1 = 4
  e = run(in);
  EXPECT_NE(
      e.find("input 'z' (#1): unmatched dim value at dim 0 (s0 + 1 with s0=3) (expected 4, got 3)"),
      std::string::npos)
      << e;

  in = inputs_for(2);
  in[1] = Tensor();
  e = run(in);
  EXPECT_NE(e.find("input 'z' (#1): input is undefined"), std::string::npos) << e;

  in = inputs_for(2);
  in[0] = Tensor(Storage::wrap(in[0].data_ptr(), in[0].nbytes(), nullptr, Device::cuda(0)),
                 DType::kFloat32, {2, 4}, {4, 1});
  e = run(in);
  EXPECT_NE(e.find("input 'x' (#0): input is on the wrong device (expected cpu, got cuda:0)"),
            std::string::npos)
      << e;

  // A failed call leaves the model usable.
  EXPECT_EQ(m.run(inputs_for(2))[0].sizes(), (Shape{2, 4}));
}

TEST(Model, ModelReportedErrorsSurface) {
  Model m = Model::load(write_test_package("model_error", true));
  const std::string e = error_of([&] { m.run(inputs_for(13)); });
  EXPECT_NE(e.find("unlucky batch 13"), std::string::npos) << e;
  EXPECT_EQ(m.run(inputs_for(12))[0].sizes(), (Shape{12, 4}));
}

TEST(Model, NonContiguousInputsAreCopied) {
  Model m = Model::load(write_test_package("noncontig", true));
  // x as the transpose of a contiguous (4, n) tensor.
  const int64_t n = 5;
  std::vector<float> x = make_x(n), xt(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < 4; ++k) xt[k * n + i] = x[i * 4 + k];
  std::vector<Tensor> in = inputs_for(n);
  in[0] = f32(xt, {4, n}).transpose(0, 1);
  ASSERT_FALSE(in[0].is_contiguous());
  const std::vector<double> got = m.run(in)[0].to_doubles();
  const std::vector<double> want = expected_y(x, default_weight(), default_bias());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4);
  // z as every other element of a longer vector.
  std::vector<float> zz(12);
  for (int i = 0; i < 12; ++i) zz[i] = static_cast<float>(i);
  in = inputs_for(n);
  in[1] = f32(zz, {12}).slice(0, 0, 12, 2);
  EXPECT_EQ(m.run(in)[1].to_doubles(), (std::vector<double>{1, 3, 5, 7, 9, 11}));
}

TEST(Model, OutputsAreFreshMemory) {
  Model m = Model::load(write_test_package("fresh", true));
  std::vector<Tensor> a = m.run(inputs_for(2));
  const std::vector<double> before = a[0].to_doubles();
  a[0].fill(123);
  std::vector<Tensor> b = m.run(inputs_for(2));
  EXPECT_EQ(b[0].to_doubles(), before);
  EXPECT_NE(a[0].data_ptr(), b[0].data_ptr());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b[0].data_ptr()) % 64, 0u);
}

/// 8 threads x 500 runs on one Model equal a single-threaded run.
void check_concurrent_runs(Model& m, bool stateful) {
  std::vector<std::vector<Tensor>> inputs;
  std::vector<std::vector<double>> want_y, want_z;
  for (int64_t n = 1; n <= 8; ++n) {
    inputs.push_back(inputs_for(n));
    std::vector<Tensor> out = m.run(inputs.back());
    want_y.push_back(out[0].to_doubles());
    want_z.push_back(out[1].to_doubles());
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 500; ++r) {
        const size_t k = static_cast<size_t>((t + r) % 8);
        std::vector<Tensor> out = m.run(inputs[k]);
        if (out[0].to_doubles() != want_y[k] || out[1].to_doubles() != want_z[k]) ++mismatches;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  if (stateful) {
    // Every increment of the shared buffer happened exactly once: 100 + 8 + 8 * 500.
    EXPECT_EQ(m.constant("b_counter").to_doubles(), (std::vector<double>{100 + 8 + 4000}));
  }
}

TEST(Model, ConcurrentRunsMatchSingleThreaded) {
  ModelOptions opts;
  opts.num_runners = 4;
  opts.num_threads = 2;
  Model m = Model::load(write_test_package("concurrent", true), opts);
  EXPECT_EQ(m.num_runners(), 4);
  EXPECT_EQ(m.thread_pool().num_threads(), 2);
  check_concurrent_runs(m, false);
}

TEST(Model, ConcurrentRunsWithMutableBuffer) {
  ModelOptions opts;
  opts.num_runners = 3;
  Model m = Model::load(write_test_package("concurrent_buf"), opts);
  check_concurrent_runs(m, true);
}

TEST(Model, UpdateAndSwapConstants) {
  Model m = Model::load(write_test_package("update"));
  const std::vector<Tensor> in = inputs_for(2);
  const std::vector<double> y0 = m.run(in)[0].to_doubles();

  // Inactive update: no effect until the swap.
  Tensor w2 = default_weight();
  w2.fill(1.0);
  Tensor b2 = f32({1, 2, 3, 4}, {4});
  m.update_constants({{"p_w", w2}, {"p_b", b2}}, /*inactive=*/true);
  w2.fill(7.0);  // the model copied the value
  EXPECT_EQ(m.run(in)[0].to_doubles(), y0);
  m.swap_constants();
  Tensor ones = default_weight();
  ones.fill(1.0);
  const std::vector<double> want = expected_y(make_x(2), ones, b2);
  // x row 0 sums to -2: y[0][j] = -4 + b[j].
  EXPECT_EQ(m.run(in)[0].to_doubles()[0], -3.0);
  EXPECT_EQ(m.run(in)[0].to_doubles(), want);
  EXPECT_NE(error_of([&] { m.swap_constants(); }).find("no inactive constants"), std::string::npos);

  // Active update: at once.
  m.update_constants({{"p_b", default_bias()}}, /*inactive=*/false);
  EXPECT_EQ(m.run(in)[0].to_doubles(), expected_y(make_x(2), ones, default_bias()));

  // Mutable buffers are written in place.
  m.update_constants({{"b_counter", Tensor::from_vector(std::vector<int64_t>{-5}, {1})}}, false);
  EXPECT_EQ(m.run(in)[2].to_doubles(), (std::vector<double>{-4}));

  // Validation: nothing changes on error.
  std::string e = error_of([&] { m.update_constants({{"nope", b2}}, false); });
  EXPECT_NE(e.find("unknown constant"), std::string::npos) << e;
  e = error_of([&] { m.update_constants({{"p_b", b2.to(DType::kFloat64)}}, false); });
  EXPECT_NE(e.find("constant 'p_b': new value has the wrong dtype (expected f32, got f64)"),
            std::string::npos)
      << e;
  e = error_of([&] { m.update_constants({{"p_w", b2}}, false); });
  EXPECT_NE(e.find("wrong sizes (expected [4, 4], got [4])"), std::string::npos) << e;
  e = error_of([&] { m.update_constants({{"p_b", b2}}, false, /*require_full=*/true); });
  EXPECT_NE(e.find("none for 'p_w'"), std::string::npos) << e;
  EXPECT_EQ(m.constant("p_b").to_doubles(), (std::vector<double>{0.5, -1, 2, 0}));
}

TEST(Model, SwapIsAtomicWithRespectToRuns) {
  ModelOptions opts;
  opts.num_runners = 4;
  Model m = Model::load(write_test_package("swap_race", true), opts);
  const std::vector<Tensor> in = inputs_for(3);
  const std::vector<double> ya = m.run(in)[0].to_doubles();
  Tensor w2 = default_weight();
  w2.fill(-2.0);
  const std::vector<double> yb = expected_y(make_x(3), w2, default_bias());
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0}, runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      while (!stop) {
        const std::vector<double> y = m.run(in)[0].to_doubles();
        if (y != ya && y != yb) ++torn;
        ++runs;
      }
    });
  // Keep swapping until the runners have done a good number of runs meanwhile.
  for (int i = 0; i < 50 || runs.load() < 400; ++i) {
    m.update_constants({{"p_w", i % 2 ? default_weight() : w2}}, /*inactive=*/true);
    m.swap_constants();
    std::this_thread::yield();
  }
  stop = true;
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_GT(runs.load(), 0);
}

TEST(Model, LoadRefusals) {
  std::string e = error_of([] { Model::load(temp_dir() + "/does_not_exist.anvil"); });
  EXPECT_NE(e.find("cannot open package"), std::string::npos) << e;
  ModelOptions cuda;
  cuda.device = Device::cuda(0);
  e = error_of([&] { Model::load(write_test_package("cuda_refused", true), cuda); });
  EXPECT_NE(e.find("cannot load a CPU package (target cpu-x86_64) on cuda:0"), std::string::npos)
      << e;
  // A package of an older ABI (before devices) is refused with a request to recompile it.
  std::string old = test_manifest(true);
  const std::string abi = "\"abi_version\": " + std::to_string(ANVIL_MODEL_ABI_VERSION);
  ASSERT_NE(old.find(abi), std::string::npos);
  old.replace(old.find(abi), abi.size(), "\"abi_version\": 2");
  e = error_of([&] { Model::load(write_test_package("old_abi", true, {}, {}, old)); });
  EXPECT_NE(e.find("built by an older anvil for runtime ABI 2"), std::string::npos) << e;
  EXPECT_NE(e.find("recompile the model with this anvil"), std::string::npos) << e;
  ModelOptions zero;
  zero.num_runners = 0;
  e = error_of([&] { Model::load(write_test_package("zero_runners", true), zero); });
  EXPECT_NE(e.find("num_runners must be at least 1"), std::string::npos) << e;
  // An extern the runtime does not implement is refused at load, not at the first run.
  const std::string missing =
      write_test_package("missing_extern", true, {}, {},
                         test_manifest(true, 1, "cpu-x86_64", "anvil_test.missing.default"));
  e = error_of([&] { Model::load(missing); });
  EXPECT_NE(e.find("extern op this runtime does not implement"), std::string::npos) << e;
  EXPECT_NE(e.find("anvil_test.missing.default"), std::string::npos) << e;
  // A target this runtime does not know.
  const std::string gpu =
      write_test_package("gpu_target", true, {}, {}, test_manifest(true, 1, "cuda-sm90"));
  e = error_of([&] { Model::load(gpu); });
  EXPECT_NE(e.find("compiled for another device"), std::string::npos) << e;
}

TEST(Model, TargetFeaturesAreChecked) {
  // A package for avx512 loads exactly when this CPU has avx512f/bw/vl (and avx2, fma).
  const std::string path = write_test_package("avx512_target", true, {}, {},
                                              test_manifest(true, 1, "cpu-x86_64-avx512"));
  const bool have = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
                    __builtin_cpu_supports("fma");
  const std::string e = error_of([&] { Model::load(path); });
  if (have)
    EXPECT_EQ(e, "");
  else
    EXPECT_NE(e.find("this CPU cannot run the package"), std::string::npos) << e;
}

TEST(Model, MovedModelRunsAndLoadsAreIndependent) {
  Model a = Model::load(write_test_package("move_a", true));
  Model b = std::move(a);
  EXPECT_EQ(b.run(inputs_for(4))[0].sizes(), (Shape{4, 4}));
  // Two packages with different weights loaded at once do not share code or constants.
  Tensor w2 = default_weight();
  w2.fill(0.0);
  Model c = Model::load(write_test_package("move_c", true, w2));
  EXPECT_EQ(c.run(inputs_for(1))[0].to_doubles(), (std::vector<double>{0.5, -1, 2, 0}));
  EXPECT_NE(b.run(inputs_for(1))[0].to_doubles(), c.run(inputs_for(1))[0].to_doubles());
}

}  // namespace
}  // namespace anvil::runtime::test
