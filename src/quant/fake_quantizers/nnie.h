// HiSilicon NNIE logarithmic quantization, as MQBench's NNIEFakeQuantize: with
// z = round(16 log2(data_max)) - 127, positive values map to 2^((clamp(round(16 log2 x - z),
// 0, 127) + z) / 16), negative ones to -2^((clamp(round(16 log2 -x - z), 1, 127) + z) / 16), and
// |x| below the smallest level (x < 2^((z - 16) / 16) for positive, x > -2^((z - 15) / 16) for
// negative) to 0. Computed in double; straight-through gradient. data_max is the running max |x|
// seen by the observer. The grid is logarithmic, so there is no affine scale / zero point.
#pragma once

#include "quant/fake_quantizer.h"

namespace qforge {
namespace quant {

class NnieFakeQuantizer : public FakeQuantizer {
 public:
  NnieFakeQuantizer(std::string name, QScheme scheme, std::unique_ptr<Observer> observer);

  void setDataMax(double data_max);
  double dataMax() const { return data_max_; }
  bool affine() const override { return false; }

  std::map<std::string, at::Tensor> state() const override;
  void loadState(const std::map<std::string, at::Tensor>& state) override;

 protected:
  at::Tensor quantize(const at::Tensor& x) override;
  void initFromObserver() override;
  bool hasParameters() const override { return data_max_ > 0.0; }
  // Throws: a logarithmic grid has no affine parameters; deployment uses dataMax().
  QParams currentQParams() const override;

 private:
  double data_max_ = 0.0;
};

// The grid's offset z = round(16 log2(data_max)) - 127: code c stands for 2^((c + z) / 16).
double nnieGridOffset(double data_max);

// The NNIE quantization function on a float/double tensor (no autograd).
at::Tensor nnieLogQuantize(const at::Tensor& x, double data_max);

}  // namespace quant
}  // namespace qforge
