#include "passes/gelu_pattern.h"

#include <cmath>

#include "ir/node_attributes.h"
#include "passes/pattern_match.h"

namespace qforge::passes {

namespace {

// The input x that `scale` divides by sqrt(2) or multiplies by 1/sqrt(2); null otherwise.
const Value* scaledInput(const Node& scale) {
  if (!isDefaultDomain(scale) || scale.inputs().size() != 2) return nullptr;
  if (scale.opType() == "Div")
    return isScalarConstant(scale.input(1), std::sqrt(2.0)) ? scale.input(0) : nullptr;
  if (scale.opType() != "Mul") return nullptr;
  for (size_t i = 0; i < 2; ++i) {
    if (isScalarConstant(scale.input(1 - i), 1.0 / std::sqrt(2.0))) return scale.input(i);
  }
  return nullptr;
}

}  // namespace

std::vector<Node*> matchDecomposedGelu(const Graph& graph, Node* scale) {
  const Value* x = scaledInput(*scale);
  if (x == nullptr) return {};
  Node* erf = onlyReader(graph, scale->output(0), "Erf");
  if (erf == nullptr) return {};
  Node* add_one = onlyReader(graph, erf->output(0), "Add");
  if (add_one == nullptr || !isScalarConstant(otherInput(*add_one, erf->output(0)), 1.0)) return {};
  Node* first = onlyReader(graph, add_one->output(0), "Mul");
  if (first == nullptr) return {};
  Node* second = onlyReader(graph, first->output(0), "Mul");
  if (second == nullptr) return {};
  const Value* first_other = otherInput(*first, add_one->output(0));
  const Value* second_other = otherInput(*second, first->output(0));
  const bool x_then_half = first_other == x && isScalarConstant(second_other, 0.5);
  const bool half_then_x = isScalarConstant(first_other, 0.5) && second_other == x;
  if (!x_then_half && !half_then_x) return {};
  return {scale, erf, add_one, first, second};
}

}  // namespace qforge::passes
