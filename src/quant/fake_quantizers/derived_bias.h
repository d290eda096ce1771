// Bias quantizer of hardware that adds the bias inside the int32 accumulator: scale =
// s_input * s_weight (per output channel), zero point 0, `bits`-wide signed grid. It owns no
// parameters: they follow the input and weight quantizers it is wired to.
#pragma once

#include "quant/fake_quantizer.h"

namespace qforge {
namespace quant {

class DerivedBiasFakeQuantizer : public FakeQuantizer {
 public:
  // `input` and `weight` must outlive this quantizer. bits: 8..32.
  DerivedBiasFakeQuantizer(std::string name, int bits, FakeQuantizer* input, FakeQuantizer* weight);

  int bits() const { return bits_; }
  // The bias as integer levels round(b / scale) clamped to the signed `bits` grid (double tensor).
  at::Tensor levels(const at::Tensor& bias) const;
  std::map<std::string, at::Tensor> state() const override { return {}; }
  void loadState(const std::map<std::string, at::Tensor>&) override {}

 protected:
  at::Tensor quantize(const at::Tensor& x) override;
  void initFromObserver() override {}
  bool hasParameters() const override;
  QParams currentQParams() const override;

 private:
  at::Tensor levels(const at::Tensor& bias, const at::Tensor& scale) const;

  int bits_;
  FakeQuantizer* input_;
  FakeQuantizer* weight_;
};

}  // namespace quant
}  // namespace qforge
