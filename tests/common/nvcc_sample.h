// Which compile-only CUDA tests run nvcc in this run. The codegen suites that check what the
// CUDA target emits (no GPU needed) spend most of their time in nvcc: 20-40 s a test on CI's two
// cores. CI compiles a seeded sample of them (a third, a different third each day) and checks
// the emitted sources of the rest with the driver's emit-only mode; the GPU label compiles and
// runs the same kernels on the GPU machine, and bench/cuda_compile_all.sh compiles every one.
//
//   ANVIL_NVCC_ALL=1          every test compiles (bench/cuda_compile_all.sh)
//   ANVIL_NVCC_SEED=N         the sample's seed (default: today's date as yyyymmdd, UTC)
//   ANVIL_NVCC_FRACTION=F     the share of tests sampled, 0..1 (default 0.34)
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace anvil::test {

/// FNV-1a of `s`: stable across runs and compilers (std::hash is not).
inline uint64_t stable_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// Whether the running test compiles its CUDA sources with nvcc (see the top of this file) for
/// its compile named `what` (one sample per compile of a test that compiles several); prints
/// the choice and the seed, so a failure of the sampled compile can be replayed with
/// ANVIL_NVCC_SEED, or every test compiled with ANVIL_NVCC_ALL=1.
inline bool nvcc_this_test(const std::string& what = "") {
  if (const char* all = std::getenv("ANVIL_NVCC_ALL"); all && std::string(all) == "1") return true;
  uint64_t seed = 0;
  if (const char* s = std::getenv("ANVIL_NVCC_SEED"); s && *s) {
    seed = std::strtoull(s, nullptr, 10);
  } else {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    seed = static_cast<uint64_t>((utc.tm_year + 1900) * 10000 + (utc.tm_mon + 1) * 100 +
                                 utc.tm_mday);
  }
  double fraction = 0.34;
  if (const char* f = std::getenv("ANVIL_NVCC_FRACTION"); f && *f) fraction = std::atof(f);
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = std::string(info->test_suite_name()) + "." + info->name() +
                           (what.empty() ? "" : " (" + what + ")");
  const uint64_t h = stable_hash(std::to_string(seed) + ":" + name);
  const bool on = static_cast<double>(h % 1000000) < fraction * 1e6;
  std::printf("[nvcc sample] %s: %s (ANVIL_NVCC_SEED=%llu, ANVIL_NVCC_ALL=1 compiles all)\n",
              name.c_str(), on ? "nvcc compiles the sources" : "emit-only",
              static_cast<unsigned long long>(seed));
  return on;
}

}  // namespace anvil::test
