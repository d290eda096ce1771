#include "core/peak_memory.h"

#include <sys/resource.h>

namespace qforge {

int64_t peakResidentBytes() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace qforge
