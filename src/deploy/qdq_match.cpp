#include "deploy/qdq_match.h"

#include <ATen/ATen.h>

namespace qforge::deploy {

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
    return std::nullopt;
  }
  dq.per_tensor = dq.scale->initializer().numel() == 1;
  return dq;
}

std::optional<Dq> perTensorDq(const Value* v) {
  auto dq = dqOf(v);
  if (!dq || !dq->per_tensor) return std::nullopt;
  return dq;
}

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

bool isScalarInitializer(const Value* v) {
  return v != nullptr && v->isInitializer() && v->initializer().numel() == 1;
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

bool constantIntegers(const Dq& w) {
  return w.q->isInitializer() && (w.q->initializer().scalar_type() == at::kChar ||
                                  w.q->initializer().scalar_type() == at::kByte);
}

std::optional<at::Tensor> constantQuantize(const Node& q) {
  const Value* x = q.input(0);
  const Value* scale_v = q.input(1);
  const Value* zp_v = q.input(2);
  if (x == nullptr || !x->isInitializer() || scale_v == nullptr || !scale_v->isInitializer() ||
      zp_v == nullptr || !zp_v->isInitializer()) {
    return std::nullopt;
  }
  const at::Tensor values = x->initializer().to(at::kFloat);
  at::Tensor scale = scale_v->initializer().to(at::kFloat);
  const at::Tensor& zp_t = zp_v->initializer();
  at::Tensor zp = zp_t.to(at::kFloat);
  if (scale.numel() > 1) {
    int64_t axis = intAttr(&q, "axis", 1);
    if (axis < 0) axis += values.dim();
    std::vector<int64_t> shape(values.dim(), 1);
    shape[axis] = scale.numel();
    scale = scale.reshape(shape);
    zp = zp.reshape(shape);
  }
  const auto [lo, hi] = typeRange(zp_t.scalar_type());
  return (at::round(values / scale) + zp)
      .clamp(static_cast<double>(lo), static_cast<double>(hi))
      .to(zp_t.scalar_type())
      .contiguous();
}

}  // namespace qforge::deploy
