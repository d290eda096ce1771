// HiSilicon NNIE's quantization parameters as MQBench writes them
// (model_gfpq_param_dict.json): {"nnie": {"gfpq_param_dict": {layer: [data_max, ...]}}}, one list
// per layer (ONNX node; its first output's name when unnamed) holding the data_max of each
// quantized activation the node reads, in input order. Layers NNIE runs without requantizing
// (Flatten, Relu, PRelu, Sigmoid, Reshape, Softmax, Clip, GlobalAveragePool, Mul) and grouped
// convolutions are left out; a Resize/Upsample lists its data input only and is repeated as
// "<layer>_permute_<n>" (NNIE splits it into Upsample + Permute).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "deploy/deploy_model.h"

namespace qforge::deploy::formats {

// Throws naming the first activation without NNIE's data_max state.
std::string nnieGfpqParams(const DeployModel& model);

// The layer -> data_max lists as written.
std::map<std::string, std::vector<double>> parseNnieGfpqDict(const std::string& text,
                                                             const std::string& where);
// Back to a table through the graph the file was written for: each layer's values go to its
// non-constant inputs in order (non-affine activations with state {"data_max": [v]}).
QuantTable parseNnieGfpqParams(const std::string& text, const std::string& where,
                               const Graph& graph);

}  // namespace qforge::deploy::formats
