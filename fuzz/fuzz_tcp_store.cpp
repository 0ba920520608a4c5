// libFuzzer target: the TCPStore server's request decoding and handling (dist/tcp_store_protocol.h)
// as the serving thread drives it, without sockets. The input is a script of chunks from up to
// four clients: a control byte (bits 0-1: the client; bit 7: the client hangs up after this
// chunk), a length byte, then that many bytes received from the client (the last chunk may be
// short). Every reply the server sends must itself decode, with code 0, 1 or 2.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dist/tcp_store_protocol.h"
#include "fuzz_util.h"

namespace {

void check_reply(int client, const std::string& frame) {
  uint32_t n = 0;
  if (frame.size() < 4) anvil::fuzz::fail_property("reply frame shorter than its size field");
  std::memcpy(&n, frame.data(), 4);
  uint8_t code = 0;
  std::vector<std::string> items;
  if (n + size_t{4} != frame.size() ||
      !anvil::dist::tcp_store_decode(frame.data() + 4, n, code, items) || code > 2)
    anvil::fuzz::fail_property("server sent a malformed reply to client " + std::to_string(client));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  anvil::dist::TcpStoreServerCore server(check_reply);
  size_t pos = 0;
  while (pos + 2 <= size) {
    const uint8_t control = data[pos];
    const size_t n = std::min<size_t>(data[pos + 1], size - pos - 2);
    const int client = control & 3;
    const char* chunk = reinterpret_cast<const char*>(data + pos + 2);
    pos += 2 + n;
    if (!server.receive(client, chunk, n) || (control & 0x80)) server.drop(client);
  }
  return 0;
}
