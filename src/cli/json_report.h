// What every `--json` prints: the command's report with the process's peak resident memory
// (`peak_rss_bytes`) added, so a run's memory is on record beside its results.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace qforge::cli {

// `report` with peak_rss_bytes set (kept when the report measured it itself), as two-space
// indented JSON and a newline.
std::string jsonReportText(nlohmann::json report);

}  // namespace qforge::cli
