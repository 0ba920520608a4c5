// Storage: alignment, zero-fill, and the reuse cache for large blocks.
#include <gtest/gtest.h>

#include <cstring>

#include "core/storage.h"

namespace anvil {
namespace {

TEST(Storage, AllocateIsAlignedAndZeroed) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{3} << 20}) {
    auto s = Storage::allocate(n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s->data()) % kStorageAlignment, 0u) << n;
    EXPECT_EQ(s->nbytes(), n);
    const auto* p = static_cast<const unsigned char*>(s->data());
    for (size_t i = 0; i < n; i += 4093) EXPECT_EQ(p[i], 0) << n << " at " << i;
  }
}

// A freed large block is handed out again (its pages stay mapped), and allocate() still zeroes
// a reused block.
TEST(Storage, LargeBlocksAreReusedAndStillZeroed) {
  const size_t n = (size_t{5} << 20) + 123;
  void* first = nullptr;
  {
    auto s = Storage::allocate_uninitialized(n);
    first = s->data();
    std::memset(first, 0xab, n);
  }
  auto again = Storage::allocate(n);
  EXPECT_EQ(again->data(), first);
  const auto* p = static_cast<const unsigned char*>(again->data());
  for (size_t i = 0; i < n; i += 4093) ASSERT_EQ(p[i], 0) << i;
  // While `again` is alive, a second block of that size is a different one.
  auto other = Storage::allocate_uninitialized(n);
  EXPECT_NE(other->data(), again->data());
}

}  // namespace
}  // namespace anvil
