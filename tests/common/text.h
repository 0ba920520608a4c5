// Helpers for tests that read generated source text (the CUDA and C++ emitters' tests).
#pragma once

#include <cstddef>
#include <string>

namespace anvil::test {

/// How many times `what` occurs in `text` (overlapping occurrences counted).
inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace anvil::test
