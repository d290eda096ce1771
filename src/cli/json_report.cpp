#include "cli/json_report.h"

#include "core/peak_memory.h"

namespace qforge::cli {

std::string jsonReportText(nlohmann::json report) {
  if (report.is_object() && !report.contains("peak_rss_bytes"))
    report["peak_rss_bytes"] = peakResidentBytes();
  return report.dump(2) + "\n";
}

}  // namespace qforge::cli
