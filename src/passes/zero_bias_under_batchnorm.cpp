#include "passes/zero_bias_under_batchnorm.h"

namespace qforge::passes {

namespace {

// Output channels of `producer`'s weight `w` (the length its bias must have).
int64_t outputChannels(const Node& producer, const at::Tensor& w) {
  const std::string& op = producer.opType();
  if (op == "ConvTranspose") {
    const Attribute* group = producer.attributes.find("group");
    return w.size(1) * (group != nullptr ? group->i : 1);
  }
  if (op == "Gemm") {
    const Attribute* trans_b = producer.attributes.find("transB");
    if (trans_b == nullptr || trans_b->i == 0) return w.size(1);
  }
  return w.size(0);
}

}  // namespace

int addZeroBiasesUnderBatchNorm(Graph& graph, std::vector<QuantUnit>& units) {
  int added = 0;
  for (QuantUnit& unit : units) {
    Node* producer = unit.anchor();
    const std::string& op = producer->opType();
    if (unit.nodes.size() < 2 || unit.nodes[1]->opType() != "BatchNormalization") continue;
    if (op != "Conv" && op != "ConvTranspose" && op != "Gemm") continue;
    if (producer->input(2) != nullptr || producer->input(1) == nullptr ||
        !producer->input(1)->isInitializer()) {
      continue;
    }
    const at::Tensor& w = producer->input(1)->initializer();
    if (w.dim() < 2) continue;
    const std::string label = producer->name().empty() ? unit.name : producer->name();
    Value* bias = graph.addInitializer(graph.uniqueName(label + "_bias"),
                                       at::zeros({outputChannels(*producer, w)}, w.options()));
    graph.setInput(producer, 2, bias);
    if (op == "Gemm") producer->attributes.set(Attribute::makeFloat("beta", 1.0));
    unit.bias = Use{producer, 2};
    ++added;
  }
  return added;
}

}  // namespace qforge::passes
