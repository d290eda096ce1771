#include "passes/zero_bias_under_batchnorm.h"

#include "exec/op_traits.h"

namespace qforge::passes {

int addZeroBiasesUnderBatchNorm(Graph& graph, std::vector<QuantUnit>& units) {
  int added = 0;
  for (QuantUnit& unit : units) {
    Node* producer = unit.anchor();
    if (unit.nodes.size() < 2 || unit.nodes[1]->opType() != "BatchNormalization") continue;
    const OpInfo* info = opInfoFor(graph, *producer);
    if (!absorbsBatchNorm(graph, *producer) || info->weight_inputs.empty() ||
        info->bias_input < 0) {
      continue;
    }
    const auto bias_slot = static_cast<size_t>(info->bias_input);
    const Value* weight = producer->input(static_cast<size_t>(info->weight_inputs.front()));
    if (producer->input(bias_slot) != nullptr || weight == nullptr || !weight->isInitializer()) {
      continue;
    }
    const at::Tensor& w = weight->initializer();
    const int64_t channels = weightOutputChannels(info, *producer, w);
    if (channels < 0) continue;
    const std::string label = producer->name().empty() ? unit.name : producer->name();
    Value* bias =
        graph.addInitializer(graph.uniqueName(label + "_bias"), at::zeros({channels}, w.options()));
    graph.setInput(producer, bias_slot, bias);
    if (info->weight_layout == WeightLayout::GemmB) producer->attributes.set(Attribute::makeFloat("beta", 1.0));
    unit.bias = Use{producer, bias_slot};
    ++added;
  }
  return added;
}

}  // namespace qforge::passes
