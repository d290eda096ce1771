// One run of a graph on sample inputs (exec/sample_inputs.h), for facts the declared types do not
// give: every intermediate's element type and shape is known after one batch. Passes ask it where
// ONNX shape inference fell short (a model without value_info, a graph built in code).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "ir/graph.h"

namespace qforge::passes {

struct SampleRun {
  TensorMap values;     // the wanted values, one batch of 1 (symbolic and unknown dims 1)
  std::string failure;  // why there are none: the executor's message; "" on success
};

// Runs `graph` once on a batch of one sample row and returns the `wanted` values. Open dims other
// than the batch are 1, or 64 and then 224 when the graph does not run on 1 (a CNN that
// downsamples an image of open size). A graph the executor cannot run (an unsupported op, an
// input without a declared shape, a shape no sample fits) gives no values and the first reason,
// never an exception: callers fall back to what the declared types say.
SampleRun runOnSample(const Graph& graph, const std::vector<std::string>& wanted);

}  // namespace qforge::passes
