// Each unit's final weight and activation specs: the backend's defaults, the user's config on
// top, the backend's first/last-layer width, then the user's per-node overrides in file order.
#pragma once

#include <vector>

#include "backends/backend_config.h"
#include "passes/insert_fake_quant.h"
#include "passes/quant_config.h"
#include "passes/quant_units.h"

namespace qforge::passes {

// One UnitSettings per unit, parallel to `units`. Units whose anchor has weights are the "layers"
// of the first/last rule (backend.constraints.first_last_bits). Throws qforge::Error naming the
// config entry when a patch does not apply.
std::vector<UnitSettings> resolveUnitSettings(const std::vector<QuantUnit>& units,
                                              const backends::BackendConfig& backend,
                                              const QuantConfig& config);

}  // namespace qforge::passes
