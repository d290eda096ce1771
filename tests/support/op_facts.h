// The op table's facts about one node, as exec/op_traits.h answers them: for tests of the facts
// an op family sets when it registers its ops.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "exec/op_traits.h"
#include "ir/attribute.h"
#include "ir/graph.h"

namespace qforge::testing {

struct NodeFacts {
  bool known = false;         // the table has an entry at that opset
  std::set<std::string> set;  // the boolean facts that hold ("shape_computation", ...)
  OutputSign sign = OutputSign::Unknown;
};

// The facts of a default-domain `op_type` node with `attributes` in a graph importing `opset`.
inline NodeFacts factsOf(const std::string& op_type, int64_t opset,
                         const std::vector<Attribute>& attributes = {}) {
  Graph graph;
  graph.model.opset_imports[""] = opset;
  Node* node = graph.addNode(op_type, {graph.addValue("x")}, {"y"}, "node");
  for (const Attribute& a : attributes)
    node->attributes.set(a);
  NodeFacts facts;
  const OpInfo* info = opInfoFor(graph, *node);
  facts.known = info != nullptr;
  facts.sign = outputSign(info, *node);
  const std::pair<const char*, bool> all[] = {
      {"moves_data_only", movesDataOnly(graph, *node)},
      {"layout_only", isLayoutOnly(graph, *node)},
      {"moves_int8", movesInt8(graph, *node)},
      {"absorbs_batchnorm", absorbsBatchNorm(graph, *node)},
      {"combines_activations", combinesActivations(graph, *node)},
      {"shape_computation", isShapeComputation(graph, *node)},
      {"weighted", isWeightedOp(info) || isWeightInput(info, 1)}};
  for (const auto& [name, holds] : all) {
    if (holds) facts.set.insert(name);
  }
  return facts;
}

// The boolean facts of `op_type` at `opset` other than having weights.
inline std::set<std::string> trueFacts(const std::string& op_type, int64_t opset) {
  std::set<std::string> facts = factsOf(op_type, opset).set;
  facts.erase("weighted");
  return facts;
}

// What the output's sign follows for `op_type` at `opset` with `attributes`.
inline OutputSign signOf(const std::string& op_type, int64_t opset,
                         const std::vector<Attribute>& attributes = {}) {
  return factsOf(op_type, opset, attributes).sign;
}

}  // namespace qforge::testing
