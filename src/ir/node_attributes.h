// Reading a node's scalar attributes with a fallback, and the default-domain test, as the passes
// and writers that inspect ONNX nodes need them.
#pragma once

#include <string>

#include "ir/graph.h"

namespace qforge {

// The node's int attribute `name`, or `fallback` when it is missing or not an int.
inline int64_t intAttr(const Node& node, const std::string& name, int64_t fallback) {
  const Attribute* a = node.attributes.find(name);
  return a != nullptr && a->kind == AttributeKind::Int ? a->i : fallback;
}

// The node's float attribute `name`, or `fallback` when it is missing or not a float.
inline double floatAttr(const Node& node, const std::string& name, double fallback) {
  const Attribute* a = node.attributes.find(name);
  return a != nullptr && a->kind == AttributeKind::Float ? a->f : fallback;
}

// "" and "ai.onnx" name the same (default) domain.
inline bool isDefaultDomain(const Node& node) {
  return node.domain().empty() || node.domain() == "ai.onnx";
}

}  // namespace qforge
