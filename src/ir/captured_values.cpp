#include "ir/captured_values.h"

#include <unordered_set>

namespace qforge {

namespace {

void collectOuterReads(const onnx::GraphProto& body, std::vector<std::string>& reads,
                       std::unordered_set<std::string>& seen) {
  std::unordered_set<std::string> defined;
  for (const auto& in : body.input())
    defined.insert(in.name());
  for (const auto& init : body.initializer())
    defined.insert(init.name());
  for (const auto& init : body.sparse_initializer())
    defined.insert(init.values().name());
  for (const auto& node : body.node()) {
    for (const auto& out : node.output())
      defined.insert(out);
  }
  auto note = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name) && seen.insert(name).second) reads.push_back(name);
  };
  for (const auto& node : body.node()) {
    for (const auto& in : node.input())
      note(in);
    for (const auto& attribute : node.attribute()) {
      std::vector<std::string> nested;
      std::unordered_set<std::string> nested_seen;
      if (attribute.has_g()) collectOuterReads(attribute.g(), nested, nested_seen);
      for (const auto& g : attribute.graphs())
        collectOuterReads(g, nested, nested_seen);
      for (const auto& name : nested)
        note(name);
    }
  }
  for (const auto& out : body.output())
    note(out.name());
}

void renameInBody(onnx::GraphProto& body, const std::map<std::string, std::string>& renames) {
  auto renamed = [&](std::string* name) {
    auto it = renames.find(*name);
    if (it != renames.end()) *name = it->second;
  };
  // ONNX forbids a body to redefine an outer name, so every read of one is a read from outside.
  for (auto& node : *body.mutable_node()) {
    for (auto& in : *node.mutable_input())
      renamed(&in);
    for (auto& attribute : *node.mutable_attribute()) {
      if (attribute.has_g()) renameInBody(*attribute.mutable_g(), renames);
      for (auto& g : *attribute.mutable_graphs())
        renameInBody(g, renames);
    }
  }
  for (auto& out : *body.mutable_output())
    renamed(out.mutable_name());
}

}  // namespace

std::vector<onnx::GraphProto> subgraphsOf(const Attribute& attribute) {
  if (attribute.kind != AttributeKind::Opaque) return {};
  onnx::AttributeProto proto;
  if (!proto.ParseFromString(attribute.opaque_proto)) return {};
  std::vector<onnx::GraphProto> bodies;
  if (proto.has_g()) bodies.push_back(proto.g());
  for (const auto& g : proto.graphs())
    bodies.push_back(g);
  return bodies;
}

bool hasSubgraphs(const Node& node) {
  for (const Attribute& a : node.attributes.all()) {
    if (!subgraphsOf(a).empty()) return true;
  }
  return false;
}

std::vector<std::string> outerReads(const onnx::GraphProto& body) {
  std::vector<std::string> reads;
  std::unordered_set<std::string> seen;
  collectOuterReads(body, reads, seen);
  return reads;
}

std::vector<std::string> outerReads(const std::vector<Attribute>& attributes) {
  std::vector<std::string> reads;
  std::unordered_set<std::string> seen;
  for (const Attribute& a : attributes) {
    for (const onnx::GraphProto& body : subgraphsOf(a)) {
      for (const std::string& name : outerReads(body)) {
        if (seen.insert(name).second) reads.push_back(name);
      }
    }
  }
  return reads;
}

std::vector<std::string> capturedNames(const Node& node) {
  const Attribute* a = node.attributes.find(kCapturedInputsAttribute);
  return a != nullptr ? a->strings : std::vector<std::string>{};
}

size_t onnxInputCount(const Node& node) {
  const size_t captured = capturedNames(node).size();
  return node.inputs().size() >= captured ? node.inputs().size() - captured : 0;
}

void renameOuterReads(onnx::GraphProto& body, const std::map<std::string, std::string>& renames) {
  if (!renames.empty()) renameInBody(body, renames);
}

}  // namespace qforge
