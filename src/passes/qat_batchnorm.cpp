#include "passes/qat_batchnorm.h"

#include <ATen/ATen.h>

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "exec/op_traits.h"
#include "ir/node_attributes.h"
#include "ir/verifier.h"
#include "passes/fake_quantize_node.h"
#include "passes/fold_batchnorm.h"
#include "quant/qparams.h"

namespace qforge::passes {

namespace {

constexpr const char* kBatchNorm = "BatchNormalization";
// Helper nodes of the simulated form carry this metadata key, valued with their BN's node name,
// so the merge removes exactly them.
constexpr const char* kSimulatedBnKey = "qforge.simulated_bn_folding";

// The initializer holding `v`'s value: `v` itself or the one behind a chain of Identity nodes
// (PyTorch's exporter writes one per duplicate of a deduplicated tensor); nullptr when computed.
const Value* initializerBehind(const Value* v) {
  while (v != nullptr && v->producer() != nullptr) {
    const Node* p = v->producer();
    if (p->opType() != "Identity" || !isDefaultDomain(*p) || p->inputs().size() != 1) {
      return nullptr;
    }
    v = p->input(0);
  }
  return v != nullptr && v->isInitializer() ? v : nullptr;
}

// ---------------------------------------------------------------------------------------------
// The training lowering

// A running statistic as the executor passed it: it must be the graph initializer's own tensor,
// so that updating it in place updates the model (and the next run, and the checkpoint, see it).
at::Tensor runningStatistic(const OpContext& ctx, size_t slot, const char* what) {
  const Value* v = ctx.node().input(slot);
  const Value* source = initializerBehind(v);
  if (source == nullptr) {
    ctx.fail(std::string(what) + " '" + (v ? v->name() : std::string("")) +
             "' is not an initializer; training BatchNormalization updates it in place");
  }
  const at::Tensor& t = ctx.input(slot);
  if (!t.is_same(source->initializer())) {
    ctx.fail(std::string(what) + " '" + v->name() +
             "' was replaced at run time (fed or hooked); its update would be lost");
  }
  if (t.requires_grad()) {
    ctx.fail(std::string(what) + " '" + v->name() +
             "' requires grad; running statistics are buffers, not trainable parameters");
  }
  if (!at::isFloatingType(t.scalar_type())) {
    ctx.fail(std::string(what) + " '" + v->name() + "' is not a floating-point tensor");
  }
  return t;
}

// y from the batch's mean and biased variance (autograd runs through both, as in PyTorch's
// training BN); the running statistics move towards the batch's, the variance's unbiased.
std::vector<at::Tensor> batchNormWithBatchStatistics(const OpContext& ctx) {
  for (size_t i = 1; i < ctx.outputCount(); ++i) {
    if (!ctx.node().output(i)->uses().empty()) {
      ctx.fail("training outputs past Y are not computed by the QAT BatchNormalization lowering");
    }
  }
  if (ctx.opset() < 9 && ctx.attrInt("spatial", 1) == 0) {
    ctx.fail("spatial=0 (statistics per activation) cannot be trained");
  }
  const at::Tensor& x = ctx.input(0);
  if (x.dim() < 2) ctx.fail("input X must be (N, C, ...), got rank " + std::to_string(x.dim()));
  const int64_t channels = x.size(1);
  for (size_t slot = 1; slot <= 4; ++slot) {
    if (ctx.input(slot).sizes() != at::IntArrayRef{channels}) {
      ctx.fail("input " + std::to_string(slot) + " must have shape [" + std::to_string(channels) +
               "]");
    }
  }
  at::Tensor running_mean = runningStatistic(ctx, 3, "running mean");
  at::Tensor running_var = runningStatistic(ctx, 4, "running variance");
  const int64_t count = x.numel() / channels;
  if (count < 2) ctx.fail("training needs more than one value per channel");

  const double epsilon = ctx.attrFloat("epsilon", 1e-5);
  const double momentum = ctx.attrFloat("momentum", 0.9);
  // ATen's fused batch norm: batch mean and biased variance (autograd through both), and the
  // running statistics updated in place from the unbiased variance, as torch.nn.BatchNorm2d in
  // training mode; ATen's momentum is 1 - ONNX's. One kernel instead of six elementwise passes.
  const at::Tensor y = at::batch_norm(x, ctx.input(1).to(x.scalar_type()),
                                      ctx.input(2).to(x.scalar_type()), running_mean, running_var,
                                      /*training=*/true, 1.0 - momentum, epsilon,
                                      /*cudnn_enabled=*/false);
  return {y};
}

}  // namespace

void registerTrainingBatchNorm(OpRegistry& registry,
                               std::shared_ptr<const BatchNormTraining> state) {
  require(state != nullptr, "registerTrainingBatchNorm: no BatchNormTraining state given");
  // The registry's inference lowerings, which frozen BN keeps running.
  std::vector<OpInfo> inference;
  for (int64_t opset = 1; opset <= 64;) {
    const OpInfo* info = registry.find("", kBatchNorm, opset);
    if (info == nullptr) {
      ++opset;
      continue;
    }
    inference.push_back(*info);
    if (info->until_version >= 64) break;
    opset = info->until_version + 1;
  }
  require(!inference.empty(), "registerTrainingBatchNorm: the registry has no BatchNormalization");
  registry.remove("", kBatchNorm);

  OpInfo training = inference.front();
  training.until_version = inference.back().until_version;
  training.run = [state, inference](const OpContext& ctx) -> std::vector<at::Tensor> {
    if (state->use_batch_statistics) return batchNormWithBatchStatistics(ctx);
    for (const OpInfo& info : inference) {
      if (ctx.opset() >= info.since_version && ctx.opset() <= info.until_version) {
        return info.run(ctx);
      }
    }
    ctx.fail("no inference lowering at this opset");
  };
  registry.add(std::move(training));
}

namespace {

// ---------------------------------------------------------------------------------------------
// Simulated folding

// The table's entry for an op whose weight (slot 1) and bias (slot 2) absorb a following BN, as
// foldBatchNorm folds it; nullptr for any other node.
const OpInfo* foldingProducer(const Graph& graph, const Node& node) {
  const OpInfo* info = opInfoFor(graph, node);
  const bool folds = info != nullptr && info->absorbs_batchnorm &&
                     info->weight_inputs == std::vector<int>{1} && info->bias_input == 2;
  return folds ? info : nullptr;
}

std::string unitNameOf(const Node& anchor) {
  return anchor.name().empty() ? anchor.outputs().front()->name() : anchor.name();
}

// Units in which the backend fuses BN into its producer: "Conv+BatchNormalization[+...]", for
// any producer the op table says absorbs BN.
std::set<std::string> unitsFusingBatchNorm(const PreparedModel& model) {
  const int64_t opset = model.graph().model.opsetFor("");
  std::set<std::string> names;
  for (const UnitSummary& u : model.units()) {
    if (u.skipped) continue;
    const size_t plus = u.ops.find('+');
    if (plus == std::string::npos) continue;
    const OpInfo* producer = opInfoFor(u.ops.substr(0, plus), opset);
    const std::string second = u.ops.substr(plus + 1, u.ops.find('+', plus + 1) - plus - 1);
    if (producer != nullptr && producer->absorbs_batchnorm && second == kBatchNorm) {
      names.insert(u.name);
    }
  }
  return names;
}

// The output-channel axis of the producer's weight `w`.
int64_t weightAxis(const Graph& graph, const Node& producer, const at::Tensor& w) {
  return weightChannelAxis(opInfoFor(graph, producer), producer, 1, w);
}

// One BN the simulation rewrites, with what it reads.
struct FusedBatchNorm {
  Node* bn = nullptr;
  Node* producer = nullptr;
  Node* weight_quantizer = nullptr;          // FakeQuantize(weight) read by the producer
  Value* weight = nullptr;                   // the float weight initializer
  Value* bias = nullptr;                     // the float conv bias, or nullptr
  Node* bias_quantizer = nullptr;            // FakeQuantize(bias) read by the producer, or nullptr
  WeightLayout layout = WeightLayout::None;  // the producer's, from the op table
  int64_t channels = 0;
};

// The BN to rewrite; nullopt when BN is not fused with a quantized weight (left alone); throws
// naming the BN when it is fused but cannot be rewritten.
std::optional<FusedBatchNorm> fusedBatchNorm(const PreparedModel& model, Node* bn,
                                             const std::set<std::string>& fusing_units) {
  const Graph& graph = model.graph();
  if (bn->opType() != kBatchNorm || !isDefaultDomain(*bn) || bn->input(0) == nullptr) {
    return std::nullopt;
  }
  Value* x = bn->input(0);
  Node* producer = x->producer();
  if (producer == nullptr || !foldingProducer(graph, *producer) ||
      producer->outputs().size() != 1 || x->uses().size() != 1 || graph.isGraphOutput(x) ||
      !fusing_units.count(unitNameOf(*producer))) {
    return std::nullopt;
  }
  Value* qw = producer->input(1);
  Node* weight_quantizer = qw != nullptr ? qw->producer() : nullptr;
  if (!isFakeQuantize(weight_quantizer) || weight_quantizer->input(0) == nullptr ||
      !weight_quantizer->input(0)->isInitializer()) {
    return std::nullopt;
  }

  auto fail = [&](const std::string& why) -> Error {
    return Error("simulated BN folding, " + bn->describe() + ": " + why);
  };
  FusedBatchNorm f;
  f.bn = bn;
  f.producer = producer;
  f.weight_quantizer = weight_quantizer;
  f.weight = weight_quantizer->input(0);
  if (qw->uses().size() != 1) throw fail("its weight quantizer's output is read by other nodes");
  const at::Tensor& w = f.weight->initializer();
  f.layout = foldingProducer(graph, *producer)->weight_layout;
  const bool gemm = f.layout == WeightLayout::GemmB;
  if (!at::isFloatingType(w.scalar_type())) throw fail("the weight is not floating point");
  if (gemm ? w.dim() != 2 : w.dim() < 3) throw fail("unexpected weight rank");
  if (f.layout == WeightLayout::GroupedOutputSecond && intAttr(*producer, "group", 1) != 1) {
    throw fail("grouped " + producer->opType() + " is not supported");
  }
  f.channels = w.size(weightAxis(graph, *producer, w));

  for (size_t i = 1; i < bn->outputs().size(); ++i) {
    if (!bn->output(i)->uses().empty() || graph.isGraphOutput(bn->output(i))) {
      throw fail("its training outputs (running or saved statistics) are in use");
    }
  }
  if (graph.model.opsetFor(bn->domain()) < 9 && intAttr(*bn, "spatial", 1) == 0) {
    throw fail("spatial=0 (statistics per activation) cannot be folded");
  }
  static const char* kParams[] = {"", "scale", "B", "mean", "var"};
  for (size_t slot = 1; slot <= 4; ++slot) {
    const Value* source = initializerBehind(bn->input(slot));
    if (source == nullptr) throw fail(std::string(kParams[slot]) + " is not an initializer");
    const at::Tensor& t = source->initializer();
    if (t.sizes() != at::IntArrayRef{f.channels} || t.scalar_type() != w.scalar_type()) {
      throw fail(std::string(kParams[slot]) + " '" + source->name() + "' is not [" +
                 std::to_string(f.channels) + "] of the weight's type");
    }
  }

  Value* b = producer->input(2);
  if (b != nullptr && isFakeQuantize(b->producer())) {
    if (model.backend().constraints.bias.mode == backends::BiasRule::Mode::Own) {
      throw fail(
          "a bias quantizer with its own observed range (bias mode 'own') is not "
          "supported: it would observe the unfolded bias");
    }
    if (b->uses().size() != 1) throw fail("its bias quantizer's output is read by other nodes");
    f.bias_quantizer = b->producer();
    b = f.bias_quantizer->input(0);
  }
  if (b != nullptr) {
    const Value* source = initializerBehind(b);
    if (source == nullptr) throw fail("the producer's bias is not an initializer");
    const at::Tensor& t = source->initializer();
    if (t.sizes() != at::IntArrayRef{f.channels} || t.scalar_type() != w.scalar_type()) {
      throw fail("the producer's bias '" + source->name() + "' is not [" +
                 std::to_string(f.channels) + "] of the weight's type");
    }
    if (gemm && floatAttr(*producer, "beta", 1.0) != 1.0) {
      throw fail(producer->opType() + " with beta != 1 is not supported");
    }
    f.bias = b;
  }
  return f;
}

// Shape putting a [C] tensor on `axis` of a rank-`rank` tensor, as an int64 tensor.
at::Tensor channelShape(int64_t channels, int64_t axis, int64_t rank) {
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(axis)] = channels;
  return at::tensor(shape, at::kLong);
}

// Adds the helper nodes of `f` and rewires the producer and BN:
//   factor = scale / sqrt(var + eps)
//   producer(x, FQ(W * factor)) / factor (+ b) -> BN
void rewriteToSimulatedForm(Graph& graph, const FusedBatchNorm& f) {
  Node* bn = f.bn;
  const std::string base = bn->name();
  auto helper = [&](const std::string& op, const std::vector<Value*>& inputs,
                    const std::string& what) {
    Node* n = graph.addNode(op, inputs, {graph.uniqueName(base + "/" + what)},
                            uniqueNodeName(graph, base + "/" + what));
    n->metadata_props.emplace_back(kSimulatedBnKey, base);
    return n->output(0);
  };
  auto constant = [&](const std::string& what, at::Tensor t) {
    return graph.addInitializer(graph.uniqueName(base + "/" + what), std::move(t));
  };

  const at::Tensor& w = f.weight->initializer();
  const double epsilon = floatAttr(*bn, "epsilon", 1e-5);
  Value* eps = constant("epsilon", at::full({}, epsilon, w.options()));
  Value* std_dev = helper("Sqrt", {helper("Add", {bn->input(4), eps}, "var_plus_eps")}, "std");
  Value* factor = helper("Div", {bn->input(1), std_dev}, "factor");
  Value* weight_factor = helper(
      "Reshape",
      {factor, constant("weight_factor_shape",
                        channelShape(f.channels, weightAxis(graph, *f.producer, w), w.dim()))},
      "weight_factor");
  graph.setInput(f.weight_quantizer, 0, helper("Mul", {f.weight, weight_factor}, "scaled_weight"));

  if (f.producer->input(2) != nullptr) graph.setInput(f.producer, 2, nullptr);
  if (f.bias_quantizer != nullptr) graph.removeNode(f.bias_quantizer);  // back at the merge

  // Output [N, C, ...] for convolutions (spatial rank = weight rank - 2), [M, C] for Gemm.
  const bool gemm = f.layout == WeightLayout::GemmB;
  Value* output_shape =
      gemm ? nullptr : constant("output_shape", channelShape(f.channels, 0, w.dim() - 1));
  auto perChannel = [&](Value* v, const std::string& what) {
    return gemm ? v : helper("Reshape", {v, output_shape}, what);
  };
  Value* y = helper("Div", {f.producer->output(0), perChannel(factor, "output_factor")},
                    "unscaled_output");
  if (f.bias != nullptr) y = helper("Add", {y, perChannel(f.bias, "output_bias")}, "with_bias");
  graph.setInput(bn, 0, y);
}

bool isHelperOf(const Node* node, const std::string& bn_name) {
  if (node == nullptr) return false;
  for (const auto& [key, value] : node->metadata_props) {
    if (key == kSimulatedBnKey && value == bn_name) return true;
  }
  return false;
}

// What the merge needs of one simulated BN.
struct SimulatedBatchNorm {
  Node* bn = nullptr;
  Node* producer = nullptr;
  Node* weight_quantizer = nullptr;
  Value* weight = nullptr;
  Value* bias = nullptr;  // nullptr when the producer had none
};

// The simulated form ending in `bn`, recognised from its tagged helper nodes; nullopt for a BN
// without them.
std::optional<SimulatedBatchNorm> simulatedBatchNorm(const Graph& graph, Node* bn) {
  if (bn->opType() != kBatchNorm || bn->name().empty() || bn->input(0) == nullptr) {
    return std::nullopt;
  }
  const std::string& tag = bn->name();
  Node* last = bn->input(0)->producer();
  if (!isHelperOf(last, tag)) return std::nullopt;
  SimulatedBatchNorm s;
  s.bn = bn;
  auto fail = [&](const std::string& why) {
    return Error("merging simulated BN folding, " + bn->describe() + ": " + why);
  };
  Node* div = last;
  if (last->opType() == "Add") {
    s.bias = last->input(1);
    if (isHelperOf(s.bias->producer(), tag)) s.bias = s.bias->producer()->input(0);  // Reshape
    div = last->input(0)->producer();
  }
  if (!isHelperOf(div, tag) || div->opType() != "Div") throw fail("the helper nodes were edited");
  s.producer = div->input(0)->producer();
  if (s.producer == nullptr || !foldingProducer(graph, *s.producer)) {
    throw fail("no producer found");
  }
  s.weight_quantizer = s.producer->input(1) ? s.producer->input(1)->producer() : nullptr;
  if (!isFakeQuantize(s.weight_quantizer)) throw fail("the weight quantizer is gone");
  Node* mul = s.weight_quantizer->input(0)->producer();
  if (!isHelperOf(mul, tag) || mul->opType() != "Mul") throw fail("the scaled weight is gone");
  s.weight = mul->input(0);
  if (!s.weight->isInitializer()) throw fail("the weight is not an initializer");
  return s;
}

const at::Tensor& fixedTensor(const Value* v, const Node& bn) {
  const Value* source = initializerBehind(v);
  require(source != nullptr, bn.describe() + ": input '" + (v ? v->name() : std::string()) +
                                 "' is no longer an initializer");
  return source->initializer();
}

// The bias quantizer prepare() created for the producer's unit (removed during simulation).
const QuantPoint* biasPointOf(const PreparedModel& model, const Node& producer) {
  const std::string unit = unitNameOf(producer);
  for (const QuantPoint& p : model.points()) {
    if (p.kind == PointKind::Bias && p.unit == unit) return &p;
  }
  return nullptr;
}

void mergeOne(PreparedModel& model, const SimulatedBatchNorm& s) {
  Graph& graph = model.graph();
  Node* bn = s.bn;
  Node* producer = s.producer;
  const std::string tag = bn->name();
  at::NoGradGuard no_grad;  // the new initializers are plain tensors, whatever the old ones were

  // BN as y = a * x + t per channel, in double as foldBatchNorm computes it.
  const double epsilon = floatAttr(*bn, "epsilon", 1e-5);
  const at::Tensor& w = s.weight->initializer();
  // The weight, though, exactly as the graph scaled it (same float ops): the weight quantizer's
  // range was observed on that tensor, and its extreme element sits on a rounding boundary
  // (amax / scale = qmax + 0.5 for a [-128, 127] grid), which one ulp of difference would cross.
  const at::Tensor factor =
      fixedTensor(bn->input(1), *bn) /
      at::sqrt(fixedTensor(bn->input(4), *bn) + at::full({}, epsilon, w.options()));
  const at::Tensor folded_weight =
      w * quant::alongAxis(factor, weightAxis(graph, *producer, w), w.dim());
  const at::Tensor gamma = fixedTensor(bn->input(1), *bn).to(at::kDouble);
  const at::Tensor beta = fixedTensor(bn->input(2), *bn).to(at::kDouble);
  const at::Tensor mean = fixedTensor(bn->input(3), *bn).to(at::kDouble);
  const at::Tensor var = fixedTensor(bn->input(4), *bn).to(at::kDouble);
  const at::Tensor a = gamma / at::sqrt(var + epsilon);
  const at::Tensor t = beta - mean * a;
  at::Tensor folded_bias;
  if (s.bias != nullptr) {
    const at::Tensor& b = fixedTensor(s.bias, *bn);
    folded_bias = (b.to(at::kDouble) * a + t).to(b.scalar_type());
  } else {
    folded_bias = t.to(w.scalar_type());
  }

  Value* new_weight =
      graph.addInitializer(graph.uniqueName(s.weight->name() + "_bn_folded"), folded_weight);
  const std::string bias_base =
      s.bias != nullptr ? s.bias->name() : unitNameOf(*producer) + "_bias";
  Value* new_bias = graph.addInitializer(graph.uniqueName(bias_base + "_bn_folded"), folded_bias);
  // Names of everything that may become unused, looked up again after the removals.
  std::vector<std::string> maybe_unused;
  for (const Node* n : graph.nodes()) {
    if (!isHelperOf(n, tag)) continue;
    for (const Value* in : n->inputs())
      if (in != nullptr) maybe_unused.push_back(in->name());
  }
  for (const Value* in : bn->inputs())
    if (in != nullptr) maybe_unused.push_back(in->name());

  graph.setInput(s.weight_quantizer, 0, new_weight);
  graph.setInput(producer, 2, new_bias);
  if (const QuantPoint* point = biasPointOf(model, *producer)) {
    Node* q = addFakeQuantizeNode(graph, new_bias, point->quantizer, {Use{producer, 2}});
    if (!point->nodes.empty() && graph.findNode(point->nodes.front()) == nullptr) {
      q->setName(point->nodes.front());
    }
  }
  if (foldingProducer(graph, *producer)->weight_layout == WeightLayout::GemmB) {
    producer->attributes.set(Attribute::makeFloat("beta", 1.0));  // C now holds beta * C
  }

  // BN's readers read the producer, which takes BN's output name (and declared type).
  Value* x = producer->output(0);
  Value* y = bn->output(0);
  const std::string y_name = y->name();
  const TensorType y_type = y->type;
  const std::string y_doc = y->doc_string;
  graph.replaceAllUsesWith(y, x);
  graph.removeNode(bn);
  for (bool removed = true; removed;) {
    removed = false;
    for (Node* n : graph.nodes()) {
      const bool unused = n->output(0)->uses().empty() && !graph.isGraphOutput(n->output(0));
      if (isHelperOf(n, tag) && unused) {
        graph.removeNode(n);
        removed = true;
        break;
      }
    }
  }
  graph.renameValue(x, y_name);
  x->type = y_type;
  x->doc_string = y_doc;
  for (const std::string& name : maybe_unused)
    removeIfUnused(graph, graph.findValue(name));
}

}  // namespace

// Every BN the simulation rewrites, in topological order.
std::vector<FusedBatchNorm> fusedBatchNorms(const PreparedModel& model) {
  const std::set<std::string> fusing_units = unitsFusingBatchNorm(model);
  std::vector<FusedBatchNorm> found;
  for (Node* node : model.graph().topologicalOrder()) {
    if (auto f = fusedBatchNorm(model, node, fusing_units)) found.push_back(*f);
  }
  return found;
}

std::vector<const Node*> batchNormsToSimulate(const PreparedModel& model) {
  std::vector<const Node*> batch_norms;
  for (const FusedBatchNorm& f : fusedBatchNorms(model))
    batch_norms.push_back(f.bn);
  return batch_norms;
}

int simulateBatchNormFolding(PreparedModel& model) {
  Graph& graph = model.graph();
  const std::vector<FusedBatchNorm> found = fusedBatchNorms(model);
  for (const FusedBatchNorm& f : found) {
    // The BN's name tags its helper nodes: it must be unique.
    if (f.bn->name().empty() || graph.findNode(f.bn->name()) != f.bn) {
      f.bn->setName(uniqueNodeName(graph, f.bn->outputs().front()->name() + "/bn"));
    }
    rewriteToSimulatedForm(graph, f);
  }
  if (!found.empty()) {
    verifyGraph(graph);
  }
  return static_cast<int>(found.size());
}

int mergeSimulatedBatchNorm(PreparedModel& model) {
  Graph& graph = model.graph();
  // By name: a merge removes nodes (helpers, Identity chains of parameters) of the graph.
  std::vector<std::string> batch_norms;
  for (Node* node : graph.topologicalOrder()) {
    if (node->opType() == kBatchNorm && !node->name().empty()) batch_norms.push_back(node->name());
  }
  int merged = 0;
  for (const std::string& name : batch_norms) {
    Node* node = graph.findNode(name);
    if (node == nullptr) continue;
    if (auto s = simulatedBatchNorm(graph, node)) {
      mergeOne(model, *s);
      ++merged;
    }
  }
  if (merged > 0) {
    verifyGraph(graph);
  }
  return merged;
}

bool isSimulatedBatchNormHelper(const Node& node) {
  for (const auto& [key, value] : node.metadata_props) {
    if (key == kSimulatedBnKey) return true;
  }
  return false;
}

int countSimulatedBatchNorms(const Graph& graph) {
  std::set<std::string> batchnorms;
  for (const Node* node : graph.nodes()) {
    for (const auto& [key, value] : node->metadata_props) {
      if (key == kSimulatedBnKey) batchnorms.insert(value);
    }
  }
  return static_cast<int>(batchnorms.size());
}

}  // namespace qforge::passes
