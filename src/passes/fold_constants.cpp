#include "passes/fold_constants.h"

#include <ATen/ATen.h>

#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/op_info.h"

namespace qforge::passes {

namespace {

bool isRandom(const Node& node) {
  static const std::set<std::string> kRandomOps = {"RandomNormal",     "RandomUniform",
                                                   "RandomNormalLike", "RandomUniformLike",
                                                   "Multinomial",      "Bernoulli"};
  return kRandomOps.count(node.opType()) > 0;
}

bool hasSubgraph(const Node& node) {
  for (const Attribute& a : node.attributes.all()) {
    if (a.kind == AttributeKind::Opaque) return true;
  }
  return false;
}

bool allInputsConstant(const Node& node) {
  for (const Value* in : node.inputs()) {
    if (in != nullptr && !in->isInitializer()) return false;
  }
  return true;
}

// ConstantOfShape's result size is known before it is made, and is the one way a tiny input asks
// for gigabytes.
bool fillTooLarge(const Node& node, int64_t max_bytes) {
  if (node.opType() != "ConstantOfShape" || node.input(0) == nullptr) return false;
  const at::Tensor shape = node.input(0)->initializer();
  double elements = 1;
  for (int64_t i = 0; i < shape.numel(); ++i)
    elements *= static_cast<double>(shape.reshape({-1})[i].item<int64_t>());
  return elements * 8 > static_cast<double>(max_bytes);  // 8: the widest element type
}

// The node's outputs computed by its lowering, or none when it cannot be folded.
std::vector<at::Tensor> evaluate(const Graph& graph, const Node& node, int64_t max_bytes,
                                 const OpRegistry& registry) {
  const int64_t opset = graph.model.opsetFor(node.domain());
  const OpInfo* info = registry.find(node.domain(), node.opType(), opset);
  if (info == nullptr || fillTooLarge(node, max_bytes)) return {};
  std::vector<at::Tensor> inputs;
  for (const Value* in : node.inputs())
    inputs.push_back(in != nullptr ? in->initializer() : at::Tensor());
  std::vector<at::Tensor> outputs;
  try {
    at::NoGradGuard no_grad;
    outputs = info->run(OpContext(node, opset, std::move(inputs)));
  } catch (const std::exception&) {
    return {};  // left to the executor, which names the node when the model runs
  }
  int64_t bytes = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i < node.outputs().size() && !node.output(i)->uses().empty()) {
      if (!outputs[i].defined()) return {};
      bytes += outputs[i].numel() * static_cast<int64_t>(outputs[i].element_size());
    }
  }
  if (outputs.size() < node.outputs().size() || bytes > max_bytes) return {};
  return outputs;
}

bool foldable(const Graph& graph, const Node& node) {
  if (isRandom(node) || hasSubgraph(node) || !allInputsConstant(node)) return false;
  for (const Value* out : node.outputs()) {
    if (graph.isGraphOutput(out)) return false;
  }
  return true;
}

// Replaces `node` by one initializer per used output, under the output's name.
void replaceByInitializers(Graph& graph, Node* node, const std::vector<at::Tensor>& results) {
  std::vector<std::pair<Value*, Value*>> replaced;  // (initializer, output it replaces)
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    Value* out = node->output(i);
    if (out->uses().empty()) continue;
    Value* init = graph.addInitializer(graph.uniqueName(out->name() + "_folded"),
                                       results[i].detach().contiguous().clone());
    init->doc_string = out->doc_string;
    graph.replaceAllUsesWith(out, init, /*include_graph_outputs=*/false);
    replaced.emplace_back(init, out);
  }
  std::vector<std::string> names;
  for (const auto& [init, out] : replaced)
    names.push_back(out->name());
  const std::vector<Value*> inputs = node->inputs();
  graph.removeNode(node);
  for (size_t i = 0; i < replaced.size(); ++i)
    graph.renameValue(replaced[i].first, names[i]);
  for (Value* in : inputs) {
    if (in != nullptr && in->uses().empty() && !graph.isGraphInput(in) &&
        !graph.isGraphOutput(in) && graph.findValue(in->name()) == in) {
      graph.removeValue(in);
    }
  }
}

}  // namespace

size_t foldConstants(Graph& graph, int64_t max_bytes, const OpRegistry& registry) {
  size_t folded = 0;
  for (Node* node : graph.topologicalOrder()) {
    if (!foldable(graph, *node)) continue;
    const std::vector<at::Tensor> results = evaluate(graph, *node, max_bytes, registry);
    if (results.empty() && !node->outputs().empty()) continue;
    replaceByInitializers(graph, node, results);
    ++folded;
  }
  return folded;
}

}  // namespace qforge::passes
