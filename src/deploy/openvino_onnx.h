// OpenVINO's form of a quantized model: ONNX with org.openvinotoolkit FakeQuantize nodes (X,
// input_low, input_high, output_low, output_high; attribute levels) where the prepared model
// quantizes, as OpenVINO's ONNX frontend imports them and MQBench's OpenVINO deploy writes them.
// The range of each grid is [(qmin - zp) * s, (qmax - zp) * s], per channel for weights (shaped
// to broadcast along the channel axis), and levels = qmax - qmin + 1; OpenVINO's formula then
// reproduces round(x / s) * s on that grid. Biases are not quantized by OpenVINO and stay float.
#pragma once

#include "deploy/deploy_model.h"
#include "ir/graph.h"

namespace qforge::deploy {

inline constexpr const char* kOpenVinoDomain = "org.openvinotoolkit";

// A new graph. Throws qforge::Error naming the tensor for a grid without scale and zero point.
Graph toOpenVinoGraph(const DeployModel& model);

}  // namespace qforge::deploy
