// Small value checks shared by the dist workers.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace anvil::dist::test {

/// Every element of t equals v (exactly: the tests use values exact in every dtype).
inline ::testing::AssertionResult all_equal(const Tensor& t, double v) {
  const auto vals = t.to_doubles();
  for (size_t i = 0; i < vals.size(); ++i)
    if (vals[i] != v)
      return ::testing::AssertionFailure()
             << t.type_str() << " element " << i << " is " << vals[i] << ", expected " << v;
  return ::testing::AssertionSuccess();
}

/// t's elements equal `want` (row-major).
inline ::testing::AssertionResult values_equal(const Tensor& t, const std::vector<double>& want) {
  const auto vals = t.to_doubles();
  if (vals.size() != want.size())
    return ::testing::AssertionFailure()
           << t.type_str() << " has " << vals.size() << " elements, expected " << want.size();
  for (size_t i = 0; i < vals.size(); ++i)
    if (vals[i] != want[i])
      return ::testing::AssertionFailure()
             << t.type_str() << " element " << i << " is " << vals[i] << ", expected " << want[i];
  return ::testing::AssertionSuccess();
}

/// Whether a gloo failure's diagnosis (gloo_diagnose.cpp) lists group rank `rank` among the peers
/// that "did not report failing this op" ("rank 1 did not ..." or "ranks 1, 2 did not ...").
inline bool names_silent_rank(const std::string& msg, int rank) {
  const size_t end = msg.find(" did not report failing this op");
  if (end == std::string::npos) return false;
  const size_t begin = msg.rfind("rank", end);
  if (begin == std::string::npos) return false;
  std::string list = msg.substr(begin, end - begin);  // "rank 1" / "ranks 1, 2"
  for (char& c : list)
    if (c == ',') c = ' ';
  std::istringstream is(list.substr(list.find(' ')));
  for (int r; is >> r;)
    if (r == rank) return true;
  return false;
}

/// True when a and b view the same memory (same storage and offset).
inline bool same_memory(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage() && a.storage_offset() == b.storage_offset();
}

/// Runs `fn`, expects an anvil::Error whose message contains every one of `parts`.
template <typename F>
::testing::AssertionResult throws_error(F&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      if (msg.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "error message lacks '" << p << "': " << msg;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no error was raised";
}

}  // namespace anvil::dist::test
