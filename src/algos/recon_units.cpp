#include "algos/recon_units.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "algos/calibrate.h"
#include "core/error.h"
#include "ir/node_attributes.h"
#include "passes/fake_quantize_node.h"

namespace qforge::algos {
namespace {

// What the partition needs to know about every node and value of the graph.
struct GraphFacts {
  std::vector<Node*> order;
  std::unordered_map<const Node*, size_t> position;
  std::unordered_set<const Value*> constant;          // computed from initializers only
  std::unordered_set<const Value*> quantized_weight;  // constants downstream of a weight quantizer

  bool isConstant(const Value* v) const { return v == nullptr || constant.count(v) > 0; }

  std::vector<Value*> activationInputs(const Node* n) const {
    std::vector<Value*> out;
    for (Value* v : n->inputs()) {
      if (!isConstant(v)) out.push_back(v);
    }
    return out;
  }

  bool isWeightQuantizer(const Node* n) const {
    return passes::isFakeQuantize(n) && n->input(0) != nullptr && isConstant(n->input(0));
  }

  // A node that computes with a quantized weight on one activation: what AdaRound rounds for.
  bool isWeighted(const Node* n) const {
    if (passes::isFakeQuantize(n) || activationInputs(n).size() != 1) return false;
    return std::any_of(n->inputs().begin(), n->inputs().end(),
                       [&](const Value* v) { return v && quantized_weight.count(v); });
  }
};

GraphFacts analyse(const Graph& graph) {
  GraphFacts f;
  f.order = graph.topologicalOrder();
  for (size_t i = 0; i < f.order.size(); ++i)
    f.position[f.order[i]] = i;
  for (const Value* v : graph.initializers())
    f.constant.insert(v);
  for (const Node* n : f.order) {
    const bool all_constant = std::all_of(n->inputs().begin(), n->inputs().end(),
                                          [&](const Value* v) { return f.isConstant(v); });
    if (!all_constant) continue;
    const bool weight = f.isWeightQuantizer(n) ||
                        std::any_of(n->inputs().begin(), n->inputs().end(), [&](const Value* v) {
                          return v && f.quantized_weight.count(v);
                        });
    for (const Value* out : n->outputs()) {
      f.constant.insert(out);
      if (weight) f.quantized_weight.insert(out);
    }
  }
  return f;
}

// Whether `n` keeps one row per sample on axis 0 when its activation input has it: ops that
// compute each sample from itself alone, and data movement whose attributes leave axis 0 where it
// is. Reconstruction caches and compares a unit's entry and exit row by row, so a layer's chain
// stops before anything else (a ViT's qkv layer ran into the head split's [3, N, ...] Transpose).
bool keepsSampleAxis(const Node& n) {
  static const std::set<std::string> kElementwise = {
      "Abs",      "Neg",         "Relu",      "LeakyRelu", "PRelu", "Elu",  "Selu", "Celu",
      "Gelu",     "Sigmoid",     "Tanh",      "Softplus",  "Mish",  "Erf",  "Exp",  "Log",
      "Sqrt",     "Floor",       "Ceil",      "Round",     "Sign",  "Clip", "Cast", "Identity",
      "Add",      "Sub",         "Mul",       "Div",       "Pow",   "Max",  "Min",  "Dropout",
      "Softsign", "HardSigmoid", "HardSwish", "Reciprocal"};
  static const std::set<std::string> kWithinSample = {
      "MaxPool",      "AveragePool",  "LpPool",       "GlobalAveragePool",  "GlobalMaxPool",
      "GlobalLpPool", "DepthToSpace", "SpaceToDepth", "BatchNormalization", "InstanceNormalization",
      "LRN"};
  if (!isDefaultDomain(n)) return false;
  const std::string& op = n.opType();
  if (kElementwise.count(op) || kWithinSample.count(op)) return true;
  if (op == "Softmax" || op == "LogSoftmax") return intAttr(n, "axis", 1) != 0;
  if (op == "Flatten") return intAttr(n, "axis", 1) >= 1;
  if (op == "Transpose") {
    const Attribute* perm = n.attributes.find("perm");
    return perm != nullptr && !perm->ints.empty() && perm->ints.front() == 0;
  }
  if (op == "Reshape") {  // a 0 copies the input's dimension (unless allowzero)
    const Value* shape = n.inputs().size() > 1 ? n.input(1) : nullptr;
    return shape != nullptr && shape->isInitializer() && shape->initializer().numel() > 0 &&
           shape->initializer().reshape({-1})[0].item<int64_t>() == 0 &&
           intAttr(n, "allowzero", 0) == 0;
  }
  return false;
}

std::vector<const Node*> between(const Graph& graph, const GraphFacts& f, const std::string& entry,
                                 const std::string& exit) {
  const Value* from = graph.value(entry);
  std::set<size_t> picked;  // topological positions
  std::vector<const Value*> todo{graph.value(exit)};
  std::unordered_set<const Value*> seen;
  while (!todo.empty()) {
    const Value* v = todo.back();
    todo.pop_back();
    if (v == nullptr || v == from || v->isInitializer() || !seen.insert(v).second) continue;
    const Node* producer = v->producer();
    if (producer == nullptr) {
      throw Error("reconstruction unit '" + entry + "' -> '" + exit + "' also reads '" + v->name() +
                  "', which is not computed from its entry");
    }
    picked.insert(f.position.at(producer));
    for (const Value* in : producer->inputs())
      todo.push_back(in);
  }
  std::vector<const Node*> nodes;
  for (size_t i : picked)
    nodes.push_back(f.order[i]);
  return nodes;
}

std::string unitName(const std::vector<const Node*>& weighted) {
  auto nameOf = [](const Node* n) { return n->name().empty() ? n->output(0)->name() : n->name(); };
  if (weighted.empty()) return "(no weights)";
  if (weighted.size() == 1) return nameOf(weighted.front());
  if (weighted.size() == 2) return nameOf(weighted.front()) + "+" + nameOf(weighted.back());
  return nameOf(weighted.front()) + ".." + nameOf(weighted.back());
}

ReconUnit makeUnit(const Graph& graph, const GraphFacts& f, const std::string& entry,
                   const std::string& exit) {
  ReconUnit u;
  u.entry = entry;
  u.exit = exit;
  u.nodes = between(graph, f, entry, exit);
  for (const Node* n : u.nodes) {
    if (f.isWeightQuantizer(n)) {
      u.weight_quantizers.push_back(n);
    } else if (passes::isFakeQuantize(n)) {
      u.act_quantizers.push_back(n);
    } else if (f.isWeighted(n)) {
      u.weighted.push_back(n);
    }
    if (!passes::isFakeQuantize(n) && f.activationInputs(n).size() >= 2) u.residual = true;
  }
  u.name = unitName(u.weighted);
  return u;
}

std::vector<ReconUnit> layerUnits(const Graph& graph, const GraphFacts& f) {
  std::vector<ReconUnit> units;
  for (const Node* n : f.order) {
    if (!f.isWeighted(n)) continue;
    // Entry: the activation before the quantizer the node reads it through.
    const Value* in = f.activationInputs(n).front();
    const Node* q = in->producer();
    const Value* entry = q != nullptr && passes::isFakeQuantize(q) ? q->input(0) : in;
    // Exit: follow the single-reader chain until the next quantizer, weighted node, merge or an
    // op that may move the samples off axis 0.
    const Value* exit = n->output(0);
    while (!graph.isGraphOutput(exit) && exit->uses().size() == 1) {
      const Node* next = exit->uses().front().node;
      if (passes::isFakeQuantize(next) || f.isWeighted(next) ||
          f.activationInputs(next).size() != 1 || next->outputs().empty() ||
          !keepsSampleAxis(*next)) {
        break;
      }
      exit = next->output(0);
    }
    units.push_back(makeUnit(graph, f, entry->name(), exit->name()));
  }
  return units;
}

// Values every path from the input to the output goes through, in order: after a node, the only
// value still waiting for readers (or being an output).
std::vector<const Value*> cutValues(const Graph& graph, const GraphFacts& f) {
  const Value* input = &dataInput(graph);
  std::unordered_map<const Value*, size_t> waiting;
  std::unordered_set<const Value*> live{input};
  waiting[input] = input->uses().size();
  std::vector<const Value*> cuts{input};
  for (const Node* n : f.order) {
    if (f.activationInputs(n).empty()) continue;  // constants and weight quantizers
    for (const Value* v : f.activationInputs(n)) {
      if (--waiting[v] == 0 && !graph.isGraphOutput(v)) live.erase(v);
    }
    for (const Value* out : n->outputs()) {
      if (out->uses().empty() && !graph.isGraphOutput(out)) continue;
      live.insert(out);
      waiting[out] = out->uses().size();
    }
    if (live.size() == 1 && *live.begin() != cuts.back()) cuts.push_back(*live.begin());
  }
  return cuts;
}

std::vector<ReconUnit> blockUnits(const Graph& graph, const GraphFacts& f, int max_layers) {
  const std::vector<const Value*> cuts = cutValues(graph, f);
  std::vector<ReconUnit> segments;
  for (size_t i = 0; i + 1 < cuts.size(); ++i)
    segments.push_back(makeUnit(graph, f, cuts[i]->name(), cuts[i + 1]->name()));

  // Segments without weights (activations, pooling, the quantizer of the next block's input) join
  // the unit before them, so a block's loss sees its output as the next block will read it;
  // leading ones join the first weighted segment.
  std::vector<std::pair<std::string, std::string>> spans;  // entry, exit
  std::vector<std::pair<size_t, bool>> shape;              // layers, residual
  std::string leading_entry;
  bool leading_residual = false;
  for (const ReconUnit& s : segments) {
    if (s.weighted.empty()) {
      if (spans.empty()) {
        if (leading_entry.empty()) leading_entry = s.entry;
        leading_residual = leading_residual || s.residual;
      } else {
        spans.back().second = s.exit;
        shape.back().second = shape.back().second || s.residual;
      }
      continue;
    }
    spans.emplace_back(leading_entry.empty() ? s.entry : leading_entry, s.exit);
    shape.emplace_back(s.weighted.size(), s.residual || leading_residual);
    leading_entry.clear();
    leading_residual = false;
  }

  // Residual segments stand alone; runs of the others are grouped up to `max_layers` layers.
  std::vector<ReconUnit> units;
  std::string group_entry, group_exit;
  size_t group_layers = 0;
  auto flush = [&] {
    if (group_layers > 0) units.push_back(makeUnit(graph, f, group_entry, group_exit));
    group_layers = 0;
  };
  for (size_t i = 0; i < spans.size(); ++i) {
    const auto& [layers, residual] = shape[i];
    if (residual) {
      flush();
      units.push_back(makeUnit(graph, f, spans[i].first, spans[i].second));
      continue;
    }
    if (group_layers > 0 && group_layers + layers > static_cast<size_t>(max_layers)) flush();
    if (group_layers == 0) group_entry = spans[i].first;
    group_exit = spans[i].second;
    group_layers += layers;
  }
  flush();
  return units;
}

}  // namespace

std::vector<const Node*> nodesBetween(const Graph& graph, const std::string& entry,
                                      const std::string& exit) {
  return between(graph, analyse(graph), entry, exit);
}

std::vector<ReconUnit> findReconUnits(const Graph& graph, ReconGranularity granularity,
                                      int max_block_layers) {
  require(max_block_layers >= 1, "a block needs room for at least one layer");
  const GraphFacts facts = analyse(graph);
  std::vector<ReconUnit> units = granularity == ReconGranularity::Layer
                                     ? layerUnits(graph, facts)
                                     : blockUnits(graph, facts, max_block_layers);
  require(!units.empty(),
          "nothing to reconstruct: no Conv, Gemm or MatMul reads a quantized initializer weight "
          "(is the model prepared for a backend that quantizes weights?)");
  return units;
}

}  // namespace qforge::algos
