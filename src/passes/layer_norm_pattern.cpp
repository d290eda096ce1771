#include "passes/layer_norm_pattern.h"

#include <ATen/ATen.h>

#include "ir/node_attributes.h"
#include "passes/pattern_match.h"
#include "passes/quant_units.h"

namespace qforge::passes {

namespace {

// Same reduction: the same axes (an attribute before opset 18, an input after; neither: all
// axes) with kept dims.
bool sameReduction(const Node& a, const Node& b) {
  if (intAttr(a, "keepdims", 1) != 1 || intAttr(b, "keepdims", 1) != 1) return false;
  const Attribute* axes_a = a.attributes.find("axes");
  const Attribute* axes_b = b.attributes.find("axes");
  if (axes_a != nullptr || axes_b != nullptr)
    return axes_a != nullptr && axes_b != nullptr && axes_a->ints == axes_b->ints;
  const Value* in_a = a.input(1);
  const Value* in_b = b.input(1);
  if (in_a == in_b) return true;  // the same axes value, or none (all axes)
  return in_a != nullptr && in_b != nullptr && in_a->isInitializer() && in_b->isInitializer() &&
         at::equal(in_a->initializer(), in_b->initializer());
}

}  // namespace

std::vector<Node*> matchDecomposedLayerNorm(const Graph& graph, Node* reduce_mean) {
  if (reduce_mean->opType() != "ReduceMean" || !isDefaultDomain(*reduce_mean)) return {};
  const Value* x = reduce_mean->input(0);
  Node* sub = onlyReader(graph, reduce_mean->output(0), "Sub");
  if (x == nullptr || sub == nullptr || sub->input(0) != x ||
      sub->input(1) != reduce_mean->output(0))
    return {};
  // The centred value feeds exactly the square and the division.
  const Value* centred = sub->output(0);
  if (graph.isGraphOutput(centred)) return {};
  Node* square = nullptr;
  Node* div = nullptr;
  for (const Use& u : centred->uses()) {
    const std::string& op = u.node->opType();
    if ((op == "Pow" && u.index == 0) || op == "Mul") {
      if (square != nullptr && square != u.node) return {};
      square = u.node;
    } else if (op == "Div" && u.index == 0) {
      if (div != nullptr) return {};
      div = u.node;
    } else {
      return {};
    }
  }
  if (square == nullptr || div == nullptr || !isDefaultDomain(*square) || !isDefaultDomain(*div))
    return {};
  if (square->opType() == "Pow") {
    const std::optional<double> exponent = scalarConstant(square->input(1));
    if (!exponent || *exponent != 2.0) return {};
  } else if (square->input(0) != centred || square->input(1) != centred) {
    return {};
  }
  Node* variance = onlyReader(graph, square->output(0), "ReduceMean");
  if (variance == nullptr || variance->input(0) != square->output(0) ||
      !sameReduction(*reduce_mean, *variance))
    return {};
  Node* add_epsilon = onlyReader(graph, variance->output(0), "Add");
  if (add_epsilon == nullptr || !scalarConstant(otherInput(*add_epsilon, variance->output(0))))
    return {};
  Node* sqrt = onlyReader(graph, add_epsilon->output(0), "Sqrt");
  if (sqrt == nullptr || onlyReader(graph, sqrt->output(0), "Div") != div ||
      div->input(1) != sqrt->output(0))
    return {};
  std::vector<Node*> nodes{reduce_mean, sub, square, variance, add_epsilon, sqrt, div};
  // The affine part, when the scale and bias are constants.
  if (Node* scale = onlyReader(graph, div->output(0), "Mul");
      scale != nullptr && isConstant(otherInput(*scale, div->output(0)))) {
    nodes.push_back(scale);
    if (Node* bias = onlyReader(graph, scale->output(0), "Add");
        bias != nullptr && isConstant(otherInput(*bias, scale->output(0))))
      nodes.push_back(bias);
  }
  return nodes;
}

}  // namespace qforge::passes
