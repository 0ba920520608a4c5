#include "runtime/cpu_features.h"

#include <cstdint>
#include <utility>

#include "core/error.h"

#if defined(__clang__) && __clang_major__ < 16
#include <cpuid.h>
#endif

namespace anvil::runtime {

namespace {

/// __builtin_cpu_supports needs a string literal, hence one entry per feature.
#define ANVIL_FEATURE_(name)                               \
  {                                                        \
    name, [] { return __builtin_cpu_supports(name) != 0; } \
  }

#if defined(__clang__) && __clang_major__ < 16
/// clang before 16 (Debian's 14 builds the sanitizer job) knows fewer __builtin_cpu_supports
/// names than gcc: those it lacks are read from CPUID, with the register state they need
/// enabled by the OS in XCR0, as gcc's checks do.
bool cpuid_bit(unsigned leaf, unsigned sub, int reg, int bit) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) return false;
  return ((r[reg] >> bit) & 1u) != 0;
}
bool cpuid_feature(unsigned leaf, unsigned sub, int reg, int bit, uint64_t xcr0_mask) {
  if (!cpuid_bit(leaf, sub, reg, bit) || !cpuid_bit(1, 0, 2, 27)) return false;  // + OSXSAVE
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((static_cast<uint64_t>(hi) << 32 | lo) & xcr0_mask) == xcr0_mask;
}
/// A feature from CPUID leaf / subleaf, register (0 eax .. 3 edx) and bit, usable when the OS
/// enables the XCR0 state in `xcr0` (0x6 AVX, 0xe6 AVX-512, 0x60000 AMX tiles).
#define ANVIL_FEATURE_CPUID_(name, leaf, sub, reg, bit, xcr0) \
  {                                                          \
    name, [] { return cpuid_feature(leaf, sub, reg, bit, xcr0); } \
  }
#else
#define ANVIL_FEATURE_CPUID_(name, leaf, sub, reg, bit, xcr0) ANVIL_FEATURE_(name)
#endif
const std::pair<const char*, bool (*)()> kFeatures[] = {
    ANVIL_FEATURE_("sse4.2"),
    ANVIL_FEATURE_("avx"),
    ANVIL_FEATURE_("avx2"),
    ANVIL_FEATURE_("fma"),
    ANVIL_FEATURE_CPUID_("f16c", 1, 0, 2, 29, 0x6),
    ANVIL_FEATURE_("bmi2"),
    ANVIL_FEATURE_("avx512f"),
    ANVIL_FEATURE_("avx512bw"),
    ANVIL_FEATURE_("avx512vl"),
    ANVIL_FEATURE_("avx512dq"),
    ANVIL_FEATURE_("avx512cd"),
    ANVIL_FEATURE_("avx512vnni"),
    ANVIL_FEATURE_("avx512bf16"),
    ANVIL_FEATURE_CPUID_("avx512fp16", 7, 0, 3, 23, 0xe6),
    ANVIL_FEATURE_("avx512vbmi"),
    ANVIL_FEATURE_("avx512vbmi2"),
    ANVIL_FEATURE_("avx512ifma"),
    ANVIL_FEATURE_("avx512bitalg"),
    ANVIL_FEATURE_("avx512vpopcntdq"),
    ANVIL_FEATURE_CPUID_("avxvnni", 7, 1, 0, 4, 0x6),
    ANVIL_FEATURE_CPUID_("amx-tile", 7, 0, 3, 24, 0x60000),
    ANVIL_FEATURE_CPUID_("amx-bf16", 7, 0, 3, 22, 0x60000),
    ANVIL_FEATURE_CPUID_("amx-int8", 7, 0, 3, 25, 0x60000),
    ANVIL_FEATURE_("gfni"),
    ANVIL_FEATURE_CPUID_("vaes", 7, 0, 2, 9, 0x6),
    ANVIL_FEATURE_("vpclmulqdq"),
};
#undef ANVIL_FEATURE_
#undef ANVIL_FEATURE_CPUID_

}  // namespace

bool cpu_supports(const std::string& feature) {
  for (const auto& [name, fn] : kFeatures)
    if (feature == name) return fn();
  throw Error("unknown CPU feature", "cpu_supports", "a feature this runtime knows", feature);
}

std::vector<std::string> known_cpu_features() {
  std::vector<std::string> out;
  for (const auto& f : kFeatures) out.push_back(f.first);
  return out;
}

std::vector<std::string> target_cpu_features(const std::string& target) {
  if (target == "cpu" || target == "cpu-x86_64" || target == "cpu-x86_64-native") return {};
  if (target == "cpu-x86_64-avx2") return {"avx2", "fma"};
  if (target == "cpu-x86_64-avx512") return {"avx2", "fma", "avx512f", "avx512bw", "avx512vl"};
  throw Error("unknown package target", "runtime",
              "cpu, cpu-x86_64, cpu-x86_64-native, cpu-x86_64-avx2 or cpu-x86_64-avx512", target);
}

void check_cpu_features(const std::string& target, const std::vector<std::string>& features,
                        const std::string& where) {
  std::vector<std::string> all;
  try {
    all = target_cpu_features(target);
  } catch (const Error& e) {
    throw e.with_context(where);
  }
  all.insert(all.end(), features.begin(), features.end());
  for (const std::string& f : all) {
    bool ok = false;
    try {
      ok = cpu_supports(f);
    } catch (const Error&) {
      throw Error("package needs a CPU feature this runtime does not know", where,
                  "a known feature", f);
    }
    if (!ok)
      throw Error(str("this CPU cannot run the package: it was compiled for ", target,
                      ", which needs ", f, "; recompile with --target native or a lower target"),
                  where, f, "a CPU without " + f);
  }
}

}  // namespace anvil::runtime
