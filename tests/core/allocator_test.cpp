#include "core/allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace qforge {
namespace {

TEST(AllocatorTest, AppliesThePolicyUnlessSwitchedOff) {
  unsetenv("QFORGE_MALLOC_TUNING");
  EXPECT_TRUE(configureAllocator());
  setenv("QFORGE_MALLOC_TUNING", "0", 1);
  EXPECT_FALSE(configureAllocator());
  unsetenv("QFORGE_MALLOC_TUNING");
}

}  // namespace
}  // namespace qforge
