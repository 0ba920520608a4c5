#include "core/error.h"

namespace anvil {

Error::Error(std::string what, std::string where, std::string expected, std::string actual)
    : std::runtime_error(format(what, where, expected, actual)),
      what_(std::move(what)),
      where_(std::move(where)),
      expected_(std::move(expected)),
      actual_(std::move(actual)) {}

std::string Error::format(const std::string& what, const std::string& where,
                          const std::string& expected, const std::string& actual) {
  std::string out = where.empty() ? what : where + ": " + what;
  if (!expected.empty() || !actual.empty()) {
    out += " (expected " + (expected.empty() ? std::string("-") : expected) + ", got " +
           (actual.empty() ? std::string("-") : actual) + ")";
  }
  return out;
}

Error Error::with_context(const std::string& outer) const {
  return Error(what_, where_.empty() ? outer : outer + ": " + where_, expected_, actual_);
}

}  // namespace anvil
