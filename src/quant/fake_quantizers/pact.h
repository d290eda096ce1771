// PACT (Choi et al. 2018): activations clipped to a learnable range, then quantized on the grid
// that range spans. Unsigned schemes clip to [0, alpha]; signed symmetric ones to [-alpha, alpha];
// signed asymmetric ones learn the lower bound beta as well ([beta, alpha]). Gradients are the
// paper's: dy/dx = 1 strictly inside the range, dy/dalpha = 1 where x >= alpha (and -1 where
// x <= -alpha for the symmetric variant), dy/dbeta = 1 where x <= beta; the dependence of the
// quantization step on alpha is ignored, as in the paper. Per-tensor.
#pragma once

#include "quant/fake_quantizer.h"

namespace qforge {
namespace quant {

class PactFakeQuantizer : public FakeQuantizer {
 public:
  // `observer` is optional: when given, calibration initialises alpha (and beta) from its range.
  PactFakeQuantizer(std::string name, QScheme scheme, double alpha = 10.0,
                    std::unique_ptr<Observer> observer = nullptr);

  std::vector<at::Tensor> parameters() const override;
  const at::Tensor& alpha() const { return alpha_; }
  const at::Tensor& beta() const { return beta_; }  // undefined unless learned

  std::map<std::string, at::Tensor> state() const override;
  void loadState(const std::map<std::string, at::Tensor>& state) override;

 protected:
  at::Tensor quantize(const at::Tensor& x) override;
  void initFromObserver() override;
  bool hasParameters() const override { return true; }
  QParams currentQParams() const override;

 private:
  std::pair<float, float> clipRange() const;

  at::Tensor alpha_;  // [1], requires grad
  at::Tensor beta_;   // [1], requires grad; asymmetric signed schemes only
};

}  // namespace quant
}  // namespace qforge
