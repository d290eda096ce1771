// Float arithmetic ONNX Runtime changes when it fuses a group of ops at its default level, which
// the emulation must follow to predict ORT bit for bit:
// - SimplifiedLayerNormFusion: Pow(x, 2) -> ReduceMean -> Add(eps) -> Sqrt -> Div(x, .) ->
//   Mul(scale) becomes one kernel that sums the squares in lanes of its own (an RMSNorm, or a
//   LayerNorm whose mean ORT could not fuse: its two readers of x given two copies of a
//   DequantizeLinear, as in the QOperator models qforge writes). ORT's LayerNormFusion of a whole
//   LayerNorm stays unfused here (its kernel runs where the emulation runs ORT's own graph,
//   exec/ops/ort_layer_norm.cpp);
// - the QDQ MatMul group with no QuantizeLinear after it: DequantizeLinear on both inputs ->
//   MatMul becomes MatMulIntegerToFloat, an int32 product times a_scale * b_scale, where the
//   float MatMul sums dequantized products (attention's q @ k^T when only its inputs are
//   quantized).
// Which groups ORT fused is read from its own optimized copy of the file, not predicted: the
// fusions' conditions change between ORT releases.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "ir/graph.h"

namespace qforge::verify {

// Rewrites `emulated` (the graph of the file ORT optimized into `optimized`) so that each group
// ORT fused into SimplifiedLayerNormalization or MatMulIntegerToFloat runs as that com.microsoft
// op of the emulation. Returns them as "<op type> '<output>'" for a note. A
// group whose ops, values or parameters differ from what the rewrite expects in `emulated` is left
// as it is.
std::vector<std::string> fuseAsOrtDid(Graph& emulated, const onnx::ModelProto& optimized);

}  // namespace qforge::verify
