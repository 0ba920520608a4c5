// The record each rank publishes in the one-shot all_reduce's connect vote (one_shot.h), and the
// check of a peer's record: "HOST HANDLE PID SLOT_BYTES" (HANDLE: the CUDA IPC handle in hex;
// "" from a rank without a buffer), and the handle's hex. Header-only and free of CUDA, so the
// CPU tests check it.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace anvil::dist::nccl {

inline constexpr const char* kOneShotHexDigits = "0123456789abcdef";

/// `n` bytes at `p` as lowercase hex.
inline std::string hex_bytes(const void* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<const unsigned char*>(p)[i];
    s += kOneShotHexDigits[c >> 4];
    s += kOneShotHexDigits[c & 15];
  }
  return s;
}

/// The `n` bytes hex_bytes wrote into `s`; false (nothing written) unless `s` is exactly that.
inline bool unhex_bytes(const std::string& s, void* p, size_t n) {
  if (s.size() != 2 * n || s.find_first_not_of(kOneShotHexDigits) != std::string::npos)
    return false;
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < n; ++i)
    static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(v(s[2 * i]) * 16 + v(s[2 * i + 1]));
  return true;
}

struct OneShotRecord {
  std::string host, handle_hex;
  int64_t pid = 0, slot_bytes = 0;
};

inline std::string format_one_shot_record(const OneShotRecord& r) {
  return str(r.host, " ", r.handle_hex, " ", r.pid, " ", r.slot_bytes);
}

/// "" when `peer` (published by `who`; `self`: this rank's own) can be mapped by a rank
/// described by `here`, else why not: no buffer or a malformed record, another host, the same
/// process (a peer's), another slot size (another limit in effect). `handle_hex` receives the
/// peer's handle.
inline std::string check_one_shot_record(const std::string& peer, const OneShotRecord& here,
                                         bool self, const std::string& who,
                                         std::string* handle_hex) {
  std::istringstream in(peer);
  std::vector<std::string> f;
  for (std::string w; in >> w;) f.push_back(w);
  if (f.size() != 4 || f[1].empty() || f[1].find_first_not_of(kOneShotHexDigits) != std::string::npos)
    return str(who, " has no peer-mappable buffer");
  if (f[0] != here.host) return str(who, " is on another host (", f[0], ")");
  if (!self && f[2] == std::to_string(here.pid)) return str(who, " is in this process");
  if (f[3] != std::to_string(here.slot_bytes))
    return str(who, " has another one-shot limit (slots of ", f[3], " bytes, here ",
               here.slot_bytes, ")");
  if (handle_hex) *handle_hex = f[1];
  return "";
}

}  // namespace anvil::dist::nccl
