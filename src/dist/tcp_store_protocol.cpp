// The TCPStore wire protocol and the server's request handling (tcp_store_protocol.h).
#include "dist/tcp_store_protocol.h"

#include <cstring>
#include <utility>

#include "core/error.h"
#include "dist/store.h"
#include "dist/tcp_store.h"

namespace anvil::dist {

namespace {

/// Appends a u32 in host order.
void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

}  // namespace

std::string tcp_store_encode(uint8_t code, const std::vector<std::string>& items) {
  std::string body;
  body.push_back(static_cast<char>(code));
  put_u32(body, static_cast<uint32_t>(items.size()));
  for (const auto& s : items) {
    put_u32(body, static_cast<uint32_t>(s.size()));
    body += s;
  }
  std::string frame;
  put_u32(frame, static_cast<uint32_t>(body.size()));
  return frame + body;
}

bool tcp_store_decode(const char* p, size_t n, uint8_t& code, std::vector<std::string>& items) {
  if (n < 5) return false;
  code = static_cast<uint8_t>(p[0]);
  uint32_t count;
  std::memcpy(&count, p + 1, 4);
  size_t off = 5;
  items.clear();
  for (uint32_t i = 0; i < count; ++i) {
    if (off + 4 > n) return false;
    uint32_t len;
    std::memcpy(&len, p + off, 4);
    off += 4;
    if (off + len > n) return false;
    items.emplace_back(p + off, len);
    off += len;
  }
  return off == n;
}

bool TcpStoreServerCore::has_all(const std::vector<std::string>& keys) const {
  for (const auto& k : keys)
    if (!data_.count(k)) return false;
  return true;
}

void TcpStoreServerCore::reply(int client, uint8_t code, const std::vector<std::string>& items) {
  send_(client, tcp_store_encode(code, items));
}

void TcpStoreServerCore::wake_waiters() {
  for (size_t i = 0; i < waiters_.size();) {
    if (has_all(waiters_[i].keys)) {
      reply(waiters_[i].client, 0, {});
      waiters_.erase(waiters_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void TcpStoreServerCore::drop(int client) {
  input_.erase(client);
  for (size_t i = 0; i < waiters_.size();) {
    if (waiters_[i].client == client)
      waiters_.erase(waiters_.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  }
}

bool TcpStoreServerCore::receive(int client, const char* data, size_t n) {
  std::string& in = input_[client];
  in.append(data, n);
  while (in.size() >= 4) {
    uint32_t size;
    std::memcpy(&size, in.data(), 4);
    if (size > kTcpStoreMaxFrame) return false;
    if (in.size() < 4 + size_t{size}) break;
    uint8_t code;
    std::vector<std::string> items;
    const bool ok = tcp_store_decode(in.data() + 4, size, code, items);
    in.erase(0, 4 + size_t{size});
    if (!ok) return false;
    handle(client, code, items);
  }
  return true;
}

void TcpStoreServerCore::handle(int client, uint8_t code, std::vector<std::string>& a) {
  auto need = [&](size_t n) {
    if (a.size() == n) return true;
    reply(client, 2, {str("TCPStore: request ", int(code), " takes ", n, " arguments")});
    return false;
  };
  switch (static_cast<TcpStoreCmd>(code)) {
    case TcpStoreCmd::kSet:
      if (!need(2)) return;
      data_[a[0]] = std::move(a[1]);
      reply(client, 0, {});
      wake_waiters();
      return;
    case TcpStoreCmd::kGet: {
      if (!need(1)) return;
      auto it = data_.find(a[0]);
      if (it == data_.end())
        reply(client, 1, {});
      else
        reply(client, 0, {it->second});
      return;
    }
    case TcpStoreCmd::kAdd: {
      if (!need(2)) return;
      int64_t v = 0;
      try {
        auto it = data_.find(a[0]);
        v = add_counter(a[0], it == data_.end() ? 0 : parse_counter(a[0], it->second),
                        std::stoll(a[1]));
      } catch (const std::exception& e) {
        reply(client, 2, {e.what()});
        return;
      }
      data_[a[0]] = std::to_string(v);
      reply(client, 0, {std::to_string(v)});
      wake_waiters();
      return;
    }
    case TcpStoreCmd::kCheck:
      reply(client, 0, {has_all(a) ? "1" : "0"});
      return;
    case TcpStoreCmd::kWait:
      if (has_all(a))
        reply(client, 0, {});
      else
        waiters_.push_back({client, std::move(a)});
      return;
    case TcpStoreCmd::kDelete:
      if (!need(1)) return;
      reply(client, 0, {data_.erase(a[0]) ? "1" : "0"});
      return;
    case TcpStoreCmd::kNumKeys:
      reply(client, 0, {std::to_string(data_.size())});
      return;
    case TcpStoreCmd::kPing:
      reply(client, 0, {});
      return;
  }
  reply(client, 2, {str("TCPStore: unknown request code ", int(code))});
}

}  // namespace anvil::dist
