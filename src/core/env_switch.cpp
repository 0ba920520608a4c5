#include "core/env_switch.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace anvil {

std::optional<bool> env_switch(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  const std::string s = v;
  if (s == "1") return true;
  if (s == "0") return false;
  throw Error(str("environment variable ", name, " is not 0 or 1"), "anvil settings", "0 or 1",
              str("'", s, "'"));
}

}  // namespace anvil
