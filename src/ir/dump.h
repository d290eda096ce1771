// A readable text form of a graph, for tests, debugging and `qforge inspect --dump`.
#pragma once

#include <string>

#include "ir/graph.h"

namespace qforge {

// One line per input, initializer (shape only), node in topological order, and output, e.g.
//   %y: float32[1,8,4,4] = Conv[kernel_shape=[3,3], pads=[1,1,1,1]](%x, %w, %b)
std::string dumpGraph(const Graph& graph);

}  // namespace qforge
