#include "core/allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/sanitizers.h"

namespace qforge {
namespace {

TEST(AllocatorTest, AppliesThePolicyUnlessSwitchedOff) {
  unsetenv("QFORGE_MALLOC_TUNING");
#ifdef QFORGE_ASAN
  // ASan's allocator replaces glibc's, and its mallopt accepts nothing (scripts/sanitize.sh).
  EXPECT_FALSE(configureAllocator());
#else
  EXPECT_TRUE(configureAllocator());
#endif
  setenv("QFORGE_MALLOC_TUNING", "0", 1);
  EXPECT_FALSE(configureAllocator());
  unsetenv("QFORGE_MALLOC_TUNING");
}

}  // namespace
}  // namespace qforge
