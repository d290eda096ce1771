// ONNX Runtime's QOperator form of a QDQ graph. Each DequantizeLinear -> op -> QuantizeLinear
// group that ONNX Runtime has an integer kernel for becomes that kernel (one selector + action
// rule per op type: deploy/qoperator_rules.h): QLinearConv,
// QLinearMatMul, and the com.microsoft QGemm, QLinearAdd, QLinearMul, QLinearGlobalAveragePool,
// QLinearAveragePool and QLinearConcat. Data movement (MaxPool, Reshape, Flatten, Transpose, ...)
// runs on the 8-bit tensors themselves; whatever has no integer kernel stays float between
// DequantizeLinear and QuantizeLinear. Every rewrite is exact with respect to the QDQ graph's
// arithmetic except where an integer kernel requantizes (the point of the format).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ir/graph.h"

namespace qforge::deploy {

struct QOperatorSummary {
  std::map<std::string, int> integer_ops;        // "QLinearConv" -> count
  std::vector<std::string> fused_nodes;          // the QDQ graph's nodes now run by integer kernels
  std::map<std::string, std::string> kernel_of;  // each of those -> its kernel ("QLinearConv")
  std::vector<std::string> float_ops;            // nodes left in float that read dequantized values
  // Each of those nodes by name, with why it stays float ("no QLinearConv: ..." or no kernel).
  std::map<std::string, std::string> not_fused;
};

// A new graph; `qdq` is not changed. Value names of the QDQ graph's QuantizeLinear outputs are
// kept where the tensor still exists (the integer kernel producing it takes over the name), so the
// two graphs' integer tensors can be compared by name.
Graph toQOperatorGraph(const Graph& qdq, QOperatorSummary* summary = nullptr);

// The int32 levels a float bias is stored as in front of an integer kernel whose accumulator has
// scale x_scale * w_scale (per output channel; the product formed in float32): round half to
// even, saturated to int32. What this rewrite writes and what ONNX Runtime's QDQ fusion stores.
at::Tensor int32BiasLevels(const at::Tensor& bias, const at::Tensor& x_scale,
                           const at::Tensor& w_scale);
// The float32 accumulator scale x_scale * w_scale those levels are on.
at::Tensor accumulatorScale(const at::Tensor& x_scale, const at::Tensor& w_scale);

}  // namespace qforge::deploy
