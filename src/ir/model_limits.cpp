#include "ir/model_limits.h"

#include <ATen/ATen.h>

#include <limits>
#include <string>
#include <vector>

#include "core/resource_limits.h"
#include "ir/dtype.h"

namespace qforge {

namespace {

struct Tally {
  int64_t nodes = 0;
  int64_t bytes = 0;
};

// Bytes an initializer declares by its shape (elements of an unsupported type count one byte:
// the runtime refuses those later, by name).
int64_t declaredBytes(const onnx::TensorProto& t) {
  const DType dtype = static_cast<DType>(t.data_type());
  const int64_t element =
      hasScalarType(dtype) ? static_cast<int64_t>(c10::elementSize(toScalarType(dtype))) : 1;
  return tensorBytes(std::vector<int64_t>(t.dims().begin(), t.dims().end()), element);
}

void tallyGraph(const onnx::GraphProto& g, int64_t depth, Tally& tally) {
  const ResourceLimits& limits = resourceLimits();
  for (const onnx::TensorProto& init : g.initializer()) {
    const std::string what = "initializer '" + init.name() + "'";
    const int64_t bytes = declaredBytes(init);
    requireTensorBytes(bytes, what);
    tally.bytes = bytes > limits.max_model_bytes - tally.bytes ? limits.max_model_bytes + 1
                                                               : tally.bytes + bytes;
    if (tally.bytes > limits.max_model_bytes) {
      throw ResourceLimitError(
          "the initializers add up to more than " + byteSizeText(limits.max_model_bytes) +
          " (the limit for a model) at " + what +
          "; if the model really is that large, raise the limit with --max-model-bytes (or "
          "QFORGE_MAX_MODEL_BYTES)");
    }
  }
  tally.nodes += g.node_size();
  if (tally.nodes > limits.max_nodes) {
    throw ResourceLimitError("the model has more than " + std::to_string(limits.max_nodes) +
                             " nodes (the limit, subgraphs included); if it really is that "
                             "large, raise the limit with --max-nodes (or QFORGE_MAX_NODES)");
  }
  for (const onnx::NodeProto& n : g.node()) {
    for (const onnx::AttributeProto& a : n.attribute()) {
      std::vector<const onnx::GraphProto*> bodies;
      if (a.has_g()) bodies.push_back(&a.g());
      for (const onnx::GraphProto& body : a.graphs())
        bodies.push_back(&body);
      for (const onnx::GraphProto* body : bodies) {
        if (depth + 1 > limits.max_subgraph_depth) {
          throw ResourceLimitError(
              "node '" + n.name() + "' (" + n.op_type() + "): its body '" + a.name() +
              "' is nested " + std::to_string(depth + 1) + " deep, above the limit of " +
              std::to_string(limits.max_subgraph_depth) +
              "; raise it with --max-subgraph-depth (or QFORGE_MAX_SUBGRAPH_DEPTH)");
        }
        tallyGraph(*body, depth + 1, tally);
      }
    }
  }
}

}  // namespace

void checkModelLimits(const onnx::GraphProto& graph) {
  Tally tally;
  tallyGraph(graph, 0, tally);
}

}  // namespace qforge
