// The passes prepare() is made of, registered by name.
#include <memory>
#include <set>

#include "passes/constants_to_initializers.h"
#include "passes/float16_to_float32.h"
#include "passes/float_ops.h"
#include "passes/fold_batchnorm.h"
#include "passes/fold_constants.h"
#include "passes/pass_registry.h"
#include "passes/unit_settings.h"
#include "passes/upgrade_opset.h"
#include "passes/zero_bias_under_batchnorm.h"

namespace qforge::passes {

namespace {

using backends::BackendConfig;
using backends::OpRole;

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

PassResult foldBatchNormPass(Graph& graph, PassContext& context) {
  if (context.backend == nullptr) return {static_cast<int64_t>(foldBatchNorm(graph)), {}};
  const BackendConfig& backend = *context.backend;
  const std::vector<std::string>& extra = context.config.extra_quantizable;
  return {static_cast<int64_t>(foldBatchNorm(graph,
                                             [&](const Node& producer) {
                                               return foldsBatchNormAfter(backend, extra,
                                                                          producer.opType());
                                             })),
          {}};
}

PassResult findUnitsPass(Graph& graph, PassContext& context) {
  context.activations = std::make_shared<const ActivationValues>(graph);
  context.units = findQuantUnits(graph, context.requireBackend("find-units"),
                                 context.config.extra_quantizable, context.activations.get());
  return {static_cast<int64_t>(context.units->size()), {}};
}

// Only where the backend quantizes biases: a float bias needs no quantizer made in advance.
PassResult zeroBiasPass(Graph& graph, PassContext& context) {
  std::vector<QuantUnit>& units = context.requireUnits("zero-bias-under-bn");
  const BackendConfig& backend = context.requireBackend("zero-bias-under-bn");
  if (backend.constraints.bias.mode == backends::BiasRule::Mode::Float) return {};
  return {addZeroBiasesUnderBatchNorm(graph, units), {}};
}

PassResult resolveSettingsPass(Graph&, PassContext& context) {
  context.settings =
      resolveUnitSettings(context.requireUnits("resolve-settings"),
                          context.requireBackend("resolve-settings"), context.config);
  return {static_cast<int64_t>(context.settings->size()), {}};
}

PassResult floatOpsPass(Graph& graph, PassContext& context) {
  const std::vector<QuantUnit>& units = context.requireUnits("list-float-ops");
  const std::vector<UnitSettings>& settings = context.requireSettings("list-float-ops");
  std::set<const Node*> in_units;
  for (size_t i = 0; i < units.size(); ++i) {
    if (!settings[i].skip) in_units.insert(units[i].nodes.begin(), units[i].nodes.end());
  }
  context.float_ops = listFloatOps(graph, context.requireBackend("list-float-ops"), in_units,
                                   context.activations.get());
  return {static_cast<int64_t>(context.float_ops->size()), {}};
}

PassResult insertPass(Graph& graph, PassContext& context) {
  const std::vector<QuantUnit>& units = context.requireUnits("insert-fake-quant");
  const std::vector<UnitSettings>& settings = context.requireSettings("insert-fake-quant");
  context.points =
      insertFakeQuantizers(graph, units, settings, context.requireBackend("insert-fake-quant"));
  return {static_cast<int64_t>(context.points->size()), {}};
}

}  // namespace

void registerBuiltinPasses(PassRegistry& registry) {
  registry.add(Pass("constants-to-initializers", PassKind::Graph,
                    "Constant nodes become initializers (Clip bounds, shapes, scales)",
                    [](Graph& graph, PassContext&) -> PassResult {
                      return {static_cast<int64_t>(constantsToInitializers(graph)), {}};
                    }));
  registry.add(Pass("float16-to-float32", PassKind::Graph,
                    "a model converted to float16 is quantized in float32: float16 weights, "
                    "Casts and constants widened, float16 inputs and outputs kept behind Casts",
                    [](Graph& graph, PassContext&) -> PassResult {
                      return {static_cast<int64_t>(float16ToFloat32(graph).total()), {}};
                    }));
  registry.add(Pass("fold-constants", PassKind::Graph,
                    "nodes whose inputs are all constants evaluated once and replaced by "
                    "initializers (shape arithmetic, weight reshapes; not random ops, not over "
                    "64 MiB)",
                    [](Graph& graph, PassContext&) -> PassResult {
                      return {static_cast<int64_t>(foldConstants(graph)), {}};
                    }));
  registry.add(
      Pass("upgrade-opset", PassKind::Graph,
           "the default-domain opset raised to what the backend's deploy files need "
           "(11: QDQ as ONNX Runtime loads it; per-channel 13), ops rewritten",
           [](Graph& graph, PassContext& context) -> PassResult {
             return {static_cast<int64_t>(upgradeOpset(graph, context.target_opset).rewritten), {}};
           }));
  registry.add(Pass("fold-bn", PassKind::Graph,
                    "BatchNormalization folded into the Conv/ConvTranspose/Gemm before it, "
                    "except where the backend quantizes that op without fusing BN",
                    foldBatchNormPass));
  registry.add(Pass("find-units", PassKind::Placement,
                    "quantization units from the backend's op roles and fusion patterns",
                    findUnitsPass));
  registry.add(Pass("zero-bias-under-bn", PassKind::Placement,
                    "zero biases for units whose BatchNormalization stays (QAT), so that folding "
                    "it later finds a bias quantizer",
                    zeroBiasPass));
  registry.add(Pass("resolve-settings", PassKind::Placement,
                    "each unit's weight and activation specs: backend, config, first/last "
                    "layers, per-node overrides",
                    resolveSettingsPass));
  registry.add(Pass("list-float-ops", PassKind::Placement,
                    "the ops that compute in float outside the units, for the report",
                    floatOpsPass));
  registry.add(Pass("insert-fake-quant", PassKind::Placement,
                    "FakeQuantize nodes per the backend's placement policy", insertPass));
}

}  // namespace qforge::passes
