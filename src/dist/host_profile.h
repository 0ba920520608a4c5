// ANVIL_DIST_HOST_PROFILE=1: the host time of each phase of issuing and waiting for collectives
// (the functional ops, ProcessGroup::post of the nccl backend), summed per phase over the
// process and printed to stderr at exit: where a small op's microseconds go
// (bench/nccl_bench.sh's breakdown), leaving out each phase's first 32 calls (a first op's
// setup). Off (the default), a Span costs one cached flag test.
#pragma once

#include <cstdint>

namespace anvil::dist::host_profile {

/// ANVIL_DIST_HOST_PROFILE is set (read once per process).
bool enabled();
/// Adds `ns` to `phase` (a string literal: phases are told apart by address).
void add(const char* phase, int64_t ns);
int64_t now_ns();

/// Times consecutive phases of one call: mark(p) charges the time since the previous mark (or
/// the Span's start) to phase p.
class Span {
 public:
  Span() : on_(enabled()), last_(on_ ? now_ns() : 0) {}
  void mark(const char* phase) {
    if (!on_) return;
    const int64_t t = now_ns();
    add(phase, t - last_);
    last_ = t;
  }

 private:
  bool on_;
  int64_t last_;
};

}  // namespace anvil::dist::host_profile
