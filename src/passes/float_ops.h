// The report's list of ops that compute in float although the backend quantizes around them:
// what a user reads to see which parts of the model will not run in integers.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "backends/backend_config.h"
#include "ir/graph.h"
#include "passes/activation_values.h"

namespace qforge::passes {

// One line per op type, "Softmax x2: node_a node_b", for the nodes that are in no quantized unit
// (`in_units`), are not FakeQuantize, shares-input ops of `backend`, pure data movement or shape
// computations (Shape, Cast, ConstantOfShape: the op table's facts), nor, given `activations`,
// ops that write no activation (arithmetic on sizes). At most four names per line, then "...".
std::vector<std::string> listFloatOps(const Graph& graph, const backends::BackendConfig& backend,
                                      const std::set<const Node*>& in_units,
                                      const ActivationValues* activations = nullptr);

}  // namespace qforge::passes
