// Turns Constant nodes into initializers, so later passes find Clip's bounds, Reshape's shape or a
// Mul's scale as initializers instead of having to look through Constant producers.
#pragma once

#include <cstddef>

#include "ir/graph.h"

namespace qforge::passes {

// Replaces every numeric Constant node (attribute value, value_float(s) or value_int(s)) by an
// initializer of the same name, dtype and shape, and returns how many were replaced.
// Left as nodes: Constants whose output is a graph output (the model's outputs stay produced by
// nodes, as ONNX runtimes expect), string and sparse constants (qforge holds numeric tensors only)
// and malformed ones (not exactly one value attribute; the executor reports those).
size_t constantsToInitializers(Graph& graph);

}  // namespace qforge::passes
