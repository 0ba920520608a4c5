// The checks every test suite shares: one value comparison (NaN only where the reference has NaN
// at the same place, infinities equal, finite values within a tolerance relative to
// max(1, max |want|)) and one "throws anvil::Error whose message says X" expectation.
//
//   EXPECT_TRUE(anvil::test::close(got, want, 1e-4)) << "output 0";
//   ANVIL_EXPECT_ERROR(model.run({x}), "input 0");
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace anvil::test {

/// Largest |got - want| over finite pairs divided by max(1, max |finite want|). Returns +inf when
/// the sizes differ, when got is NaN where want is not (or the reverse), or when an infinity is
/// not matched by the same infinity: a NaN can never hide inside a max().
inline double rel_error(const std::vector<double>& got, const std::vector<double>& want,
                        int64_t* first_bad = nullptr) {
  if (first_bad) *first_bad = -1;
  if (got.size() != want.size()) return INFINITY;
  double scale = 1, err = 0;
  for (double v : want)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  int64_t worst_at = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = got[i], b = want[i];
    if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b)) {
      const bool same = (std::isnan(a) && std::isnan(b)) || a == b;
      if (!same) {
        if (first_bad) *first_bad = static_cast<int64_t>(i);
        return INFINITY;
      }
      continue;
    }
    const double d = std::fabs(a - b);
    if (d > err) err = d, worst_at = static_cast<int64_t>(i);
  }
  if (first_bad) *first_bad = worst_at;
  return err / scale;
}

/// The comparison as a gtest assertion, naming the worst element and both values.
inline ::testing::AssertionResult close(const std::vector<double>& got,
                                        const std::vector<double>& want, double tol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << "got " << got.size() << " values, want " << want.size();
  int64_t at = -1;
  const double err = rel_error(got, want, &at);
  if (err <= tol) return ::testing::AssertionSuccess();
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  r << "relative error " << err << " > " << tol;
  if (at >= 0) r << " at element " << at << ": got " << got[at] << ", want " << want[at];
  return r;
}

/// Tensors: sizes must be equal, then values as above.
inline ::testing::AssertionResult close(const Tensor& got, const Tensor& want, double tol) {
  if (got.sizes() != want.sizes())
    return ::testing::AssertionFailure()
           << "sizes " << shape_str(got.sizes()) << ", want " << shape_str(want.sizes());
  return close(got.to_doubles(), want.to_doubles(), tol);
}

/// The project's tolerance (ARCHITECTURE.md "Tests"), relative to max(1, max |want|): fp32 and
/// fp64 1e-4, bf16 and fp16 2e-2, integers and bool exact.
inline double tolerance_of(DType dtype) {
  if (dtype == DType::kBFloat16 || dtype == DType::kFloat16) return 2e-2;
  if (is_floating(dtype)) return 1e-4;
  return 0.0;
}

/// Tensors against a reference of the same dtype, at the project's tolerance for that dtype.
inline ::testing::AssertionResult matches_reference(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << got.type_str() << " vs " << want.type_str();
  return close(got, want, tolerance_of(want.dtype()));
}

/// The message of the anvil::Error `f` throws; "" when it throws none. Other exceptions pass
/// through (a test then fails on them as gtest reports uncaught exceptions).
template <typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const ::anvil::Error& e) {
    return e.what();
  }
  return "";
}

/// Checks that `message` came from a throw (non-empty) and contains `part`.
inline ::testing::AssertionResult error_says(const std::string& message, const std::string& part) {
  if (message.empty()) return ::testing::AssertionFailure() << "no anvil::Error was thrown";
  if (message.find(part) == std::string::npos)
    return ::testing::AssertionFailure()
           << "the error does not say \"" << part << "\": " << message;
  return ::testing::AssertionSuccess();
}

}  // namespace anvil::test

/// Expects `stmt` to throw anvil::Error whose message contains `part`: the specific error the
/// test stands for, not any error thrown on the way.
#define ANVIL_EXPECT_ERROR(stmt, part) \
  EXPECT_TRUE(::anvil::test::error_says(::anvil::test::error_message([&] { stmt; }), (part)))
#define ANVIL_ASSERT_ERROR(stmt, part) \
  ASSERT_TRUE(::anvil::test::error_says(::anvil::test::error_message([&] { stmt; }), (part)))
