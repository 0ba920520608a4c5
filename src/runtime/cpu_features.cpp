#include "runtime/cpu_features.h"

#include <utility>

#include "core/error.h"

namespace anvil::runtime {

namespace {

/// __builtin_cpu_supports needs a string literal, hence one entry per feature.
#define ANVIL_FEATURE_(name)                               \
  {                                                        \
    name, [] { return __builtin_cpu_supports(name) != 0; } \
  }
const std::pair<const char*, bool (*)()> kFeatures[] = {
    ANVIL_FEATURE_("sse4.2"),
    ANVIL_FEATURE_("avx"),
    ANVIL_FEATURE_("avx2"),
    ANVIL_FEATURE_("fma"),
    ANVIL_FEATURE_("f16c"),
    ANVIL_FEATURE_("bmi2"),
    ANVIL_FEATURE_("avx512f"),
    ANVIL_FEATURE_("avx512bw"),
    ANVIL_FEATURE_("avx512vl"),
    ANVIL_FEATURE_("avx512dq"),
    ANVIL_FEATURE_("avx512cd"),
    ANVIL_FEATURE_("avx512vnni"),
    ANVIL_FEATURE_("avx512bf16"),
    ANVIL_FEATURE_("avx512fp16"),
    ANVIL_FEATURE_("avx512vbmi"),
    ANVIL_FEATURE_("avx512vbmi2"),
    ANVIL_FEATURE_("avx512ifma"),
    ANVIL_FEATURE_("avx512bitalg"),
    ANVIL_FEATURE_("avx512vpopcntdq"),
    ANVIL_FEATURE_("avxvnni"),
    ANVIL_FEATURE_("amx-tile"),
    ANVIL_FEATURE_("amx-bf16"),
    ANVIL_FEATURE_("amx-int8"),
    ANVIL_FEATURE_("gfni"),
    ANVIL_FEATURE_("vaes"),
    ANVIL_FEATURE_("vpclmulqdq"),
};
#undef ANVIL_FEATURE_

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
