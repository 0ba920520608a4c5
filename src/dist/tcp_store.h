// TCPStore: the rendezvous store of a multi-process job. One process runs a TCPStoreServer
// (rank 0 hosts it in a background thread, or a launcher runs it standalone); every rank talks to
// it through a TCPStore client. Blocking calls (get, wait) are served by the server parking the
// request until the keys exist; the client bounds them by its timeout and then raises an Error
// naming the missing keys and the timeout.
//
// Wire format (one request, one response, per connection at a time): a frame is a u32 byte count
// followed by u8 code, u32 string count and that many (u32 length, bytes) strings. Request codes
// are TcpStoreCmd values; response codes are 0 = ok, 1 = key missing, 2 = error (message).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/store.h"

namespace anvil::dist {

/// Request codes of the TCPStore protocol.
enum class TcpStoreCmd : uint8_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kCheck = 4,
  kWait = 5,
  kDelete = 6,
  kNumKeys = 7,
  kPing = 8,
};

/// The TCPStore server: listens on all interfaces and serves clients from one background thread.
class TCPStoreServer {
 public:
  /// Starts listening on `port` (0 = any free port) and serving. Throws Error when the port
  /// cannot be bound (e.g. already in use), naming it.
  explicit TCPStoreServer(int port = 0);
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  /// The port actually listened on.
  int port() const { return port_; }
  /// Stops serving and closes every connection (also done by the destructor).
  void stop();

 private:
  struct State;
  void serve();
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  int port_ = 0;
  std::unique_ptr<State> state_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
};

/// A client of a TCPStoreServer; optionally hosts the server itself (rank 0).
/// Thread-safe: concurrent calls use separate connections, so a long wait() in one thread never
/// blocks another thread's set().
class TCPStore : public Store {
 public:
  /// Connects to HOST:PORT. With `is_server`, first starts a TCPStoreServer on PORT in this
  /// process (PORT 0 picks a free one; port() tells which). Connecting retries until `timeout`.
  TCPStore(std::string host, int port, bool is_server, Millis timeout = kDefaultStoreTimeout);
  ~TCPStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  /// "TCPStore(HOST:PORT)", used in messages.
  std::string describe() const;

 protected:
  std::string get_now(const std::string& key) override;

 private:
  struct Reply {
    uint8_t code = 0;
    std::vector<std::string> values;
  };
  /// Sends one request and reads its reply on a pooled connection, both before `deadline_ms`
  /// from now; returns false (connection dropped) when the deadline passes first.
  bool request(TcpStoreCmd cmd, const std::vector<std::string>& args, Millis timeout, Reply& reply);
  /// request() that treats a missed deadline as a store error naming `what`.
  Reply call(TcpStoreCmd cmd, const std::vector<std::string>& args, const std::string& what);
  int acquire(Millis timeout);
  void release(int fd);

  std::unique_ptr<TCPStoreServer> server_;
  std::string host_;
  int port_;
  std::mutex mu_;
  std::vector<int> idle_;
};

}  // namespace anvil::dist
