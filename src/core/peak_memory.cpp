#include "core/peak_memory.h"

#include <sys/resource.h>

namespace qforge {

int64_t peakResidentBytes() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

nlohmann::json withPeakResidentBytes(nlohmann::json report) {
  if (report.is_object() && !report.contains("peak_rss_bytes"))
    report["peak_rss_bytes"] = peakResidentBytes();
  return report;
}

}  // namespace qforge
