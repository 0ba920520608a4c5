// Compile cache size limit and pruning (codegen/cache.h): LRU order by mtime, the kept entry,
// recently used entries, writers' temporaries, the prune lock, hits refreshing mtime, automatic
// pruning after cached_package_for (ANVIL_CACHE_MAX_MB), and `anvil cache info|prune|clear`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cache.h"
#include "common/check.h"
#include "core/error.h"
#include "driver/compile.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kHour = 3600;

/// Seconds since the epoch, now.
int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Sets a file's (or folder's) mtime to `seconds` since the epoch.
void set_mtime(const fs::path& p, int64_t seconds) {
  struct timespec ts[2] = {{static_cast<time_t>(seconds), 0}, {static_cast<time_t>(seconds), 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, 0), 0) << p;
}

int64_t mtime_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return static_cast<int64_t>(st.st_mtim.tv_sec);
}

/// Writes `bytes` bytes at `p` (parents created) with mtime `mtime_s`.
void make_file(const fs::path& p, int64_t bytes, int64_t mtime_s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << std::string(static_cast<size_t>(bytes), 'x');
  set_mtime(p, mtime_s);
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing: " << (part) << "\nin:\n" << (text)

class CachePrune : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("anvil_cache_prune_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    cache_ = dir_ / "cache";
    fs::create_directories(cache_);
  }
  void TearDown() override {
    ::unsetenv("ANVIL_CACHE_MAX_MB");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  /// Ten 1000-byte entries of every kind, entry i last used i hours after a day ago.
  std::vector<fs::path> fill_ten() {
    std::vector<fs::path> paths;
    const int64_t base = now_s() - 24 * kHour;
    for (int i = 0; i < 10; ++i) {
      const std::string n = std::to_string(i);
      const fs::path p = i % 3 == 0   ? cache_ / "packages" / ("m" + n + ".anvil")
                         : i % 3 == 1 ? cache_ / "obj" / "a1" / ("k" + n + ".o")
                                      : cache_ / "so" / ("k" + n + ".so");
      make_file(p, 1000, base + i * kHour);
      paths.push_back(p);
    }
    return paths;
  }

  /// Runs the CLI with `env` assignments and already-quoted `args`.
  int cli(const std::string& env, const std::string& args, std::string* out, std::string* err) {
    const fs::path o = dir_ / "stdout.txt", e = dir_ / "stderr.txt";
    const std::string cmd = "env " + env + " " + sh_quote(ANVIL_CLI) + " " + args + " >" +
                            sh_quote(o.string()) + " 2>" + sh_quote(e.string()) + " </dev/null";
    const int status = std::system(cmd.c_str());
    *out = slurp(o);
    *err = slurp(e);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  fs::path dir_, cache_;
};

TEST_F(CachePrune, UsageCountsEveryKind) {
  fill_ten();
  make_file(cache_ / "probe" / "p.txt", 7, now_s());
  make_file(cache_ / "packages" / "m.anvil.tmp-1-0", 50, now_s());
  make_file(cache_ / "build" / "b-abc123" / "kernels_0.cpp", 30, now_s());
  make_file(cache_ / "elsewhere" / "big.bin", 100000, now_s());  // not anvil's: not counted
  const codegen::CacheUsage u = codegen::cache_usage(cache_.string());
  EXPECT_EQ(u.packages, 4);  // i = 0, 3, 6, 9
  EXPECT_EQ(u.package_bytes, 4000);
  EXPECT_EQ(u.objects, 3);
  EXPECT_EQ(u.object_bytes, 3000);
  EXPECT_EQ(u.libraries, 3);
  EXPECT_EQ(u.library_bytes, 3000);
  EXPECT_EQ(u.probes, 1);
  EXPECT_EQ(u.temp_files, 2);
  EXPECT_EQ(u.temp_bytes, 80);
  EXPECT_EQ(u.total_bytes, 10000 + 7 + 80);
  EXPECT_EQ(codegen::cache_usage((dir_ / "missing").string()).total_bytes, 0);
}

TEST_F(CachePrune, RemovesExactlyTheLeastRecentlyUsed) {
  const std::vector<fs::path> p = fill_ten();
  // 10000 bytes over a 6500 limit: down to 90% (5850) takes the five oldest.
  const codegen::PruneResult r = codegen::prune_cache(cache_.string(), 6500);
  EXPECT_FALSE(r.skipped);
  EXPECT_EQ(r.bytes_before, 10000);
  EXPECT_EQ(r.removed_files, 5);
  EXPECT_EQ(r.removed_bytes, 5000);
  EXPECT_EQ(r.bytes_after, 5000);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(fs::exists(p[i]), i >= 5) << p[i];
  EXPECT_EQ(codegen::cache_usage(cache_.string()).total_bytes, 5000);
  // Under the limit now: a second prune removes nothing.
  EXPECT_EQ(codegen::prune_cache(cache_.string(), 6500).removed_files, 0);
}

TEST_F(CachePrune, KeepsTheEntryJustWrittenAndRecentlyUsedOnes) {
  const std::vector<fs::path> p = fill_ten();
  set_mtime(p[1], now_s() - 60);  // used a minute ago: in use by another process
  // keep_path is the oldest entry (as if just written with an old mtime), spelled with "./".
  const std::string keep = (cache_ / "." / "packages" / "m0.anvil").string();
  const codegen::PruneResult r = codegen::prune_cache(cache_.string(), 6500, keep);
  EXPECT_EQ(r.removed_files, 5);
  const std::vector<bool> want = {true, true, false, false, false, false, false, true, true, true};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(fs::exists(p[i]), want[i]) << p[i];
  // Everything recent: over the limit but nothing may go.
  for (const auto& f : p)
    if (fs::exists(f)) set_mtime(f, now_s());
  const codegen::PruneResult none = codegen::prune_cache(cache_.string(), 1000);
  EXPECT_EQ(none.removed_files, 0);
  EXPECT_EQ(none.bytes_after, 5000);
  // Without the recent-use protection (what `anvil cache prune` does) the limit holds.
  const codegen::PruneResult forced = codegen::prune_cache(cache_.string(), 1000, "", 0);
  EXPECT_LE(forced.bytes_after, 900);
  EXPECT_EQ(codegen::cache_usage(cache_.string()).total_bytes, 0);
}

TEST_F(CachePrune, HitRefreshesMtimeSoTheEntrySurvives) {
  const std::vector<fs::path> p = fill_ten();
  EXPECT_TRUE(codegen::touch_cache_entry(p[0].string()));  // the oldest is used again
  EXPECT_GE(mtime_of(p[0]), now_s() - 5);
  EXPECT_FALSE(codegen::touch_cache_entry((cache_ / "packages" / "none.anvil").string()));
  EXPECT_FALSE(codegen::touch_cache_entry((cache_ / "packages").string()));  // a folder
  codegen::prune_cache(cache_.string(), 6500);
  EXPECT_TRUE(fs::exists(p[0]));
  for (int i = 1; i <= 5; ++i) EXPECT_FALSE(fs::exists(p[i])) << p[i];
  for (int i = 6; i < 10; ++i) EXPECT_TRUE(fs::exists(p[i])) << p[i];
}

TEST_F(CachePrune, WritersTemporariesSurviveUntilStale) {
  const int64_t now = now_s();
  const fs::path young_pkg = cache_ / "packages" / "m.anvil.tmp-4242-0";
  const fs::path young_obj = cache_ / "obj" / "ab" / "k.o.tmp.4242.1";
  const fs::path old_obj = cache_ / "obj" / "ab" / "j.o.tmp.4242.0";
  const fs::path young_build = cache_ / "build" / "b-young1";
  const fs::path old_build = cache_ / "build" / "b-old123";
  make_file(young_pkg, 5000, now - 30 * 60);  // a writer 30 minutes in
  make_file(young_obj, 5000, now);
  make_file(old_obj, 5000, now - 2 * kHour);  // a crashed writer's leftover
  make_file(young_build / "kernels_0.cpp", 100, now);
  make_file(old_build / "kernels_0.cpp", 100, now - 3 * kHour);
  set_mtime(old_build, now - 3 * kHour);
  make_file(cache_ / "so" / "old.so", 1000, now - 48 * kHour);
  const codegen::PruneResult r = codegen::prune_cache(cache_.string(), 1000);
  EXPECT_TRUE(fs::exists(young_pkg));
  EXPECT_TRUE(fs::exists(young_obj));
  EXPECT_TRUE(fs::exists(young_build / "kernels_0.cpp"));
  EXPECT_FALSE(fs::exists(old_obj));
  EXPECT_FALSE(fs::exists(old_build));
  EXPECT_FALSE(fs::exists(cache_ / "so" / "old.so"));
  EXPECT_EQ(r.removed_files, 3);
  EXPECT_EQ(r.removed_bytes, 5000 + 100 + 1000);
  // clear keeps a running writer's files too.
  codegen::clear_cache(cache_.string());
  EXPECT_TRUE(fs::exists(young_pkg));
  EXPECT_TRUE(fs::exists(young_obj));
}

TEST_F(CachePrune, OneProcessPrunesAtATime) {
  const std::vector<fs::path> p = fill_ten();
  const int fd = ::open((cache_ / ".prune.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // another pruner holds the lock
  const codegen::PruneResult r = codegen::prune_cache(cache_.string(), 6500);
  EXPECT_TRUE(r.skipped);
  for (const auto& f : p) EXPECT_TRUE(fs::exists(f)) << f;
  ::close(fd);
  EXPECT_EQ(codegen::prune_cache(cache_.string(), 6500).removed_files, 5);
}

TEST_F(CachePrune, MaxMbFromEnvironment) {
  ::unsetenv("ANVIL_CACHE_MAX_MB");
  EXPECT_EQ(codegen::cache_max_bytes(), int64_t{2048} << 20);
  ::setenv("ANVIL_CACHE_MAX_MB", "3", 1);
  EXPECT_EQ(codegen::cache_max_bytes(), int64_t{3} << 20);
  ::setenv("ANVIL_CACHE_MAX_MB", "0", 1);
  EXPECT_EQ(codegen::cache_max_bytes(), 0);
  for (const char* bad : {"-1", "1.5", "12MB", "99999999999999"}) {
    ::setenv("ANVIL_CACHE_MAX_MB", bad, 1);
    ANVIL_EXPECT_ERROR(codegen::cache_max_bytes(), "ANVIL_CACHE_MAX_MB is not a cache size") << bad;
  }
}

TEST_F(CachePrune, CachedPackageForTouchesOnHitAndPrunesAfterInsert) {
  driver::CompileOptions o;
  o.cache_dir = cache_.string();
  o.progress = codegen::ProgressMode::kQuiet;
  o.num_translation_units = 1;
  const std::string pt2 = std::string(ANVIL_FIXTURES_DIR) + "/const_and_buffer.pt2";
  // An old 2 MiB package of another model, over a 1 MiB limit.
  const fs::path stale = cache_ / "packages" / "old-model.anvil";
  make_file(stale, 2 << 20, now_s() - 48 * kHour);
  ::setenv("ANVIL_CACHE_MAX_MB", "1", 1);
  const std::string pkg = driver::cached_package_for(pt2, o);
  EXPECT_TRUE(fs::is_regular_file(pkg));
  EXPECT_FALSE(fs::exists(stale));  // pruned after the insert
  EXPECT_LE(codegen::cache_usage(cache_.string()).total_bytes, int64_t{1} << 20);
  // A hit marks the package used.
  set_mtime(pkg, now_s() - 48 * kHour);
  driver::CompileReport r;
  EXPECT_EQ(driver::cached_package_for(pt2, o, &r), pkg);
  EXPECT_TRUE(r.cache_hit);
  EXPECT_GE(mtime_of(pkg), now_s() - 60);
}

TEST_F(CachePrune, CliInfoPruneClear) {
  const int64_t now = now_s();
  make_file(cache_ / "packages" / "a.anvil", 600000, now - 30 * kHour);
  make_file(cache_ / "obj" / "0f" / "b.o", 600000, now - 20 * kHour);
  make_file(cache_ / "so" / "c.so", 600000, now - 10 * kHour);
  make_file(cache_ / "packages" / "d.anvil.tmp-99-0", 1000, now);  // a running writer's
  const std::string env = "ANVIL_CACHE_DIR=" + sh_quote(cache_.string()) + " ANVIL_CACHE_MAX_MB=3";
  std::string out, err;
  ASSERT_EQ(cli(env, "cache info", &out, &err), 0) << err;
  EXPECT_HAS(out, "cache:     " + cache_.string());
  EXPECT_HAS(out, "size:      1.72 MiB (1801000 bytes)");
  EXPECT_HAS(out, "limit:     3.00 MiB (3145728 bytes)");
  EXPECT_HAS(out, "packages:  1 (585.9 KiB (600000 bytes))");
  EXPECT_HAS(out, "objects:   1 (585.9 KiB (600000 bytes))");
  EXPECT_HAS(out, "libraries: 1 (585.9 KiB (600000 bytes))");
  EXPECT_HAS(out, "temporary: 1 (1000 bytes)");

  // Under the 3 MiB limit: nothing to do. Over 1 MiB: the two oldest go (to <= 943718 bytes).
  ASSERT_EQ(cli(env, "cache prune", &out, &err), 0) << err;
  EXPECT_HAS(out, "removed 0 entries");
  ASSERT_EQ(cli(env, "cache prune --max-mb 1", &out, &err), 0) << err;
  EXPECT_HAS(out, "removed 2 entries (1.14 MiB (1200000 bytes)), 586.9 KiB (601000 bytes) left");
  EXPECT_HAS(out, "(limit 1.00 MiB (1048576 bytes))");
  EXPECT_FALSE(fs::exists(cache_ / "packages" / "a.anvil"));
  EXPECT_FALSE(fs::exists(cache_ / "obj" / "0f" / "b.o"));
  EXPECT_TRUE(fs::exists(cache_ / "so" / "c.so"));

  // --cache-dir overrides $ANVIL_CACHE_DIR.
  ASSERT_EQ(cli("", "cache clear --cache-dir " + sh_quote(cache_.string()), &out, &err), 0) << err;
  EXPECT_HAS(out, "removed 1 entries");
  EXPECT_FALSE(fs::exists(cache_ / "so" / "c.so"));
  EXPECT_TRUE(fs::exists(cache_ / "packages" / "d.anvil.tmp-99-0"));
  ASSERT_EQ(cli(env, "cache info", &out, &err), 0) << err;
  EXPECT_HAS(out, "packages:  0 (0 bytes)");
  EXPECT_HAS(out, "size:      1000 bytes");

  // Mistakes: usage errors exit 2, a bad limit exits 1, each with one clear line.
  EXPECT_EQ(cli(env, "cache bogus", &out, &err), 2);
  EXPECT_HAS(err, "unknown cache action 'bogus'");
  EXPECT_EQ(cli(env, "cache info --max-mb 1", &out, &err), 2);
  EXPECT_EQ(cli(env, "cache prune --max-mb -3", &out, &err), 2);
  EXPECT_EQ(cli(env, "cache", &out, &err), 2);
  EXPECT_EQ(cli("ANVIL_CACHE_DIR=" + sh_quote(cache_.string()) + " ANVIL_CACHE_MAX_MB=lots",
                "cache info", &out, &err),
            1);
  EXPECT_HAS(err, "ANVIL_CACHE_MAX_MB");
  ASSERT_EQ(cli(env, "cache --help", &out, &err), 0) << err;
  EXPECT_HAS(out, "info|prune|clear");
}

}  // namespace
}  // namespace anvil
