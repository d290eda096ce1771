#include "deploy/qoperator_onnx.h"

#include <ATen/ATen.h>

#include <map>

#include "core/error.h"
#include "deploy/qdq_match.h"
#include "deploy/qoperator_rules.h"
#include "exec/op_traits.h"
#include "ir/onnx_import.h"
#include "ir/verifier.h"
#include "passes/fake_quantize_node.h"

namespace qforge::deploy {

namespace {

constexpr const char* kMicrosoft = "com.microsoft";

class Rewriter {
 public:
  explicit Rewriter(Graph& g) : g_(g), rewrite_(g) {}

  void run() {
    foldConstantQuantize();
    pushQuantizeThroughDataMovement();
    pushDequantizeThroughDataMovement();
    requantizeFloatSelections();
    removeRedundantPairs();
    QOperatorSummary& summary = rewrite_.summary();
    for (Node* n : g_.topologicalOrder()) {
      if (rewrite_.removed(n)) continue;  // taken into an earlier group
      const QOperatorRule* rule = qoperatorRuleFor(*n);
      if (rule == nullptr) continue;
      KernelGroup group;
      const std::string refusal = rule->select(*n, rewrite_, group);
      if (refusal.empty()) {
        rule->apply(group, rewrite_);
      } else {
        summary.not_fused[n->name()] = std::string("no ") + rule->kernel + ": " + refusal;
      }
    }
    g_.eliminateDeadCode();
    removeRedundantPairs();
    g_.eliminateDeadCode();
    if (!summary.integer_ops.empty()) {
      bool any_microsoft = false;
      for (const Node* n : g_.nodes())
        any_microsoft = any_microsoft || n->domain() == kMicrosoft;
      if (any_microsoft) g_.model.opset_imports[kMicrosoft] = 1;
    }
    listFloatOps();
  }

  const QOperatorSummary& summary() { return rewrite_.summary(); }

 private:
  // Nodes left in float that read dequantized values; a node some rule refused keeps its reason.
  void listFloatOps() {
    QOperatorSummary& summary = rewrite_.summary();
    std::map<std::string, std::string> reasons;
    for (const Node* n : g_.topologicalOrder()) {
      if (!n->domain().empty() || isOp(n, "QuantizeLinear") || isOp(n, "DequantizeLinear")) {
        continue;
      }
      bool reads_dequantized = false;
      for (const Value* v : n->inputs())
        reads_dequantized = reads_dequantized || dqOf(v).has_value();
      if (!reads_dequantized) continue;
      summary.float_ops.push_back(n->describe());
      auto it = summary.not_fused.find(n->name());
      reasons[n->name()] = it != summary.not_fused.end()
                               ? it->second
                               : "ONNX Runtime has no integer kernel for " + n->opType();
    }
    summary.not_fused = std::move(reasons);
  }

  // Weights arrive as QuantizeLinear(float initializer): store the integers instead.
  void foldConstantQuantize() {
    for (Node* n : g_.topologicalOrder()) {
      if (!isOp(n, "QuantizeLinear")) continue;
      const std::optional<at::Tensor> q = constantQuantize(*n);
      if (!q) continue;
      Value* out = n->output(0);
      const std::string name = out->name();
      Value* folded = g_.addInitializer(g_.uniqueName(name + "_folded"), *q);
      g_.replaceAllUsesWith(out, folded, true);
      g_.removeNode(n);
      g_.renameValue(folded, name);
    }
  }

  // MaxPool(DequantizeLinear(q)) = DequantizeLinear(MaxPool(q)) exactly, and likewise for ops
  // that only move or select values: run them on the integers so the next kernel reads those.
  // The op table says which ops take 8-bit data at the model's opset (OpInfo::moves_int8). One
  // pass in topological order suffices: a moved op's readers come later and then read the new
  // DequantizeLinear.
  void pushDequantizeThroughDataMovement() {
    for (Node* n : g_.topologicalOrder()) {
      if (!movesInt8(g_, *n)) continue;
      if (n->outputs().size() != 1 || g_.isGraphOutput(n->output(0))) continue;
      auto dq = perTensorDq(n->input(0));
      if (!dq) continue;
      std::vector<Value*> inputs = n->inputs();
      inputs[0] = dq->q;
      Node* moved =
          g_.addNode(n->opType(), inputs, {g_.uniqueName(n->output(0)->name() + "_quantized")},
                     passes::uniqueNodeName(g_, n->name() + "_quantized"));
      moved->attributes = n->attributes;
      Node* dequantize =
          rewrite_.addDequantize(moved->output(0), dq->scale, dq->zero_point, n->output(0)->name());
      g_.replaceAllUsesWith(n->output(0), dequantize->output(0), true);
      g_.removeNode(n);
    }
  }

  // An op that only selects values but takes no 8-bit data at the model's opset (MaxPool before
  // opset 12) stays float between its DequantizeLinear and its readers, so the Conv after it
  // cannot become a QLinearConv: ORT runs it in float, rounding otherwise than qforge's float
  // Conv (U^2-NetP on ONNX_QNN: 33 float Convs after MaxPools, the QOperator model up to 30
  // steps from the emulation). What it selects is on its input's grid, so QuantizeLinear ->
  // DequantizeLinear with that grid after it changes no value and gives the readers a
  // DequantizeLinear to fuse with.
  void requantizeFloatSelections() {
    for (Node* n : g_.topologicalOrder()) {
      if (!movesDataOnly(g_, *n) || movesInt8(g_, *n) || combinesActivations(g_, *n)) continue;
      if (n->outputs().size() != 1 || g_.isGraphOutput(n->output(0))) continue;
      auto dq = perTensorDq(n->input(0));
      if (!dq || !onlyIndicesBesideData(*n)) continue;
      Value* selected = n->output(0);
      bool quantized_already = false;
      for (const Use& use : selected->uses())
        quantized_already = quantized_already || isOp(use.node, "QuantizeLinear");
      if (quantized_already) continue;
      Node* q = g_.addNode("QuantizeLinear", {selected, dq->scale, dq->zero_point},
                           {g_.uniqueName(selected->name() + "_requantized")},
                           passes::uniqueNodeName(g_, n->name() + "/QuantizeLinear"));
      Node* back =
          rewrite_.addDequantize(q->output(0), dq->scale, dq->zero_point, selected->name());
      g_.replaceAllUsesWith(selected, back->output(0), true);
      g_.setInput(q, 0, selected);  // replaceAllUsesWith moved q's own input too
    }
  }

  // Whether every input but the data (input 0) is an integer: indices, axes, shapes. Values from
  // another float input (Scatter's updates) need not be on the data's grid.
  static bool onlyIndicesBesideData(const Node& n) {
    for (size_t i = 1; i < n.inputs().size(); ++i) {
      const Value* v = n.input(i);
      if (v == nullptr) continue;
      const DType t =
          v->isInitializer() ? fromScalarType(v->initializer().scalar_type()) : v->type.dtype;
      if (t != DType::Int64 && t != DType::Int32) return false;
    }
    return true;
  }

  // QuantizeLinear(Transpose(v)) = Transpose(QuantizeLinear(v)) exactly, and likewise for ops
  // that only reshape or reorder (layout-only and 8-bit in the op table): quantize before them,
  // so that the op computing v meets its QuantizeLinear and can become an integer kernel (ONNX
  // Runtime propagates Q/DQ the same way). A QuantizeLinear moved up is itself a candidate to
  // move further, so the work list takes it back.
  void pushQuantizeThroughDataMovement() {
    std::vector<Node*> work;
    for (Node* n : g_.topologicalOrder()) {
      if (isOp(n, "QuantizeLinear")) work.push_back(n);
    }
    while (!work.empty()) {
      Node* q = work.back();
      work.pop_back();
      if (Node* early = quantizeBefore(q)) work.push_back(early);
    }
  }

  // Moves `q` above the data-movement op producing its input; returns the new QuantizeLinear,
  // or nullptr when it cannot move.
  Node* quantizeBefore(Node* q) {
    Node* m = q->input(0)->producer();
    if (m == nullptr || !movesInt8(g_, *m) || !isLayoutOnly(g_, *m)) return nullptr;
    if (soleQuantize(m->output(0), g_) != q) return nullptr;  // per tensor, the only reader
    Value* x = m->input(0);
    if (x->isInitializer() || g_.isGraphInput(x) || g_.isGraphOutput(x) || x->uses().size() != 1 ||
        dqOf(x).has_value()) {
      return nullptr;
    }
    // x -> Q' -> m' (on integers) -> readers of q's output, which m' now produces.
    Node* early = g_.addNode("QuantizeLinear", {x, q->input(1), q->input(2)},
                             {g_.uniqueName(x->name() + "_quantized")},
                             passes::uniqueNodeName(g_, q->name() + "_early"));
    std::vector<Value*> inputs = m->inputs();
    inputs[0] = early->output(0);
    Node* moved = g_.addNode(m->opType(), inputs, {g_.uniqueName(q->output(0)->name() + "_m")},
                             passes::uniqueNodeName(g_, m->name() + "_quantized"));
    moved->attributes = m->attributes;
    Value* q_out = q->output(0);
    const std::string name = q_out->name();
    moved->output(0)->type = q_out->type;
    g_.replaceAllUsesWith(q_out, moved->output(0), true);
    g_.removeNode(q);
    g_.removeNode(m);
    g_.renameValue(moved->output(0), name);
    return early;
  }

  // QuantizeLinear(DequantizeLinear(q)) with the same parameters is q.
  void removeRedundantPairs() {
    for (Node* n : g_.topologicalOrder()) {
      if (!isOp(n, "QuantizeLinear") || n->input(2) == nullptr) continue;
      auto dq = dqOf(n->input(0));
      if (!dq || !n->input(1)->isInitializer() || !n->input(2)->isInitializer()) continue;
      if (!sameParams(dq->scale, dq->zero_point, n->input(1), n->input(2))) continue;
      if (intAttr(n, "axis", 1) != dq->axis && !dq->per_tensor) continue;
      Value* out = n->output(0);
      if (g_.isGraphOutput(out)) continue;  // keep the declared output's name and node
      g_.replaceAllUsesWith(out, dq->q, false);
      g_.removeNode(n);
    }
  }

  Graph& g_;
  QOperatorRewrite rewrite_;
};

}  // namespace

at::Tensor accumulatorScale(const at::Tensor& x_scale, const at::Tensor& w_scale) {
  return x_scale.to(at::kFloat).reshape({}) * w_scale.to(at::kFloat).reshape({-1});
}

at::Tensor int32BiasLevels(const at::Tensor& bias, const at::Tensor& x_scale,
                           const at::Tensor& w_scale) {
  const at::Tensor scale = accumulatorScale(x_scale, w_scale).to(at::kDouble);
  return at::round(bias.to(at::kDouble) / scale).clamp(-2147483647.0, 2147483647.0).to(at::kInt);
}

Graph toQOperatorGraph(const Graph& qdq, QOperatorSummary* summary) {
  Graph g = qdq.clone();
  Rewriter rewriter(g);
  rewriter.run();
  verifyGraph(g);
  if (summary != nullptr) *summary = rewriter.summary();
  return g;
}

}  // namespace qforge::deploy
