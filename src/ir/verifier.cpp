#include "ir/verifier.h"

#include <algorithm>
#include <unordered_set>

#include "core/error.h"

namespace qforge {

namespace {

// ONNX Runtime refuses a model in which two nodes share a non-empty name.
void checkUniqueNodeNames(const Graph& graph) {
  std::unordered_set<std::string> seen;
  for (const Node* node : graph.nodes()) {
    if (node->name().empty()) continue;
    require(seen.insert(node->name()).second,
            "two nodes are named '" + node->name() + "'; node names must be unique");
  }
}

void checkDefinitions(const Graph& graph) {
  for (Node* node : graph.nodes()) {
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      const Value* v = node->inputs()[i];
      if (v == nullptr) continue;
      const bool defined = v->producer() != nullptr || v->isInitializer() || graph.isGraphInput(v);
      require(defined, node->describe() + " reads '" + v->name() +
                           "', which no node, graph input or initializer defines");
      const auto& uses = v->uses();
      require(std::find(uses.begin(), uses.end(), Use{node, i}) != uses.end(),
              "internal: use list of '" + v->name() + "' misses " + node->describe());
    }
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      const Value* v = node->outputs()[i];
      require(
          v->producer() == node && v->producerOutputIndex() == i,
          "internal: '" + v->name() + "' does not record " + node->describe() + " as its producer");
      require(!v->isInitializer(), "'" + v->name() + "' is both an initializer and the output of " +
                                       node->describe() + "; a value is defined once");
      require(!graph.isGraphInput(v), "'" + v->name() +
                                          "' is both a graph input and the output of " +
                                          node->describe() + "; a value is defined once");
    }
  }
  for (const Value* out : graph.outputs()) {
    const bool defined =
        out->producer() != nullptr || out->isInitializer() || graph.isGraphInput(out);
    require(defined, "graph output '" + out->name() + "' is never defined");
  }
}

void checkInitializerTypes(const Graph& graph) {
  for (const Value* v : graph.initializers()) {
    const at::Tensor& t = v->initializer();
    require(fromScalarType(t.scalar_type()) == v->type.dtype,
            "initializer '" + v->name() + "' holds " + dtypeName(fromScalarType(t.scalar_type())) +
                " data but is declared " + dtypeName(v->type.dtype));
  }
}

// Every ONNX operator produces a value; a node without outputs computes nothing, and code that
// names a node by its first output (unnamed nodes) relies on one (a fuzzed model's output-less
// unnamed node ended `qforge inspect` in std::out_of_range, issue #22).
void checkNodesHaveOutputs(const Graph& graph) {
  for (const Node* node : graph.nodes()) {
    require(!node->outputs().empty(),
            node->describe() + " has no outputs; every node must produce at least one value");
  }
}

void checkUniqueNodeOutputs(const Graph& graph) {
  std::unordered_set<const Value*> seen;
  for (Node* node : graph.nodes()) {
    for (const Value* v : node->outputs()) {
      require(seen.insert(v).second, "value '" + v->name() + "' is defined more than once");
    }
  }
}

}  // namespace

void verifyGraph(const Graph& graph) {
  checkNodesHaveOutputs(graph);
  checkUniqueNodeOutputs(graph);
  checkUniqueNodeNames(graph);
  checkDefinitions(graph);
  checkInitializerTypes(graph);
  graph.topologicalOrder();  // throws on a cycle
}

}  // namespace qforge
