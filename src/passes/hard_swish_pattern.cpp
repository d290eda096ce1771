#include "passes/hard_swish_pattern.h"

#include "ir/node_attributes.h"
#include "passes/pattern_match.h"

namespace qforge::passes {

std::vector<Node*> matchDecomposedHardSwish(const Graph& graph, Node* hard_sigmoid) {
  if (hard_sigmoid->opType() != "HardSigmoid" || !isDefaultDomain(*hard_sigmoid)) return {};
  // ONNX's defaults are alpha 0.2 and beta 0.5; HardSwish's gate is x / 6 + 1/2.
  const double alpha = floatAttr(*hard_sigmoid, "alpha", 0.2);
  const double beta = floatAttr(*hard_sigmoid, "beta", 0.5);
  if (!closeTo(alpha, 1.0 / 6.0) || !closeTo(beta, 0.5)) return {};
  const Value* x = hard_sigmoid->input(0);
  Node* mul = onlyReader(graph, hard_sigmoid->output(0), "Mul");
  if (x == nullptr || mul == nullptr || otherInput(*mul, hard_sigmoid->output(0)) != x) return {};
  return {hard_sigmoid, mul};
}

}  // namespace qforge::passes
