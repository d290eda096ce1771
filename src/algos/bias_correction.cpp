#include "algos/bias_correction.h"

#include <ATen/ATen.h>

#include <chrono>
#include <map>
#include <set>

#include "algos/calibrate.h"
#include "core/error.h"
#include "exec/op_traits.h"
#include "ir/node_attributes.h"
#include "passes/fake_quantize_node.h"

namespace qforge::algos {

namespace {

using passes::PreparedModel;

// A weighted unit to correct: its anchor, and where its bias is read.
struct Target {
  size_t report = 0;  // index into the result's layers
  Node* anchor = nullptr;
  const OpInfo* info = nullptr;  // the anchor's entry in the op table
  Node* bias_reader = nullptr;   // the anchor, or the FakeQuantize node on its bias
  size_t bias_slot = 0;
  at::Tensor float_mean;  // E[y_fp] per output channel, double
};

// The anchor node each Weight point's FakeQuantize nodes feed, by unit name.
std::map<std::string, Node*> anchorsByUnit(const PreparedModel& model) {
  std::map<std::string, Node*> anchors;
  const Graph& graph = model.graph();
  for (const passes::QuantPoint& p : model.points()) {
    if (p.kind != passes::PointKind::Weight) continue;
    for (const std::string& name : p.nodes) {
      const Node* fq = graph.findNode(name);
      if (fq == nullptr) continue;
      for (const Use& use : fq->output(0)->uses()) {
        if (!passes::isFakeQuantize(use.node)) anchors[p.unit] = use.node;
      }
    }
  }
  return anchors;
}

std::string firstOp(const std::string& ops) {
  return ops.substr(0, ops.find('+'));
}

// The float tensor behind input `slot` of `node`, looking through a FakeQuantize node.
const Value* floatSource(const Node& node, size_t slot) {
  const Value* v = node.input(slot);
  if (v != nullptr && passes::isFakeQuantize(v->producer())) v = v->producer()->input(0);
  return v;
}

// Gemm's C is beta * C (OpInfo's GemmB layout comes with Gemm's attributes).
bool scalesBiasByBeta(const OpInfo* info) {
  return info != nullptr && info->weight_layout == WeightLayout::GemmB;
}

// Why `anchor`'s bias cannot be corrected, or "" when it can; fills in where it is read.
std::string planBias(const Graph& graph, Target& target) {
  Node* anchor = target.anchor;
  const std::string& op = anchor->opType();
  target.info = opInfoFor(graph, *anchor);
  if (target.info == nullptr || target.info->bias_input < 0) {
    return op + " has no bias input" +
           (isWeightedOp(target.info) ? " (a following Add would carry it)" : "");
  }
  target.bias_reader = anchor;
  target.bias_slot = static_cast<size_t>(target.info->bias_input);
  const Value* bias = anchor->input(target.bias_slot);
  if (bias != nullptr && passes::isFakeQuantize(bias->producer())) {
    target.bias_reader = bias->producer();
    target.bias_slot = 0;
    bias = bias->producer()->input(0);
  }
  if (bias == nullptr) return "";
  if (!bias->isInitializer() || graph.isGraphInput(bias)) {
    return "bias '" + bias->name() + "' is not an initializer";
  }
  if (scalesBiasByBeta(target.info)) {
    const Value* w = floatSource(*anchor, static_cast<size_t>(target.info->weight_inputs.front()));
    const int64_t n = weightOutputChannels(target.info, *anchor, w->initializer());
    const int64_t numel = bias->initializer().numel();
    if (numel != 1 && numel != n) return op + "'s C varies along its rows";
  }
  return "";
}

// Per-channel sums of `t` over every axis but 1 (the output channels of Conv and Gemm).
at::Tensor channelSums(const at::Tensor& t) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d != 1) dims.push_back(d);
  }
  return at::sum(t, dims, /*keepdim=*/false, at::kDouble);
}

// Mean per output channel accumulated over batches.
struct ChannelMean {
  at::Tensor sum;
  int64_t count = 0;

  void add(const at::Tensor& t) {
    at::Tensor s = channelSums(t);
    sum = sum.defined() ? sum + s : s;
    count += t.numel() / std::max<int64_t>(t.size(1), 1);
  }
  at::Tensor mean() const { return sum / static_cast<double>(count); }
};

// The quantized model's means of `values` over all batches.
std::vector<at::Tensor> quantizedMeans(PreparedModel& model, const std::string& input,
                                       const std::vector<at::Tensor>& batches,
                                       const std::vector<std::string>& values) {
  std::vector<ChannelMean> means(values.size());
  for (const at::Tensor& x : batches) {
    TensorMap out = model.executor().run({{input, x}}, values);
    for (size_t i = 0; i < values.size(); ++i)
      means[i].add(out.at(values[i]));
  }
  std::vector<at::Tensor> result;
  for (const ChannelMean& m : means)
    result.push_back(m.mean());
  return result;
}

// b -= delta, in the bias's dtype and shape; a Gemm's effective beta * C is stored with beta 1.
void writeCorrectedBias(PreparedModel& model, const Target& target, const at::Tensor& delta,
                        CorrectedLayer& report) {
  Graph& graph = model.graph();
  Node* anchor = target.anchor;
  Value* bias = target.bias_reader->input(target.bias_slot);
  at::Tensor corrected;
  if (bias == nullptr) {
    const size_t weight_slot = static_cast<size_t>(target.info->weight_inputs.front());
    const at::ScalarType type = floatSource(*anchor, weight_slot)->initializer().scalar_type();
    corrected = (-delta).to(type);
    report.bias_added = true;
  } else {
    const at::Tensor& old = bias->initializer();
    at::Tensor effective = old.to(at::kDouble).reshape({-1});
    if (scalesBiasByBeta(target.info)) effective = effective * floatAttr(*anchor, "beta", 1.0);
    corrected = effective.expand_as(delta) - delta;
    if (old.dim() == 2) corrected = corrected.reshape({1, -1});
    corrected = corrected.to(old.scalar_type());
  }
  if (scalesBiasByBeta(target.info)) anchor->attributes.set(Attribute::makeFloat("beta", 1.0));
  if (bias != nullptr && bias->uses().size() == 1 && !graph.isGraphOutput(bias)) {
    bias->setInitializer(corrected);
  } else {
    const std::string base = bias != nullptr
                                 ? bias->name()
                                 : (anchor->name().empty() ? "bias" : anchor->name()) + "_bias";
    Value* fresh = graph.addInitializer(graph.uniqueName(base + "_corrected"), corrected);
    graph.setInput(target.bias_reader, target.bias_slot, fresh);
  }

  // A bias quantizer with its own range observes the new bias instead of the old one. It pulls
  // new parameters when its observer's batch count differs from the one it last pulled, so the
  // observer sees the (fixed) bias once more than before.
  if (passes::isFakeQuantize(target.bias_reader)) {
    quant::FakeQuantizer* q = model.quantizer(passes::quantizerOf(*target.bias_reader));
    if (q != nullptr && q->observer() != nullptr) {
      const int64_t seen = q->observer()->batches();
      q->observer()->reset();
      for (int64_t i = 0; i <= seen; ++i)
        q->observer()->observe(corrected);
    }
  }
}

// Restores every quantizer's mode and removes the hooks this pass added, however it ends.
class ModelStateGuard {
 public:
  explicit ModelStateGuard(PreparedModel& model) : model_(model) {
    for (quant::FakeQuantizer* q : model.quantizers())
      modes_.emplace_back(q, q->mode());
  }
  ~ModelStateGuard() {
    removeHooks();
    for (auto& [q, mode] : modes_)
      q->setMode(mode);
  }
  void addHook(int64_t id) { hooks_.push_back(id); }
  void removeHooks() {
    for (int64_t id : hooks_)
      model_.executor().removeHook(id);
    hooks_.clear();
  }

 private:
  PreparedModel& model_;
  std::vector<std::pair<quant::FakeQuantizer*, quant::FakeQuantMode>> modes_;
  std::vector<int64_t> hooks_;
};

}  // namespace

BiasCorrectionResult correctBias(PreparedModel& model, data::BatchLoader& loader, int64_t batches,
                                 const BiasCorrectionProgress& progress) {
  require(batches > 0, "bias correction needs at least one batch");
  const auto start = std::chrono::steady_clock::now();
  requireCalibrated(model, "bias correction");
  const std::string input = dataInput(model.graph()).name();

  BiasCorrectionResult result;
  std::vector<Target> targets;
  const std::map<std::string, Node*> anchors = anchorsByUnit(model);
  const int64_t opset = model.graph().model.opsetFor("");
  for (const passes::UnitSummary& unit : model.units()) {
    auto it = anchors.find(unit.name);
    if (it == anchors.end()) {
      if (unit.skipped && isWeightedOp(opInfoFor(firstOp(unit.ops), opset))) {
        result.layers.push_back(CorrectedLayer{unit.name, unit.name, firstOp(unit.ops), 0, 0, 0,
                                               false, "the config keeps the unit float"});
      }
      continue;
    }
    Target target;
    target.anchor = it->second;
    target.report = result.layers.size();
    CorrectedLayer layer;
    layer.unit = unit.name;
    layer.node = target.anchor->describe();
    layer.op = target.anchor->opType();
    layer.skipped = planBias(model.graph(), target);
    result.layers.push_back(layer);
    if (layer.skipped.empty()) targets.push_back(target);
  }

  std::vector<at::Tensor> inputs;
  while (static_cast<int64_t>(inputs.size()) < batches) {
    auto batch = loader.next();
    if (!batch) break;
    inputs.push_back(batch->inputs);
    result.samples += batch->inputs.size(0);
  }
  require(!inputs.empty(),
          "bias correction data " + loader.dataset().describe() + " yielded no batch");
  result.batches = static_cast<int64_t>(inputs.size());
  if (targets.empty()) return result;

  ModelStateGuard guard(model);
  Executor& executor = model.executor();

  // The float model's means, once: later corrections must aim at the original float model.
  model.setMode(quant::FakeQuantMode::Float);
  std::vector<ChannelMean> float_means(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    guard.addHook(executor.addHook(targets[i].anchor->output(0)->name(),
                                   [&float_means, i](const Value&, const at::Tensor& t) {
                                     float_means[i].add(t);
                                     return t;
                                   }));
  }
  for (const at::Tensor& x : inputs)
    executor.run({{input, x}}, {});
  guard.removeHooks();
  for (size_t i = 0; i < targets.size(); ++i) {
    require(float_means[i].count > 0, "bias correction: " + targets[i].anchor->describe() +
                                          " is not on the path from the input to the outputs");
    targets[i].float_mean = float_means[i].mean();
  }

  // Layer by layer in the quantized model; each pass also measures the previous layer after its
  // correction.
  model.setMode(quant::FakeQuantMode::Quantization);
  for (size_t i = 0; i <= targets.size(); ++i) {
    std::vector<std::string> values;
    if (i < targets.size()) values.push_back(targets[i].anchor->output(0)->name());
    if (i > 0) values.push_back(targets[i - 1].anchor->output(0)->name());
    const std::vector<at::Tensor> means = quantizedMeans(model, input, inputs, values);
    if (i > 0) {
      const Target& previous = targets[i - 1];
      result.layers[previous.report].shift_after =
          (means.back() - previous.float_mean).abs().max().item<double>();
    }
    if (i == targets.size()) break;
    const Target& target = targets[i];
    CorrectedLayer& layer = result.layers[target.report];
    const at::Tensor delta = means.front() - target.float_mean;
    layer.channels = delta.numel();
    layer.shift_before = delta.abs().max().item<double>();
    writeCorrectedBias(model, target, delta, layer);
    if (progress) progress(static_cast<int64_t>(i) + 1, static_cast<int64_t>(targets.size()));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace qforge::algos
