// TQT (Jain et al., "Trained Quantization Thresholds", MLSys 2020): symmetric power-of-two
// quantization whose threshold is trained in the log domain. With l = log2 t,
//   s = 2^ceil(l) / 2^(b-1) (signed) or 2^ceil(l) / 2^b (unsigned),  q(x) = clamp(round(x/s)) * s,
// and the paper's gradients (ceil and round straight-through):
//   dq/dl = s ln2 * (round(x/s) - x/s) inside the grid, s ln2 * qmin or qmax where clipped,
//   dq/dx = 1 inside the grid, 0 where clipped.
// MQBench's TqtFakeQuantize never trains the threshold; this one does. Per-tensor.
#pragma once

#include "quant/fake_quantizer.h"

namespace qforge {
namespace quant {

class TqtFakeQuantizer : public FakeQuantizer {
 public:
  // `observer` initialises t from its range (max |x|) during calibration.
  TqtFakeQuantizer(std::string name, QScheme scheme, std::unique_ptr<Observer> observer);

  void setThreshold(double threshold);
  // log2 t, [1] float requiring grad.
  const at::Tensor& log2Threshold() const { return log2_t_; }
  std::vector<at::Tensor> parameters() const override;

  std::map<std::string, at::Tensor> state() const override;
  void loadState(const std::map<std::string, at::Tensor>& state) override;

 protected:
  at::Tensor quantize(const at::Tensor& x) override;
  void initFromObserver() override;
  bool hasParameters() const override { return initialized_; }
  QParams currentQParams() const override;

 private:
  float currentScale() const;

  at::Tensor log2_t_;
  bool initialized_ = false;
};

}  // namespace quant
}  // namespace qforge
