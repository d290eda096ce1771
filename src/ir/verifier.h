// Structural checks every pass relies on: acyclic, every input defined, def/use lists consistent,
// types of initializers consistent with their declarations.
#pragma once

#include "ir/graph.h"

namespace qforge {

// Throws qforge::Error describing the first problem found (naming the node or value).
void verifyGraph(const Graph& graph);

}  // namespace qforge
