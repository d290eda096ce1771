// DSQ (Gong et al., "Differentiable Soft Quantization", ICCV 2019). Inside each quantization bin
// the hard step is replaced for the backward pass by the tanh curve
//   phi(v) = floor(v) + 0.5 + 0.5 * tanh(k (v - floor(v) - 0.5)) / tanh(k / 2),
//   with 1 / tanh(k / 2) = 1 / (1 - alpha), i.e. k = ln(2 / alpha - 1),
// where v = clamp(x / s + z, qmin, qmax). The forward value is round(phi(v)), half to
// even (the hard quantization); gradients flow through phi to x and to the learnable alpha in (0,
// 1): the smaller alpha, the closer phi is to the staircase. Scale and zero point come from the
// observer. Per-tensor or per-channel.
#pragma once

#include "quant/fake_quantizer.h"

namespace qforge {
namespace quant {

class DsqFakeQuantizer : public FakeQuantizer {
 public:
  DsqFakeQuantizer(std::string name, QScheme scheme, std::unique_ptr<Observer> observer,
                   double alpha = 0.4, bool learn_alpha = true);

  void setQParams(const QParams& params);
  const at::Tensor& alpha() const { return alpha_; }
  std::vector<at::Tensor> parameters() const override;

  std::map<std::string, at::Tensor> state() const override;
  void loadState(const std::map<std::string, at::Tensor>& state) override;

 protected:
  at::Tensor quantize(const at::Tensor& x) override;
  void initFromObserver() override;
  bool hasParameters() const override { return params_.defined(); }
  QParams currentQParams() const override { return params_; }

 private:
  QParams params_;
  at::Tensor alpha_;  // [1]
  bool learn_alpha_;
};

// The DSQ function itself (autograd through ATen ops), for tests and custom modules. `scale` and
// `zero_point` broadcast against x (shape [1] or per-channel shaped); alpha is a [1] tensor.
at::Tensor dsqFakeQuantize(const at::Tensor& x, const at::Tensor& scale,
                           const at::Tensor& zero_point, int64_t qmin, int64_t qmax,
                           const at::Tensor& alpha);

}  // namespace quant
}  // namespace qforge
