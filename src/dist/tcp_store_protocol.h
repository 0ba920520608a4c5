// The TCPStore wire protocol (format in tcp_store.h) and the server's request handling without
// sockets: TcpStoreServerCore takes the bytes each client sent and answers through a callback.
// TCPStoreServer's serving thread drives one over its connections; fuzz/fuzz_tcp_store.cpp
// drives one with arbitrary bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace anvil::dist {

/// The largest frame body either side accepts, in bytes.
inline constexpr uint32_t kTcpStoreMaxFrame = 1u << 30;

/// One frame: u32 body size, then the body (u8 code, u32 count, (u32 length, bytes) * count).
std::string tcp_store_encode(uint8_t code, const std::vector<std::string>& items);

/// Decodes a frame body of `n` bytes at `p`; false when malformed (short, a length past the
/// end, bytes left over).
bool tcp_store_decode(const char* p, size_t n, uint8_t& code, std::vector<std::string>& items);

/// The server's keys, parked waits and per-client input buffers. Clients are ints (the server
/// uses socket descriptors). Not thread-safe: one thread drives it.
class TcpStoreServerCore {
 public:
  /// Sends one encoded reply frame to a client.
  using Send = std::function<void(int client, const std::string& frame)>;

  explicit TcpStoreServerCore(Send send) : send_(std::move(send)) {}

  /// Appends `n` bytes received from `client` and handles every complete request in them.
  /// Returns false when the client broke the protocol (a frame over kTcpStoreMaxFrame or a
  /// malformed body): the caller closes the connection and calls drop().
  bool receive(int client, const char* data, size_t n);

  /// Forgets `client`: its buffered bytes and its parked waits.
  void drop(int client);

  /// The number of keys held.
  size_t num_keys() const { return data_.size(); }

 private:
  struct Waiter {
    int client;
    std::vector<std::string> keys;
  };
  bool has_all(const std::vector<std::string>& keys) const;
  void reply(int client, uint8_t code, const std::vector<std::string>& items);
  void wake_waiters();
  void handle(int client, uint8_t code, std::vector<std::string>& args);

  Send send_;
  std::map<std::string, std::string> data_;
  std::map<int, std::string> input_;  // bytes received per client, not yet handled
  std::vector<Waiter> waiters_;
};

}  // namespace anvil::dist
