// Fixed affine fake quantizer: scale and zero point come from the observer (or are set directly);
// straight-through estimator with clip mask. Per-tensor or per-channel.
#pragma once

#include "quant/fake_quantizer.h"

namespace qforge {
namespace quant {

class FixedFakeQuantizer : public FakeQuantizer {
 public:
  FixedFakeQuantizer(std::string name, QScheme scheme, std::unique_ptr<Observer> observer);

  void setQParams(const QParams& params);

  // Allocation-free forward for evaluation and calibration loops (no autograd).
  void quantizeInto(const at::Tensor& x, at::Tensor& out);
  void quantizeInPlace(at::Tensor& x);

  std::map<std::string, at::Tensor> state() const override;
  void loadState(const std::map<std::string, at::Tensor>& state) override;

 protected:
  at::Tensor quantize(const at::Tensor& x) override;
  void initFromObserver() override;
  bool hasParameters() const override { return params_.defined(); }
  QParams currentQParams() const override { return params_; }

 private:
  QParams params_;
};

}  // namespace quant
}  // namespace qforge
