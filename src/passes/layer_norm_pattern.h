// LayerNormalization as exporters before ONNX opset 17 write it: ReduceMean -> Sub -> Pow 2 (or
// Mul by itself) -> ReduceMean -> Add epsilon -> Sqrt -> Div, then optionally Mul by a constant
// scale and Add a constant bias (torch.onnx at opsets 9-16, tf2onnx, Paddle2ONNX). Every backend
// toolchain fuses this subgraph into one normalization kernel (TensorRT, the SNPE/QNN
// converters, OpenVINO's MVN fusion, ONNX Runtime's quant_pre_process), so placement treats it
// as the backend treats a LayerNormalization op: no quantizer inside it. A quantizer on the
// variance would round the small variances of some rows to zero and divide by zero.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace qforge::passes {

// The nodes of the decomposed LayerNormalization whose first ReduceMean is `reduce_mean`, in
// topological order (that ReduceMean first, the last node writing the normalized output);
// empty when `reduce_mean` does not start one. Every inner value must be read only inside the
// pattern and must not be a graph output; the two ReduceMeans must reduce the same axes with
// kept dims, and epsilon, the exponent, the scale and the bias must be constants.
std::vector<Node*> matchDecomposedLayerNorm(const Graph& graph, Node* reduce_mean);

}  // namespace qforge::passes
