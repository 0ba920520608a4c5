// The gloo backend's chain broadcast (src/dist/gloo/gloo_broadcast.cpp) against exact values:
// sizes just below, at and above the chain threshold, sizes that are not a multiple of the
// chunk, every root, several dtypes and a non-contiguous tensor, with W = 2, 3 and 4; the
// default settings with a multi-chunk message; bad settings are a clear error.
#ifdef ANVIL_HAVE_GLOO
#include <cstring>

#include "dist/gloo/gloo_process_group.h"
#include "dist/world.h"
#include "dist_check.h"
#include "dist_harness.h"

namespace anvil::dist::test {
namespace {

/// Byte i of a message from `root` (distinct per root and position, never the fill value 0xEE).
uint8_t pattern(int root, int64_t i) { return static_cast<uint8_t>((i * 31 + root * 7) % 251); }

/// Broadcasts a u8 tensor of `nbytes` from every root; non-roots start at 0xEE. Expects every
/// byte of the root's pattern on every rank.
void check_bytes(WorkerCtx& ctx, int64_t nbytes) {
  for (int root = 0; root < ctx.world; ++root) {
    Tensor x = Tensor::empty({nbytes}, DType::kUInt8);
    auto* p = static_cast<uint8_t*>(x.data_ptr());
    for (int64_t i = 0; i < nbytes; ++i) p[i] = ctx.rank == root ? pattern(root, i) : 0xEE;
    ctx.pg->broadcast(x, root)->wait();
    int64_t bad = -1;
    for (int64_t i = 0; i < nbytes && bad < 0; ++i)
      if (p[i] != pattern(root, i)) bad = i;
    EXPECT_EQ(bad, -1) << nbytes << " bytes from root " << root << ": byte " << bad << " is "
                       << (bad >= 0 ? int(p[bad]) : 0) << ", expected "
                       << (bad >= 0 ? int(pattern(root, bad)) : 0);
  }
}

// Run with ANVIL_GLOO_BCAST_CHAIN_MIN=4096 and ANVIL_GLOO_BCAST_CHUNK=1000.
DIST_WORKER(gloo_bcast_chain) {
  const int W = ctx.world, r = ctx.rank;
  // Below (gloo's broadcast), at and above the threshold (the chain); 4096 and 10001 are not
  // multiples of the 1000-byte chunk, 10000 is; 1 and 999 are under one chunk.
  for (int64_t n : {1, 999, 4095, 4096, 4097, 10000, 10001, 65537}) check_bytes(ctx, n);
  // Several dtypes from every root, values exact in each (f64 1001 x 8 B: 9 chunks of 1000).
  for (DType dt : {DType::kFloat64, DType::kFloat32, DType::kBFloat16, DType::kFloat16,
                   DType::kInt64, DType::kInt32, DType::kInt8}) {
    for (int root = 0; root < W; ++root) {
      Tensor x = Tensor::full({1001}, r == root ? 3 + root : -1, dt);
      ctx.pg->broadcast(x, root)->wait();
      EXPECT_TRUE(all_equal(x, 3 + root)) << dtype_name(dt) << " root " << root;
    }
  }
  // A non-contiguous view (a transposed f32 [40, 30] of 4800 bytes) from the last rank: the
  // base's memory gets the root's values in the base's layout.
  std::vector<float> vals;
  for (int i = 0; i < 1200; ++i) vals.push_back(static_cast<float>(r == W - 1 ? i : -7));
  Tensor base = Tensor::from_vector(vals, {30, 40});
  Tensor t = base.transpose(0, 1);
  ASSERT_FALSE(t.is_contiguous());
  ctx.pg->broadcast(t, W - 1)->wait();
  std::vector<double> want;
  for (int i = 0; i < 1200; ++i) want.push_back(i);
  EXPECT_TRUE(values_equal(base, want));
  // Back-to-back broadcasts from different roots, waited together: they run in order.
  Tensor a = Tensor::full({3000}, r == 0 ? 11 : 0, DType::kInt32);
  Tensor b = Tensor::full({3000}, r == W - 1 ? 22 : 0, DType::kInt32);
  auto wa = ctx.pg->broadcast(a, 0);
  auto wb = ctx.pg->broadcast(b, W - 1);
  wa->wait();
  wb->wait();
  EXPECT_TRUE(all_equal(a, 11));
  EXPECT_TRUE(all_equal(b, 22));
}

// Default settings: 3 MiB + 5 bytes crosses three 1 MiB chunks and a 5-byte tail; 8 bytes
// is a single short message.
DIST_WORKER(gloo_bcast_default) {
  check_bytes(ctx, 8);
  check_bytes(ctx, 3 * kGlooChainBroadcastChunk + 5);
}

// A bad setting fails the group's creation with the variable and the expected form.
DIST_WORKER_NOINIT(gloo_bcast_bad_chunk) {
  EXPECT_TRUE(throws_error([&] { init_world_from_env("gloo"); },
                           {"bad ANVIL_GLOO_BCAST_CHUNK", "an integer byte count >= 1", "0"}));
}

class GlooBroadcast : public ::testing::TestWithParam<DistParam> {};

TEST_P(GlooBroadcast, ChainAroundTheThresholdEveryRootAndChunking) {
  JobOptions o;
  o.env["ANVIL_GLOO_BCAST_CHAIN_MIN"] = "4096";
  o.env["ANVIL_GLOO_BCAST_CHUNK"] = "1000";
  EXPECT_DIST_JOB_OK("gloo_bcast_chain", o);
}
TEST_P(GlooBroadcast, ChainOffUsesGlooBroadcast) {
  JobOptions o;
  o.env["ANVIL_GLOO_BCAST_CHAIN_MIN"] = "off";
  EXPECT_DIST_JOB_OK("gloo_bcast_default", o);
}
TEST_P(GlooBroadcast, DefaultSettingsMultiChunk) { EXPECT_DIST_JOB_OK("gloo_bcast_default"); }
// One rank: with several, rank 0 fails first and takes the store down before the others see
// the setting.
TEST(GlooBroadcastSettings, BadChunkSettingIsAClearError) {
  JobOptions o;
  o.env["ANVIL_GLOO_BCAST_CHUNK"] = "0";
  const auto r = run_job("gloo", 1, "gloo_bcast_bad_chunk", o);
  EXPECT_TRUE(r.ok()) << r.all_output();
}

std::vector<DistParam> gloo_params() { return {{"gloo", 2}, {"gloo", 3}, {"gloo", 4}}; }
INSTANTIATE_TEST_SUITE_P(Dist, GlooBroadcast, ::testing::ValuesIn(gloo_params()), param_name);

}  // namespace
}  // namespace anvil::dist::test
#endif  // ANVIL_HAVE_GLOO
