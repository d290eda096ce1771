// ONNX -> Graph. Runs ONNX shape inference and the verifier so every later stage starts from a
// graph that is known to be well formed.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "ir/graph.h"

namespace qforge {

struct ImportOptions {
  bool infer_shapes = true;
  bool verify = true;
};

// Loads a model file. Every problem (unreadable, truncated, not ONNX, missing initializer, cycle,
// duplicate names, bad external data) is a qforge::Error whose message starts with the path.
Graph importOnnxFile(const std::string& path, const ImportOptions& options = {});

// Converts an in-memory model; `base_dir` resolves external data. Shape inference may add
// value_info to `model`.
Graph importOnnxModel(onnx::ModelProto& model, const std::string& base_dir,
                      const ImportOptions& options = {});

// A control-flow body (the graph attribute of If, Loop or Scan) as a Graph of its own, for an
// Executor to run: its graph inputs are the body's formal inputs, then one per value it reads
// from the graphs around it (`captured`, in outerReads order). Opsets come from `outer`.
struct Subgraph {
  Graph graph;
  std::vector<std::string> formal_inputs;
  std::vector<std::string> captured;
};
Subgraph importSubgraph(const onnx::GraphProto& body, const ModelInfo& outer);

// A copy treated as a loaded file would be: exported to a ModelProto and imported again, so ONNX
// shape inference and the verifier run on it (for a graph built in code that should behave like
// a model read from disk). A plain deep copy is Graph::clone().
Graph copyGraph(const Graph& graph);

}  // namespace qforge
