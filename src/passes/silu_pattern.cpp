#include "passes/silu_pattern.h"

#include "ir/node_attributes.h"
#include "passes/pattern_match.h"

namespace qforge::passes {

std::vector<Node*> matchDecomposedSilu(const Graph& graph, Node* sigmoid) {
  if (sigmoid->opType() != "Sigmoid" || !isDefaultDomain(*sigmoid)) return {};
  const Value* x = sigmoid->input(0);
  Node* mul = onlyReader(graph, sigmoid->output(0), "Mul");
  if (x == nullptr || mul == nullptr || otherInput(*mul, sigmoid->output(0)) != x) return {};
  return {sigmoid, mul};
}

}  // namespace qforge::passes
