// Store base helpers, HashStore, FileStore and PrefixStore.
#include "dist/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"

namespace anvil::dist {

namespace fs = std::filesystem;

std::string Store::get(const std::string& key) {
  wait({key}, timeout());
  return get_now(key);
}

void throw_store_timeout(const std::string& store, const std::vector<std::string>& keys,
                         Millis timeout) {
  std::string names;
  for (const auto& k : keys) names += (names.empty() ? "'" : ", '") + k + "'";
  throw Error(str("timed out after ", timeout.count(), " ms waiting for key(s) ", names,
                  " (a rank did not arrive or did not publish them)"),
              store, str("key(s) ", names, " set within ", timeout.count(), " ms"),
              "still missing");
}

void store_barrier(Store& store, const std::string& key, int rank, int size, Millis timeout) {
  if (store.add(key + "/arrived", 1) == size) store.set(key + "/all_arrived", "1");
  store.wait({key + "/all_arrived"}, timeout);
  if (store.add(key + "/departed", 1) == size) store.set(key + "/all_departed", "1");
  if (rank == 0) store.wait({key + "/all_departed"}, timeout);
}

int64_t parse_counter(const std::string& key, const std::string& value) {
  try {
    size_t pos = 0;
    const int64_t v = std::stoll(value, &pos);
    if (pos == value.size()) return v;
  } catch (const std::exception&) {
  }
  throw Error("store value is not an integer counter", str("Store::add('", key, "')"),
              "a decimal integer written by add()", str("'", value.substr(0, 32), "'"));
}

int64_t add_counter(const std::string& key, int64_t value, int64_t delta) {
  int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum))
    throw Error("store counter overflows int64", str("Store::add('", key, "')"),
                "a sum within [-2^63, 2^63)", str(value, " + ", delta));
  return sum;
}

// ------------------------------------------------------------------------------------------
// HashStore

void HashStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    data_[key] = value;
  }
  cv_.notify_all();
}

std::string HashStore::get_now(const std::string& key) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = data_.find(key);
  if (it == data_.end())
    throw Error("key not found", "HashStore::get", str("key '", key, "'"), "absent");
  return it->second;
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t v;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = data_.find(key);
    v = add_counter(key, it == data_.end() ? 0 : parse_counter(key, it->second), delta);
    data_[key] = std::to_string(v);
  }
  cv_.notify_all();
  return v;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& k : keys)
    if (!data_.count(k)) return false;
  return true;
}

void HashStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  auto all = [&] {
    for (const auto& k : keys)
      if (!data_.count(k)) return false;
    return true;
  };
  if (cv_.wait_for(lk, timeout, all)) return;
  std::vector<std::string> missing;
  for (const auto& k : keys)
    if (!data_.count(k)) missing.push_back(k);
  throw_store_timeout("HashStore", missing, timeout);
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lk(mu_);
  return data_.erase(key) > 0;
}

int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lk(mu_);
  return static_cast<int64_t>(data_.size());
}

// ------------------------------------------------------------------------------------------
// FileStore

namespace {

/// Reads a whole file; false when it does not exist.
bool read_file(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream os;
  os << f.rdbuf();
  out = os.str();
  return true;
}

/// Writes `data` to `path` atomically (temporary file + rename).
void write_file_atomic(const std::string& path, const std::string& data) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = str(path, ".tmp.", getpid(), ".", counter++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!f) throw Error("cannot write store file", "FileStore", "a writable directory", tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error("cannot rename store file", "FileStore", path, ec.message());
}

/// An exclusive flock on DIR/.lock for the lifetime of the object.
class DirLock {
 public:
  explicit DirLock(const std::string& dir) {
    const std::string p = dir + "/.lock";
    fd_ = ::open(p.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot open store lock file", "FileStore", p, std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~DirLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }

 private:
  int fd_ = -1;
};

}  // namespace

FileStore::FileStore(std::string dir, Millis timeout) : Store(timeout), dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (!fs::is_directory(dir_, ec))
    throw Error("cannot create the store directory", "FileStore", "a writable directory", dir_);
}

std::string FileStore::path_of(const std::string& key) const {
  static const char* kHex = "0123456789abcdef";
  std::string name = "k_";
  for (unsigned char c : key) {
    name += kHex[c >> 4];
    name += kHex[c & 15];
  }
  return dir_ + "/" + name;
}

void FileStore::set(const std::string& key, const std::string& value) {
  write_file_atomic(path_of(key), value);
}

std::string FileStore::get_now(const std::string& key) {
  std::string v;
  if (!read_file(path_of(key), v))
    throw Error("key not found", str("FileStore(", dir_, ")::get"), str("key '", key, "'"),
                "absent");
  return v;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  DirLock lock(dir_);
  std::string cur;
  const int64_t old = read_file(path_of(key), cur) ? parse_counter(key, cur) : 0;
  const int64_t v = add_counter(key, old, delta);
  write_file_atomic(path_of(key), std::to_string(v));
  return v;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  std::error_code ec;
  for (const auto& k : keys)
    if (!fs::exists(path_of(k), ec)) return false;
  return true;
}

void FileStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto sleep = std::chrono::microseconds(200);
  while (!check(keys)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::vector<std::string> missing;
      for (const auto& k : keys)
        if (!check({k})) missing.push_back(k);
      throw_store_timeout(str("FileStore(", dir_, ")"), missing, timeout);
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(20000));
  }
}

bool FileStore::delete_key(const std::string& key) {
  std::error_code ec;
  return fs::remove(path_of(key), ec);
}

int64_t FileStore::num_keys() {
  int64_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("k_", 0) == 0 && name.find(".tmp.") == std::string::npos) ++n;
  }
  return n;
}

// ------------------------------------------------------------------------------------------
// PrefixStore

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : Store(base ? base->timeout() : kDefaultStoreTimeout),
      prefix_(std::move(prefix)),
      base_(std::move(base)) {
  if (!base_) throw Error("PrefixStore needs a store", "PrefixStore", "a store", "null");
}

std::vector<std::string> PrefixStore::full(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(full(k));
  return out;
}

void PrefixStore::set(const std::string& key, const std::string& value) {
  base_->set(full(key), value);
}
std::string PrefixStore::get(const std::string& key) {
  base_->wait({full(key)}, timeout());
  return base_->get_now(full(key));
}
std::string PrefixStore::get_now(const std::string& key) { return base_->get_now(full(key)); }
int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return base_->add(full(key), delta);
}
bool PrefixStore::check(const std::vector<std::string>& keys) { return base_->check(full(keys)); }
void PrefixStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  base_->wait(full(keys), timeout);
}
bool PrefixStore::delete_key(const std::string& key) { return base_->delete_key(full(key)); }
int64_t PrefixStore::num_keys() { return base_->num_keys(); }

}  // namespace anvil::dist
