// Constant folding: a node whose inputs are all initializers (or omitted) is evaluated once, with
// the executor's own lowering, and its outputs become initializers. Shape and index arithmetic on
// constants, Constant nodes, a weight's Transpose or Reshape then no longer look like
// computations to quantize (passes/activation_values.h), and later passes read the values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "exec/op_info.h"
#include "ir/graph.h"

namespace qforge::passes {

// Larger results stay nodes: a folded tensor is held in memory and written into every model file.
inline constexpr int64_t kMaxFoldedBytes = int64_t{64} << 20;

// Folds nodes in topological order (so chains fold whole) and returns how many were folded.
// Left as they are: random ops (RandomNormal, Bernoulli...: a value per run), nodes with
// subgraphs, nodes whose outputs are graph outputs, ops the op table cannot run at the graph's
// opset, lowerings that fail (the executor reports those when the model runs), and results over
// `max_bytes` in total. Initializers only the folded nodes read are removed (not graph inputs).
// Lowerings come from `registry`.
size_t foldConstants(Graph& graph, int64_t max_bytes = kMaxFoldedBytes,
                     const OpRegistry& registry = OpRegistry::builtin());

}  // namespace qforge::passes
