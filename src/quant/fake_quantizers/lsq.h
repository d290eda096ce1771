// LSQ (Esser et al., "Learned Step Size Quantization", ICLR 2020): learnable scale with gradient
// scale g = 1 / sqrt(numel * qmax), and LSQ+
// (Bhalgat et al. 2020) which also learns the zero point of asymmetric schemes. Forward and
// gradients are those of PyTorch's _fake_quantize_learnable_per_tensor_affine; the observer (an
// LsqInitObserver in the paper) initialises the parameters.
#pragma once

#include "quant/fake_quantizer.h"

namespace qforge {
namespace quant {

class LsqFakeQuantizer : public FakeQuantizer {
 public:
  struct Options {
    bool learn_zero_point = false;  // LSQ+; needs an asymmetric scheme
    bool grad_scaling = true;       // the 1 / sqrt(numel * qmax) factor
    // Which numel a per-channel scale's factor counts: the elements that scale sees (the paper's
    // rule applied per scale), or the whole tensor, as PyTorch's _LearnableFakeQuantize and
    // MQBench do, which gives per-channel scales sqrt(channels) times smaller steps.
    bool grad_scale_per_channel = true;
  };

  LsqFakeQuantizer(std::string name, QScheme scheme, std::unique_ptr<Observer> observer,
                   Options options);
  LsqFakeQuantizer(std::string name, QScheme scheme, std::unique_ptr<Observer> observer)
      : LsqFakeQuantizer(std::move(name), scheme, std::move(observer), Options{}) {}

  // Sets the parameters directly (e.g. from a checkpoint or a hand-picked initialisation).
  void setQParams(const QParams& params);

  // scale (and zero_point for LSQ+), float tensors [C] requiring grad. Stable across calibration
  // refreshes once created, so optimizers may hold them.
  std::vector<at::Tensor> parameters() const override;
  const at::Tensor& scale() const { return scale_; }
  const at::Tensor& zeroPoint() const { return zero_point_; }

  std::map<std::string, at::Tensor> state() const override;
  void loadState(const std::map<std::string, at::Tensor>& state) override;

 protected:
  at::Tensor quantize(const at::Tensor& x) override;
  void initFromObserver() override;
  bool hasParameters() const override { return scale_.defined(); }
  QParams currentQParams() const override;

 private:
  Options options_;
  at::Tensor scale_;       // float [C], requires grad
  at::Tensor zero_point_;  // float [C], requires grad for LSQ+
};

}  // namespace quant
}  // namespace qforge
