#include "verify/ort_fused_groups.h"

#include <set>

#include "deploy/qdq_match.h"

namespace qforge::verify {
namespace {

const char kMicrosoft[] = "com.microsoft";

// The emulated graph's value named like input `i` of ORT's node, or nullptr.
Value* valueOf(const Graph& g, const onnx::NodeProto& n, int i) {
  if (i >= n.input_size() || n.input(i).empty()) return nullptr;
  return g.findValue(n.input(i));
}

// Produces `produced` (which `replaced` computed until now) under the old value's name, then
// drops the ops nothing reads any more.
void takeOver(Graph& g, Value* replaced, Value* produced) {
  const std::string name = replaced->name();
  g.replaceAllUsesWith(replaced, produced, true);
  g.eliminateDeadCode();
  g.renameValue(produced, name);
}

// ------------------------------------------------------------------ SimplifiedLayerNormalization

// The group ends in the scale's Mul.
bool fuseSimplifiedLayerNorm(Graph& g, const onnx::NodeProto& fused) {
  Value* y = g.findValue(fused.output(0));
  if (y == nullptr || y->producer() == nullptr || y->producer()->opType() != "Mul") return false;
  Value* x = valueOf(g, fused, 0);
  Value* scale = valueOf(g, fused, 1);
  if (x == nullptr || scale == nullptr) return false;
  Node* node = g.addNode("SimplifiedLayerNormalization", {x, scale},
                         {g.uniqueName(y->name() + "_ort_fused")}, fused.name(), kMicrosoft);
  for (const onnx::AttributeProto& a : fused.attribute()) {
    if (a.name() == "axis") node->attributes.set(Attribute::makeInt("axis", a.i()));
    if (a.name() == "epsilon") node->attributes.set(Attribute::makeFloat("epsilon", a.f()));
  }
  takeOver(g, y, node->output(0));
  return true;
}

// -------------------------------------------------------------------------- MatMulIntegerToFloat

// The DequantizeLinear `v` was computed from through data movement only, or nullptr.
const Node* dequantizedAt(const Value* v) {
  static const std::set<std::string> moves = {"Reshape",   "Transpose", "Gather",   "Squeeze",
                                              "Unsqueeze", "Flatten",   "Identity", "Slice"};
  for (const Node* n = v->producer(); n != nullptr; n = n->input(0)->producer()) {
    if (n->opType() == "DequantizeLinear") return n;
    if (!moves.count(n->opType()) || n->input(0) == nullptr) return nullptr;
  }
  return nullptr;
}

// The DequantizeLinear whose levels `x` holds and that QuantizeLinear can take back exactly
// (|level - zp| <= 255, so x / scale is within 2^-15 of a whole number): per tensor, or along the
// last axis of a weight `x` that reads it directly (per column); else nullptr.
const Node* levelsSource(const Value* x) {
  const Node* dq = dequantizedAt(x);
  if (dq == nullptr || dq->input(2) == nullptr || !dq->input(1)->isInitializer() ||
      !dq->input(2)->isInitializer()) {
    return nullptr;
  }
  if (deploy::isScalarInitializer(dq->input(1))) return dq;
  // Per column: a weight, read directly.
  if (x->producer() != dq || !dq->input(0)->isInitializer()) return nullptr;
  const int64_t rank = dq->input(0)->initializer().dim();
  const Attribute* axis_attribute = dq->attributes.find("axis");
  const int64_t axis = axis_attribute != nullptr ? axis_attribute->i : 1;  // ONNX's default
  const bool last_axis = rank >= 2 && (axis == -1 || axis == rank - 1);
  return last_axis && dq->input(1)->initializer().dim() == 1 ? dq : nullptr;
}

// QuantizeLinear of `x` on the grid of `dq`, which gives its levels back.
Value* levelsOf(Graph& g, Value* x, const Node* dq) {
  Node* q = g.addNode("QuantizeLinear", {x, dq->input(1), dq->input(2)},
                      {g.uniqueName(x->name() + "_levels")});
  if (dq->attributes.has("axis")) q->attributes.set(*dq->attributes.find("axis"));
  return q->output(0);
}

// Where ORT fused a MatMul of two dequantized operands into MatMulIntegerToFloat. The scales and
// zero points are taken from the DequantizeLinears of the emulated file: ORT may have moved int8
// operands to uint8 with zero points + 128, which leaves every level - zero point as it was.
bool fuseMatMulIntegerToFloat(Graph& g, const onnx::NodeProto& fused) {
  Value* y = g.findValue(fused.output(0));
  if (y == nullptr || y->producer() == nullptr || y->producer()->opType() != "MatMul") return false;
  // A bias folded in too (a following Add) is not rewritten.
  if (fused.input_size() > 6 && !fused.input(6).empty()) return false;
  Node* matmul = y->producer();
  Value* a = matmul->input(0);
  Value* b = matmul->input(1);
  const Node* a_dq = a != nullptr ? levelsSource(a) : nullptr;
  const Node* b_dq = b != nullptr ? levelsSource(b) : nullptr;
  if (a_dq == nullptr || b_dq == nullptr || !deploy::isScalarInitializer(a_dq->input(1))) {
    return false;
  }
  Node* node = g.addNode("MatMulIntegerToFloat",
                         {levelsOf(g, a, a_dq), levelsOf(g, b, b_dq), a_dq->input(1),
                          b_dq->input(1), a_dq->input(2), b_dq->input(2)},
                         {g.uniqueName(y->name() + "_ort_fused")}, fused.name(), kMicrosoft);
  takeOver(g, y, node->output(0));
  return true;
}

}  // namespace

std::vector<std::string> fuseAsOrtDid(Graph& emulated, const onnx::ModelProto& optimized) {
  std::vector<std::string> fused;
  for (const onnx::NodeProto& n : optimized.graph().node()) {
    if (n.output_size() < 1) continue;
    if (n.op_type() == "SimplifiedLayerNormalization" && fuseSimplifiedLayerNorm(emulated, n)) {
      fused.push_back("SimplifiedLayerNormalization '" + n.output(0) + "'");
    } else if (n.op_type() == "MatMulIntegerToFloat" && fuseMatMulIntegerToFloat(emulated, n)) {
      fused.push_back("MatMulIntegerToFloat '" + n.output(0) + "'");
    }
  }
  if (!fused.empty() && emulated.model.opsetFor(kMicrosoft) == 0) {
    emulated.model.opset_imports[kMicrosoft] = 1;
  }
  return fused;
}

}  // namespace qforge::verify
