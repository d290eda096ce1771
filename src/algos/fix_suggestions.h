// What to change about one quantizer that hurts a model's outputs, drawn from what the backend
// allows (backends::Alternatives) and from what the quantizer sees: each fix with a reason and the
// quantization config override that applies it (passes/quant_config.h), so it can be edited and
// replayed with `qforge quantize --config`. Ordered from the cheapest on the device to the most
// expensive; keeping the unit float is always last.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "algos/sensitivity.h"
#include "backends/backend_config.h"
#include "passes/insert_fake_quant.h"

namespace qforge::algos {

struct FixSuggestion {
  std::string fix;  // "observer", "per-channel", "cle", "wider", "16-bit", "float"
  std::string why;
  nlohmann::json override_entry;  // one entry of a config's `overrides`; null for a flag
  std::string flag;               // a `qforge quantize` flag that applies it ("--cle"); "" none
};

// Thresholds of the rules, named for the report and the tests.
inline constexpr double kOutlierRatio = 3.0;   // max |x| over the 99.9th percentile's
inline constexpr double kChannelSpread = 4.0;  // largest channel range over the median one
inline constexpr double kClippedShare = 1e-3;  // values the grid clips

// The fixes for `point` (a quantizer of a unit; graph input/output quantizers and derived biases
// get none: no per-node override reaches them).
std::vector<FixSuggestion> suggestFixes(const passes::QuantPoint& point,
                                        const QuantizerSensitivity& sensitivity,
                                        const std::string& unit_ops,
                                        const backends::BackendConfig& backend);

}  // namespace qforge::algos
