// Store: the small key-value service ranks use to find each other (rendezvous) and to agree on
// small facts (addresses, counters). Every blocking call is bounded by a timeout and raises an
// anvil::Error naming the key(s) and the timeout when it expires.
//
// Implementations: HashStore (in-process, for ranks that are threads), FileStore (a directory on a
// shared file system), TCPStore (tcp_store.h: a server hosted by rank 0 or standalone, plus
// clients) and PrefixStore (a namespace inside another store, one per sub-group).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace anvil::dist {

/// Milliseconds, the unit of every timeout in dist.
using Millis = std::chrono::milliseconds;

/// Timeout of a store's blocking calls unless set otherwise (torch's default too).
inline constexpr Millis kDefaultStoreTimeout{300000};

/// A key-value store shared by the ranks of a job. Values are byte strings.
/// All methods are thread-safe.
class Store {
 public:
  explicit Store(Millis timeout = kDefaultStoreTimeout) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Sets `key` to `value` (overwrites).
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// The value of `key`, waiting up to timeout() for some rank to set it.
  virtual std::string get(const std::string& key);
  /// Adds `delta` to the integer stored at `key` (absent = 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  /// True when every key exists (does not wait).
  virtual bool check(const std::vector<std::string>& keys) = 0;
  /// Waits until every key exists; throws Error naming the missing keys after `timeout`.
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  /// wait() bounded by the store's own timeout().
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  /// Removes `key`; true when it existed.
  virtual bool delete_key(const std::string& key) = 0;
  /// Number of keys in the store (for a PrefixStore: in the whole underlying store).
  virtual int64_t num_keys() = 0;

  Millis timeout() const { return timeout_; }
  void set_timeout(Millis timeout) { timeout_ = timeout; }

 protected:
  /// The value of a key known to exist (called by get() after wait()).
  virtual std::string get_now(const std::string& key) = 0;
  friend class PrefixStore;

 private:
  Millis timeout_;
};

/// Throws the Error every store raises when a wait expires: it names the store, the keys still
/// missing and the timeout.
[[noreturn]] void throw_store_timeout(const std::string& store,
                                      const std::vector<std::string>& keys, Millis timeout);

/// A barrier of `size` ranks through `store` under `key` (fresh per use). Rank 0 returns last,
/// after every rank has finished its last store call, so a store hosted by rank 0 outlives
/// every rank's use of it.
void store_barrier(Store& store, const std::string& key, int rank, int size, Millis timeout);

/// Parses a decimal integer value written by add(); throws Error naming the key otherwise.
int64_t parse_counter(const std::string& key, const std::string& value);

/// `value` + `delta` for add() on `key`; throws Error naming the key, the value and the delta
/// when the sum leaves int64 (the counter keeps its old value).
int64_t add_counter(const std::string& key, int64_t value, int64_t delta);

/// An in-memory store shared by threads of one process (tests with ranks as threads).
class HashStore : public Store {
 public:
  explicit HashStore(Millis timeout = kDefaultStoreTimeout) : Store(timeout) {}
  void set(const std::string& key, const std::string& value) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

 protected:
  std::string get_now(const std::string& key) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
};

/// A store kept in a directory (created if missing), one file per key, for ranks that share a
/// file system. Writes are atomic (write + rename); add() is serialized with flock.
class FileStore : public Store {
 public:
  explicit FileStore(std::string dir, Millis timeout = kDefaultStoreTimeout);
  void set(const std::string& key, const std::string& value) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  const std::string& dir() const { return dir_; }

 protected:
  std::string get_now(const std::string& key) override;

 private:
  /// The file holding `key` (the key hex-encoded, so any byte string is a valid key).
  std::string path_of(const std::string& key) const;
  std::string dir_;
};

/// A namespace inside another store: every key is stored as "PREFIX/key". Sub-groups use one so
/// their rendezvous keys never collide with the world's.
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  const std::shared_ptr<Store>& base() const { return base_; }

 protected:
  std::string get_now(const std::string& key) override;

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> full(const std::vector<std::string>& keys) const;
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace anvil::dist
