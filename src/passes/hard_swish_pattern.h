// HardSwish as exporters before ONNX opset 14 write it: HardSigmoid(x, alpha 1/6, beta 1/2)
// multiplied by the same x (torch.onnx at opsets 9-13), or x * Clip(x + 3, 0, 6) / 6
// (Paddle2ONNX). From opset 14 the same
// model is one HardSwish op, so placement treats the pair as that op: one unit with quantizers at
// its edges when the backend lists HardSwish, else float with no quantizer inside, and a model
// exported at opset 11 is placed as its opset-17 export is. A squeeze-excitation gate
// (HardSigmoid of one value scaling another) is no HardSwish and does not match.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace qforge::passes {

// {HardSigmoid, Mul} when `hard_sigmoid` (alpha 1/6 and beta 1/2 to float precision) is read
// only by a Mul whose other operand is the HardSigmoid's own input, and its output is no graph
// output; empty otherwise.
std::vector<Node*> matchDecomposedHardSwish(const Graph& graph, Node* hard_sigmoid);

// HardSwish as Paddle2ONNX (and Keras's hard_swish through tf2onnx) write it: x * Relu6(x + 3) / 6,
// that is Add(x, 3) -> Clip(0, 6) -> Mul by x -> Div by 6 (or Mul by 1/6), the division before
// or after the Mul. The nodes from `add` in chain order when every inner value is read only by
// the next node and is no graph output; empty otherwise.
std::vector<Node*> matchClippedHardSwish(const Graph& graph, Node* add);

}  // namespace qforge::passes
