// Standard ONNX from a prepared model: every FakeQuantize node becomes what any ONNX runtime
// runs. 8-bit affine activations with round-half-to-even become QuantizeLinear ->
// DequantizeLinear; other activation widths and rounding rules become the same arithmetic in
// plain float ops (Div, Round|Floor, Add, Clip, Sub, Mul), so the file is exact for every scheme.
// So does the output quantizer of a Softmax whose scale overflows ONNX Runtime's QLinearSoftmax,
// which ORT would otherwise fuse it into.
// Weights are stored already fake-quantized (so learned rounding such as AdaRound survives), as
// QuantizeLinear -> DequantizeLinear up to 8 bits whatever their rounding (they are on the grid),
// so that runtimes see integers rather than a float expression to fold BatchNormalization into;
// int32 biases are stored as int32 with a DequantizeLinear. NNIE's logarithmic grid becomes float
// arithmetic (Abs, Log, Round, Clip, Pow, Where), its constant weights stored on the grid.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/prepare.h"

namespace qforge::deploy {

// A new graph; the prepared model is not changed (its quantizers must hold parameters).
// Throws qforge::Error naming the quantizer for a grid that is neither affine nor NNIE's log grid.
// quantizerTable() lists non-affine quantizers with their state instead of a scale and zero point.
// Weights that ONNX Runtime would multiply by an int8-quantized activation are stored in float
// (deploy/ort_matmul_nbits_guard.h). Outside TensorRT's files, a pair following a pair of other
// parameters is written in the other 8-bit type (deploy/ort_double_qdq_guard.h).
struct QdqDetails {
  // Each quantizer's integer tensor in the new graph (the QuantizeLinear output, or for a
  // quantizer written as arithmetic its Clip onto [qmin, qmax], integers held in float; for
  // NNIE's logarithmic grid the grid's values) by quantizer name, for comparing runtimes tensor by
  // tensor.
  std::map<std::string, std::string> quantized_values;
  // The MatMul/Gemm nodes whose quantized weight is stored as its dequantized float values.
  std::vector<std::string> weights_in_float;
  // QuantizeLinear outputs written in the other 8-bit type so that ONNX Runtime does not merge
  // their pair with the one before (deploy/ort_double_qdq_guard.h).
  std::vector<std::string> retyped_pairs;
};
Graph toQdqGraph(passes::PreparedModel& model, QdqDetails* details = nullptr);

// Every quantizer: kind, value, unit, scheme, observer, fake quantizer, scale and zero point.
nlohmann::json quantizerTable(passes::PreparedModel& model);

}  // namespace qforge::deploy
