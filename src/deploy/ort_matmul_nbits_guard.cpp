#include "deploy/ort_matmul_nbits_guard.h"

#include <ATen/ATen.h>

#include <optional>

#include "deploy/qdq_match.h"
#include "ir/node_attributes.h"
#include "quant/qparams.h"

namespace qforge::deploy {

namespace {

bool producedBy(const Value* v, const char* op_type) {
  return v != nullptr && isOp(v->producer(), op_type);
}

// What ORT's selector asks of the node itself: a MatMul, or a Gemm it can treat as one.
bool matmulShaped(const Node& n) {
  if (n.opType() == "MatMul") return true;
  return n.opType() == "Gemm" && intAttr(n, "transA", 0) == 0 && intAttr(n, "transB", 0) == 0 &&
         floatAttr(n, "alpha", 1.0) == 1.0;
}

// ORT fuses only a weight DequantizeLinear that feeds this one node, and only when the product
// goes on in float: a QuantizeLinear reading it makes the unit a QDQ MatMul, which ORT leaves be.
bool ortWouldFuse(const Graph& g, const Node& n) {
  if (!matmulShaped(n)) return false;
  const Value* weight = n.input(1);
  if (!producedBy(weight, "DequantizeLinear") || producedBy(n.input(0), "DequantizeLinear"))
    return false;
  if (weight->uses().size() != 1 || g.isGraphOutput(weight)) return false;
  for (const Use& use : n.output(0)->uses()) {
    if (use.node->opType() == "QuantizeLinear") return false;
  }
  return true;
}

const at::Tensor* constantOf(const Value* v) {
  return v != nullptr && v->isInitializer() ? &v->initializer() : nullptr;
}

// A scale or zero point shaped to broadcast against a tensor of `rank` dims.
at::Tensor alongAxisOf(const Node& qdq, const at::Tensor& t, int64_t rank) {
  if (t.dim() == 0) return t;
  int64_t axis = intAttr(qdq, "axis", 1);
  if (axis < 0) axis += rank;
  return quant::alongAxis(t, axis, rank);
}

// The weight's integers: a constant, or a QuantizeLinear of constants.
std::optional<at::Tensor> integersOf(const Value* levels) {
  if (const at::Tensor* stored = constantOf(levels)) return stored->to(at::kLong);
  if (levels == nullptr || !isOp(levels->producer(), "QuantizeLinear")) return std::nullopt;
  const std::optional<at::Tensor> q = constantQuantize(*levels->producer());
  if (!q) return std::nullopt;
  return q->to(at::kLong);
}

// (integer - zero point) * scale in float32, as DequantizeLinear computes it.
std::optional<at::Tensor> dequantized(const Node& dq) {
  const std::optional<at::Tensor> integers = integersOf(dq.input(0));
  const at::Tensor* scale = constantOf(dq.input(1));
  if (!integers || scale == nullptr) return std::nullopt;
  const int64_t rank = integers->dim();
  at::Tensor centred = *integers;
  if (const at::Tensor* zero_point = constantOf(dq.input(2)))
    centred = centred - alongAxisOf(dq, zero_point->to(at::kLong), rank);
  return centred.to(at::kFloat).mul(alongAxisOf(dq, scale->to(at::kFloat), rank)).contiguous();
}

}  // namespace

std::vector<std::string> storeWeightOnlyMatMulWeightsInFloat(Graph& g) {
  std::vector<std::string> stored;
  for (Node* n : g.topologicalOrder()) {
    if (!ortWouldFuse(g, *n)) continue;
    Value* weight = n->input(1);
    const std::optional<at::Tensor> values = dequantized(*weight->producer());
    if (!values) continue;  // not a constant weight: ORT's selector wants constants too
    Value* in_float = g.addInitializer(g.uniqueName(weight->name() + "_float"), *values);
    g.setInput(n, 1, in_float);
    stored.push_back(n->name().empty() ? n->output(0)->name() : n->name());
  }
  return stored;
}

}  // namespace qforge::deploy
