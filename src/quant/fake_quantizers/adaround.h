// AdaRound (Nagel et al., "Up or Down? Adaptive Rounding for Post-Training Quantization", ICML
// 2020) weight quantizer. The rounding of each weight is a learnable variable V through the
// rectified sigmoid h(V) = clamp(sigmoid(V) (zeta - gamma) + gamma, 0, 1), zeta = 1.1,
// gamma = -0.1:
//   soft: w_q = s (clamp(floor(w / s) + h(V) + z, qmin, qmax) - z)
//   hard: the same with h(V) replaced by [V >= 0]
// V is initialised so that h(V) equals the fractional part of w / s, which makes the hard mode
// reproduce round-to-nearest (ties up). Scale and zero point come from the observer (typically
// MinMax or MSE) and stay fixed. Before initRounding() the quantizer rounds to nearest like the
// fixed quantizer. Per-tensor or per-channel.
#pragma once

#include "quant/fake_quantizer.h"

namespace qforge {
namespace quant {

class AdaRoundFakeQuantizer : public FakeQuantizer {
 public:
  enum class Rounding { Nearest, Soft, Hard };

  AdaRoundFakeQuantizer(std::string name, QScheme scheme, std::unique_ptr<Observer> observer);

  void setQParams(const QParams& params);
  // Creates V for `weight` (needs scale and zero point) and switches to soft rounding.
  void initRounding(const at::Tensor& weight);
  void setRounding(Rounding rounding);
  Rounding rounding() const { return rounding_; }

  // h(V), the soft rounding offsets in [0, 1].
  at::Tensor softOffsets() const;
  // AdaRound's rounding regulariser sum(1 - |2 h(V) - 1|^beta), which pushes h(V) to 0 or 1.
  at::Tensor roundingRegularizer(double beta) const;
  // The same for offsets `h` computed once (softOffsets()) and shared with roundWith().
  static at::Tensor regularizer(const at::Tensor& h, double beta);
  // `weight` rounded down to its grid plus `offsets` in [0, 1] (h(V) soft, [V >= 0] hard):
  // s (clamp(floor(w / s) + offsets + z, qmin, qmax) - z).
  at::Tensor roundWith(const at::Tensor& weight, const at::Tensor& offsets) const;

  const at::Tensor& roundingVariable() const { return v_; }
  std::vector<at::Tensor> parameters() const override;

  std::map<std::string, at::Tensor> state() const override;
  void loadState(const std::map<std::string, at::Tensor>& state) override;

  static constexpr double kZeta = 1.1;
  static constexpr double kGamma = -0.1;

 protected:
  at::Tensor quantize(const at::Tensor& x) override;
  void initFromObserver() override;
  bool hasParameters() const override { return params_.defined(); }
  QParams currentQParams() const override { return params_; }

 private:
  std::pair<at::Tensor, at::Tensor> broadcastParams(const at::Tensor& like) const;

  QParams params_;
  at::Tensor v_;
  Rounding rounding_ = Rounding::Nearest;
};

}  // namespace quant
}  // namespace qforge
