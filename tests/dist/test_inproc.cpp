// Collectives with ranks as threads of one process (STYLE principle 13): gloo groups sharing an
// in-memory HashStore, parametrized by world size x dtype x size; the single-rank real group
// (SP1, spec/collectives.md §2.7 c) and the fake backend (§2.7 b).
#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "dist/fake_process_group.h"
#include "dist/functional.h"
#include "dist/registry.h"
#include "dist/world.h"
#include "dist_check.h"
#ifdef ANVIL_HAVE_GLOO
#include "dist/gloo/gloo_process_group.h"
#endif

namespace anvil::dist::test {
namespace {

using std::chrono::milliseconds;

#ifdef ANVIL_HAVE_GLOO
/// Runs fn(pg) on `world` threads, each a rank of one gloo group over a shared HashStore.
template <typename Fn>
void on_threads(int world, Fn fn) {
  auto store = std::make_shared<HashStore>(milliseconds(20000));
  std::vector<std::future<void>> ranks;
  for (int r = 0; r < world; ++r)
    ranks.push_back(std::async(std::launch::async, [&, r] {
      GroupOptions o;
      o.timeout = milliseconds(20000);
      auto pg = std::make_shared<GlooProcessGroup>(store, r, world, std::vector<int>{}, o);
      pg->set_name("threads");
      fn(*pg);
      pg->barrier()->wait();
    }));
  for (auto& f : ranks) f.get();  // rethrows a rank's exception
}

struct ThreadParam {
  int world;
  DType dtype;
  int64_t numel;
};

class GlooThreads : public ::testing::TestWithParam<ThreadParam> {};

TEST_P(GlooThreads, AllCollectives) {
  const auto [W, dt, n] = GetParam();
  std::mutex mu;
  std::vector<std::string> failures;
  auto expect = [&](bool ok, const std::string& what) {
    if (ok) return;
    std::lock_guard<std::mutex> lk(mu);
    failures.push_back(what);
  };
  on_threads(W, [&](ProcessGroup& pg) {
    const int r = pg.rank();
    Tensor x = Tensor::full({n}, r + 1, dt);
    pg.all_reduce(x, ReduceOp::kSum)->wait();
    expect(all_equal(x, W * (W + 1) / 2.0), "all_reduce sum");
    Tensor m = Tensor::full({n}, r + 1, dt);
    pg.all_reduce(m, ReduceOp::kMax)->wait();
    expect(all_equal(m, W), "all_reduce max");
    Tensor g = Tensor::zeros({W * n}, dt);
    pg.all_gather_into_tensor(g, Tensor::full({n}, r, dt))->wait();
    for (int j = 0; j < W; ++j) expect(all_equal(g.slice(0, j * n, (j + 1) * n), j), "all_gather");
    Tensor rs = Tensor::zeros({n}, dt);
    pg.reduce_scatter_tensor(rs, Tensor::full({W * n}, r, dt), ReduceOp::kSum)->wait();
    expect(all_equal(rs, W * (W - 1) / 2.0), "reduce_scatter");
    Tensor a = Tensor::zeros({W, n}, dt);
    pg.all_to_all_single(a, Tensor::full({W, n}, r, dt), {}, {})->wait();
    for (int j = 0; j < W; ++j) expect(all_equal(a.select(0, j), j), "all_to_all");
    Tensor b = Tensor::full({n}, r == W - 1 ? 3 : 0, dt);
    pg.broadcast(b, W - 1)->wait();
    expect(all_equal(b, 3), "broadcast");
  });
  EXPECT_TRUE(failures.empty()) << failures.front();
}

INSTANTIATE_TEST_SUITE_P(
    Dist, GlooThreads,
    ::testing::Values(ThreadParam{2, DType::kFloat32, 1}, ThreadParam{3, DType::kBFloat16, 1000},
                      ThreadParam{4, DType::kInt64, 5}, ThreadParam{3, DType::kFloat32, 262144},
                      ThreadParam{2, DType::kUInt8, 3}),
    [](const auto& info) {
      return str("w", info.param.world, "_", dtype_name(info.param.dtype), "_n", info.param.numel);
    });

TEST(GlooThreadsCoalesced, MixedDtypesAndEmptyTensors) {
  on_threads(3, [](ProcessGroup& pg) {
    const int r = pg.rank();
    std::vector<Tensor> ts = {
        Tensor::full({2, 3}, r, DType::kFloat32), Tensor::full({0, 0}, r, DType::kFloat32),
        Tensor::full({4}, r + 1, DType::kInt64), Tensor::full({1}, r * 2, DType::kFloat32)};
    pg.all_reduce_coalesced(ts, ReduceOp::kSum)->wait();
    EXPECT_TRUE(all_equal(ts[0], 3));
    EXPECT_EQ(ts[1].numel(), 0);
    EXPECT_TRUE(all_equal(ts[2], 6));
    EXPECT_TRUE(all_equal(ts[3], 6));
    std::vector<Tensor> outs = {Tensor::zeros({6}, DType::kInt32),
                                Tensor::zeros({3, 2}, DType::kFloat32)};
    pg.reduce_scatter_tensor_coalesced(
          outs, {Tensor::full({18}, r, DType::kInt32), Tensor::full({9, 2}, 1, DType::kFloat32)},
          ReduceOp::kSum)
        ->wait();
    EXPECT_TRUE(all_equal(outs[0], 3));
    EXPECT_TRUE(all_equal(outs[1], 3));
  });
}

TEST(GlooSingleRank, WorldOfOneIsIdentity) {
  // SP1: a real group with W = 1.
  on_threads(1, [](ProcessGroup& pg) {
    Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3});
    pg.all_reduce(x, ReduceOp::kAvg)->wait();
    EXPECT_TRUE(values_equal(x, {1, 2, 3}));
    Tensor g = Tensor::zeros({3}, DType::kFloat32);
    pg.all_gather_into_tensor(g, x)->wait();
    EXPECT_TRUE(values_equal(g, {1, 2, 3}));
    Tensor a = Tensor::zeros({3}, DType::kFloat32);
    pg.all_to_all_single(a, x, {3}, {3})->wait();
    EXPECT_TRUE(values_equal(a, {1, 2, 3}));
  });
}

/// Scheduling policies (sched(7) numbers) of this process's threads, from /proc/self/task.
std::vector<int> thread_policies() {
  std::vector<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream f(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));  // fields 3.. after "(comm) "
    std::string field;
    for (int i = 3; i <= 41 && rest >> field; ++i)
      if (i == 41) out.push_back(std::stoi(field));
  }
  return out;
}

TEST(GlooDevice, EventLoopThreadRunsUnderSchedBatch) {
  // Without SCHED_BATCH the loop thread, woken by a peer's data, preempts a caller that holds a
  // pair lock and spins on that lock (a 64 B all_reduce took ~4 ms with each rank on one core).
  auto count = [](int policy) {
    const auto p = thread_policies();
    return std::count(p.begin(), p.end(), policy);
  };
  const auto batch_before = count(SCHED_BATCH);
  {
    on_threads(1, [&](ProcessGroup&) {
      EXPECT_EQ(count(SCHED_BATCH), batch_before + 1);  // gloo's event loop
      EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);    // the creating thread got its policy back
    });
  }
  ASSERT_EQ(count(SCHED_BATCH), batch_before);  // the device went with its last group
  ::setenv("ANVIL_GLOO_LOOP_SCHED", "other", 1);
  on_threads(1, [&](ProcessGroup&) { EXPECT_EQ(count(SCHED_BATCH), batch_before); });
  ::setenv("ANVIL_GLOO_LOOP_SCHED", "fifo", 1);
  EXPECT_TRUE(throws_error([] { on_threads(1, [](ProcessGroup&) {}); },
                           {"unknown ANVIL_GLOO_LOOP_SCHED", "batch or other", "fifo"}));
  ::unsetenv("ANVIL_GLOO_LOOP_SCHED");
}
#endif

TEST(FakeBackend, ShapesWithoutCommunication) {
  // §2.7 b: one process claims rank 0 of W=2; outputs have the right shapes.
  auto pg = std::make_shared<FakeProcessGroup>(0, 2);
  EXPECT_EQ(pg->backend_name(), "fake");
  Tensor x = Tensor::full({2, 3, 4}, 1, DType::kFloat32);
  pg->all_reduce(x, ReduceOp::kSum)->wait();
  EXPECT_EQ(x.sizes(), (Shape{2, 3, 4}));
  Tensor g = Tensor::zeros({4, 3, 4}, DType::kFloat32);
  pg->all_gather_into_tensor(g, x)->wait();
  EXPECT_TRUE(all_equal(g, 1));
  Tensor rs = Tensor::zeros({1, 3, 4}, DType::kFloat32);
  pg->reduce_scatter_tensor(rs, x, ReduceOp::kSum)->wait();
  EXPECT_EQ(rs.sizes(), (Shape{1, 3, 4}));
  Tensor a = Tensor::zeros({3, 2}, DType::kFloat32);
  pg->all_to_all_single(a, Tensor::full({5, 2}, 1, DType::kFloat32), {1, 2}, {2, 3})->wait();
  EXPECT_EQ(a.sizes(), (Shape{3, 2}));
  pg->barrier()->wait();
  auto sub = pg->new_subgroup({0}, "fake-sub");
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->size(), 1);
}

TEST(Registry, NamesAliasesAndUnknownGroups) {
  auto& reg = GroupRegistry::instance();
  auto a = std::make_shared<FakeProcessGroup>(0, 2);
  auto b = std::make_shared<FakeProcessGroup>(1, 2);
  reg.register_group("reg-test-a", a);
  reg.register_group("reg-test-a", a);  // same group again: fine
  reg.alias("reg-test-alias", "reg-test-a");
  EXPECT_EQ(reg.resolve("reg-test-alias"), a);
  EXPECT_EQ(a->name(), "reg-test-a");
  EXPECT_TRUE(throws_error([&] { reg.register_group("reg-test-a", b); },
                           {"'reg-test-a' is already registered for another group"}));
  EXPECT_TRUE(throws_error([&] { reg.resolve("reg-test-zzz"); },
                           {"unknown process group 'reg-test-zzz'", "'reg-test-a'"}));
  // A group registered on this thread resolves on another (§2.6).
  auto other = std::async(std::launch::async, [&] { return reg.resolve("reg-test-alias"); });
  EXPECT_EQ(other.get(), a);
  EXPECT_TRUE(reg.unregister("reg-test-alias"));
  EXPECT_TRUE(reg.unregister("reg-test-a"));
  EXPECT_EQ(reg.find("reg-test-a"), nullptr);
}

TEST(Registry, WorkRegistryKeyedByStorage) {
  auto& works = WorkRegistry::instance();
  const size_t before = works.size();
  auto pg = std::make_shared<FakeProcessGroup>(0, 1);
  Tensor base = Tensor::zeros({4, 4}, DType::kFloat32);
  Tensor view = base.slice(0, 0, 2);
  works.register_work(view, pg->barrier());
  EXPECT_TRUE(works.has_pending(base));  // same storage
  EXPECT_EQ(works.size(), before + 1);
  functional::wait_tensor(base);
  EXPECT_FALSE(works.has_pending(view));
  EXPECT_EQ(works.size(), before);
}

}  // namespace
}  // namespace anvil::dist::test
