// STPU's ranges as MQBench writes them (model_stpu_minmax.json), one object keyed by:
//   activation tensor      {"min": -127 * s, "max": 127 * s}  (and, for some, "emin")
//   "<node>_weights"       {"min", "max"} of the weight a Conv/Gemm/ConvTranspose reads
//   "<node>_bias"          {"alpha": s_in * s_w, "zero_point": 0} for a Conv/Gemm with bias
// Ranges pass from a Concat's output to its inputs, from a Relu's output to its input, and to
// the inputs of Flatten/Reshape/Resize; Sigmoid outputs are [-1, 1]. "emin" (STPU's exponent
// floor for accumulators) is set on Conv/ConvTranspose outputs (from input, weight and output
// ranges and the weight's fan-in), Resize/Upsample outputs, and Gemm outputs (128).
// Per-tensor symmetric 8-bit only. Not done: MQBench's Conv + Mul merge, which edits weights.
#pragma once

#include <string>

#include "deploy/deploy_model.h"

namespace qforge::deploy::formats {

std::string stpuMinMax(const DeployModel& model);

// Activation entries (keys with "min" and "max" that name a tensor) and weights, mapped back
// through `graph` ("<node>_weights" -> the node's weight input); "_bias" entries are derived
// and skipped.
QuantTable parseStpuMinMax(const std::string& text, const std::string& where, const Graph& graph);

// STPU's biased exponent of |v| (IEEE single: floor(log2 |v|) + 127, clamped to 1..254, 0 for 0).
int stpuExponent(double v);

}  // namespace qforge::deploy::formats
