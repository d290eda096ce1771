#include "cli/json_report.h"

#include "core/peak_memory.h"

namespace qforge::cli {

std::string jsonReportText(nlohmann::json report) {
  return withPeakResidentBytes(std::move(report)).dump(2) + "\n";
}

}  // namespace qforge::cli
