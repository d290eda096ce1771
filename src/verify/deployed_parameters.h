// What verify checks in the exported files before running them: the scales and zero points
// they are written with, and the biases ONNX Runtime rounds to int32 in its integer kernels.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "exec/executor.h"
#include "passes/prepare.h"

namespace qforge::verify {

// The scale and zero point each exported integer tensor of the model at `path` is written with
// must be its quantizer's: one line per tensor that differs ("file: tensor 't' (quantizer 'q')
// is written with scale 0.1, the prepared model's is 0.05 ...").
std::vector<std::string> parameterMismatches(passes::PreparedModel& model,
                                             const nlohmann::json& manifest,
                                             const std::string& path);

// Bias initializers as ONNX Runtime rounds them: for each fused Conv/Gemm whose input and weight
// are quantized and whose bias is a float initializer, round(b / (s_x * s_w)) * (s_x * s_w).
TensorMap runtimeBiases(passes::PreparedModel& model, const nlohmann::json& manifest);

}  // namespace qforge::verify
