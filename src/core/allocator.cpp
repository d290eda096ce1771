#include "core/allocator.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "core/sanitizers.h"
#include "core/tensor_pool.h"

namespace qforge {

bool configureAllocator() {
  const char* env = std::getenv("QFORGE_MALLOC_TUNING");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
#if defined(M_MMAP_MAX) && !defined(QFORGE_ASAN)
  // Retain up to 1 GiB of freed heap before returning it to the system.
  constexpr int kTrimThreshold = 1 << 30;
  const bool tuned = mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
  // The pool would hide a use after free from AddressSanitizer, so its builds keep ATen's own.
  return installTensorPool() && tuned;
#else
  return false;
#endif
}

}  // namespace qforge
