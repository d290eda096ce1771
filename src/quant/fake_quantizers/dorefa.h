// DoReFa weight quantization (Zhou et al. 2016): w_q = 2 Q_k(tanh(w) / (2 max|tanh(w)|) + 1/2) - 1
// with Q_k(r) = round(r (2^k - 1)) / (2^k - 1) straight-through. Outputs lie on the 2^k levels
// {-1, -1 + 2/n, ..., 1} (n = 2^k - 1), i.e. integer levels 2j - n of scale 1/n, which need the
// (k+1)-bit grid [-n, n]: scheme() reports that grid, so deployment stores the levels exactly. No
// observer, no parameters; gradients flow through tanh and the max normalisation. Unsigned schemes
// are refused (the levels are signed).
#pragma once

#include "quant/fake_quantizer.h"

namespace qforge {
namespace quant {

class DorefaFakeQuantizer : public FakeQuantizer {
 public:
  DorefaFakeQuantizer(std::string name, QScheme scheme);

  std::map<std::string, at::Tensor> state() const override { return {}; }
  void loadState(const std::map<std::string, at::Tensor>&) override {}

 protected:
  at::Tensor quantize(const at::Tensor& x) override;
  void initFromObserver() override {}
  bool hasParameters() const override { return true; }
  // scale 1/n, zero point 0: the output levels are the odd or even integers 2j - n times 1/n,
  // on the restricted (k+1)-bit grid [-n, n] that scheme() reports (k: the bits asked for).
  QParams currentQParams() const override;

 private:
  double levels_;  // n = 2^k - 1
};

}  // namespace quant
}  // namespace qforge
