// Quantization units: the one definition of "what runs as one quantized kernel" (Conv+BN+ReLU,
// Gemm, Conv+Add+ReLU, ...) from a backend's op roles and fusion patterns. Inserting fake
// quantizers, lowering for deploy and the report all read the same units.
#pragma once

#include <string>
#include <vector>

#include "backends/backend_config.h"
#include "ir/graph.h"
#include "passes/activation_values.h"

namespace qforge::passes {

struct QuantUnit {
  std::string name;          // the anchor node's name (or its first output's when unnamed)
  std::vector<Node*> nodes;  // anchor first, then the fused ops in chain order
  backends::OpRole role = backends::OpRole::Quantizable;
  // (node, slot) pairs through which the unit reads activations from outside itself.
  std::vector<Use> activation_inputs;
  // (node, slot) pairs of the anchor's constant weights (initializers), and of its bias.
  std::vector<Use> weights;
  Use bias;                 // bias.node == nullptr when there is none (or it is not an initializer)
  Value* output = nullptr;  // what the unit writes: the last node's first output
  // False when the output is no activation (an int64 or shape-derived value): no quantizer on it.
  bool output_carries_activations = true;
  std::string pattern;  // the fusion pattern that formed it ("" for a lone op)

  Node* anchor() const { return nodes.front(); }
  std::string ops() const;  // "Conv+BatchNormalization+Relu"
};

// The role `op_type` plays for `backend` once the user's `extra_quantizable` op types are added:
// an extra op is quantizable unless the backend says never; an unlisted op is Never (float).
backends::OpRole unitRole(const backends::BackendConfig& backend,
                          const std::vector<std::string>& extra_quantizable,
                          const std::string& op_type);

// Finds the units of `graph` in topological order: every op whose unitRole is quantizable or
// fixed becomes the anchor of one unit, extended by the longest fusion pattern that matches.
// A fused step must be the only reader of the previous step's output, which must not be a graph
// output. Only values that carry activations (passes/activation_values.h) count as activation
// inputs or a quantized output; an op that reads and writes none is no unit.
// `activations` (computed here when null) must describe `graph` as it is.
std::vector<QuantUnit> findQuantUnits(const Graph& graph, const backends::BackendConfig& backend,
                                      const std::vector<std::string>& extra_quantizable = {},
                                      const ActivationValues* activations = nullptr);

// True when `v` is a constant: an initializer or the output of a Constant node.
bool isConstant(const Value* v);

}  // namespace qforge::passes
