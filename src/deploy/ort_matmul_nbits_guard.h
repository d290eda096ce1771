// ONNX Runtime (1.30, CPU provider, graph optimization level "extended" and above, its default)
// rewrites DequantizeLinear -> MatMul into its MatMulNBits kernel when the weight is the MatMul's
// only DequantizeLinear input and no QuantizeLinear reads the product (likewise a Gemm without
// transposes). It runs that kernel at accuracy level 4: the float activation is quantized to int8
// in blocks of 32 along K before the product. The graph says float activation times dequantized
// weight, and so does the simulation: on the zoo ViT with 16-bit activations (PPLW8A16) ORT's
// products were up to 131 of 65,536 levels off on 98% of elements.
//
// Such a weight is stored instead as the float values its DequantizeLinear gives, which ORT
// multiplies as they are. Weights of MatMuls whose activation is itself dequantized (8-bit QDQ
// units, fused into QLinearMatMul or left unfused) keep their integers.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace qforge::deploy {

// Rewrites `g` (a lowered QDQ graph) in place; returns the MatMul/Gemm nodes whose weight it
// stored in float, in graph order. The dequantized values are computed as DequantizeLinear does:
// (integer - zero point) * scale in float32.
std::vector<std::string> storeWeightOnlyMatMulWeightsInFloat(Graph& g);

}  // namespace qforge::deploy
