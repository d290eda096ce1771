// SiLU (Swish) as every exporter writes it: Sigmoid(x) multiplied by the same x (torch.onnx for
// nn.SiLU at every opset, tf2onnx for tf.nn.swish); ONNX has no Swish op before opset 24. A PyTorch
// model holds it as one nn.SiLU, which MQBench does not quantize, and TensorRT runs it inside the
// preceding convolution; so placement treats the pair as one Swish op: a unit when the backend
// lists Swish, its pieces when the backend quantizes both Sigmoid and Mul (ONNX Runtime's
// quantizer writes QLinearSigmoid and QLinearMul), else float with no quantizer inside. A
// squeeze-excitation gate (Sigmoid of one value scaling another) is no SiLU and does not match.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace qforge::passes {

// {Sigmoid, Mul} when `sigmoid` is read only by a Mul whose other operand is the Sigmoid's own
// input, and its output is no graph output; empty otherwise.
std::vector<Node*> matchDecomposedSilu(const Graph& graph, Node* sigmoid);

}  // namespace qforge::passes
