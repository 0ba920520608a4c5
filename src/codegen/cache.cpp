#include "codegen/cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <utility>
#include <vector>

#include "core/error.h"

namespace anvil::codegen {

namespace fs = std::filesystem;

namespace {

/// What a file or folder under the cache is.
enum class EntryKind { kPackage, kObject, kLibrary, kProbe, kTemp };

/// One complete entry, temporary file or kept build folder.
struct Entry {
  std::string path;
  EntryKind kind = EntryKind::kTemp;
  bool is_dir = false;
  int64_t bytes = 0;
  int64_t mtime_ns = 0;  // nanoseconds since the epoch
};

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

int64_t now_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// A writer's unfinished file: "<entry>.tmp-<pid>-<n>" (driver) or "<entry>.tmp.<pid>..."
/// (toolchain).
bool is_temp_name(const std::string& name) {
  return name.find(".tmp-") != std::string::npos || name.find(".tmp.") != std::string::npos;
}

/// The names in folder `dir` (none when it is missing or vanishes while being read).
std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) names.push_back(it->path().filename().string());
  return names;
}

/// Total size and newest mtime of the files below `dir` (a kept build folder).
void add_tree(const fs::path& dir, Entry& e) {
  for (const std::string& name : list_dir(dir)) {
    const fs::path p = dir / name;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    e.mtime_ns = std::max(e.mtime_ns, mtime_ns(st));
    if (S_ISDIR(st.st_mode))
      add_tree(p, e);
    else if (S_ISREG(st.st_mode))
      e.bytes += static_cast<int64_t>(st.st_size);
  }
}

/// Adds the regular files of `dir` named `*<suffix>` as `kind` and their temporaries.
void scan_files(const fs::path& dir, const std::string& suffix, EntryKind kind,
                std::vector<Entry>& out) {
  for (const std::string& name : list_dir(dir)) {
    const bool temp = is_temp_name(name);
    if (!temp && !ends_with(name, suffix)) continue;
    const fs::path p = dir / name;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // vanished or not ours
    out.push_back({p.string(), temp ? EntryKind::kTemp : kind, false,
                   static_cast<int64_t>(st.st_size), mtime_ns(st)});
  }
}

/// Every entry anvil keeps under the cache folder `dir` (only its own sub-folders are read).
std::vector<Entry> scan(const fs::path& dir) {
  std::vector<Entry> entries;
  scan_files(dir / "packages", ".anvil", EntryKind::kPackage, entries);
  for (const std::string& sub : list_dir(dir / "obj"))
    if (sub.size() == 2) scan_files(dir / "obj" / sub, ".o", EntryKind::kObject, entries);
  scan_files(dir / "so", ".so", EntryKind::kLibrary, entries);
  scan_files(dir / "probe", ".txt", EntryKind::kProbe, entries);
  for (const std::string& name : list_dir(dir / "build")) {
    if (name.rfind("b-", 0) != 0) continue;
    const fs::path p = dir / "build" / name;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    Entry e{p.string(), EntryKind::kTemp, true, 0, mtime_ns(st)};
    add_tree(p, e);
    entries.push_back(e);
  }
  return entries;
}

int64_t total_of(const std::vector<Entry>& entries) {
  int64_t total = 0;
  for (const Entry& e : entries) total += e.bytes;
  return total;
}

/// Deletes an entry; true when it is gone afterwards (also when another process removed it).
bool remove_entry(const Entry& e) {
  if (e.is_dir) {
    std::error_code ec;
    fs::remove_all(e.path, ec);
    return !ec || ec == std::errc::no_such_file_or_directory;
  }
  return ::unlink(e.path.c_str()) == 0 || errno == ENOENT;
}

/// Holds <dir>/.prune.lock (flock) while alive; `held()` false when another process has it.
/// An unwritable folder gets no lock (nothing can be deleted there anyway).
class PruneLock {
 public:
  PruneLock(const fs::path& dir, bool wait) {
    fd_ = ::open((dir / ".prune.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    int rc;
    do {
      rc = ::flock(fd_, LOCK_EX | (wait ? 0 : LOCK_NB));
    } while (rc != 0 && errno == EINTR);
    held_ = rc == 0 || errno != EWOULDBLOCK;
  }
  ~PruneLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the flock
  }
  PruneLock(const PruneLock&) = delete;
  PruneLock& operator=(const PruneLock&) = delete;
  bool held() const { return fd_ < 0 || held_; }

 private:
  int fd_ = -1;
  bool held_ = false;
};

std::string normal_path(const std::string& p) {
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec);
  return (ec ? fs::path(p) : abs).lexically_normal().string();
}

bool is_removable_kind(EntryKind k) {
  return k == EntryKind::kPackage || k == EntryKind::kObject || k == EntryKind::kLibrary;
}

/// Removes temporaries older than kStaleTempSeconds from `entries` (and the disk).
void remove_stale_temps(std::vector<Entry>& entries, int64_t now, PruneResult& r) {
  const int64_t stale_ns = kStaleTempSeconds * 1000000000;
  std::vector<Entry> kept;
  for (Entry& e : entries) {
    if (e.kind == EntryKind::kTemp && now - e.mtime_ns >= stale_ns && remove_entry(e)) {
      ++r.removed_files;
      r.removed_bytes += e.bytes;
      continue;
    }
    kept.push_back(std::move(e));
  }
  entries = std::move(kept);
}

}  // namespace

CacheUsage cache_usage(const std::string& dir) {
  CacheUsage u;
  u.dir = dir;
  for (const Entry& e : scan(dir)) {
    u.total_bytes += e.bytes;
    const std::pair<int64_t*, int64_t*> slot =
        e.kind == EntryKind::kPackage   ? std::pair{&u.packages, &u.package_bytes}
        : e.kind == EntryKind::kObject  ? std::pair{&u.objects, &u.object_bytes}
        : e.kind == EntryKind::kLibrary ? std::pair{&u.libraries, &u.library_bytes}
        : e.kind == EntryKind::kProbe   ? std::pair{&u.probes, &u.probe_bytes}
                                        : std::pair{&u.temp_files, &u.temp_bytes};
    ++*slot.first;
    *slot.second += e.bytes;
  }
  return u;
}

int64_t cache_max_bytes() {
  const char* v = std::getenv("ANVIL_CACHE_MAX_MB");
  if (!v || !*v) return kDefaultCacheMaxMb << 20;
  const std::string s = v;
  const bool digits = s.size() <= 12 &&
                      std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits)
    throw Error("ANVIL_CACHE_MAX_MB is not a cache size", "ANVIL_CACHE_MAX_MB",
                "a whole number of MiB (0: no limit)", "'" + s + "'");
  return std::stoll(s) << 20;
}

PruneResult prune_cache(const std::string& dir, int64_t max_bytes, const std::string& keep_path,
                        int64_t keep_recent_s) {
  PruneResult r;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return r;
  PruneLock lock(dir, /*wait=*/false);
  if (!lock.held()) {
    r.skipped = true;
    return r;
  }
  std::vector<Entry> entries = scan(dir);
  r.bytes_before = total_of(entries);
  const int64_t now = now_ns();
  remove_stale_temps(entries, now, r);
  int64_t total = r.bytes_before - r.removed_bytes;
  if (max_bytes > 0 && total > max_bytes) {
    const int64_t target = max_bytes / 10 * 9 + (max_bytes % 10) * 9 / 10;
    const std::string keep = keep_path.empty() ? "" : normal_path(keep_path);
    const int64_t recent_ns = keep_recent_s * 1000000000;
    std::vector<const Entry*> lru;
    for (const Entry& e : entries)
      if (is_removable_kind(e.kind) && now - e.mtime_ns >= recent_ns &&
          (keep.empty() || normal_path(e.path) != keep))
        lru.push_back(&e);
    std::sort(lru.begin(), lru.end(), [](const Entry* a, const Entry* b) {
      return a->mtime_ns != b->mtime_ns ? a->mtime_ns < b->mtime_ns : a->path < b->path;
    });
    for (const Entry* e : lru) {
      if (total <= target) break;
      // A hit since the scan touched it: it is in use now.
      struct stat st {};
      if (::lstat(e->path.c_str(), &st) == 0 && mtime_ns(st) != e->mtime_ns) continue;
      if (!remove_entry(*e)) continue;
      ++r.removed_files;
      r.removed_bytes += e->bytes;
      total -= e->bytes;
    }
  }
  r.bytes_after = total;
  return r;
}

PruneResult clear_cache(const std::string& dir) {
  PruneResult r;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return r;
  PruneLock lock(dir, /*wait=*/true);
  std::vector<Entry> entries = scan(dir);
  r.bytes_before = total_of(entries);
  remove_stale_temps(entries, now_ns(), r);
  for (const Entry& e : entries) {
    if (!is_removable_kind(e.kind) || !remove_entry(e)) continue;
    ++r.removed_files;
    r.removed_bytes += e.bytes;
  }
  r.bytes_after = r.bytes_before - r.removed_bytes;
  return r;
}

bool touch_cache_entry(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  // A read-only cache (or another owner's file) cannot be touched; it is still a hit.
  (void)::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  return true;
}

void prune_after_insert(const std::string& dir, const std::string& keep_path) {
  const int64_t max_bytes = cache_max_bytes();
  if (max_bytes == 0) return;
  try {
    prune_cache(dir, max_bytes, keep_path);
  } catch (const std::exception&) {
    // The entry is written; a cache that cannot be pruned only costs disk space.
  }
}

}  // namespace anvil::codegen
