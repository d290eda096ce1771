// The process's peak resident set size: what every --json report carries (the CLI's and the
// Python module's), so memory is measured on every run without a separate tool.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

namespace qforge {

// Bytes of the largest resident set this process has had so far (getrusage's ru_maxrss).
int64_t peakResidentBytes();

// `report` with peak_rss_bytes set to peakResidentBytes(), unless it is no object or already
// holds the figure (a pipeline that measured it itself).
nlohmann::json withPeakResidentBytes(nlohmann::json report);

}  // namespace qforge
