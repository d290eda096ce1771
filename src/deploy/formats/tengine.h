// Tengine's quantization table as MQBench writes it (model_for_tengine.scale): one line
// "tensor scale zero_point" per quantized activation, scale being the real step (real =
// (q - zero_point) * scale, not its reciprocal) and zero_point an integer on Tengine's uint8
// grid (a signed
// grid [qmin, qmax] is written shifted: zero point - qmin). Tengine's converter fuses Conv + Relu /
// Relu6 (Clip 0..6), so with the graph the Conv's output repeats the range of the activation after
// it.
#pragma once

#include <string>

#include "deploy/deploy_model.h"
#include "ir/graph.h"

namespace qforge::deploy::formats {

// `graph` (may be null) adds the fused Conv outputs and the inputs of Flatten/Reshape/Resize.
std::string tengineScales(const QuantTable& table, const Graph* graph = nullptr);
// Activations on an unsigned 8-bit grid [0, 255].
QuantTable parseTengineScales(const std::string& text, const std::string& where);

}  // namespace qforge::deploy::formats
