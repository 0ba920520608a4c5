// Tests for anvil::Error: the message names what, where, expected and actual.
#include <gtest/gtest.h>

#include "core/error.h"

namespace anvil {
namespace {

TEST(Error, MessageHasAllFourParts) {
  Error e("shape mismatch", "aten.mm.default", "[2, 3]", "[4, 5]");
  EXPECT_STREQ(e.what(), "aten.mm.default: shape mismatch (expected [2, 3], got [4, 5])");
  EXPECT_EQ(e.what_part(), "shape mismatch");
  EXPECT_EQ(e.where(), "aten.mm.default");
  EXPECT_EQ(e.expected(), "[2, 3]");
  EXPECT_EQ(e.actual(), "[4, 5]");
}

TEST(Error, OptionalParts) {
  EXPECT_STREQ(Error("boom").what(), "boom");
  EXPECT_STREQ(Error("boom", "here").what(), "here: boom");
  EXPECT_STREQ(Error("boom", "here", "x").what(), "here: boom (expected x, got -)");
  EXPECT_STREQ(Error("boom", "", "", "y").what(), "boom (expected -, got y)");
}

TEST(Error, WithContextPrefixesTheLocation) {
  Error inner("bad dtype", "weight w1", "f32", "f8e4m3fn");
  Error outer = inner.with_context("model.pt2");
  EXPECT_EQ(outer.where(), "model.pt2: weight w1");
  EXPECT_EQ(outer.expected(), "f32");
  EXPECT_EQ(outer.actual(), "f8e4m3fn");
  EXPECT_STREQ(outer.what(), "model.pt2: weight w1: bad dtype (expected f32, got f8e4m3fn)");
  EXPECT_EQ(Error("x").with_context("ctx").where(), "ctx");
}

TEST(Error, CheckMacros) {
  EXPECT_NO_THROW(ANVIL_CHECK(1 + 1 == 2, "w", "math", "2", "2"));
  try {
    int rank = 3;
    ANVIL_CHECK(rank == 2, "aten.t", "input must be 2-d", "rank 2", str("rank ", rank));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "aten.t: input must be 2-d (expected rank 2, got rank 3)");
  }
  try {
    ANVIL_INTERNAL_ASSERT(false, "invariant broken");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.what_part(), "internal error: invariant broken");
    EXPECT_NE(e.where().find("test_error.cpp:"), std::string::npos);
  }
  // Error is a std::runtime_error, whose what() is the formatted message.
  const std::string as_runtime_error = [] {
    try {
      throw Error("bad rank", "aten.t", "2", "3");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  }();
  EXPECT_EQ(as_runtime_error, "aten.t: bad rank (expected 2, got 3)");
}

TEST(Error, StrConcatenates) {
  EXPECT_EQ(str("dim ", 3, " of ", std::string("x"), ' ', 1.5), "dim 3 of x 1.5");
  EXPECT_EQ(str(), "");
}

}  // namespace
}  // namespace anvil
