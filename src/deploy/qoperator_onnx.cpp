#include "deploy/qoperator_onnx.h"

#include <ATen/ATen.h>

#include <limits>
#include <optional>
#include <set>

#include "core/error.h"
#include "exec/op_traits.h"
#include "ir/onnx_import.h"
#include "ir/verifier.h"
#include "passes/fake_quantize_node.h"

namespace qforge::deploy {

namespace {

constexpr const char* kMicrosoft = "com.microsoft";

// A DequantizeLinear feeding a value: the integer tensor and its parameters.
struct Dq {
  Node* node = nullptr;
  Value* q = nullptr;
  Value* scale = nullptr;
  Value* zero_point = nullptr;
  bool per_tensor = true;
  int64_t axis = 1;
};

int64_t intAttr(const Node* n, const std::string& name, int64_t fallback) {
  const Attribute* a = n->attributes.find(name);
  return a == nullptr ? fallback : a->i;
}

double floatAttr(const Node* n, const std::string& name, double fallback) {
  const Attribute* a = n->attributes.find(name);
  return a == nullptr ? fallback : a->f;
}

bool isOp(const Node* n, const char* type) {
  return n != nullptr && n->domain().empty() && n->opType() == type;
}

std::optional<Dq> dqOf(const Value* v) {
  if (v == nullptr || !isOp(v->producer(), "DequantizeLinear")) return std::nullopt;
  Node* n = v->producer();
  Dq dq{n, n->input(0), n->input(1), n->input(2), true, intAttr(n, "axis", 1)};
  if (dq.zero_point == nullptr || !dq.scale->isInitializer() || !dq.zero_point->isInitializer()) {
    return std::nullopt;  // the integer kernels need constant parameters with a known type
  }
  dq.per_tensor = dq.scale->initializer().numel() == 1;
  return dq;
}

std::optional<Dq> perTensorDq(const Value* v) {
  auto dq = dqOf(v);
  if (!dq || !dq->per_tensor) return std::nullopt;
  return dq;
}

// The QuantizeLinear that is the only reader of `v`, when there is one.
Node* soleQuantize(const Value* v, const Graph& g) {
  if (v == nullptr || g.isGraphOutput(v) || v->uses().size() != 1) return nullptr;
  Node* n = v->uses().front().node;
  if (!isOp(n, "QuantizeLinear") || v->uses().front().index != 0) return nullptr;
  if (n->input(2) == nullptr || !n->input(1)->isInitializer() || !n->input(2)->isInitializer()) {
    return nullptr;
  }
  if (n->input(1)->initializer().numel() != 1) return nullptr;  // activations: per tensor
  return n;
}

bool sameParams(const Value* scale_a, const Value* zp_a, const Value* scale_b, const Value* zp_b) {
  const at::Tensor& za = zp_a->initializer();
  const at::Tensor& zb = zp_b->initializer();
  return za.scalar_type() == zb.scalar_type() && za.numel() == zb.numel() &&
         scale_a->initializer().numel() == scale_b->initializer().numel() &&
         at::equal(scale_a->initializer().reshape({-1}), scale_b->initializer().reshape({-1})) &&
         at::equal(za.reshape({-1}), zb.reshape({-1}));
}

std::pair<int64_t, int64_t> typeRange(at::ScalarType t) {
  return t == at::kByte ? std::pair<int64_t, int64_t>{0, 255}
                        : std::pair<int64_t, int64_t>{-128, 127};
}

class Rewriter {
 public:
  explicit Rewriter(Graph& g) : g_(g) {}

  void run() {
    foldConstantQuantize();
    pushQuantizeThroughDataMovement();
    pushDequantizeThroughDataMovement();
    removeRedundantPairs();
    for (Node* n : g_.topologicalOrder()) {
      if (removed_.count(n) || !n->domain().empty()) continue;  // removed: do not touch
      const std::string& op = n->opType();
      if (op == "Conv") {
        fuseConv(n);
      } else if (op == "MatMul") {
        fuseMatMul(n);
      } else if (op == "Gemm") {
        fuseGemm(n);
      } else if (op == "Add" || op == "Mul") {
        fuseBinary(n);
      } else if (op == "GlobalAveragePool" || op == "AveragePool") {
        fusePool(n);
      } else if (op == "Concat") {
        fuseConcat(n);
      }
    }
    g_.eliminateDeadCode();
    removeRedundantPairs();
    g_.eliminateDeadCode();
    if (!summary_.integer_ops.empty()) {
      bool any_microsoft = false;
      for (const Node* n : g_.nodes())
        any_microsoft = any_microsoft || n->domain() == kMicrosoft;
      if (any_microsoft) g_.model.opset_imports[kMicrosoft] = 1;
    }
    for (const Node* n : g_.topologicalOrder()) {
      if (!n->domain().empty() || isOp(n, "QuantizeLinear") || isOp(n, "DequantizeLinear")) {
        continue;
      }
      bool reads_dequantized = false;
      for (const Value* v : n->inputs())
        reads_dequantized = reads_dequantized || dqOf(v).has_value();
      if (reads_dequantized) summary_.float_ops.push_back(n->describe());
    }
  }

  const QOperatorSummary& summary() const { return summary_; }

 private:
  // Weights arrive as QuantizeLinear(float initializer): store the integers instead.
  void foldConstantQuantize() {
    for (Node* n : g_.topologicalOrder()) {
      if (!isOp(n, "QuantizeLinear") || !n->input(0)->isInitializer() ||
          !n->input(1)->isInitializer() || n->input(2) == nullptr ||
          !n->input(2)->isInitializer()) {
        continue;
      }
      const at::Tensor x = n->input(0)->initializer().to(at::kFloat);
      at::Tensor scale = n->input(1)->initializer().to(at::kFloat);
      const at::Tensor zp_t = n->input(2)->initializer();
      at::Tensor zp = zp_t.to(at::kFloat);
      if (scale.numel() > 1) {
        int64_t axis = intAttr(n, "axis", 1);
        if (axis < 0) axis += x.dim();
        std::vector<int64_t> shape(x.dim(), 1);
        shape[axis] = scale.numel();
        scale = scale.reshape(shape);
        zp = zp.reshape(shape);
      }
      // ONNX QuantizeLinear: saturate(round_half_even(x / scale) + zero_point).
      const auto [lo, hi] = typeRange(zp_t.scalar_type());
      const at::Tensor q = (at::round(x / scale) + zp)
                               .clamp(static_cast<double>(lo), static_cast<double>(hi))
                               .to(zp_t.scalar_type());
      Value* out = n->output(0);
      const std::string name = out->name();
      Value* folded = g_.addInitializer(g_.uniqueName(name + "_folded"), q.contiguous());
      g_.replaceAllUsesWith(out, folded, true);
      g_.removeNode(n);
      g_.renameValue(folded, name);
    }
  }

  // MaxPool(DequantizeLinear(q)) = DequantizeLinear(MaxPool(q)) exactly, and likewise for ops
  // that only move or select values: run them on the integers so the next kernel reads those.
  // The op table says which ops take 8-bit data at the model's opset (OpInfo::moves_int8).
  void pushDequantizeThroughDataMovement() {
    bool changed = true;
    while (changed) {
      changed = false;
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
            addDequantize(moved->output(0), dq->scale, dq->zero_point, n->output(0)->name());
        g_.replaceAllUsesWith(n->output(0), dequantize->output(0), true);
        g_.removeNode(n);
        changed = true;
        break;  // the order changed: start over
      }
    }
  }

  // QuantizeLinear(Transpose(v)) = Transpose(QuantizeLinear(v)) exactly, and likewise for ops
  // that only reshape or reorder (layout-only and 8-bit in the op table): quantize before them,
  // so that the op computing v meets its QuantizeLinear and can become an integer kernel (ONNX
  // Runtime propagates Q/DQ the same way).
  void pushQuantizeThroughDataMovement() {
    bool changed = true;
    while (changed) {
      changed = false;
      for (Node* q : g_.topologicalOrder()) {
        if (!isOp(q, "QuantizeLinear")) continue;
        Node* m = q->input(0)->producer();
        if (m == nullptr || !movesInt8(g_, *m) || !isLayoutOnly(g_, *m)) continue;
        if (soleQuantize(m->output(0), g_) != q) continue;  // per tensor, the only reader
        Value* x = m->input(0);
        if (x->isInitializer() || g_.isGraphInput(x) || g_.isGraphOutput(x) ||
            x->uses().size() != 1 || dqOf(x).has_value()) {
          continue;
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
        changed = true;
        break;  // the order changed: start over
      }
    }
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

  Node* addDequantize(Value* q, Value* scale, Value* zp, const std::string& base) {
    return g_.addNode("DequantizeLinear", {q, scale, zp}, {g_.uniqueName(base + "_dequantized")},
                      passes::uniqueNodeName(g_, base + "/DequantizeLinear"));
  }

  // The op's output reaches one QuantizeLinear, directly or through one Relu / Clip. Returns
  // the QuantizeLinear and the activation between (or nullptr).
  std::pair<Node*, Node*> outputQuantize(const Node* n) {
    Value* out = n->output(0);
    if (Node* q = soleQuantize(out, g_)) return {q, nullptr};
    if (g_.isGraphOutput(out) || out->uses().size() != 1) return {nullptr, nullptr};
    Node* act = out->uses().front().node;
    if (!(isOp(act, "Relu") || isOp(act, "Clip")) || out->uses().front().index != 0) {
      return {nullptr, nullptr};
    }
    if (Node* q = soleQuantize(act->output(0), g_)) return {q, act};
    return {nullptr, nullptr};
  }

  // Whether activation `act` changes no value of the grid `q` writes; then the requantizing
  // kernel's saturation already applies it.
  bool activationIsNoOp(const Node* act, const Node* q) {
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

  // Puts `kernel` (whose output carries q's parameters) in place of op [-> act] -> q. An
  // activation that changes grid values stays, reading the kernel's dequantized output:
  // q(act(v)) = q(act(dq(q(v)))) for Relu and Clip, so the result is the same.
  void finish(Node* kernel, Node* q, Node* act, Node* op) {
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
    removed_.insert(op);
    summary_.integer_ops[kernel->opType()]++;
    summary_.fused_nodes.push_back(op->name());
  }

  Node* addKernel(const std::string& type, const std::vector<Value*>& inputs, const Node* op,
                  const std::string& domain = "") {
    Node* k =
        g_.addNode(type, inputs, {g_.uniqueName(op->output(0)->name() + "_" + type)},
                   passes::uniqueNodeName(g_, op->name().empty() ? type : op->name()), domain);
    return k;
  }

  // An int32 bias for a kernel whose accumulator has scale x_scale * w_scale: the stored
  // integers of a DequantizeLinear(int32), or a float bias quantized here.
  Value* int32Bias(Value* bias, const Dq& x, const Dq& w) {
    if (bias == nullptr) return nullptr;
    if (auto dq = dqOf(bias)) {
      if (dq->q->isInitializer() && dq->q->initializer().scalar_type() == at::kInt) return dq->q;
      return nullptr;
    }
    if (!bias->isInitializer()) return nullptr;
    const at::Tensor levels =
        int32BiasLevels(bias->initializer(), x.scale->initializer(), w.scale->initializer());
    return g_.addInitializer(g_.uniqueName(bias->name() + "_int32"), levels.contiguous());
  }

  static bool constantIntegers(const Dq& w) {
    return w.q->isInitializer() && (w.q->initializer().scalar_type() == at::kChar ||
                                    w.q->initializer().scalar_type() == at::kByte);
  }

  void fuseConv(Node* n) {
    auto x = perTensorDq(n->input(0));
    auto w = dqOf(n->input(1));
    if (!x || !w || !constantIntegers(*w) || (!w->per_tensor && w->axis != 0)) return;
    auto [q, act] = outputQuantize(n);
    if (q == nullptr) return;
    Value* bias = int32Bias(n->input(2), *x, *w);
    if (n->input(2) != nullptr && bias == nullptr) return;
    std::vector<Value*> inputs = {x->q,     x->scale,      x->zero_point, w->q,
                                  w->scale, w->zero_point, q->input(1),   q->input(2)};
    if (bias != nullptr) inputs.push_back(bias);
    Node* k = addKernel("QLinearConv", inputs, n);
    k->attributes = n->attributes;
    finish(k, q, act, n);
  }

  void fuseMatMul(Node* n) {
    auto a = perTensorDq(n->input(0));
    auto b = dqOf(n->input(1));
    if (!a || !b) return;
    if (!b->per_tensor) {
      // Per-column scales: a constant 2-D B quantized along its last axis.
      if (!constantIntegers(*b) || b->q->initializer().dim() != 2 || b->axis != 1) return;
    }
    auto [q, act] = outputQuantize(n);
    if (q == nullptr) return;
    Node* k = addKernel(
        "QLinearMatMul",
        {a->q, a->scale, a->zero_point, b->q, b->scale, b->zero_point, q->input(1), q->input(2)},
        n);
    finish(k, q, act, n);
  }

  void fuseGemm(Node* n) {
    auto a = perTensorDq(n->input(0));
    auto b = dqOf(n->input(1));
    if (!a || !b || !constantIntegers(*b)) return;
    if (intAttr(n, "transA", 0) != 0 || floatAttr(n, "alpha", 1.0) != 1.0) return;
    if (n->input(2) != nullptr && floatAttr(n, "beta", 1.0) != 1.0) return;
    const int64_t trans_b = intAttr(n, "transB", 0);
    if (!b->per_tensor && b->axis != (trans_b ? 0 : 1)) return;  // one scale per output column
    Value* bias = int32Bias(n->input(2), *a, *b);
    if (n->input(2) != nullptr && bias == nullptr) return;
    auto [q, act] = outputQuantize(n);
    std::vector<Value*> inputs = {a->q,     a->scale,      a->zero_point, b->q,
                                  b->scale, b->zero_point, bias};
    if (q != nullptr) {
      inputs.push_back(q->input(1));
      inputs.push_back(q->input(2));
    }
    Node* k = addKernel("QGemm", inputs, n, kMicrosoft);
    k->attributes.set(Attribute::makeInt("transB", trans_b));
    if (q != nullptr) return finish(k, q, act, n);
    // No quantized output: QGemm writes float, as the Gemm did.
    const std::string name_of_gemm = n->name();
    Value* out = n->output(0);
    const std::string name = out->name();
    k->output(0)->type = out->type;
    g_.replaceAllUsesWith(out, k->output(0), true);
    g_.removeNode(n);
    g_.renameValue(k->output(0), name);
    removed_.insert(n);
    summary_.integer_ops["QGemm"]++;
    summary_.fused_nodes.push_back(name_of_gemm);
  }

  void fuseBinary(Node* n) {
    auto a = perTensorDq(n->input(0));
    auto b = perTensorDq(n->input(1));
    if (!a || !b) return;
    auto [q, act] = outputQuantize(n);
    if (q == nullptr) return;
    const at::ScalarType t = q->input(2)->initializer().scalar_type();
    if (a->zero_point->initializer().scalar_type() != t ||
        b->zero_point->initializer().scalar_type() != t) {
      return;
    }
    Node* k = addKernel(
        "QLinear" + n->opType(),
        {a->q, a->scale, a->zero_point, b->q, b->scale, b->zero_point, q->input(1), q->input(2)}, n,
        kMicrosoft);
    finish(k, q, act, n);
  }

  void fusePool(Node* n) {
    auto x = perTensorDq(n->input(0));
    if (!x) return;
    auto [q, act] = outputQuantize(n);
    if (q == nullptr) return;
    if (x->zero_point->initializer().scalar_type() != q->input(2)->initializer().scalar_type()) {
      return;
    }
    Node* k = addKernel("QLinear" + n->opType(),
                        {x->q, x->scale, x->zero_point, q->input(1), q->input(2)}, n, kMicrosoft);
    k->attributes = n->attributes;
    k->attributes.set(Attribute::makeInt("channels_last", 0));
    finish(k, q, act, n);
  }

  void fuseConcat(Node* n) {
    auto [q, act] = outputQuantize(n);
    if (q == nullptr) return;
    std::vector<Value*> inputs = {q->input(1), q->input(2)};
    for (Value* v : n->inputs()) {
      auto x = perTensorDq(v);
      if (!x) return;
      if (x->zero_point->initializer().scalar_type() != q->input(2)->initializer().scalar_type()) {
        return;
      }
      inputs.insert(inputs.end(), {x->q, x->scale, x->zero_point});
    }
    Node* k = addKernel("QLinearConcat", inputs, n, kMicrosoft);
    k->attributes.set(Attribute::makeInt("axis", intAttr(n, "axis", 0)));
    finish(k, q, act, n);
  }

  Graph& g_;
  std::set<const Node*> removed_;
  QOperatorSummary summary_;
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
