#include "quant/fake_quantizers/fixed.h"

#include "quant/fake_quantize.h"

namespace qforge {
namespace quant {

FixedFakeQuantizer::FixedFakeQuantizer(std::string name, QScheme scheme,
                                       std::unique_ptr<Observer> observer)
    : FakeQuantizer("Fixed", std::move(name), scheme, std::move(observer)) {}

void FixedFakeQuantizer::setQParams(const QParams& params) {
  if (!params.defined() || params.scale.numel() != params.zero_point.numel()) {
    fail("scale and zero point must be set with the same number of values");
  }
  params_ = QParams{params.scale.detach().to(at::kFloat).reshape({-1}).clone(),
                    params.zero_point.detach().to(at::kLong).reshape({-1}).clone()};
}

at::Tensor FixedFakeQuantizer::quantize(const at::Tensor& x) {
  return fakeQuantize(x, params_, scheme());
}

void FixedFakeQuantizer::quantizeInto(const at::Tensor& x, at::Tensor& out) {
  refreshFromObserver();
  if (!hasParameters()) fail("no quantization parameters yet; run calibration first");
  fakeQuantizeOut(x, params_, scheme(), out);
}

void FixedFakeQuantizer::quantizeInPlace(at::Tensor& x) {
  refreshFromObserver();
  if (!hasParameters()) fail("no quantization parameters yet; run calibration first");
  fakeQuantizeInPlace(x, params_, scheme());
}

void FixedFakeQuantizer::initFromObserver() {
  params_ = observer()->qparams();
}

std::map<std::string, at::Tensor> FixedFakeQuantizer::state() const {
  if (!hasParameters()) return {};
  return {{"scale", params_.scale.clone()}, {"zero_point", params_.zero_point.clone()}};
}

void FixedFakeQuantizer::loadState(const std::map<std::string, at::Tensor>& state) {
  const at::Tensor scale = stateEntry(state, "scale");
  setQParams(QParams{scale, stateEntry(state, "zero_point", scale.numel())});
}

}  // namespace quant
}  // namespace qforge
