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
  std::vector<Value*> inputs;
  for (int i = 0; i < fused.input_size(); ++i) {
    Value* v = valueOf(g, fused, i);
    if (v == nullptr && !fused.input(i).empty()) return false;
    inputs.push_back(v);
  }
  if (inputs.size() < 2 || inputs[0] == nullptr || inputs[1] == nullptr) return false;
  Node* node = g.addNode(fused.op_type(), inputs, {g.uniqueName(y->name() + "_ort_fused")},
                         fused.name(), kMicrosoft);
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

// True when `x` holds the levels of a DequantizeLinear by `scale` and `zero_point`: quantizing
// it again on that grid gives the levels back exactly (|level - zp| <= 255, so x / scale is
// within 2^-15 of a whole number).
bool dequantizedBy(const Value* x, const Value* scale, const Value* zero_point) {
  const Node* dq = dequantizedAt(x);
  return dq != nullptr && dq->input(1) == scale && dq->input(2) == zero_point &&
         deploy::isScalarInitializer(scale) && deploy::isScalarInitializer(zero_point);
}

bool fuseMatMulIntegerToFloat(Graph& g, const onnx::NodeProto& fused) {
  Value* y = g.findValue(fused.output(0));
  if (y == nullptr || y->producer() == nullptr || y->producer()->opType() != "MatMul") return false;
  // A bias folded in too (a following Add) is not rewritten.
  if (fused.input_size() > 6 && !fused.input(6).empty()) return false;
  Node* matmul = y->producer();
  Value* a_scale = valueOf(g, fused, 2);
  Value* b_scale = valueOf(g, fused, 3);
  Value* a_zp = valueOf(g, fused, 4);
  Value* b_zp = valueOf(g, fused, 5);
  Value* a = matmul->input(0);
  Value* b = matmul->input(1);
  if (a == nullptr || b == nullptr || !dequantizedBy(a, a_scale, a_zp) ||
      !dequantizedBy(b, b_scale, b_zp)) {
    return false;
  }
  Value* a_levels =
      g.addNode("QuantizeLinear", {a, a_scale, a_zp}, {g.uniqueName(a->name() + "_levels")})
          ->output(0);
  Value* b_levels =
      g.addNode("QuantizeLinear", {b, b_scale, b_zp}, {g.uniqueName(b->name() + "_levels")})
          ->output(0);
  Node* node = g.addNode("MatMulIntegerToFloat", {a_levels, b_levels, a_scale, b_scale, a_zp, b_zp},
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
      fused.push_back(n.op_type() + " '" + n.output(0) + "'");
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
