#include "deploy/ort_double_qdq_guard.h"

#include <ATen/ATen.h>

#include <optional>

#include "deploy/qdq_match.h"

namespace qforge::deploy {

namespace {

// A QuantizeLinear -> DequantizeLinear pair as ORT's remover reads one: scalar constant
// parameters, the same ones on both nodes, and the Q read by nothing but the DQ.
struct Pair {
  Node* q = nullptr;
  Node* dq = nullptr;
};

bool eightBit(const at::Tensor& zero_point) {
  return zero_point.scalar_type() == at::kChar || zero_point.scalar_type() == at::kByte;
}

// One use, and not a graph output: what ORT asks of every link but the last.
bool onlyLink(const Graph& g, const Value* v) {
  return v->uses().size() == 1 && !g.isGraphOutput(v);
}

std::optional<Pair> pairEndingAt(const Graph& g, Node* dq) {
  if (!isOp(dq, "DequantizeLinear") || dq->inputs().size() != 3) return std::nullopt;
  Node* q = dq->input(0)->producer();
  if (!isOp(q, "QuantizeLinear") || q->inputs().size() != 3 || !onlyLink(g, q->output(0)))
    return std::nullopt;
  if (!isScalarInitializer(q->input(1)) || !isScalarInitializer(q->input(2)) ||
      !eightBit(q->input(2)->initializer()))
    return std::nullopt;
  if (!isScalarInitializer(dq->input(1)) || !isScalarInitializer(dq->input(2)) ||
      !sameParams(q->input(1), q->input(2), dq->input(1), dq->input(2)))
    return std::nullopt;
  return Pair{q, dq};
}

// The pair whose Q reads `dq`'s output, as the second half of a chain ORT would collapse.
std::optional<Pair> secondPairAfter(const Graph& g, const Node* dq) {
  const Value* y = dq->output(0);
  if (!onlyLink(g, y)) return std::nullopt;
  Node* q = y->uses().front().node;
  if (!isOp(q, "QuantizeLinear") || !onlyLink(g, q->output(0))) return std::nullopt;
  return pairEndingAt(g, q->output(0)->uses().front().node);
}

bool sameTypeDifferentGrid(const Pair& a, const Pair& b) {
  const at::Tensor za = a.q->input(2)->initializer();
  const at::Tensor zb = b.q->input(2)->initializer();
  if (za.scalar_type() != zb.scalar_type()) return false;
  return !sameParams(a.q->input(1), a.q->input(2), b.q->input(1), b.q->input(2));
}

// The same grid in the other 8-bit type: levels and zero point move by 128 together.
void retype(Graph& g, const Pair& p) {
  const at::Tensor zp = p.q->input(2)->initializer();
  const bool to_unsigned = zp.scalar_type() == at::kChar;
  const int64_t shifted = zp.to(at::kLong).item<int64_t>() + (to_unsigned ? 128 : -128);
  const at::Tensor new_zp =
      at::full(zp.sizes(), shifted, at::TensorOptions().dtype(to_unsigned ? at::kByte : at::kChar));
  Value* zp_value = g.addInitializer(g.uniqueName(p.q->input(2)->name() + "_retyped"), new_zp);
  g.setInput(p.q, 2, zp_value);
  g.setInput(p.dq, 2, zp_value);
  p.q->output(0)->type.dtype = to_unsigned ? DType::UInt8 : DType::Int8;
}

}  // namespace

std::vector<std::string> keepDoubleQdqPairsApart(Graph& g) {
  std::vector<std::string> retyped;
  // In graph order, so that in a chain of three pairs the middle one is retyped and the third,
  // of the first's type again, no longer follows a pair of its own type.
  for (Node* n : g.topologicalOrder()) {
    const std::optional<Pair> first = pairEndingAt(g, n);
    if (!first) continue;
    const std::optional<Pair> second = secondPairAfter(g, first->dq);
    if (!second || !sameTypeDifferentGrid(*first, *second)) continue;
    retype(g, *second);
    retyped.push_back(second->q->output(0)->name());
  }
  return retyped;
}

}  // namespace qforge::deploy
