#include "passes/constants_to_initializers.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "ir/node_attributes.h"

namespace qforge::passes {

namespace {

// The tensor a Constant node produces, as the executor's Constant lowering builds it; nullopt
// for constants that are not numeric tensors or do not have exactly one value attribute.
std::optional<at::Tensor> constantTensor(const Node& node) {
  static const char* const kValueAttrs[] = {"value",         "value_float", "value_floats",
                                            "value_int",     "value_ints",  "value_string",
                                            "value_strings", "sparse_value"};
  const Attribute* found = nullptr;
  for (const char* name : kValueAttrs) {
    const Attribute* a = node.attributes.find(name);
    if (a == nullptr) continue;
    if (found != nullptr) return std::nullopt;
    found = a;
  }
  if (found == nullptr) return std::nullopt;
  const std::string& name = found->name;
  const AttributeKind kind = found->kind;
  if (name == "value" && kind == AttributeKind::Tensor && found->t.defined()) return found->t;
  if (name == "value_float" && kind == AttributeKind::Float) {
    return at::scalar_tensor(found->f, at::kFloat);
  }
  if (name == "value_floats" && kind == AttributeKind::Floats) {
    return at::tensor(at::ArrayRef<double>(found->floats), at::kDouble).to(at::kFloat);
  }
  if (name == "value_int" && kind == AttributeKind::Int) {
    return at::scalar_tensor(found->i, at::kLong);
  }
  if (name == "value_ints" && kind == AttributeKind::Ints) {
    return at::tensor(at::ArrayRef<int64_t>(found->ints), at::kLong);
  }
  return std::nullopt;
}

}  // namespace

size_t constantsToInitializers(Graph& graph) {
  size_t converted = 0;
  for (Node* node : graph.nodes()) {
    if (node->opType() != "Constant" || !isDefaultDomain(*node)) continue;
    if (node->outputs().size() != 1 || !node->inputs().empty()) continue;
    Value* out = node->output(0);
    if (graph.isGraphOutput(out)) continue;
    std::optional<at::Tensor> tensor = constantTensor(*node);
    if (!tensor) continue;

    // The initializer takes the output's name, which is free only once the node is gone.
    const std::string name = out->name();
    const std::string doc_string = out->doc_string;
    Value* init = graph.addInitializer(graph.uniqueName(name + "_constant"), tensor->clone());
    graph.replaceAllUsesWith(out, init, /*include_graph_outputs=*/false);
    graph.removeNode(node);
    graph.renameValue(init, name);
    init->doc_string = doc_string;
    ++converted;
  }
  return converted;
}

}  // namespace qforge::passes
