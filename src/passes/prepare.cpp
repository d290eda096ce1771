#include "passes/prepare.h"

#include "core/error.h"
#include "passes/deploy_opset.h"
#include "passes/fake_quantize_node.h"
#include "passes/pass_pipeline.h"
#include "quant/fake_quantizers/derived_bias.h"
#include "quant/fake_quantizers/fixed.h"

namespace qforge::passes {

using backends::BackendConfig;

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
  if (!executor_ || executor_structure_ != graph_.structureVersion()) {
    executor_.reset();
    executor_structure_ = graph_.structureVersion();
    registry_ = std::make_unique<OpRegistry>(
        registryWithFakeQuantize([this](const std::string& name) { return quantizer(name); }));
    executor_ = std::make_unique<Executor>(graph_, ExecutorOptions{}, *registry_);
  }
  return *executor_;
}

namespace {

std::unique_ptr<quant::FakeQuantizer> createQuantizer(const QuantPoint& p,
                                                      const PreparedModel& model,
                                                      const PrepareOptions& options) {
  const auto& observers = options.observers ? *options.observers : quant::builtinObservers();
  const auto& fakes =
      options.fake_quantizers ? *options.fake_quantizers : quant::builtinFakeQuantizers();

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

namespace {

// The placement passes for a model whose BatchNormalization stays (QAT).
constexpr const char* kPlacementPassesKeepingBatchNorm =
    "find-units,zero-bias-under-bn,resolve-settings,list-float-ops,insert-fake-quant";

}  // namespace

std::string defaultPreparePasses(bool fold_batchnorm) {
  const std::string graph_passes =
      "constants-to-initializers,float16-to-float32,fold-constants,upgrade-opset,";
  return fold_batchnorm ? graph_passes + "fold-bn," + kPlacementPasses
                        : graph_passes + kPlacementPassesKeepingBatchNorm;
}

PassPipeline preparePipeline(const PrepareOptions& options) {
  const PassRegistry& registry =
      options.pass_registry != nullptr ? *options.pass_registry : PassRegistry::builtin();
  if (options.passes.empty()) {
    return PassPipeline::parse(defaultPreparePasses(options.fold_batchnorm), registry);
  }
  PassPipeline pipeline = PassPipeline::parse(options.passes, registry);
  if (!pipeline.hasPlacement()) {
    // Graph passes only: raise the opset and quantize what they leave, as the default pipeline
    // would.
    const char* tail = options.fold_batchnorm ? kPlacementPasses : kPlacementPassesKeepingBatchNorm;
    const std::string upgrade = pipeline.contains("upgrade-opset") ? "" : "upgrade-opset,";
    pipeline = PassPipeline::parse(options.passes + "," + upgrade + tail, registry);
  }
  require(pipeline.contains("insert-fake-quant"),
          "pass list '" + pipeline.text() +
              "' places no quantizers: end it with the placement "
              "passes (" +
              kPlacementPasses + ") or list graph passes only");
  return pipeline;
}

std::unique_ptr<PreparedModel> prepare(Graph g, const BackendConfig& backend,
                                       const PrepareOptions& options) {
  checkOverridesMatch(options.config, g);
  const PassPipeline pipeline = preparePipeline(options);
  PassContext context;
  context.backend = &backend;
  context.config = options.config;
  context.target_opset = requiredDeployOpset(backend, options.config);
  std::vector<PassRecord> records = pipeline.run(g, context);

  const std::vector<QuantUnit>& units = *context.units;
  const std::vector<UnitSettings>& settings = *context.settings;
  std::vector<UnitSummary> summaries;
  for (size_t i = 0; i < units.size(); ++i) {
    summaries.push_back(UnitSummary{units[i].name, units[i].ops(), units[i].pattern,
                                    settings[i].skip, settings[i]});
  }
  auto model =
      assemblePreparedModel(std::move(g), backend, std::move(summaries), std::move(*context.points),
                            context.float_ops.value_or(std::vector<std::string>{}), options);
  model->pass_records_ = std::move(records);
  return model;
}

}  // namespace qforge::passes
