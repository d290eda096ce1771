#include "passes/prepare.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "ir/verifier.h"
#include "passes/constants_to_initializers.h"
#include "passes/fake_quantize_node.h"
#include "passes/fold_batchnorm.h"
#include "quant/fake_quantizers/derived_bias.h"
#include "quant/fake_quantizers/fixed.h"

namespace qforge::passes {

using backends::BackendConfig;
using backends::OpRole;

PreparedModel::PreparedModel(Graph graph, BackendConfig backend)
    : graph_(std::move(graph)), backend_(std::move(backend)) {}

quant::FakeQuantizer* PreparedModel::quantizer(const std::string& name) const {
  auto it = quantizers_.find(name);
  return it == quantizers_.end() ? nullptr : it->second.get();
}

std::vector<quant::FakeQuantizer*> PreparedModel::quantizers() const {
  std::vector<quant::FakeQuantizer*> out;
  for (const QuantPoint& p : points_)
    out.push_back(quantizer(p.quantizer));
  return out;
}

void PreparedModel::setMode(quant::FakeQuantMode mode) {
  using quant::FakeQuantMode;
  for (quant::FakeQuantizer* q : quantizers()) {
    if (q->observer() != nullptr) {
      q->setMode(mode);
    } else {
      const bool on =
          mode == FakeQuantMode::Quantization || mode == FakeQuantMode::CalibrateAndQuantize;
      q->setMode(on ? FakeQuantMode::Quantization : FakeQuantMode::Float);
    }
  }
}

Executor& PreparedModel::executor() {
  if (!executor_) {
    registry_ = std::make_unique<OpRegistry>(
        registryWithFakeQuantize([this](const std::string& name) { return quantizer(name); }));
    executor_ = std::make_unique<Executor>(graph_, ExecutorOptions{}, *registry_);
  }
  return *executor_;
}

namespace {

// Runs one editing step and checks the graph it leaves; errors carry the step's name.
template <typename Step>
auto runStep(const char* name, Graph& graph, Step&& step) {
  try {
    auto result = step();
    verifyGraph(graph);
    return result;
  } catch (const Error& e) {
    throw e.within(std::string("prepare, step '") + name + "'");
  }
}

// Units whose anchor has weights, in topological order: the "layers" of first/last rules.
std::pair<int, int> firstAndLastWeighted(const std::vector<QuantUnit>& units) {
  int first = -1, last = -1;
  for (size_t i = 0; i < units.size(); ++i) {
    if (units[i].weights.empty()) continue;
    if (first < 0) first = static_cast<int>(i);
    last = static_cast<int>(i);
  }
  return {first, last};
}

// Whether BN after a `producer` op may be folded into it. A backend that quantizes the producer
// as a unit but has no fusion putting BN right after it runs BN on its own, after the quantized
// weights (Academic, as MQBench's AcademicQuantizer, which does not fuse). Where the producer
// stays float, folding changes nothing the backend quantizes.
bool foldsBatchNormAfter(const BackendConfig& backend, const std::vector<std::string>& extra,
                         const std::string& producer) {
  if (unitRole(backend, extra, producer) != OpRole::Quantizable) return true;
  for (const backends::FusionPattern& pattern : backend.fusions) {
    if (pattern.steps.size() >= 2 && pattern.steps[0].accepts(producer) &&
        pattern.steps[1].accepts("BatchNormalization")) {
      return true;
    }
  }
  return false;
}

// Kept BN (QAT) fused into a Conv/ConvTranspose/Gemm without a bias: folding BN later creates
// that bias, so when the backend quantizes biases the producer gets a zero bias now, and with it
// the bias quantizer the folded model needs (simulateBatchNormFolding, mergeSimulatedBatchNorm).
// Under BN the zero bias changes nothing: training BN subtracts the batch mean, inference BN the
// running one, after it.
int addZeroBiasesUnderBatchNorm(Graph& graph, std::vector<QuantUnit>& units) {
  int added = 0;
  for (QuantUnit& unit : units) {
    Node* producer = unit.anchor();
    const std::string& op = producer->opType();
    if (unit.nodes.size() < 2 || unit.nodes[1]->opType() != "BatchNormalization") continue;
    if (op != "Conv" && op != "ConvTranspose" && op != "Gemm") continue;
    if (producer->input(2) != nullptr || producer->input(1) == nullptr ||
        !producer->input(1)->isInitializer()) {
      continue;
    }
    const at::Tensor& w = producer->input(1)->initializer();
    if (w.dim() < 2) continue;
    int64_t channels = w.size(0);
    if (op == "ConvTranspose") {
      const Attribute* group = producer->attributes.find("group");
      channels = w.size(1) * (group != nullptr ? group->i : 1);
    } else if (op == "Gemm") {
      const Attribute* trans_b = producer->attributes.find("transB");
      if (trans_b == nullptr || trans_b->i == 0) channels = w.size(1);
    }
    const std::string label = producer->name().empty() ? unit.name : producer->name();
    Value* bias =
        graph.addInitializer(graph.uniqueName(label + "_bias"), at::zeros({channels}, w.options()));
    graph.setInput(producer, 2, bias);
    if (op == "Gemm") producer->attributes.set(Attribute::makeFloat("beta", 1.0));
    unit.bias = Use{producer, 2};
    ++added;
  }
  return added;
}

std::vector<UnitSettings> resolveSettings(const std::vector<QuantUnit>& units,
                                          const BackendConfig& backend, const QuantConfig& config) {
  const backends::QuantSpec weight =
      applySpecPatch(backend.weight, config.weight, config.where + ": weight");
  const backends::QuantSpec activation =
      applySpecPatch(backend.activation, config.activation, config.where + ": activation");
  const auto [first, last] = firstAndLastWeighted(units);
  std::vector<UnitSettings> settings;
  for (size_t i = 0; i < units.size(); ++i) {
    UnitSettings s{weight, activation, false};
    const int width = backend.constraints.first_last_bits;
    if (width > 0 && (static_cast<int>(i) == first || static_cast<int>(i) == last)) {
      s.weight.scheme.bits = width;
      s.activation.scheme.bits = width;
    }
    // Overrides apply in file order; a later one wins where they overlap.
    for (const NodeOverride& o : config.overrides) {
      if (!selects(o, *units[i].anchor())) continue;
      s.skip = s.skip || o.skip;
      s.weight = applySpecPatch(s.weight, o.weight, o.where + ".weight");
      s.activation = applySpecPatch(s.activation, o.activation, o.where + ".activation");
    }
    settings.push_back(s);
  }
  return settings;
}

// Ops that compute something, are not part of a unit and are not pure data movement.
std::vector<std::string> floatOps(const Graph& graph, const BackendConfig& backend,
                                  const std::set<const Node*>& in_units) {
  static const std::set<std::string> bookkeeping = {"Constant", "Shape",           "Identity",
                                                    "Gather",   "Unsqueeze",       "Squeeze",
                                                    "Concat",   "ConstantOfShape", "Cast"};
  std::map<std::string, std::vector<std::string>> by_op;
  for (const Node* n : graph.topologicalOrder()) {
    if (in_units.count(n) || isFakeQuantize(n)) continue;
    const backends::OpTrait* trait = backend.trait(n->opType());
    if (trait != nullptr && trait->role == OpRole::SharesInput) continue;
    const OpInfo* info =
        OpRegistry::builtin().find(n->domain(), n->opType(), graph.model.opsetFor(n->domain()));
    if ((info != nullptr && info->moves_data_only) || bookkeeping.count(n->opType())) continue;
    by_op[n->opType()].push_back(n->name().empty() ? n->outputs().front()->name() : n->name());
  }
  std::vector<std::string> out;
  for (const auto& [op, names] : by_op) {
    std::string line = op + " x" + std::to_string(names.size()) + ":";
    for (size_t i = 0; i < names.size() && i < 4; ++i)
      line += " " + names[i];
    if (names.size() > 4) line += " ...";
    out.push_back(line);
  }
  return out;
}

std::unique_ptr<quant::FakeQuantizer> createQuantizer(const QuantPoint& p,
                                                      const PreparedModel& model,
                                                      const PrepareOptions& options) {
  static const quant::ObserverRegistry builtin_observers = [] {
    quant::ObserverRegistry r;
    quant::registerBuiltinObservers(r);
    return r;
  }();
  static const quant::FakeQuantizerRegistry builtin_quantizers = [] {
    quant::FakeQuantizerRegistry r;
    quant::registerBuiltinFakeQuantizers(r);
    return r;
  }();
  const auto& observers = options.observers ? *options.observers : builtin_observers;
  const auto& fakes = options.fake_quantizers ? *options.fake_quantizers : builtin_quantizers;

  if (p.kind == PointKind::FixedOutput) {
    auto q = std::make_unique<quant::FixedFakeQuantizer>(p.quantizer, p.spec.scheme, nullptr);
    q->setQParams(quant::makeQParams({static_cast<float>(p.fixed_scale)}, {p.fixed_zero_point}));
    return q;
  }
  if (p.kind == PointKind::Bias && !p.bias_input_quantizer.empty()) {
    return std::make_unique<quant::DerivedBiasFakeQuantizer>(
        p.quantizer, p.bias_bits, model.quantizer(p.bias_input_quantizer),
        model.quantizer(p.bias_weight_quantizer));
  }
  try {
    auto observer =
        observers.create(p.spec.observer, p.value, p.spec.scheme, p.spec.observer_options);
    return fakes.create(p.spec.fake_quantizer, p.quantizer, p.spec.scheme, std::move(observer),
                        p.spec.fake_quantizer_options);
  } catch (const Error& e) {
    throw e.within(std::string(toString(p.kind)) + " quantizer of '" + p.value + "'" +
                   (p.unit.empty() ? "" : " (unit '" + p.unit + "')"));
  }
}

}  // namespace

std::unique_ptr<PreparedModel> assemblePreparedModel(Graph graph, BackendConfig backend,
                                                     std::vector<UnitSummary> units,
                                                     std::vector<QuantPoint> points,
                                                     std::vector<std::string> float_ops,
                                                     const PrepareOptions& options) {
  auto model = std::make_unique<PreparedModel>(std::move(graph), std::move(backend));
  model->units_ = std::move(units);
  model->points_ = std::move(points);
  model->float_ops_ = std::move(float_ops);
  for (const QuantPoint& p : model->points_) {
    model->quantizers_[p.quantizer] = createQuantizer(p, *model, options);
  }
  return model;
}

std::unique_ptr<PreparedModel> prepare(Graph g, const BackendConfig& backend,
                                       const PrepareOptions& options) {
  checkOverridesMatch(options.config, g);
  runStep("constants to initializers", g, [&] { return constantsToInitializers(g); });
  if (options.fold_batchnorm) {
    runStep("fold BatchNormalization", g, [&] {
      return foldBatchNorm(g, [&](const Node& producer) {
        return foldsBatchNormAfter(backend, options.config.extra_quantizable, producer.opType());
      });
    });
  }

  std::vector<QuantUnit> units = findQuantUnits(g, backend, options.config.extra_quantizable);
  if (!options.fold_batchnorm && backend.constraints.bias.mode != backends::BiasRule::Mode::Float) {
    runStep("zero biases under BatchNormalization", g,
            [&] { return addZeroBiasesUnderBatchNorm(g, units); });
  }
  std::vector<UnitSettings> settings = resolveSettings(units, backend, options.config);
  std::vector<UnitSummary> summaries;
  std::set<const Node*> in_units;
  for (size_t i = 0; i < units.size(); ++i) {
    summaries.push_back(UnitSummary{units[i].name, units[i].ops(), units[i].pattern,
                                    settings[i].skip, settings[i]});
    if (!settings[i].skip) in_units.insert(units[i].nodes.begin(), units[i].nodes.end());
  }
  std::vector<std::string> float_ops = floatOps(g, backend, in_units);
  std::vector<QuantPoint> points = runStep("insert fake quantizers", g, [&] {
    return insertFakeQuantizers(g, units, settings, backend);
  });
  return assemblePreparedModel(std::move(g), backend, std::move(summaries), std::move(points),
                               std::move(float_ops), options);
}

}  // namespace qforge::passes
