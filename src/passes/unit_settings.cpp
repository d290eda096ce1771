#include "passes/unit_settings.h"

#include <utility>

namespace qforge::passes {

namespace {

// Indices of the first and last units whose anchor has weights (-1 when none).
std::pair<int, int> firstAndLastWeighted(const std::vector<QuantUnit>& units) {
  int first = -1, last = -1;
  for (size_t i = 0; i < units.size(); ++i) {
    if (units[i].weights.empty()) continue;
    if (first < 0) first = static_cast<int>(i);
    last = static_cast<int>(i);
  }
  return {first, last};
}

}  // namespace

std::vector<UnitSettings> resolveUnitSettings(const std::vector<QuantUnit>& units,
                                              const backends::BackendConfig& backend,
                                              const QuantConfig& config) {
  const backends::QuantSpec weight =
      applySpecPatch(backend.weight, config.weight, config.where + ": weight");
  const backends::QuantSpec activation =
      applySpecPatch(backend.activation, config.activation, config.where + ": activation");
  const auto [first, last] = firstAndLastWeighted(units);
  std::vector<UnitSettings> settings;
  for (size_t i = 0; i < units.size(); ++i) {
    UnitSettings s{weight, activation, false};
    const int width = backend.constraints.first_last_bits;
    if (width > 0 && (static_cast<int>(i) == first || static_cast<int>(i) == last)) {
      s.weight.scheme.bits = width;
      s.activation.scheme.bits = width;
    }
    // Overrides apply in file order; a later one wins where they overlap.
    for (const NodeOverride& o : config.overrides) {
      if (!selects(o, *units[i].anchor())) continue;
      s.skip = s.skip || o.skip;
      s.weight = applySpecPatch(s.weight, o.weight, o.where + ".weight");
      s.activation = applySpecPatch(s.activation, o.activation, o.where + ".activation");
    }
    settings.push_back(s);
  }
  return settings;
}

}  // namespace qforge::passes
