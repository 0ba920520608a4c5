// CPU feature checks for a package's target: a package compiled for an ISA must refuse to load
// on a CPU without it (instead of dying of SIGILL in the first kernel).
#pragma once

#include <string>
#include <vector>

namespace anvil::runtime {

/// Whether this CPU has `feature` (GCC __builtin_cpu_supports names: "avx2", "fma",
/// "avx512f", ...). Throws Error for a name this runtime does not know.
bool cpu_supports(const std::string& feature);
/// Every feature name cpu_supports() knows.
std::vector<std::string> known_cpu_features();
/// The features a manifest target implies ("cpu-x86_64-avx2" -> avx2, fma); throws Error for a
/// target that is not a CPU target this runtime knows.
std::vector<std::string> target_cpu_features(const std::string& target);
/// Throws Error naming the package, its target and the first missing feature when this CPU
/// cannot run code built for `target` with the extra `features`.
void check_cpu_features(const std::string& target, const std::vector<std::string>& features,
                        const std::string& where);

}  // namespace anvil::runtime
