// QDrop (Wei et al., ICLR 2022): during reconstruction or QAT each element takes its float value
// with probability p and its fake-quantized value otherwise, so the model learns flat minima
// with respect to activation quantization. Wraps any fake quantizer; modes, parameters and state
// are the wrapped quantizer's. Set p to 0 for evaluation.
#pragma once

#include <optional>

#include "quant/fake_quantizer.h"

namespace qforge {
namespace quant {

class QDropFakeQuantizer : public FakeQuantizer {
 public:
  QDropFakeQuantizer(std::unique_ptr<FakeQuantizer> inner, double drop_probability = 0.5,
                     std::optional<at::Generator> generator = std::nullopt);

  at::Tensor forward(const at::Tensor& x) override;
  void setMode(FakeQuantMode mode) override;
  void setDropProbability(double p);
  double dropProbability() const { return drop_probability_; }
  FakeQuantizer& inner() const { return *inner_; }

  std::vector<at::Tensor> parameters() const override { return inner_->parameters(); }
  std::map<std::string, at::Tensor> state() const override { return inner_->state(); }
  void loadState(const std::map<std::string, at::Tensor>& state) override {
    inner_->loadState(state);
  }

 protected:
  at::Tensor quantize(const at::Tensor& x) override { return inner_->forward(x); }
  void initFromObserver() override {}
  bool hasParameters() const override { return true; }
  QParams currentQParams() const override { return inner_->qparams(); }

 private:
  std::unique_ptr<FakeQuantizer> inner_;
  double drop_probability_;
  std::optional<at::Generator> generator_;
};

}  // namespace quant
}  // namespace qforge
