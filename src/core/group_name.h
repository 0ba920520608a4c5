// The name a compiled graph gives a legacy (tag, ranks, group_size) collective group. The
// frontend writes it into the graph and dist's GroupRegistry resolves it at run time, so it lives
// below both (the frontend does not use dist).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace anvil {

/// "legacy/<group_size>/<r0,r1,...>/<tag>".
std::string legacy_group_name(const std::string& tag, const std::vector<int64_t>& ranks,
                              int64_t group_size);

/// Parses a legacy_group_name(); false when `name` is not one.
bool parse_legacy_group_name(const std::string& name, std::string& tag,
                             std::vector<int64_t>& ranks, int64_t& group_size);

}  // namespace anvil
