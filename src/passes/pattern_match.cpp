#include "passes/pattern_match.h"

#include <ATen/ATen.h>

#include <cmath>

#include "ir/node_attributes.h"
#include "passes/quant_units.h"

namespace qforge::passes {

Node* onlyReader(const Graph& graph, const Value* v, const char* op_type) {
  if (v == nullptr || v->uses().empty() || graph.isGraphOutput(v)) return nullptr;
  Node* reader = v->uses().front().node;
  for (const Use& u : v->uses())
    if (u.node != reader) return nullptr;
  return reader->opType() == op_type && isDefaultDomain(*reader) ? reader : nullptr;
}

std::optional<double> scalarConstant(const Value* v) {
  if (!isConstant(v)) return std::nullopt;
  at::Tensor t = v->initializer();
  if (!t.defined()) {
    const Attribute* a = v->producer()->attributes.find("value");
    if (a == nullptr || a->kind != AttributeKind::Tensor || !a->t.defined()) return std::nullopt;
    t = a->t;
  }
  if (t.numel() != 1 ||
      !(t.is_floating_point() || t.scalar_type() == at::kLong || t.scalar_type() == at::kInt))
    return std::nullopt;
  return t.to(at::kDouble).item<double>();
}

bool closeTo(double value, double expected) {
  return std::abs(value - expected) <= 1e-6 * std::abs(expected);
}

bool isScalarConstant(const Value* v, double expected) {
  const std::optional<double> value = scalarConstant(v);
  return value && closeTo(*value, expected);
}

std::optional<double> clipBound(const Node& clip, size_t slot, const char* attribute) {
  if (const Attribute* a = clip.attributes.find(attribute)) return a->f;
  return clip.inputs().size() > slot ? scalarConstant(clip.input(slot)) : std::nullopt;
}

const Value* otherInput(const Node& node, const Value* v) {
  if (node.inputs().size() != 2) return nullptr;
  if (node.input(0) == v) return node.input(1);
  if (node.input(1) == v) return node.input(0);
  return nullptr;
}

}  // namespace qforge::passes
