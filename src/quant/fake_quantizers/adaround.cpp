#include "quant/fake_quantizers/adaround.h"

#include "quant/fake_quantize.h"

namespace qforge {
namespace quant {

AdaRoundFakeQuantizer::AdaRoundFakeQuantizer(std::string name, QScheme scheme,
                                             std::unique_ptr<Observer> observer)
    : FakeQuantizer("AdaRound", std::move(name), scheme, std::move(observer)) {}

void AdaRoundFakeQuantizer::setQParams(const QParams& params) {
  if (!params.defined() || params.scale.numel() != params.zero_point.numel()) {
    fail("scale and zero point must be set with the same number of values");
  }
  params_ = QParams{params.scale.detach().to(at::kFloat).reshape({-1}).clone(),
                    params.zero_point.detach().to(at::kLong).reshape({-1}).clone()};
}

void AdaRoundFakeQuantizer::initFromObserver() {
  params_ = observer()->qparams();
}

std::pair<at::Tensor, at::Tensor> AdaRoundFakeQuantizer::broadcastParams(
    const at::Tensor& like) const {
  std::vector<int64_t> shape(std::max<int64_t>(like.dim(), 1), 1);
  if (scheme().perChannel()) {
    if (scheme().axis >= like.dim() || like.size(scheme().axis) != params_.numel()) {
      fail("per-channel parameters do not match the weight on axis " +
           std::to_string(scheme().axis));
    }
    shape[scheme().axis] = params_.numel();
  } else if (params_.numel() != 1) {
    fail("per-tensor scheme with " + std::to_string(params_.numel()) + " scales");
  }
  return {params_.scale.to(like.scalar_type()).reshape(shape),
          params_.zero_point.to(like.scalar_type()).reshape(shape)};
}

void AdaRoundFakeQuantizer::initRounding(const at::Tensor& weight) {
  refreshFromObserver();
  if (!hasParameters()) fail("initRounding needs scale and zero point; calibrate first");
  const at::Tensor w = weight.detach();
  auto [scale, zp] = broadcastParams(w);
  (void)zp;
  const at::Tensor ratio = w / scale;
  const at::Tensor rest = ratio - at::floor(ratio);  // in [0, 1)
  // sigmoid(V) (zeta - gamma) + gamma = rest  <=>  V = -log((zeta - gamma) / (rest - gamma) - 1).
  v_ = (-at::log((kZeta - kGamma) / (rest - kGamma) - 1.0)).set_requires_grad(true);
  rounding_ = Rounding::Soft;
}

void AdaRoundFakeQuantizer::setRounding(Rounding rounding) {
  if (rounding != Rounding::Nearest && !v_.defined()) {
    fail("soft or hard rounding needs initRounding(weight) first");
  }
  rounding_ = rounding;
}

at::Tensor AdaRoundFakeQuantizer::softOffsets() const {
  if (!v_.defined()) fail("rounding variables not initialised; call initRounding(weight)");
  return at::clamp(at::sigmoid(v_) * (kZeta - kGamma) + kGamma, 0.0, 1.0);
}

at::Tensor AdaRoundFakeQuantizer::roundingRegularizer(double beta) const {
  return regularizer(softOffsets(), beta);
}

at::Tensor AdaRoundFakeQuantizer::regularizer(const at::Tensor& h, double beta) {
  return (1.0 - (2.0 * h - 1.0).abs().pow(beta)).sum();
}

std::vector<at::Tensor> AdaRoundFakeQuantizer::parameters() const {
  if (v_.defined()) return {v_};
  return {};
}

at::Tensor AdaRoundFakeQuantizer::quantize(const at::Tensor& x) {
  if (rounding_ == Rounding::Nearest) return fakeQuantize(x, params_, scheme());
  if (x.sizes() != v_.sizes()) {
    fail("input shape " + c10::str(x.sizes()) + " differs from the weight the rounding was " +
         "initialised for " + c10::str(v_.sizes()));
  }
  return roundWith(x, rounding_ == Rounding::Soft ? softOffsets() : (v_.detach() >= 0));
}

at::Tensor AdaRoundFakeQuantizer::roundWith(const at::Tensor& weight,
                                            const at::Tensor& offsets) const {
  auto [scale, zp] = broadcastParams(weight);
  const at::Tensor base = at::floor(weight.detach() / scale);
  const at::Tensor levels =
      at::clamp(base + offsets.to(weight.scalar_type()) + zp, static_cast<double>(scheme().qmin()),
                static_cast<double>(scheme().qmax()));
  return (levels - zp) * scale;
}

std::map<std::string, at::Tensor> AdaRoundFakeQuantizer::state() const {
  std::map<std::string, at::Tensor> s;
  if (hasParameters()) {
    s["scale"] = params_.scale.clone();
    s["zero_point"] = params_.zero_point.clone();
  }
  if (v_.defined()) s["rounding_variable"] = v_.detach().clone();
  return s;
}

void AdaRoundFakeQuantizer::loadState(const std::map<std::string, at::Tensor>& state) {
  const at::Tensor scale = stateEntry(state, "scale");
  setQParams(QParams{scale, stateEntry(state, "zero_point", scale.numel())});
  auto it = state.find("rounding_variable");
  if (it != state.end() && it->second.defined()) {
    v_ = it->second.detach().clone().set_requires_grad(true);
    rounding_ = Rounding::Soft;
  }
}

}  // namespace quant
}  // namespace qforge
