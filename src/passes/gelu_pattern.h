// GELU as exporters before ONNX opset 20 write it: x / sqrt(2) (or x * 1/sqrt(2)) -> Erf -> Add 1
// -> Mul by x and Mul by 0.5, in either order (torch.onnx: Mul x, then Mul 0.5). Backend
// toolchains run it as one activation kernel (TensorRT's pointwise fusion, the QNN converter's
// Gelu, ONNX Runtime's Gelu fusion) and a PyTorch model holds it as one nn.GELU, which MQBench
// does not quantize; so placement treats it as the backend treats a Gelu op: one unit with
// quantizers at its edges when the backend lists Gelu, else float, never quantizers inside.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace qforge::passes {

// The nodes of the decomposed GELU whose first node (the division or multiplication of x) is
// `scale`, in chain order; empty when `scale` does not start one. Every inner value must be read
// only by the next node and must not be a graph output; the constants must be 1/sqrt(2) (as a
// divisor sqrt(2)), 1 and 0.5 to float precision, and the Mul by x must read the same x.
std::vector<Node*> matchDecomposedGelu(const Graph& graph, Node* scale);

}  // namespace qforge::passes
