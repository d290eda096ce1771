#include "passes/quant_units.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "exec/op_traits.h"
#include "passes/activation_values.h"
#include "passes/gelu_pattern.h"
#include "passes/hard_swish_pattern.h"
#include "passes/layer_norm_pattern.h"
#include "passes/silu_pattern.h"

namespace qforge::passes {

using backends::BackendConfig;
using backends::FusionPattern;
using backends::OpRole;

std::string QuantUnit::ops() const {
  std::string out;
  for (const Node* n : nodes)
    out += (out.empty() ? "" : "+") + n->opType();
  return out;
}

bool isConstant(const Value* v) {
  return v != nullptr && (v->isInitializer() ||
                          (v->producer() != nullptr && v->producer()->opType() == "Constant" &&
                           v->producer()->inputs().empty()));
}

namespace {

// The single consumer of `node`'s first output, when it has exactly one and is not a graph output.
Node* soleConsumer(const Graph& graph, const Node* node) {
  const Value* out = node->outputs().front();
  if (node->outputs().size() != 1 || out->uses().size() != 1 || graph.isGraphOutput(out)) {
    return nullptr;
  }
  return out->uses().front().node;
}

// The nodes `pattern` covers from `anchor` (empty when it does not match).
std::vector<Node*> matchPattern(const Graph& graph, Node* anchor, const FusionPattern& pattern,
                                const std::set<const Node*>& taken) {
  if (!pattern.steps.front().accepts(anchor->opType())) return {};
  std::vector<Node*> nodes{anchor};
  for (size_t i = 1; i < pattern.steps.size(); ++i) {
    Node* next = soleConsumer(graph, nodes.back());
    if (next != nullptr && !taken.count(next) && next->domain().empty() &&
        pattern.steps[i].accepts(next->opType())) {
      nodes.push_back(next);
    } else if (!pattern.steps[i].optional) {
      return {};
    }
  }
  return nodes;
}

std::vector<int> activationSlots(const Node& node, const OpInfo* info,
                                 const backends::OpTrait* trait) {
  if (trait != nullptr && !trait->activation_inputs.empty()) return trait->activation_inputs;
  if (info == nullptr || !info->combines_activations) return {0};
  std::vector<int> slots;
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    if (info != nullptr && static_cast<int>(i) == info->bias_input) continue;
    slots.push_back(static_cast<int>(i));
  }
  return slots;
}

void collectInputs(const Graph& graph, const BackendConfig& backend,
                   const ActivationValues& activations, QuantUnit& unit) {
  const std::set<const Node*> inside(unit.nodes.begin(), unit.nodes.end());
  for (size_t k = 0; k < unit.nodes.size(); ++k) {
    Node* node = unit.nodes[k];
    const OpInfo* info = opInfoFor(graph, *node);
    if (k == 0 && unit.role == OpRole::Quantizable) {
      for (size_t slot = 0; slot < node->inputs().size(); ++slot) {
        const Value* v = node->input(slot);
        if (v != nullptr && v->isInitializer() && isWeightInput(info, slot)) {
          unit.weights.push_back(Use{node, slot});
        }
      }
      if (info != nullptr && info->bias_input >= 0) {
        const Value* b = node->input(static_cast<size_t>(info->bias_input));
        if (b != nullptr && b->isInitializer()) {
          unit.bias = Use{node, static_cast<size_t>(info->bias_input)};
        }
      }
    }
    // BN, ReLU: no new activations
    if (k > 0 && (info == nullptr || !info->combines_activations)) continue;
    if (unit.role != OpRole::Quantizable) continue;
    const std::vector<int> slots =
        activationSlots(*node, info, k == 0 ? backend.trait(node->opType()) : nullptr);
    for (int slot : slots) {
      const Value* v = node->input(static_cast<size_t>(slot));
      if (v == nullptr || isConstant(v) || (isWeightInput(info, slot) && v->isInitializer()))
        continue;
      // Indices, shapes and masks are never quantized; a weight computed from initializers
      // (Transpose(W) when constant folding is off or over its budget) still is, as a weight.
      const DType dtype = activations.dtypeOf(v);
      const bool computed_weight =
          isWeightInput(info, slot) && (dtype == DType::Undefined || isFloatType(dtype));
      if (!computed_weight && !activations.carriesActivations(v)) continue;
      if (v->producer() != nullptr && inside.count(v->producer())) continue;
      unit.activation_inputs.push_back(Use{node, static_cast<size_t>(slot)});
    }
  }
  unit.output = unit.nodes.back()->outputs().front();
  unit.output_carries_activations = activations.carriesActivations(unit.output);
}

// The nodes of an op written out in primitives that starts at `node`, and that op's type.
std::pair<std::vector<Node*>, const char*> writtenOutOp(const Graph& graph, Node* node) {
  if (std::vector<Node*> norm = matchDecomposedLayerNorm(graph, node); !norm.empty())
    return {std::move(norm), "LayerNormalization"};
  if (std::vector<Node*> gelu = matchDecomposedGelu(graph, node); !gelu.empty())
    return {std::move(gelu), "Gelu"};
  if (std::vector<Node*> hard_swish = matchDecomposedHardSwish(graph, node); !hard_swish.empty())
    return {std::move(hard_swish), "HardSwish"};
  if (std::vector<Node*> hard_swish = matchClippedHardSwish(graph, node); !hard_swish.empty())
    return {std::move(hard_swish), "HardSwish"};
  if (std::vector<Node*> silu = matchDecomposedSilu(graph, node); !silu.empty())
    return {std::move(silu), "Swish"};
  return {{}, ""};
}

// Quantizable and fixed ops are the anchors of units; the others stay float.
bool formsUnit(OpRole role) {
  return role == OpRole::Quantizable || role == OpRole::Fixed;
}

// True when the backend does not list the written-out op itself but quantizes every node of it
// on its own: it has no kernel for the op and runs the pieces in integers (QNN has no Swish and
// runs SiLU as Sigmoid and ElementWiseMultiply; ONNX Runtime's quantizer writes QLinearSigmoid
// and QLinearMul), so they are placed as the backend places them. An op the backend lists as
// float stays float whatever its pieces are, and so does a normalization: every toolchain fuses
// it into one kernel, and a quantized variance rounds small variances to zero (ConvNeXt: NaN).
bool runsThePieces(const BackendConfig& backend, const std::vector<std::string>& extra_quantizable,
                   const std::string& op_type, const std::vector<Node*>& pieces) {
  if (backend.trait(op_type) != nullptr || op_type == "LayerNormalization" ||
      formsUnit(unitRole(backend, extra_quantizable, op_type)))
    return false;
  return std::all_of(pieces.begin(), pieces.end(), [&](const Node* n) {
    return formsUnit(unitRole(backend, extra_quantizable, n->opType()));
  });
}

bool readsActivations(const Node& node, const ActivationValues& activations) {
  for (const Value* in : node.inputs()) {
    if (activations.carriesActivations(in)) return true;
  }
  return false;
}

}  // namespace

OpRole unitRole(const BackendConfig& backend, const std::vector<std::string>& extra_quantizable,
                const std::string& op_type) {
  const backends::OpTrait* trait = backend.trait(op_type);
  const bool extra = std::find(extra_quantizable.begin(), extra_quantizable.end(), op_type) !=
                     extra_quantizable.end();
  if (extra && (trait == nullptr || trait->role != OpRole::Never)) return OpRole::Quantizable;
  return trait != nullptr ? trait->role : OpRole::Never;
}

std::vector<QuantUnit> findQuantUnits(const Graph& graph, const BackendConfig& backend,
                                      const std::vector<std::string>& extra_quantizable,
                                      const ActivationValues* known_activations) {
  std::optional<ActivationValues> computed;
  if (known_activations == nullptr) computed.emplace(graph);
  const ActivationValues& activations = known_activations ? *known_activations : *computed;
  std::vector<QuantUnit> units;
  std::set<const Node*> taken;
  for (Node* node : graph.topologicalOrder()) {
    if (taken.count(node) || !node->domain().empty()) continue;
    // An op written out in primitive ops (LayerNormalization, GELU, HardSwish, SiLU) is placed as
    // the op would be: one unit when the backend quantizes that op; its pieces when the backend
    // does not list the op and quantizes each piece; else float, never quantizers inside.
    if (auto [nodes, op_type] = writtenOutOp(graph, node);
        !nodes.empty() && !runsThePieces(backend, extra_quantizable, op_type, nodes)) {
      taken.insert(nodes.begin(), nodes.end());
      const OpRole role = unitRole(backend, extra_quantizable, op_type);
      if (!formsUnit(role)) continue;
      QuantUnit unit;
      unit.role = role;
      unit.nodes = std::move(nodes);
      unit.pattern = std::string(op_type) + ", decomposed";
      unit.name = node->name().empty() ? node->outputs().front()->name() : node->name();
      collectInputs(graph, backend, activations, unit);
      units.push_back(std::move(unit));
      continue;
    }
    const OpRole role = unitRole(backend, extra_quantizable, node->opType());
    if (!formsUnit(role)) continue;
    // An op on shapes or indices only (a Mul of two sizes, a Cast to int64) is no unit.
    if (!activations.carriesActivations(node->outputs().front()) &&
        !readsActivations(*node, activations))
      continue;

    QuantUnit unit;
    unit.role = role;
    unit.nodes = {node};
    if (role == OpRole::Quantizable) {
      for (const FusionPattern& pattern : backend.fusions) {
        std::vector<Node*> match = matchPattern(graph, node, pattern, taken);
        if (match.size() > unit.nodes.size()) {
          unit.nodes = std::move(match);
          unit.pattern = pattern.str();
        }
      }
    }
    for (const Node* n : unit.nodes)
      taken.insert(n);
    unit.name = node->name().empty() ? node->outputs().front()->name() : node->name();
    collectInputs(graph, backend, activations, unit);
    units.push_back(std::move(unit));
  }
  return units;
}

}  // namespace qforge::passes
