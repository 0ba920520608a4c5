// ANVIL_DIST_HOST_PROFILE (host_profile.h).
#include "dist/host_profile.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace anvil::dist::host_profile {

namespace {

struct Phase {
  std::atomic<const char*> name{nullptr};
  std::atomic<int64_t> ns{0}, calls{0}, seen{0};
};

constexpr int64_t kWarmup = 32;  // calls of a phase left out of its figure

constexpr int kPhases = 64;
Phase g_phases[kPhases];
std::mutex g_insert;

void report() {
  std::fprintf(stderr, "anvil dist host profile (pid %d): phase, calls (after the first %d), mean us, total ms\n",
               static_cast<int>(::getpid()), static_cast<int>(kWarmup));
  for (const Phase& p : g_phases) {
    const char* n = p.name.load();
    if (!n) break;
    const int64_t c = p.calls.load();
    std::fprintf(stderr, "  %-44s %9lld %9.3f %10.3f\n", n, static_cast<long long>(c),
                 c ? static_cast<double>(p.ns.load()) / 1e3 / static_cast<double>(c) : 0.0,
                 static_cast<double>(p.ns.load()) / 1e6);
  }
}

}  // namespace

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("ANVIL_DIST_HOST_PROFILE");
    const bool yes = v && *v && std::strcmp(v, "0") != 0;
    if (yes) std::atexit(report);
    return yes;
  }();
  return on;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void add(const char* phase, int64_t ns) {
  for (int i = 0; i < kPhases; ++i) {
    Phase& p = g_phases[i];
    const char* n = p.name.load(std::memory_order_acquire);
    if (n == nullptr) {
      std::lock_guard<std::mutex> lk(g_insert);
      n = p.name.load();
      if (n == nullptr) {
        p.name.store(phase, std::memory_order_release);
        n = phase;
      }
    }
    if (n == phase) {
      // the first calls of each phase (first op: communicator, allocations, NCCL's setup) are
      // counted apart from the steady figure
      if (p.seen.fetch_add(1, std::memory_order_relaxed) < kWarmup) return;
      p.ns.fetch_add(ns, std::memory_order_relaxed);
      p.calls.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
}

}  // namespace anvil::dist::host_profile
