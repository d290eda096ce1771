#include "algos/equalization.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "core/error.h"
#include "core/strings.h"
#include "ir/node_attributes.h"
#include "passes/constants_to_initializers.h"
#include "passes/fold_batchnorm.h"
#include "quant/qparams.h"

namespace qforge::algos {

namespace {

std::string label(const Node& node) {
  return node.name().empty() ? node.describe() : node.name();
}

// A floating-point initializer that a graph input cannot override.
bool isFixedTensor(const Graph& graph, const Value* v) {
  return v != nullptr && v->isInitializer() && !graph.isGraphInput(v) &&
         at::isFloatingType(v->initializer().scalar_type());
}

// A weight this pass may rewrite in place: fixed, and read by `node` alone.
bool ownsWeight(const Graph& graph, const Node& node, size_t slot) {
  const Value* w = node.input(slot);
  return isFixedTensor(graph, w) && w->uses().size() == 1 && !graph.isGraphOutput(w);
}

// Absent, or fixed (a shared bias is copied when written).
bool biasUsable(const Graph& graph, const Node& node, size_t slot) {
  return node.input(slot) == nullptr || isFixedTensor(graph, node.input(slot));
}

// --- finding the pairs ---------------------------------------------------------------------

enum class Conv2Kind { Conv, Depthwise, Gemm };

struct Pair {
  Node* conv1 = nullptr;
  Node* conv2 = nullptr;
  Conv2Kind kind = Conv2Kind::Conv;
  int64_t channels = 0;       // Conv1's output channels = Conv2's input channels
  int64_t features = 1;       // Gemm: input features per channel (Flatten of H x W)
  bool through_relu = false;  // high-bias absorption is exact only through Relu
  Node* relu6 = nullptr;      // Clip(0, 6) to replace by Relu
  std::string path;
};

struct PairSearch {
  std::optional<Pair> pair;
  std::string reason;
};

PairSearch skip(std::string reason) {
  return PairSearch{std::nullopt, std::move(reason)};
}

enum class ClipKind { ReluLike, Relu6, Other };

// Clip with constant bounds 0 and none behaves as Relu; 0 and 6 is ReLU6.
ClipKind classifyClip(const Graph& graph, const Node& clip) {
  std::optional<double> lo, hi;
  if (graph.model.opsetFor(clip.domain()) < 11) {
    if (const Attribute* a = clip.attributes.find("min")) lo = a->f;
    if (const Attribute* a = clip.attributes.find("max")) hi = a->f;
  } else {
    for (size_t slot : {1, 2}) {
      const Value* bound = clip.input(slot);
      if (bound == nullptr) continue;
      if (!isFixedTensor(graph, bound) || bound->initializer().numel() != 1) return ClipKind::Other;
      (slot == 1 ? lo : hi) = bound->initializer().item<double>();
    }
  }
  if (lo != 0.0) return ClipKind::Other;
  if (!hi) return ClipKind::ReluLike;
  return *hi == 6.0 ? ClipKind::Relu6 : ClipKind::Other;
}

bool isPooling(const std::string& op) {
  return op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" ||
         op == "GlobalMaxPool";
}

// Conv2 reading Conv1's `channels` channels as its data input.
PairSearch checkConv2(const Graph& graph, Pair pair, Node* conv2) {
  if (!ownsWeight(graph, *conv2, 1)) {
    return skip(label(*conv2) + "'s weight is not an initializer it alone reads");
  }
  if (!biasUsable(graph, *conv2, 2)) return skip(label(*conv2) + "'s bias is not an initializer");
  const at::Tensor& w2 = conv2->input(1)->initializer();
  const int64_t group = intAttr(*conv2, "group", 1);
  const int64_t c = pair.channels;
  if (w2.dim() < 3) return skip(label(*conv2) + "'s weight has rank " + std::to_string(w2.dim()));
  if (group == 1 && w2.size(1) == c) {
    pair.kind = Conv2Kind::Conv;
  } else if (group == c && w2.size(1) == 1 && w2.size(0) % c == 0) {
    pair.kind = Conv2Kind::Depthwise;
  } else if (group == 1) {
    return skip(label(*conv2) + " has " + std::to_string(w2.size(1)) + " input channels for " +
                std::to_string(c) + " output channels");
  } else {
    return skip(label(*conv2) + " is a grouped convolution (group " + std::to_string(group) +
                " over " + std::to_string(c) + " channels), neither depthwise nor group 1");
  }
  pair.conv2 = conv2;
  return PairSearch{pair, ""};
}

// Gemm reading Flatten(axis 1) of Conv1's channels: input feature k belongs to channel
// k / features.
PairSearch checkGemm(const Graph& graph, Pair pair, Node* gemm) {
  if (intAttr(*gemm, "transA", 0) != 0) return skip(label(*gemm) + " has transA=1");
  if (!ownsWeight(graph, *gemm, 1) || gemm->input(1)->initializer().dim() != 2) {
    return skip(label(*gemm) + "'s B is not a 2-D initializer it alone reads");
  }
  const at::Tensor& w = gemm->input(1)->initializer();
  const bool trans_b = intAttr(*gemm, "transB", 0) != 0;
  const int64_t k = trans_b ? w.size(1) : w.size(0);
  const int64_t n = trans_b ? w.size(0) : w.size(1);
  if (k % pair.channels != 0) {
    return skip(label(*gemm) + " has " + std::to_string(k) + " input features, not a multiple of " +
                std::to_string(pair.channels) + " channels");
  }
  if (!biasUsable(graph, *gemm, 2)) return skip(label(*gemm) + "'s C is not an initializer");
  if (const Value* c = gemm->input(2); c != nullptr) {
    const int64_t numel = c->initializer().numel();
    if (numel != 1 && numel != n) return skip(label(*gemm) + "'s C varies along its rows");
  }
  pair.kind = Conv2Kind::Gemm;
  pair.features = k / pair.channels;
  pair.conv2 = gemm;
  return PairSearch{pair, ""};
}

// Follows Conv1's output through single-reader steps to the layer that can take its scales.
PairSearch findPair(const Graph& graph, Node* conv1, bool relu6_to_relu) {
  if (!ownsWeight(graph, *conv1, 1)) return skip("its weight is not an initializer it alone reads");
  if (!biasUsable(graph, *conv1, 2)) return skip("its bias is not an initializer");
  const at::Tensor& w1 = conv1->input(1)->initializer();
  if (w1.dim() < 3) return skip("its weight has rank " + std::to_string(w1.dim()));

  Pair pair;
  pair.conv1 = conv1;
  pair.channels = w1.size(0);
  std::vector<std::string> steps;
  bool activation_seen = false, flattened = false;
  Value* v = conv1->output(0);
  while (true) {
    const std::string what = "'" + v->name() + "'";
    if (graph.isGraphOutput(v)) return skip(what + " is a graph output");
    if (v->uses().size() != 1) {
      return skip(what + " has " + std::to_string(v->uses().size()) + " readers");
    }
    const Use use = v->uses().front();
    Node* next = use.node;
    const std::string& op = next->opType();
    if (!isDefaultDomain(*next) || use.index != 0) {
      return skip(what + " is read by " + next->describe() + " in input " +
                  std::to_string(use.index));
    }
    if (flattened && op != "Gemm") {
      return skip("Flatten before " + next->describe() + ", which is not a Gemm");
    }
    for (size_t i = 1; i < next->outputs().size(); ++i) {
      if (!next->output(i)->uses().empty() || graph.isGraphOutput(next->output(i))) {
        return skip(next->describe() + " has a second output in use");
      }
    }
    if (op == "Conv") {
      PairSearch found = checkConv2(graph, pair, next);
      if (found.pair) found.pair->path = steps.empty() ? "none" : join(steps, " -> ");
      return found;
    }
    if (op == "Gemm") {
      if (!flattened) return skip(what + " reaches " + next->describe() + " without a Flatten");
      PairSearch found = checkGemm(graph, pair, next);
      if (found.pair) found.pair->path = join(steps, " -> ");
      return found;
    }
    if (op == "Relu" || op == "Clip") {
      if (activation_seen) return skip("two activations before the next layer");
      activation_seen = true;
      const ClipKind kind = op == "Relu" ? ClipKind::ReluLike : classifyClip(graph, *next);
      if (kind == ClipKind::Other) {
        return skip(next->describe() + " is a Clip other than Clip(0, inf) or Clip(0, 6)");
      }
      if (kind == ClipKind::Relu6) {
        if (!relu6_to_relu) {
          return skip(next->describe() +
                      " is Clip(0, 6) (ReLU6), which does not commute with scaling; "
                      "relu6_to_relu replaces it by Relu");
        }
        pair.relu6 = next;
        steps.push_back("Relu (was Clip(0, 6))");
      } else {
        steps.push_back(op == "Relu" ? "Relu" : "Clip(0, inf)");
      }
      pair.through_relu = true;
    } else if (isPooling(op)) {
      steps.push_back(op);
    } else if (op == "Flatten" && intAttr(*next, "axis", 1) == 1) {
      flattened = true;
      steps.push_back(op);
    } else {
      return skip(what + " is read by " + next->describe() +
                  ", not a Conv, a Gemm or a step that commutes with scaling");
    }
    v = next->output(0);
  }
}

// --- the arithmetic, on double copies of the weights ------------------------------------------

// A layer's parameters while the pass works on them.
struct Layer {
  Node* node = nullptr;
  at::Tensor weight;  // double, contiguous
  at::Tensor bias;    // double [C_out]; undefined when the node has none (yet)
  bool bias_changed = false;
  // The folded BatchNormalization's B and scale, divided by the scales applied since.
  at::Tensor beta, gamma;
};

void requireFinite(const at::Tensor& t, const Value& v, const Node& node) {
  require(at::isfinite(t).all().item<bool>(), "cross-layer equalization: " + node.describe() +
                                                  ": tensor '" + v.name() + "' holds NaN or Inf");
}

Layer loadLayer(Node* node) {
  Layer layer;
  layer.node = node;
  const Value* w = node->input(1);
  requireFinite(w->initializer(), *w, *node);
  layer.weight = w->initializer().to(at::kDouble).clone(at::MemoryFormat::Contiguous);
  if (const Value* b = node->input(2); b != nullptr) {
    requireFinite(b->initializer(), *b, *node);
    at::Tensor bias = b->initializer().to(at::kDouble).reshape({-1});
    if (node->opType() == "Gemm") {
      const bool trans_b = intAttr(*node, "transB", 0) != 0;
      const int64_t n = layer.weight.size(trans_b ? 0 : 1);
      bias = (bias * floatAttr(*node, "beta", 1.0)).expand({n}).clone();
    }
    layer.bias = bias.clone();
  }
  return layer;
}

// Row i of the returned view holds every weight that input channel i of the pair multiplies.
at::Tensor inputChannelRows(const Layer& conv2, const Pair& pair) {
  const at::Tensor& w = conv2.weight;
  const int64_t c = pair.channels;
  switch (pair.kind) {
    case Conv2Kind::Conv:
      return w.transpose(0, 1);  // [C, C_out, k...]
    case Conv2Kind::Depthwise:
      return w.view({c, -1});  // output rows i*m .. i*m+m-1 read channel i
    case Conv2Kind::Gemm:
      if (intAttr(*conv2.node, "transB", 0) != 0) {
        return w.view({w.size(0), c, pair.features}).transpose(0, 1);  // [C, N, features]
      }
      return w.view({c, -1});  // [C * features, N] rows grouped by channel
  }
  return w;
}

at::Tensor rowRanges(const at::Tensor& rows) {
  return rows.abs().reshape({rows.size(0), -1}).amax(1);
}

// max r / min r over the channels whose range is not 0 (0 when all are).
double spread(const at::Tensor& ranges) {
  const at::Tensor live = ranges.masked_select(ranges > 0);
  if (live.numel() == 0) return 0;
  return (live.max() / live.min()).item<double>();
}

// Conv2's output change when its input channels drop by c: sum over each channel's weights
// (all spatial taps, every feature of a flattened channel) times c.
at::Tensor absorbedShift(const Layer& conv2, const Pair& pair, const at::Tensor& c) {
  const at::Tensor& w = conv2.weight;
  const int64_t ch = pair.channels;
  switch (pair.kind) {
    case Conv2Kind::Conv:
      return w.reshape({w.size(0), ch, -1}).sum(2).mv(c);
    case Conv2Kind::Depthwise:
      return (w.reshape({ch, w.size(0) / ch, -1}).sum(2) * c.unsqueeze(1)).reshape({-1});
    case Conv2Kind::Gemm: {
      const double alpha = floatAttr(*conv2.node, "alpha", 1.0);
      if (intAttr(*conv2.node, "transB", 0) != 0) {
        return w.view({w.size(0), ch, pair.features}).sum(2).mv(c) * alpha;
      }
      return w.view({ch, pair.features, -1}).sum(1).t().mv(c) * alpha;
    }
  }
  return at::Tensor();
}

// One equalization step for one pair; returns max |s_i - 1|.
double equalizePair(Layer& conv1, Layer& conv2, const Pair& pair) {
  const at::Tensor r1 = rowRanges(conv1.weight);
  at::Tensor rows2 = inputChannelRows(conv2, pair);
  const at::Tensor r2 = rowRanges(rows2);
  // A dead channel on either side has no range to balance.
  const at::Tensor s = at::where((r1 > 0) & (r2 > 0), at::sqrt(r1 / r2), at::ones_like(r1));
  conv1.weight.div_(quant::alongAxis(s, 0, conv1.weight.dim()));
  if (conv1.bias.defined()) {
    conv1.bias.div_(s);
    conv1.bias_changed = true;
  }
  if (conv1.beta.defined()) {
    conv1.beta.div_(s);
    conv1.gamma.div_(s);
  }
  rows2.mul_(quant::alongAxis(s, 0, rows2.dim()));
  return (s - 1).abs().max().item<double>();
}

// Moves c = max(0, beta - 3 |gamma|) from Conv1's bias into Conv2's.
void absorbHighBias(Layer& conv1, Layer& conv2, const Pair& pair, EqualizedPair& report) {
  const at::Tensor c = at::clamp_min(conv1.beta - 3 * conv1.gamma.abs(), 0);
  report.absorbed_channels = (c > 0).sum().item<int64_t>();
  report.max_absorbed = c.max().item<double>();
  if (report.absorbed_channels == 0) return;
  if (!conv1.bias.defined()) conv1.bias = at::zeros({pair.channels}, at::kDouble);
  conv1.bias.sub_(c);
  conv1.beta.sub_(c);
  const at::Tensor shift = absorbedShift(conv2, pair, c);
  if (!conv2.bias.defined()) conv2.bias = at::zeros_like(shift);
  conv2.bias.add_(shift);
  conv1.bias_changed = conv2.bias_changed = true;
}

// --- writing back -------------------------------------------------------------------------

// Stores `tensor` as input `slot` of `node`: in place when only `node` reads the initializer,
// else as a new initializer (the old one stays for its other readers).
void writeParam(Graph& graph, Node* node, size_t slot, at::Tensor tensor, const std::string& base) {
  Value* v = node->input(slot);
  if (v != nullptr && v->uses().size() == 1 && !graph.isGraphOutput(v)) {
    v->setInitializer(std::move(tensor));
    return;
  }
  graph.setInput(node, slot, graph.addInitializer(graph.uniqueName(base), std::move(tensor)));
  if (v != nullptr && v->uses().empty() && v->producer() == nullptr && !graph.isGraphOutput(v)) {
    graph.removeValue(v);
  }
}

void writeLayer(Graph& graph, const Layer& layer) {
  Node* node = layer.node;
  const at::ScalarType weight_type = node->input(1)->initializer().scalar_type();
  node->input(1)->setInitializer(layer.weight.to(weight_type));
  if (!layer.bias_changed) return;
  const Value* old = node->input(2);
  const at::ScalarType type = old != nullptr ? old->initializer().scalar_type() : weight_type;
  at::Tensor bias = layer.bias;
  if (node->opType() == "Gemm") {
    // The effective beta * C was edited; it is stored as C with beta 1.
    if (old != nullptr && old->initializer().dim() == 2) bias = bias.reshape({1, -1});
    node->attributes.set(Attribute::makeFloat("beta", 1.0));
  }
  const std::string base = old != nullptr ? old->name() : label(*node) + "_bias";
  writeParam(graph, node, 2, bias.to(type), base);
}

// Relu in place of a Clip(0, 6), under the Clip's node and output names.
void replaceByRelu(Graph& graph, Node* clip) {
  Value* out = clip->output(0);
  const std::string node_name = clip->name();
  const std::string out_name = out->name();
  const TensorType type = out->type;
  Node* relu = graph.addNode("Relu", {clip->input(0)}, {graph.uniqueName(out_name + "_relu")});
  graph.replaceAllUsesWith(out, relu->output(0));
  std::vector<Value*> bounds = {clip->input(1), clip->input(2)};
  graph.removeNode(clip);
  graph.renameValue(relu->output(0), out_name);
  relu->output(0)->type = type;
  relu->setName(node_name);
  for (Value* b : bounds) {
    if (b != nullptr && b->uses().empty() && b->producer() == nullptr && !graph.isGraphInput(b) &&
        !graph.isGraphOutput(b)) {
      graph.removeValue(b);
    }
  }
}

// --- BatchNormalization statistics ----------------------------------------------------------

const Value* throughIdentity(const Value* v) {
  while (v != nullptr && v->producer() != nullptr && v->producer()->opType() == "Identity") {
    v = v->producer()->input(0);
  }
  return v;
}

struct BatchNormStats {
  at::Tensor beta, gamma;  // double [C]
};

// B and scale of each BatchNormalization that sits alone after a Conv (the ones the fold takes).
std::map<Node*, BatchNormStats> batchNormStats(const Graph& graph) {
  std::map<Node*, BatchNormStats> stats;
  for (Node* bn : graph.nodes()) {
    if (bn->opType() != "BatchNormalization" || !isDefaultDomain(*bn) || bn->inputs().size() != 5) {
      continue;
    }
    const Value* x = bn->input(0);
    if (x == nullptr || x->producer() == nullptr || x->producer()->opType() != "Conv" ||
        x->uses().size() != 1) {
      continue;
    }
    const Value* scale = throughIdentity(bn->input(1));
    const Value* bias = throughIdentity(bn->input(2));
    if (!isFixedTensor(graph, scale) || !isFixedTensor(graph, bias)) continue;
    stats[x->producer()] = BatchNormStats{bias->initializer().to(at::kDouble).reshape({-1}),
                                          scale->initializer().to(at::kDouble).reshape({-1})};
  }
  return stats;
}

bool readByBatchNorm(const Node& conv) {
  for (const Use& u : conv.output(0)->uses()) {
    if (u.node->opType() == "BatchNormalization") return true;
  }
  return false;
}

}  // namespace

EqualizationReport equalizeCrossLayer(Graph& graph, const EqualizationOptions& options) {
  require(options.max_iterations >= 1,
          "cross-layer equalization: max_iterations must be at least 1, not " +
              std::to_string(options.max_iterations));
  require(std::isfinite(options.tolerance) && options.tolerance > 0,
          "cross-layer equalization: tolerance must be a positive number");
  EqualizationReport report;
  passes::constantsToInitializers(graph);
  std::map<Node*, BatchNormStats> stats = batchNormStats(graph);
  report.batchnorms_folded = passes::foldBatchNorm(graph);
  for (auto it = stats.begin(); it != stats.end();) {
    // A BN the fold left in place has statistics of nothing this pass edits.
    it = readByBatchNorm(*it->first) ? stats.erase(it) : std::next(it);
  }

  std::vector<Pair> pairs;
  for (Node* node : graph.topologicalOrder()) {
    if (node->opType() != "Conv" || !isDefaultDomain(*node)) continue;
    PairSearch found = findPair(graph, node, options.relu6_to_relu);
    if (found.pair) {
      pairs.push_back(*found.pair);
    } else {
      report.skipped.push_back(SkippedConv{label(*node), found.reason});
    }
  }

  std::map<Node*, Layer> layers;
  auto layerOf = [&](Node* node) -> Layer& {
    auto it = layers.find(node);
    if (it != layers.end()) return it->second;
    Layer layer = loadLayer(node);
    if (auto s = stats.find(node);
        s != stats.end() && s->second.beta.numel() == layer.weight.size(0)) {
      layer.beta = s->second.beta.clone();
      layer.gamma = s->second.gamma.clone();
    }
    return layers.emplace(node, std::move(layer)).first->second;
  };
  for (const Pair& p : pairs) {
    EqualizedPair r;
    r.conv1 = label(*p.conv1);
    r.conv2 = label(*p.conv2);
    r.path = p.path;
    r.channels = p.channels;
    r.conv1_spread_before = spread(rowRanges(layerOf(p.conv1).weight));
    r.conv2_spread_before = spread(rowRanges(inputChannelRows(layerOf(p.conv2), p)));
    report.pairs.push_back(r);
  }

  for (int iteration = 1; iteration <= options.max_iterations && !pairs.empty(); ++iteration) {
    double change = 0;
    for (const Pair& p : pairs)
      change = std::max(change, equalizePair(layerOf(p.conv1), layerOf(p.conv2), p));
    report.iterations = iteration;
    report.last_max_scale_change = change;
    if (change < options.tolerance) {
      report.converged = true;
      break;
    }
  }

  for (size_t i = 0; i < pairs.size(); ++i) {
    const Pair& p = pairs[i];
    Layer& conv1 = layerOf(p.conv1);
    Layer& conv2 = layerOf(p.conv2);
    EqualizedPair& r = report.pairs[i];
    r.conv1_spread_after = spread(rowRanges(conv1.weight));
    r.conv2_spread_after = spread(rowRanges(inputChannelRows(conv2, p)));
    if (options.high_bias_absorption && p.through_relu && conv1.beta.defined()) {
      absorbHighBias(conv1, conv2, p, r);
    }
  }

  for (const auto& [node, layer] : layers)
    writeLayer(graph, layer);
  for (const Pair& p : pairs) {
    if (p.relu6 == nullptr) continue;
    report.relu6_replaced.push_back(label(*p.relu6));
    replaceByRelu(graph, p.relu6);
  }
  return report;
}

}  // namespace qforge::algos
