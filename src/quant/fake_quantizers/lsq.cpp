#include "quant/fake_quantizers/lsq.h"

#include <cmath>

#include "quant/fake_quantize.h"

namespace qforge {
namespace quant {

LsqFakeQuantizer::LsqFakeQuantizer(std::string name, QScheme scheme,
                                   std::unique_ptr<Observer> observer, Options options)
    : FakeQuantizer(options.learn_zero_point ? "LSQ+" : "LSQ", std::move(name), scheme,
                    std::move(observer)),
      options_(options) {
  if (options.learn_zero_point && scheme.symmetric) {
    fail("LSQ+ learns a zero point, which a symmetric scheme fixes at 0; use an asymmetric scheme");
  }
}

void LsqFakeQuantizer::setQParams(const QParams& params) {
  if (!params.defined() || params.scale.numel() != params.zero_point.numel()) {
    fail("scale and zero point must be set with the same number of values");
  }
  const at::Tensor scale = params.scale.detach().to(at::kFloat).reshape({-1});
  const at::Tensor zp = params.zero_point.detach().to(at::kFloat).reshape({-1});
  at::NoGradGuard no_grad;
  if (scale_.defined() && scale_.sizes() == scale.sizes()) {
    // Copy in place so optimizers holding the parameters keep working.
    scale_.copy_(scale);
    zero_point_.copy_(zp);
  } else {
    scale_ = scale.clone().set_requires_grad(true);
    zero_point_ = zp.clone().set_requires_grad(options_.learn_zero_point);
  }
}

void LsqFakeQuantizer::initFromObserver() {
  setQParams(observer()->qparams());
}

std::vector<at::Tensor> LsqFakeQuantizer::parameters() const {
  if (!scale_.defined()) return {};
  if (options_.learn_zero_point) return {scale_, zero_point_};
  return {scale_};
}

at::Tensor LsqFakeQuantizer::quantize(const at::Tensor& x) {
  {
    // An optimizer step may have pushed the scale through zero, or the zero point off the grid.
    // variable_data() edits the values without bumping the autograd version counter (like
    // PyTorch's .data), so graphs of earlier forwards that saved these tensors stay valid.
    at::NoGradGuard no_grad;
    at::Tensor scale = scale_.variable_data();
    if ((scale < scheme().eps).any().item<bool>()) scale.abs_().clamp_min_(scheme().eps);
    at::Tensor zp = zero_point_.variable_data();
    if (scheme().symmetric) {
      zp.zero_();
    } else {
      zp.clamp_(static_cast<double>(scheme().qmin()), static_cast<double>(scheme().qmax()));
    }
  }
  double factor = 1.0;
  if (options_.grad_scaling) {
    double counted = static_cast<double>(x.numel());
    if (options_.grad_scale_per_channel) counted /= static_cast<double>(scale_.numel());
    factor = 1.0 / std::sqrt(counted * static_cast<double>(scheme().qmax()));
  }
  return learnableFakeQuantize(x, scale_, zero_point_, scheme(), factor);
}

QParams LsqFakeQuantizer::currentQParams() const {
  const at::Tensor zp =
      zero_point_.detach()
          .round()
          .clamp(static_cast<double>(scheme().qmin()), static_cast<double>(scheme().qmax()))
          .to(at::kLong);
  return QParams{scale_.detach().clone(), zp};
}

std::map<std::string, at::Tensor> LsqFakeQuantizer::state() const {
  if (!hasParameters()) return {};
  return {{"scale", scale_.detach().clone()}, {"zero_point", zero_point_.detach().clone()}};
}

void LsqFakeQuantizer::loadState(const std::map<std::string, at::Tensor>& state) {
  const at::Tensor scale = stateEntry(state, "scale");
  setQParams(QParams{scale, stateEntry(state, "zero_point", scale.numel())});
}

}  // namespace quant
}  // namespace qforge
