#include "passes/hard_swish_pattern.h"

#include "ir/node_attributes.h"
#include "passes/pattern_match.h"
#include "passes/quant_units.h"

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

namespace {

// The node that divides `v` by 6 or multiplies it by 1/6, when it alone reads `v`.
Node* sixthOf(const Graph& graph, const Value* v) {
  if (Node* div = onlyReader(graph, v, "Div");
      div && div->input(0) == v && isScalarConstant(div->input(1), 6.0))
    return div;
  if (Node* mul = onlyReader(graph, v, "Mul");
      mul && isScalarConstant(otherInput(*mul, v), 1 / 6.0))
    return mul;
  return nullptr;
}

// The Mul of `v` by `x`, when it alone reads `v`.
Node* productWith(const Graph& graph, const Value* v, const Value* x) {
  Node* mul = onlyReader(graph, v, "Mul");
  return mul && otherInput(*mul, v) == x ? mul : nullptr;
}

}  // namespace

std::vector<Node*> matchClippedHardSwish(const Graph& graph, Node* add) {
  if (add->opType() != "Add" || !isDefaultDomain(*add) || add->inputs().size() != 2) return {};
  const Value* x = isScalarConstant(add->input(1), 3.0)   ? add->input(0)
                   : isScalarConstant(add->input(0), 3.0) ? add->input(1)
                                                          : nullptr;
  if (x == nullptr || isConstant(x)) return {};
  Node* clip = onlyReader(graph, add->output(0), "Clip");
  if (clip == nullptr || clipBound(*clip, 1, "min") != 0.0 || clipBound(*clip, 2, "max") != 6.0)
    return {};
  // x * relu6 / 6, or x * (relu6 / 6).
  if (Node* product = productWith(graph, clip->output(0), x)) {
    if (Node* sixth = sixthOf(graph, product->output(0))) return {add, clip, product, sixth};
    return {};
  }
  if (Node* sixth = sixthOf(graph, clip->output(0))) {
    if (Node* product = productWith(graph, sixth->output(0), x)) return {add, clip, sixth, product};
  }
  return {};
}

}  // namespace qforge::passes
