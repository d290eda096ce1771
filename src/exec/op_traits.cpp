#include "exec/op_traits.h"

#include <algorithm>

#include "ir/node_attributes.h"

namespace qforge {

const OpInfo* opInfoFor(const Graph& graph, const Node& node) {
  return OpRegistry::builtin().find(node.domain(), node.opType(),
                                    graph.model.opsetFor(node.domain()));
}

const OpInfo* opInfoFor(const std::string& op_type, int64_t opset) {
  return OpRegistry::builtin().find("", op_type, opset);
}

bool isWeightInput(const OpInfo* info, size_t slot) {
  return info != nullptr && std::find(info->weight_inputs.begin(), info->weight_inputs.end(),
                                      static_cast<int>(slot)) != info->weight_inputs.end();
}

bool isWeightedOp(const OpInfo* info) {
  return info != nullptr && !info->weight_inputs.empty() &&
         info->weight_layout != WeightLayout::None;
}

int64_t weightChannelAxis(const OpInfo* info, const Node& node, size_t slot,
                          const at::Tensor& weight) {
  if (!isWeightInput(info, slot) || weight.dim() < 2) return -1;
  switch (info->weight_layout) {
    case WeightLayout::None:
      return -1;
    case WeightLayout::OutputFirst:
      return 0;
    case WeightLayout::GroupedOutputSecond:
      return 1;
    case WeightLayout::GemmB:
      return intAttr(node, "transB", 0) != 0 ? 0 : 1;
    case WeightLayout::LastAxis:
      return weight.dim() - 1;
  }
  return -1;
}

int64_t weightOutputChannels(const OpInfo* info, const Node& node, const at::Tensor& weight) {
  if (info == nullptr || info->weight_inputs.empty()) return -1;
  const int64_t axis =
      weightChannelAxis(info, node, static_cast<size_t>(info->weight_inputs.front()), weight);
  if (axis < 0) return -1;
  const int64_t group =
      info->weight_layout == WeightLayout::GroupedOutputSecond ? intAttr(node, "group", 1) : 1;
  return weight.size(axis) * group;
}

OutputSign outputSign(const OpInfo* info, const Node& node) {
  if (info == nullptr) return OutputSign::Unknown;
  return info->output_sign_of ? info->output_sign_of(node) : info->output_sign;
}

bool combinesActivations(const Graph& graph, const Node& node) {
  const OpInfo* info = opInfoFor(graph, node);
  return info != nullptr && info->combines_activations;
}

bool movesDataOnly(const Graph& graph, const Node& node) {
  const OpInfo* info = opInfoFor(graph, node);
  return info != nullptr && info->moves_data_only;
}

bool isLayoutOnly(const Graph& graph, const Node& node) {
  const OpInfo* info = opInfoFor(graph, node);
  return info != nullptr && info->layout_only;
}

bool movesInt8(const Graph& graph, const Node& node) {
  const OpInfo* info = opInfoFor(graph, node);
  return info != nullptr && info->moves_int8;
}

bool absorbsBatchNorm(const Graph& graph, const Node& node) {
  const OpInfo* info = opInfoFor(graph, node);
  return info != nullptr && info->absorbs_batchnorm;
}

bool isShapeComputation(const Graph& graph, const Node& node) {
  const OpInfo* info = opInfoFor(graph, node);
  return info != nullptr && info->shape_computation;
}

}  // namespace qforge
