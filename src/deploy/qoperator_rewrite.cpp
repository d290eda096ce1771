// The edits QOperator actions share: adding kernels and DequantizeLinear nodes, int32 biases, and
// putting a kernel in the place of its group.
#include <ATen/ATen.h>

#include <limits>

#include "deploy/qoperator_rules.h"
#include "passes/fake_quantize_node.h"

namespace qforge::deploy {

std::pair<Node*, Node*> QOperatorRewrite::outputQuantize(const Node* op) const {
  Value* out = op->output(0);
  if (Node* q = soleQuantize(out, g_)) return {q, nullptr};
  if (g_.isGraphOutput(out) || out->uses().size() != 1) return {nullptr, nullptr};
  Node* act = out->uses().front().node;
  if (!(isOp(act, "Relu") || isOp(act, "Clip")) || out->uses().front().index != 0) {
    return {nullptr, nullptr};
  }
  if (Node* q = soleQuantize(act->output(0), g_)) return {q, act};
  return {nullptr, nullptr};
}

Node* QOperatorRewrite::addDequantize(Value* q, Value* scale, Value* zp, const std::string& base) {
  return g_.addNode("DequantizeLinear", {q, scale, zp}, {g_.uniqueName(base + "_dequantized")},
                    passes::uniqueNodeName(g_, base + "/DequantizeLinear"));
}

Node* QOperatorRewrite::addKernel(const std::string& type, const std::vector<Value*>& inputs,
                                  const Node* op, const std::string& domain) {
  return g_.addNode(type, inputs, {g_.uniqueName(op->output(0)->name() + "_" + type)},
                    passes::uniqueNodeName(g_, op->name().empty() ? type : op->name()), domain);
}

bool biasConvertible(const Value* bias) {
  if (bias == nullptr) return true;
  if (auto dq = dqOf(bias)) {
    return dq->q->isInitializer() && dq->q->initializer().scalar_type() == at::kInt;
  }
  return bias->isInitializer();
}

Value* QOperatorRewrite::int32Bias(Value* bias, const Dq& x, const Dq& w) {
  if (bias == nullptr) return nullptr;
  if (auto dq = dqOf(bias)) return dq->q;  // already int32 levels (biasConvertible checked)
  const at::Tensor levels =
      int32BiasLevels(bias->initializer(), x.scale->initializer(), w.scale->initializer());
  return g_.addInitializer(g_.uniqueName(bias->name() + "_int32"), levels.contiguous());
}

// Whether activation `act` changes no value of the grid `q` writes; then the requantizing
// kernel's saturation already applies it.
bool QOperatorRewrite::activationIsNoOp(const Node* act, const Node* q) const {
  const at::Tensor zp_t = q->input(2)->initializer();
  const auto [lo, hi] = typeRange(zp_t.scalar_type());
  const float scale = q->input(1)->initializer().to(at::kFloat).reshape({}).item<float>();
  const int64_t zp = zp_t.to(at::kLong).reshape({}).item<int64_t>();
  const float grid_min = static_cast<float>(lo - zp) * scale;
  const float grid_max = static_cast<float>(hi - zp) * scale;
  if (isOp(act, "Relu")) return grid_min >= 0.0f;
  float clip_lo = -std::numeric_limits<float>::infinity();
  float clip_hi = std::numeric_limits<float>::infinity();
  if (act->attributes.has("min")) clip_lo = static_cast<float>(floatAttr(act, "min", clip_lo));
  if (act->attributes.has("max")) clip_hi = static_cast<float>(floatAttr(act, "max", clip_hi));
  for (size_t i : {1, 2}) {
    Value* v = act->input(i);
    if (v == nullptr) continue;
    if (!v->isInitializer()) return false;
    const float bound = v->initializer().to(at::kFloat).reshape({}).item<float>();
    (i == 1 ? clip_lo : clip_hi) = bound;
  }
  return grid_min >= clip_lo && grid_max <= clip_hi;
}

// An activation that changes grid values stays, reading the kernel's dequantized output:
// q(act(v)) = q(act(dq(q(v)))) for Relu and Clip, so the result is the same.
void QOperatorRewrite::finish(Node* kernel, const KernelGroup& group) {
  Node* q = group.quantize;
  Node* act = group.activation;
  Value* out = kernel->output(0);
  if (act != nullptr && !activationIsNoOp(act, q)) {
    Node* dq = addDequantize(out, q->input(1), q->input(2), out->name());
    g_.setInput(act, 0, dq->output(0));
  } else {
    Value* q_out = q->output(0);
    const std::string name = q_out->name();
    out->type = q_out->type;
    g_.replaceAllUsesWith(q_out, out, true);
    removed_.insert(q);
    g_.removeNode(q);
    g_.renameValue(out, name);
  }
  record(kernel, group.op);
}

void QOperatorRewrite::finishFloat(Node* kernel, const KernelGroup& group) {
  Node* op = group.op;
  Value* out = op->output(0);
  const std::string name = out->name();
  kernel->output(0)->type = out->type;
  g_.replaceAllUsesWith(out, kernel->output(0), true);
  record(kernel, op);
  g_.removeNode(op);
  g_.renameValue(kernel->output(0), name);
}

// The group's op is gone from the graph's point of view (the driver deletes it as dead code).
void QOperatorRewrite::record(const Node* kernel, const Node* op) {
  removed_.insert(op);
  summary_.integer_ops[kernel->opType()]++;
  summary_.fused_nodes.push_back(op->name());
  summary_.kernel_of[op->name()] = kernel->opType();
}

}  // namespace qforge::deploy
