// Error: the one exception type anvil's libraries raise for user-facing failures.
// Its message always says what went wrong, where, what was expected and what was found.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace anvil {

/// A user-facing error. `what()` reads "WHERE: WHAT (expected EXPECTED, got ACTUAL)".
class Error : public std::runtime_error {
 public:
  Error(std::string what, std::string where = "", std::string expected = "", std::string actual = "");

  const std::string& what_part() const { return what_; }
  const std::string& where() const { return where_; }
  const std::string& expected() const { return expected_; }
  const std::string& actual() const { return actual_; }

  /// Returns a copy whose location is prefixed with `outer` ("outer: inner-where").
  Error with_context(const std::string& outer) const;

 private:
  static std::string format(const std::string& what, const std::string& where,
                            const std::string& expected, const std::string& actual);
  std::string what_, where_, expected_, actual_;
};

/// Streams any printable values into one string: str("dim ", 3, " of ", name).
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  ((os << args), ...);
  return os.str();
}

}  // namespace anvil

/// Throws anvil::Error unless `cond` holds.
#define ANVIL_CHECK(cond, where, what, expected, actual)                              \
  do {                                                                                 \
    if (!(cond)) throw ::anvil::Error((what), (where), (expected), (actual));          \
  } while (0)

/// An internal invariant: a failure is a bug in anvil, not in the user's input.
#define ANVIL_INTERNAL_ASSERT(cond, msg)                                               \
  do {                                                                                 \
    if (!(cond))                                                                       \
      throw ::anvil::Error(std::string("internal error: ") + (msg),                    \
                           std::string(__FILE__) + ":" + std::to_string(__LINE__));   \
  } while (0)
