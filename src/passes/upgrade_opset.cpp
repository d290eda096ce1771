#include "passes/upgrade_opset.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/captured_values.h"
#include "ir/node_attributes.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "passes/sample_run.h"
#include "passes/upgrade_opset_rewrites.h"

namespace qforge::passes {

namespace {

// The opsets above `from` and up to `to` at which ONNX redefined `op_type`, in order.
std::vector<int64_t> changesOf(const std::string& op_type, int64_t from, int64_t to) {
  std::vector<int64_t> out;
  const onnx::OpSchema* at_from = onnx::OpSchemaRegistry::Schema(op_type, static_cast<int>(from));
  // An op newer than `from` (qforge's own QuantizeLinear in a lowered opset-9 graph) is written
  // in its first form: only its later changes count.
  int64_t current = at_from != nullptr ? at_from->since_version() : -1;
  for (int64_t v = from + 1; v <= to; ++v) {
    const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(op_type, static_cast<int>(v));
    if (s == nullptr || s->since_version() == current) continue;
    if (current >= 0) out.push_back(s->since_version());
    current = s->since_version();
  }
  return out;
}

// One step of a node's way to the target: the rewrite at `since` (nullptr: compatible).
struct Step {
  int64_t since;
  const upgrade::Rewrite* rewrite;
};

class Upgrader;

// One body of a control-flow node (If's branches, Loop's and Scan's body), upgraded as a graph of
// its own and written back into the node's attribute.
struct BodyUpgrade {
  Node* node;
  std::string attribute;
  Subgraph body;
  std::unique_ptr<Upgrader> upgrader;
};

class Upgrader {
 public:
  // `top`: the model's graph, which a sample run can feed; a body's values have no samples.
  Upgrader(Graph& graph, int64_t from, int64_t to, bool top = true)
      : graph_(graph), from_(from), to_(to), top_(top), context_{graph, [this](const Value* v) {
                                                                   return rankOf(v);
                                                                 }} {}

  // Every node's steps, checked, before any edit (bodies included).
  void plan() {
    for (Node* node : graph_.topologicalOrder()) {
      if (!isDefaultDomain(*node)) continue;
      planBodies(node);
      std::vector<Step> steps = stepsOf(*node);
      if (!steps.empty()) plans_.emplace_back(node, std::move(steps));
    }
    if (top_) sampleMissingRanks();
    for (const auto& [node, steps] : plans_) {
      for (const Step& step : steps) {
        if (step.rewrite != nullptr) step.rewrite->check(context_, *node);
      }
    }
  }

  size_t apply() {
    size_t rewritten = applyBodies();
    for (auto& [node, steps] : plans_) {
      Node* current = node;
      bool edited = false;
      for (const Step& step : steps) {
        if (step.rewrite == nullptr) continue;
        current = step.rewrite->apply(context_, current);
        edited = true;
      }
      if (edited) ++rewritten;
    }
    return rewritten;
  }

 private:
  void planBodies(Node* node) {
    for (const Attribute& a : node->attributes.all()) {
      const std::vector<onnx::GraphProto> bodies = subgraphsOf(a);
      if (bodies.empty()) continue;
      if (bodies.size() != 1) {
        throw Error(node->describe() + ": attribute '" + a.name +
                    "' holds several graphs, which qforge cannot move to opset " +
                    std::to_string(to_) + "; convert the model to opset " + std::to_string(to_) +
                    " first");
      }
      auto upgrade = std::make_unique<BodyUpgrade>(
          BodyUpgrade{node, a.name, importSubgraph(bodies.front(), graph_.model), nullptr});
      upgrade->upgrader = std::make_unique<Upgrader>(upgrade->body.graph, from_, to_, false);
      try {
        upgrade->upgrader->plan();
      } catch (const Error& e) {
        throw e.within(node->describe() + ", body '" + a.name + "'");
      }
      bodies_.push_back(std::move(upgrade));
    }
  }

  // Each body rewritten, then exported into its attribute again, without the extra inputs that
  // stood for the outer values it reads.
  size_t applyBodies() {
    size_t rewritten = 0;
    for (auto& b : bodies_) {
      rewritten += b->upgrader->apply();
      onnx::ModelProto model = exportOnnxModel(b->body.graph);
      onnx::GraphProto* g = model.mutable_graph();
      auto* inputs = g->mutable_input();
      inputs->erase(std::remove_if(inputs->begin(), inputs->end(),
                                   [&](const onnx::ValueInfoProto& in) {
                                     return std::find(b->body.captured.begin(),
                                                      b->body.captured.end(),
                                                      in.name()) != b->body.captured.end();
                                   }),
                    inputs->end());
      onnx::AttributeProto proto;
      proto.ParseFromString(b->node->attributes.find(b->attribute)->opaque_proto);
      g->set_name(proto.g().name());
      *proto.mutable_g() = *g;
      Attribute updated = *b->node->attributes.find(b->attribute);
      updated.opaque_proto = proto.SerializeAsString();
      b->node->attributes.set(std::move(updated));
    }
    return rewritten;
  }

  std::vector<Step> stepsOf(const Node& node) {
    std::vector<Step> steps;
    std::string op = node.opType();
    int64_t at = from_;
    while (true) {
      const std::vector<int64_t> changes = changesOf(op, at, to_);
      if (changes.empty()) break;
      const int64_t since = changes.front();
      const upgrade::Rewrite* rewrite = upgrade::rewriteFor(op, since);
      if (rewrite == nullptr && !upgrade::isCompatibleChange(op, since)) {
        throw Error(node.describe() + ": qforge cannot move " + op + " from opset " +
                    std::to_string(from_) + " to " + std::to_string(to_) + ": ONNX changed " + op +
                    " at opset " + std::to_string(since) +
                    " in a way qforge has no rewrite for; convert the model to opset " +
                    std::to_string(to_) + " first");
      }
      steps.push_back(Step{since, rewrite});
      if (upgrade::needsInputRank(op, since) && node.input(0) != nullptr) {
        rank_wanted_.push_back(node.input(0));
      }
      if (rewrite != nullptr && !rewrite->becomes.empty()) op = rewrite->becomes;
      at = since;
    }
    if (onnx::OpSchemaRegistry::Schema(op, static_cast<int>(to_)) == nullptr) {
      throw Error(node.describe() + ": ONNX defines no " + op + " at opset " + std::to_string(to_) +
                  "; qforge cannot move it there");
    }
    return steps;
  }

  std::optional<int64_t> rankOf(const Value* v) const {
    if (v == nullptr) return std::nullopt;
    if (v->isInitializer()) return v->initializer().dim();
    if (v->type.shape) return static_cast<int64_t>(v->type.shape->size());
    auto it = sampled_ranks_.find(v);
    if (it != sampled_ranks_.end()) return it->second;
    return std::nullopt;
  }

  // One sample run gives the ranks the model's shapes do not (before any edit).
  void sampleMissingRanks() {
    std::vector<std::string> names;
    for (const Value* v : rank_wanted_) {
      if (!rankOf(v)) names.push_back(v->name());
    }
    for (const auto& [name, tensor] : runOnSample(graph_, names).values)
      sampled_ranks_[graph_.value(name)] = tensor.dim();
  }

  Graph& graph_;
  int64_t from_, to_;
  bool top_;
  upgrade::Context context_;
  std::vector<std::unique_ptr<BodyUpgrade>> bodies_;
  std::vector<std::pair<Node*, std::vector<Step>>> plans_;
  std::vector<const Value*> rank_wanted_;
  std::map<const Value*, int64_t> sampled_ranks_;
};

// The IR version each opset came with: a model keeps its own when newer. IR 3 and older also
// required every initializer to be a graph input, which the rewrites' new constants are not.
int64_t irVersionFor(int64_t opset) {
  if (opset <= 10) return 5;
  if (opset == 11) return 6;
  if (opset <= 14) return 7;
  return 8;
}

}  // namespace

OpsetUpgrade upgradeOpset(Graph& graph, int64_t target) {
  OpsetUpgrade result;
  result.from = graph.model.opsetFor("");
  result.to = result.from;
  if (target <= result.from) return result;
  require(target <= kMaxUpgradeOpset, "qforge upgrades models up to opset " +
                                          std::to_string(kMaxUpgradeOpset) +
                                          " (the newest its ONNX library knows); opset " +
                                          std::to_string(target) + " was asked for");
  require(result.from >= 1, "the model imports no default-domain opset; qforge cannot upgrade it");
  Upgrader upgrader(graph, result.from, target);
  upgrader.plan();
  result.rewritten = upgrader.apply();
  graph.model.opset_imports.erase("ai.onnx");
  graph.model.opset_imports[""] = target;
  graph.model.ir_version = std::max(graph.model.ir_version, irVersionFor(target));
  result.to = target;
  return result;
}

}  // namespace qforge::passes
