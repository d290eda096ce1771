#include "quant/fake_quantizers/dsq.h"

namespace qforge {
namespace quant {

at::Tensor dsqFakeQuantize(const at::Tensor& x, const at::Tensor& scale,
                           const at::Tensor& zero_point, int64_t qmin, int64_t qmax,
                           const at::Tensor& alpha) {
  // alpha in (0, 1) keeps k positive and finite.
  const at::Tensor a = alpha.clamp(1e-4, 1.0 - 1e-4);
  const at::Tensor tanh_scale = 1.0 / (1.0 - a);
  const at::Tensor k = at::log(2.0 / a - 1.0);
  const at::Tensor v =
      at::clamp(x / scale + zero_point, static_cast<double>(qmin), static_cast<double>(qmax));
  const at::Tensor base = v.detach().floor();
  const at::Tensor phi = base + 0.5 + 0.5 * tanh_scale * at::tanh(k * (v - base - 0.5));
  // Straight-through rounding: value round(phi), gradient of phi. phi and round(phi) are within
  // 0.5 of each other, so round(phi) - phi and the sum below are exact.
  const at::Tensor levels = phi + (at::round(phi) - phi).detach();
  return (levels - zero_point) * scale;
}

DsqFakeQuantizer::DsqFakeQuantizer(std::string name, QScheme scheme,
                                   std::unique_ptr<Observer> observer, double alpha,
                                   bool learn_alpha)
    : FakeQuantizer("DSQ", std::move(name), scheme, std::move(observer)),
      learn_alpha_(learn_alpha) {
  if (!(alpha > 0.0 && alpha < 1.0)) fail("alpha " + std::to_string(alpha) + " is not in (0, 1)");
  alpha_ = at::full({1}, alpha, at::kFloat).set_requires_grad(learn_alpha);
}

void DsqFakeQuantizer::setQParams(const QParams& params) {
  if (!params.defined() || params.scale.numel() != params.zero_point.numel()) {
    fail("scale and zero point must be set with the same number of values");
  }
  params_ = QParams{params.scale.detach().to(at::kFloat).reshape({-1}).clone(),
                    params.zero_point.detach().to(at::kLong).reshape({-1}).clone()};
}

std::vector<at::Tensor> DsqFakeQuantizer::parameters() const {
  if (learn_alpha_) return {alpha_};
  return {};
}

at::Tensor DsqFakeQuantizer::quantize(const at::Tensor& x) {
  std::vector<int64_t> shape(std::max<int64_t>(x.dim(), 1), 1);
  if (scheme().perChannel()) {
    if (scheme().axis >= x.dim() || x.size(scheme().axis) != params_.numel()) {
      fail("per-channel parameters do not match the input on axis " +
           std::to_string(scheme().axis));
    }
    shape[scheme().axis] = params_.numel();
  }
  const at::Tensor scale = params_.scale.to(x.scalar_type()).reshape(shape);
  const at::Tensor zp = params_.zero_point.to(x.scalar_type()).reshape(shape);
  return dsqFakeQuantize(x, scale, zp, scheme().qmin(), scheme().qmax(),
                         alpha_.to(x.scalar_type()));
}

void DsqFakeQuantizer::initFromObserver() {
  params_ = observer()->qparams();
}

std::map<std::string, at::Tensor> DsqFakeQuantizer::state() const {
  std::map<std::string, at::Tensor> s{{"alpha", alpha_.detach().clone()}};
  if (hasParameters()) {
    s["scale"] = params_.scale.clone();
    s["zero_point"] = params_.zero_point.clone();
  }
  return s;
}

void DsqFakeQuantizer::loadState(const std::map<std::string, at::Tensor>& state) {
  const at::Tensor scale = stateEntry(state, "scale");
  setQParams(QParams{scale, stateEntry(state, "zero_point", scale.numel())});
  at::NoGradGuard no_grad;
  alpha_.copy_(stateEntry(state, "alpha", 1));
}

}  // namespace quant
}  // namespace qforge
