#include "passes/deploy_opset.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "quant/registry.h"

namespace qforge::passes {

using backends::QuantSpec;

namespace {

// Every weight or activation spec some unit may end with: the backend's, the config's global
// patch over it, each override's patch over that, and the first/last-layer width.
std::vector<QuantSpec> specsOf(const QuantSpec& backend_spec, const nlohmann::json& global,
                               const QuantConfig& config, bool weights, int first_last_bits) {
  const auto patched = [&](const QuantSpec& base, const nlohmann::json& patch) {
    return patch.is_null() || patch.empty() ? base : applySpecPatch(base, patch, config.where);
  };
  const QuantSpec base = patched(backend_spec, global);
  std::vector<QuantSpec> specs{base};
  for (const NodeOverride& o : config.overrides) {
    if (!o.skip) specs.push_back(patched(base, weights ? o.weight : o.activation));
  }
  if (first_last_bits > 0) {
    QuantSpec first_last = base;
    first_last.scheme.bits = first_last_bits;
    specs.push_back(first_last);
  }
  return specs;
}

// Whether the spec's quantizer has an affine grid (scale and zero point).
bool isAffine(const QuantSpec& spec) {
  try {
    auto observer = spec.observer.empty()
                        ? nullptr
                        : quant::builtinObservers().create(spec.observer, "probe", spec.scheme,
                                                           spec.observer_options);
    return quant::builtinFakeQuantizers()
        .create(spec.fake_quantizer, "probe", spec.scheme, std::move(observer),
                spec.fake_quantizer_options)
        ->affine();
  } catch (const Error&) {
    return true;  // prepare() reports the bad spec itself, naming the tensor
  }
}

// Per-channel weights need QuantizeLinear's axis (13); every other grid (QuantizeLinear, or the
// arithmetic form with Round and Clip's input bounds) fits the floor.
int64_t weightOpset(const QuantSpec& spec) {
  return spec.scheme.perChannel() ? 13 : kQdqOpsetFloor;
}

}  // namespace

int64_t requiredDeployOpset(const backends::BackendConfig& backend, const QuantConfig& config) {
  const int first_last = backend.constraints.first_last_bits;
  const std::vector<QuantSpec> weights =
      specsOf(backend.weight, config.weight, config, true, first_last);
  // A grid without scale and zero point (NNIE's logarithmic one) is written as arithmetic
  // (Round, Clip with input bounds, Where): the floor covers it, as it covers per-tensor
  // activations.
  int64_t opset = kQdqOpsetFloor;
  for (const QuantSpec& w : weights) {
    if (isAffine(w)) opset = std::max(opset, weightOpset(w));
  }
  const backends::BiasRule& bias = backend.constraints.bias;
  if (bias.mode == backends::BiasRule::Mode::Own) {
    QuantSpec own;
    own.scheme = bias.scheme;
    opset = std::max(opset, weightOpset(own));
  }
  return opset;
}

}  // namespace qforge::passes
