// Group naming and threading: spec/collectives.md §4 cases 23, 24, 26 (eager part) and 27, plus
// sub-groups by rank list and two threads driving two groups at once; gloo and mpi, 2-4 ranks.
#include <future>
#include <thread>

#include "dist/functional.h"
#include "dist/registry.h"
#include "dist/world.h"
#include "dist_check.h"
#include "dist_harness.h"

namespace anvil::dist::test {
namespace {

namespace F = ::anvil::dist::functional;

// §4.23: the world registered as "default" and automatically named "0": both names resolve to
// the world group and give identical results.
DIST_WORKER(case23) {
  GroupRegistry::instance().alias("default", "0");
  EXPECT_EQ(GroupRegistry::instance().resolve("default"), GroupRegistry::instance().resolve("0"));
  EXPECT_EQ(GroupRegistry::instance().resolve("0"), ctx.pg);
  Tensor x = Tensor::full({5}, ctx.rank + 1, DType::kFloat32);
  Tensor a = F::wait_tensor(F::all_reduce(x, ReduceOp::kSum, "0"));
  Tensor b = F::wait_tensor(F::all_reduce(x, ReduceOp::kSum, "default"));
  EXPECT_TRUE(values_equal(a, b.to_doubles()));
  EXPECT_TRUE(all_equal(a, ctx.world * (ctx.world + 1) / 2.0));
  // A name already naming the world cannot be taken by another group.
  auto other = new_group([&] {
    std::vector<int> all;
    for (int i = 0; i < ctx.world; ++i) all.push_back(i);
    return all;
  }());
  EXPECT_TRUE(throws_error([&] { GroupRegistry::instance().register_group("default", other); },
                           {"'default' is already registered"}));
}

// §4.24: the legacy (tag "", ranks [0..W-1], group_size W) form resolves to "0" and its
// all_reduce sum equals the native one.
DIST_WORKER(case24) {
  std::vector<int64_t> ranks;
  for (int i = 0; i < ctx.world; ++i) ranks.push_back(i);
  const std::string name = F::legacy_group_name("", ranks, ctx.world);
  EXPECT_EQ(name, "0");
  Tensor x = Tensor::full({3, 2}, ctx.rank * 2 + 1, DType::kFloat32);
  Tensor legacy = F::wait_tensor(F::all_reduce(x, ReduceOp::kSum, name));
  Tensor native = F::wait_tensor(F::all_reduce(x, ReduceOp::kSum, "0"));
  EXPECT_TRUE(values_equal(legacy, native.to_doubles()));
  EXPECT_TRUE(all_equal(legacy, static_cast<double>(ctx.world) * ctx.world));
  EXPECT_TRUE(throws_error([&] { F::legacy_group_name("", ranks, ctx.world + 1); },
                           {"group_size does not match"}));
  EXPECT_TRUE(throws_error([&] { F::legacy_group_name("", {0}, 1); },
                           {"no registered process group has exactly these ranks"}));
  // The name compiled graphs carry for a legacy group (the importer cannot resolve it) names
  // the same group at run time; an unmatched one says which ranks it wanted.
  const std::string compiled = GroupRegistry::legacy_name("", ranks, ctx.world);
  EXPECT_EQ(GroupRegistry::instance().resolve(compiled), GroupRegistry::instance().resolve("0"));
  Tensor via_compiled = F::wait_tensor(F::all_reduce(x, ReduceOp::kSum, compiled));
  EXPECT_TRUE(values_equal(via_compiled, native.to_doubles()));
  EXPECT_EQ(GroupRegistry::instance().find(GroupRegistry::legacy_name("", {0}, 1)), nullptr);
  EXPECT_TRUE(throws_error(
      [&] { GroupRegistry::instance().resolve(GroupRegistry::legacy_name("", {0}, 1)); },
      {"no registered process group has exactly these ranks", "ranks [0]"}));
  EXPECT_TRUE(throws_error(
      [&] { GroupRegistry::instance().resolve(GroupRegistry::legacy_name("blue", ranks, ctx.world)); },
      {"unknown group tag 'blue'"}));
}

// §4.26: the main thread registered the group; a second thread runs eager functional
// collectives on it, and an exception raised there reaches the joiner.
DIST_WORKER(case26) {
  auto fut = std::async(std::launch::async, [&] {
    Tensor y = F::wait_tensor(
        F::all_reduce(Tensor::full({4}, ctx.rank, DType::kFloat32), ReduceOp::kMax, "0"));
    EXPECT_TRUE(all_equal(y, ctx.world - 1));
    F::all_reduce(y, ReduceOp::kSum, "no-such-group");  // throws
  });
  EXPECT_TRUE(throws_error([&] { fut.get(); }, {"unknown process group 'no-such-group'"}));
}

// §4.27: an unknown group name -> a clear error naming the group, no hang.
DIST_WORKER(case27) {
  Tensor x = Tensor::full({4}, 1, DType::kFloat32);
  EXPECT_TRUE(throws_error([&] { F::all_reduce(x, ReduceOp::kSum, "missing"); },
                           {"unknown process group 'missing'", "'0'"}));
  EXPECT_TRUE(throws_error([&] { F::all_gather_into_tensor(x, ctx.world, "tp"); },
                           {"unknown process group 'tp'"}));
  EXPECT_TRUE(throws_error([&] { F::broadcast(x, 0, ""); }, {"unknown process group ''"}));
  EXPECT_EQ(WorkRegistry::instance().size(), 0u);
}

// Sub-groups by rank list: evens and odds, each registered under its creation-order name.
DIST_WORKER(subgroups) {
  std::vector<int> evens, odds;
  for (int i = 0; i < ctx.world; ++i) (i % 2 ? odds : evens).push_back(i);
  auto ge = new_group(evens);  // "1" on every rank, null where not a member
  auto go = new_group(odds);   // "2"
  const bool even = ctx.rank % 2 == 0;
  auto mine = even ? ge : go;
  ASSERT_TRUE(mine);
  EXPECT_FALSE(even ? go : ge);
  EXPECT_EQ(mine->name(), even ? "1" : "2");
  EXPECT_EQ(mine->global_ranks(), even ? evens : odds);
  EXPECT_EQ(mine->rank(), ctx.rank / 2);
  Tensor y = F::wait_tensor(
      F::all_reduce(Tensor::full({3}, ctx.rank, DType::kInt64), ReduceOp::kSum, even ? "1" : "2"));
  double want = 0;
  for (int i : even ? evens : odds) want += i;
  EXPECT_TRUE(all_equal(y, want));
  std::vector<int64_t> ranks(mine->global_ranks().begin(), mine->global_ranks().end());
  EXPECT_EQ(F::legacy_group_name("", ranks, static_cast<int64_t>(ranks.size())), even ? "1" : "2");
  EXPECT_EQ(GroupRegistry::instance().resolve(GroupRegistry::legacy_name(
                "", ranks, static_cast<int64_t>(ranks.size()))),
            mine);
  // Rank lists must be sorted and inside the world.
  EXPECT_TRUE(throws_error([&] { ctx.pg->new_subgroup({1, 0}, "bad"); }, {"strictly increasing"}));
  EXPECT_TRUE(throws_error(
      [&] {
        ctx.pg->new_subgroup({0, ctx.world}, "bad");
      },
      {"outside the group"}));
}

// Two threads issue collectives on two groups (the world and a second group over all ranks)
// at the same time; every result is right.
DIST_WORKER(two_threads) {
  std::vector<int> all;
  for (int i = 0; i < ctx.world; ++i) all.push_back(i);
  auto second = new_group(all);  // "1"
  ASSERT_TRUE(second);
  const int W = ctx.world, r = ctx.rank;
  auto run = [&](const std::string& group, int base) {
    for (int it = 0; it < 30; ++it) {
      Tensor x = Tensor::full({64}, base + r + it, DType::kFloat32);
      Tensor y = F::wait_tensor(F::all_reduce(x, ReduceOp::kSum, group));
      const double want = W * (base + it) + W * (W - 1) / 2.0;
      if (!all_equal(y, want)) return false;
      Tensor g = F::wait_tensor(F::all_gather_into_tensor(x, W, group));
      for (int j = 0; j < W; ++j)
        if (!all_equal(g.slice(0, 64 * j, 64 * j + 64), base + j + it)) return false;
    }
    return true;
  };
  auto a = std::async(std::launch::async, run, "0", 0);
  auto b = std::async(std::launch::async, run, "1", 1000);
  EXPECT_TRUE(a.get());
  EXPECT_TRUE(b.get());
}

class Groups : public ::testing::TestWithParam<DistParam> {};

TEST_P(Groups, Case23_DefaultAliasOfWorld) { EXPECT_DIST_JOB_OK("case23"); }
TEST_P(Groups, Case24_LegacyRanksFormResolves) { EXPECT_DIST_JOB_OK("case24"); }
TEST_P(Groups, Case26_SecondThreadUsesMainThreadGroup) { EXPECT_DIST_JOB_OK("case26"); }
TEST_P(Groups, Case27_UnknownGroupNamed) { EXPECT_DIST_JOB_OK("case27"); }
TEST_P(Groups, SubgroupsByRankList) { EXPECT_DIST_JOB_OK("subgroups"); }
TEST_P(Groups, TwoThreadsTwoGroupsConcurrently) { EXPECT_DIST_JOB_OK("two_threads"); }

INSTANTIATE_TEST_SUITE_P(Dist, Groups, ::testing::ValuesIn(all_params()), param_name);

}  // namespace
}  // namespace anvil::dist::test
