#include "core/group_name.h"

#include <sstream>

#include "core/error.h"

namespace anvil {

namespace {
constexpr const char* kLegacyPrefix = "legacy/";
}  // namespace

std::string legacy_group_name(const std::string& tag, const std::vector<int64_t>& ranks,
                              int64_t group_size) {
  std::string r;
  for (int64_t x : ranks) r += (r.empty() ? "" : ",") + std::to_string(x);
  return str(kLegacyPrefix, group_size, "/", r, "/", tag);
}

bool parse_legacy_group_name(const std::string& name, std::string& tag,
                             std::vector<int64_t>& ranks, int64_t& group_size) {
  if (name.rfind(kLegacyPrefix, 0) != 0) return false;
  const size_t a = std::string(kLegacyPrefix).size();
  const size_t b = name.find('/', a);
  const size_t c = b == std::string::npos ? b : name.find('/', b + 1);
  if (c == std::string::npos) return false;
  try {
    group_size = std::stoll(name.substr(a, b - a));
    ranks.clear();
    std::stringstream rs(name.substr(b + 1, c - b - 1));
    for (std::string r; std::getline(rs, r, ',');) ranks.push_back(std::stoll(r));
  } catch (const std::exception&) {
    return false;
  }
  tag = name.substr(c + 1);
  return true;
}

}  // namespace anvil
