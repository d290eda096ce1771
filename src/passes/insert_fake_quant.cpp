#include "passes/insert_fake_quant.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "exec/op_traits.h"
#include "passes/activation_values.h"
#include "passes/fake_quantize_node.h"

namespace qforge::passes {

using backends::BackendConfig;
using backends::OpRole;
using backends::QuantSpec;

const char* toString(PointKind kind) {
  switch (kind) {
    case PointKind::Weight:
      return "weight";
    case PointKind::Bias:
      return "bias";
    case PointKind::Activation:
      return "activation";
    case PointKind::FixedOutput:
      return "fixed";
  }
  return "?";
}

std::optional<std::string> quantizerFeeding(const Value* v, const BackendConfig& backend) {
  while (v != nullptr && v->producer() != nullptr) {
    const Node* p = v->producer();
    if (isFakeQuantize(p)) return quantizerOf(*p);
    const backends::OpTrait* trait = backend.trait(p->opType());
    if (trait == nullptr || trait->role != OpRole::SharesInput || p->inputs().empty()) break;
    v = p->input(0);
  }
  return std::nullopt;
}

namespace {

// Whether every value of `v` is >= 0, so an unsigned grid loses nothing: the output of a ReLU-like
// op, or of pooling, data movement or an Add over such outputs (OpenVINO's rule, in its notes).
// The op table says how each op's sign follows from its inputs; where it knows nothing, a quantizer
// or an op sharing its input's quantizer passes input 0's sign on.
bool producesNonNegative(const Graph& graph, const Value* v, const BackendConfig& backend) {
  if (v == nullptr || v->producer() == nullptr) return false;
  const Node* p = v->producer();
  const auto from = [&](const Value* in) { return producesNonNegative(graph, in, backend); };
  OutputSign sign = outputSign(opInfoFor(graph, *p), *p);
  const backends::OpTrait* trait = backend.trait(p->opType());
  if (sign == OutputSign::Unknown &&
      (isFakeQuantize(p) || (trait && trait->role == OpRole::SharesInput))) {
    sign = OutputSign::OfDataInput;
  }
  switch (sign) {
    case OutputSign::NonNegative:
      return true;
    case OutputSign::OfAllInputs:
      return !p->inputs().empty() && std::all_of(p->inputs().begin(), p->inputs().end(), from);
    case OutputSign::OfDataInput:
      return !p->inputs().empty() && from(p->input(0));
    case OutputSign::Unknown:
      break;
  }
  return false;
}

class Inserter {
 public:
  Inserter(Graph& graph, const BackendConfig& backend) : graph_(graph), backend_(backend) {}

  std::vector<QuantPoint> run(const std::vector<QuantUnit>& units,
                              const std::vector<UnitSettings>& settings) {
    require(units.size() == settings.size(), "insertFakeQuantizers: one setting per unit");
    const backends::Placement& place = backend_.placement;
    if (place.graph_inputs) {
      for (Value* in : graph_.inputs()) {
        // Token ids and masks are inputs too, but no activations.
        const DType dtype = in->type.dtype;
        if (!in->isInitializer() && (dtype == DType::Undefined || isFloatType(dtype))) {
          quantizeAllUses(in, "", backend_.activation);
        }
      }
    }
    for (size_t i = 0; i < units.size(); ++i) {
      const QuantUnit& unit = units[i];
      const UnitSettings& s = settings[i];
      if (s.skip) continue;
      if (unit.role == OpRole::Fixed) {
        if (unit.output_carries_activations) quantizeFixedOutput(unit);
        continue;
      }
      const bool shared_concat =
          backend_.constraints.concat_shared_scale && unit.anchor()->opType() == "Concat";
      std::string concat_quantizer;
      for (const Use& w : unit.weights)
        quantizeWeight(unit, w, s.weight);
      if (place.unit_inputs) {
        for (const Use& in : unit.activation_inputs) {
          std::string q = quantizeInput(unit, in, s.activation,
                                        shared_concat ? concat_quantizer : std::string());
          if (shared_concat && concat_quantizer.empty()) concat_quantizer = q;
        }
      }
      const bool output_placed =
          place.unit_outputs || (place.graph_outputs && graph_.isGraphOutput(unit.output));
      if (output_placed && unit.output_carries_activations) {
        quantizeAllUses(unit.output, unit.name, s.activation, concat_quantizer);
      }
      if (backend_.constraints.bias.mode != backends::BiasRule::Mode::Float &&
          unit.bias.node != nullptr) {
        quantizeBias(unit, s);
      }
    }
    alignComparedValues();
    return std::move(points_);
  }

 private:
  // Final activation scheme for value `v`: unsigned after ReLU-like producers when asked.
  QuantSpec activationFor(const Value* v, QuantSpec spec) const {
    spec.scheme.axis = -1;
    if (backend_.constraints.unsigned_after_relu && spec.scheme.symmetric &&
        !spec.scheme.is_unsigned && producesNonNegative(graph_, v, backend_)) {
      spec.scheme.is_unsigned = true;
      spec.scheme.symmetric_range = false;
      spec.scheme.full_range_clamp = false;
    }
    return spec;
  }

  QuantPoint& addPoint(PointKind kind, const std::string& name, const Value* v,
                       const std::string& unit, const QuantSpec& spec) {
    QuantPoint p;
    p.kind = kind;
    p.quantizer = name;
    p.value = v->name();
    p.unit = unit;
    p.spec = spec;
    points_.push_back(p);
    by_name_[name] = points_.size() - 1;
    return points_.back();
  }

  std::string freshName(const std::string& base) {
    std::string name = base;
    for (int k = 1; by_name_.count(name); ++k)
      name = base + "_" + std::to_string(k);
    return name;
  }

  void recordNode(const std::string& quantizer, const Node* node) {
    points_[by_name_.at(quantizer)].nodes.push_back(node->name());
  }

  void quantizeWeight(const QuantUnit& unit, const Use& use, QuantSpec spec) {
    Value* w = use.node->input(use.index);
    if (spec.scheme.axis >= 0) {
      spec.scheme.axis =
          weightChannelAxis(opInfoFor(graph_, *use.node), *use.node, use.index, w->initializer());
    }
    const std::string name = freshName(w->name());
    addPoint(PointKind::Weight, name, w, unit.name, spec);
    recordNode(name, addFakeQuantizeNode(graph_, w, name, {use}));
  }

  // Quantizes what `use` reads, reusing the value's quantizer when another unit made one.
  std::string quantizeInput(const QuantUnit& unit, const Use& use, const QuantSpec& spec,
                            const std::string& shared) {
    Value* v = use.node->input(use.index);
    if (auto q = quantizerFeeding(v, backend_)) {
      if (shared.empty() || *q == shared) return *q;
    }
    auto existing = fq_of_value_.find(v);
    if (existing != fq_of_value_.end() && shared.empty()) {
      graph_.setInput(use.node, use.index, existing->second->output(0));
      return quantizerOf(*existing->second);
    }
    std::string name = shared;
    if (name.empty()) {
      name = freshName(v->name());
      addPoint(PointKind::Activation, name, v, unit.name, activationFor(v, spec));
    }
    Node* node = addFakeQuantizeNode(graph_, v, name, {use});
    recordNode(name, node);
    if (shared.empty()) fq_of_value_[v] = node;
    return name;
  }

  // Quantizes `v` for every reader (unit outputs, graph inputs). Units are visited in
  // topological order, so no reader of `v` has a quantizer of its own yet.
  void quantizeAllUses(Value* v, const std::string& unit, const QuantSpec& spec,
                       const std::string& shared = "") {
    if (shared.empty() && quantizerFeeding(v, backend_)) return;
    std::string name = shared;
    if (name.empty()) {
      name = freshName(v->name());
      addPoint(PointKind::Activation, name, v, unit, activationFor(v, spec));
    }
    recordNode(name, addFakeQuantizeNode(graph_, v, name, {}));
  }

  void quantizeFixedOutput(const QuantUnit& unit) {
    const backends::OpTrait* trait = backend_.trait(unit.anchor()->opType());
    QuantSpec spec = backend_.activation;
    spec.scheme.axis = -1;
    spec.scheme.is_unsigned = trait->fixed_unsigned;
    spec.scheme.symmetric = trait->fixed_zero_point == 0;
    spec.scheme.symmetric_range = false;
    spec.scheme.full_range_clamp = false;
    spec.observer.clear();
    spec.fake_quantizer = "Fixed";
    const std::string name = freshName(unit.output->name());
    QuantPoint& p = addPoint(PointKind::FixedOutput, name, unit.output, unit.name, spec);
    p.fixed_scale = trait->fixed_scale;
    p.fixed_zero_point = trait->fixed_zero_point;
    recordNode(name, addFakeQuantizeNode(graph_, unit.output, name, {}));
  }

  void quantizeBias(const QuantUnit& unit, const UnitSettings& s) {
    Value* b = unit.bias.node->input(unit.bias.index);
    const backends::BiasRule& rule = backend_.constraints.bias;
    QuantSpec spec = s.weight;
    std::string input_q, weight_q;
    if (rule.mode == backends::BiasRule::Mode::Derived) {
      // The anchor's data input and its weight quantizers define the bias grid.
      auto in = quantizerFeeding(unit.anchor()->input(0), backend_);
      const Value* w = unit.anchor()->input(1);
      auto wq = quantizerFeeding(w, backend_);
      if (!in || !wq) return;  // float input or weight: the bias stays float as well
      input_q = *in;
      weight_q = *wq;
      spec.observer.clear();
      spec.fake_quantizer = "DerivedBias";
    } else {
      spec.scheme = rule.scheme;
      spec.observer = rule.observer;
      spec.observer_options.clear();
      spec.fake_quantizer = "Fixed";
      spec.fake_quantizer_options.clear();
    }
    const std::string name = freshName(b->name());
    QuantPoint& p = addPoint(PointKind::Bias, name, b, unit.name, spec);
    p.bias_input_quantizer = input_q;
    p.bias_weight_quantizer = weight_q;
    p.bias_bits = rule.bits;
    recordNode(name, addFakeQuantizeNode(graph_, b, name, {unit.bias}));
  }

  // Equal tests values for identity: detectors keep a heat map's local maxima as
  // Equal(MaxPool(s), s). When one side reads a quantized use of a value through data movement and
  // the other side reads the same value in float, the two never match once quantized (M-LSD's
  // scores became all zeros). The float side then reads the same quantizer, as hardware holding
  // one copy of the tensor would.
  void alignComparedValues() {
    for (Node* node : graph_.topologicalOrder()) {
      if (node->opType() != "Equal" || !node->domain().empty() || node->inputs().size() != 2)
        continue;
      for (size_t side = 0; side < 2; ++side) {
        const Node* fq = quantizerThroughDataMovement(node->input(side));
        if (fq == nullptr) continue;
        const Use float_use = useReading(fq->input(0), Use{node, 1 - side});
        if (float_use.node != nullptr)
          graph_.setInput(float_use.node, float_use.index, fq->output(0));
      }
    }
  }

  // The FakeQuantize node `v` comes from through ops that only move data, or nullptr.
  const Node* quantizerThroughDataMovement(const Value* v) const {
    while (v != nullptr && v->producer() != nullptr) {
      const Node* p = v->producer();
      if (isFakeQuantize(p)) return p;
      if (p->inputs().empty() || !movesDataOnly(graph_, *p)) break;
      v = p->input(0);
    }
    return nullptr;
  }

  // Following `use` back through ops that only move data: the use that reads `source` itself,
  // or none.
  Use useReading(const Value* source, Use use) const {
    while (use.node != nullptr) {
      const Value* v = use.node->input(use.index);
      if (v == source) return use;
      Node* p = v != nullptr ? v->producer() : nullptr;
      if (p == nullptr || p->inputs().empty() || !movesDataOnly(graph_, *p)) break;
      use = Use{p, 0};
    }
    return Use{};
  }

  Graph& graph_;
  const BackendConfig& backend_;
  std::vector<QuantPoint> points_;
  std::map<std::string, size_t> by_name_;
  std::map<const Value*, Node*> fq_of_value_;
};

}  // namespace

std::vector<QuantPoint> insertFakeQuantizers(Graph& graph, const std::vector<QuantUnit>& units,
                                             const std::vector<UnitSettings>& settings,
                                             const BackendConfig& backend) {
  return Inserter(graph, backend).run(units, settings);
}

}  // namespace qforge::passes
