#include "core/allocator.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace qforge {

bool configureAllocator() {
  const char* env = std::getenv("QFORGE_MALLOC_TUNING");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
#ifdef M_MMAP_MAX
  // Retain up to 1 GiB of freed heap before returning it to the system.
  constexpr int kTrimThreshold = 1 << 30;
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
  return false;
#endif
}

}  // namespace qforge
