// Reads the text form dumpGraph writes (the grammar is in ir/dump.h) back into a Graph, so a test
// can state a graph in a few lines. parseGraph(dumpGraph(g)) rebuilds g for graphs of plain ops:
// names, types, attributes (floats as float32, as ONNX stores them), initializers of up to
// dumpGraph's `max_values` elements exactly, larger ones as zeros of their type and shape.
#pragma once

#include <string>

#include "ir/graph.h"

namespace qforge {

// Nodes may appear in any order (they are wired after all lines are read) and the result is not
// verified, so a test can also build a broken graph for the verifier. Bad text throws
// qforge::Error with one line: "graph text line 4, column 12: <what is wrong>".
Graph parseGraph(const std::string& text);

}  // namespace qforge
