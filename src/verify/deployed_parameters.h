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

// Float weights ONNX Runtime quantizes on its own (its WeightBiasQuantization transformer, at
// every optimization level but disabled): a Conv, ConvTranspose or Gemm whose input comes from a
// per-tensor DequantizeLinear and whose output reaches a QuantizeLinear without branching
// (through Relu or Clip only) gets its float weight initializer quantized to int8 per tensor
// (range widened to zero, scale (max - min) / 255, zero point rounded to even) and its float
// bias to int32 on s_input * that scale. The values ORT computes with, by initializer name in
// `exported` (a model qforge wrote); an initializer both kinds of node read is left out.
TensorMap ortQuantizedWeights(const Graph& exported);

}  // namespace qforge::verify
