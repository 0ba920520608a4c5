// Size limit and pruning of anvil's compile cache (ccache-style): the object files, linked
// libraries and packages under the cache folder (codegen::default_cache_dir()).
//
//   <dir>/obj/XX/<key>.o        object files (toolchain)
//   <dir>/so/<key>.so           linked libraries (toolchain)
//   <dir>/packages/<n>.anvil    packages (driver::cached_package_for, `anvil run m.pt2`)
//   <dir>/probe/<key>.txt       compiler probes (tiny; counted, never pruned)
//   <dir>/build/b-XXXXXX/       sources kept after a failed compile (removed after an hour)
//
// Every insert calls prune_after_insert(): when the folder holds more than the limit
// ($ANVIL_CACHE_MAX_MB, default 2048; 0: no limit), least-recently-used entries (by mtime: every
// hit calls touch_cache_entry()) are deleted until it holds at most 90% of the limit. Entries
// used in the last kRecentUse seconds, the entry just written and unfinished temporary files
// ("*.tmp-*", "*.tmp.*" younger than an hour) are never deleted, so processes sharing the cache
// do not delete what another is about to link or load. Writers rename complete files into
// place, so a reader sees an entry whole or not at all; every deletion tolerates ENOENT races,
// and one process prunes at a time (a non-blocking flock on <dir>/.prune.lock; the others skip).
// Only the folders above are ever looked at, so a mistaken ANVIL_CACHE_DIR (say $HOME) loses
// nothing but anvil's own files.
#pragma once

#include <cstdint>
#include <string>

namespace anvil::codegen {

/// Entries used more recently than this are kept by automatic pruning (seconds): a concurrent
/// build links objects it found (and touched) minutes earlier, a caller loads its package.
constexpr int64_t kRecentUseSeconds = 15 * 60;
/// Temporary files and build folders younger than this belong to a writer still at work.
constexpr int64_t kStaleTempSeconds = 60 * 60;
/// Default size limit in MiB when $ANVIL_CACHE_MAX_MB is unset.
constexpr int64_t kDefaultCacheMaxMb = 2048;

/// What the cache folder holds (sizes are file sizes in bytes).
struct CacheUsage {
  std::string dir;
  int64_t total_bytes = 0;  // everything below, temporaries and probes included
  int64_t packages = 0, package_bytes = 0;
  int64_t objects = 0, object_bytes = 0;
  int64_t libraries = 0, library_bytes = 0;
  int64_t probes = 0, probe_bytes = 0;
  int64_t temp_files = 0, temp_bytes = 0;  // temporaries of writers and kept build folders
};

/// What prune_cache() / clear_cache() did.
struct PruneResult {
  bool skipped = false;  // another process was pruning the same folder
  int64_t removed_files = 0, removed_bytes = 0;
  int64_t bytes_before = 0, bytes_after = 0;
};

/// Sizes and counts of the cache folder `dir` (all zero when it does not exist).
CacheUsage cache_usage(const std::string& dir);

/// The size limit in bytes from $ANVIL_CACHE_MAX_MB (default kDefaultCacheMaxMb MiB); 0 means no
/// limit. Throws Error when the variable is not a non-negative integer.
int64_t cache_max_bytes();

/// When `dir` holds more than `max_bytes` (> 0), deletes least-recently-used packages, objects and
/// libraries until it holds at most 90% of `max_bytes`, never `keep_path` nor entries used in the
/// last `keep_recent_s` seconds. Always removes temporaries and build folders older than
/// kStaleTempSeconds. Returns what it removed; skipped when another process holds the lock.
PruneResult prune_cache(const std::string& dir, int64_t max_bytes,
                        const std::string& keep_path = "",
                        int64_t keep_recent_s = kRecentUseSeconds);

/// Deletes every package, object and library under `dir`, and temporaries older than
/// kStaleTempSeconds (a concurrent writer keeps its unfinished files). Waits for the lock.
PruneResult clear_cache(const std::string& dir);

/// Marks a cache entry as used now (sets its mtime). Returns true when `path` is a regular file,
/// i.e. on a cache hit; false when it does not exist. A read-only cache is still a hit.
bool touch_cache_entry(const std::string& path);

/// After an insert of `keep_path` into `dir`: prune_cache(dir, cache_max_bytes(), keep_path).
/// Filesystem failures are swallowed (a prune never fails a compile); a malformed
/// $ANVIL_CACHE_MAX_MB throws Error.
void prune_after_insert(const std::string& dir, const std::string& keep_path);

}  // namespace anvil::codegen
