// The record each rank publishes in the one-shot all_reduce's connect vote (one_shot.h), and the
// check of a peer's record: "HOST HANDLE PID SLOT_BYTES" (HANDLE: the CUDA IPC handle in hex;
// "" from a rank without a buffer). Header-only and free of CUDA, so the CPU tests check it.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace anvil::dist::nccl {

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
  if (f.size() != 4 || f[1].empty() || f[1].find_first_not_of("0123456789abcdef") != std::string::npos)
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
