// The process's peak resident set size: what every --json report carries, so memory is measured
// on every run without a separate tool.
#pragma once

#include <cstdint>

namespace qforge {

// Bytes of the largest resident set this process has had so far (getrusage's ru_maxrss).
int64_t peakResidentBytes();

}  // namespace qforge
