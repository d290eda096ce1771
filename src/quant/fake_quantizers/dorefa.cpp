#include "quant/fake_quantizers/dorefa.h"

namespace qforge {
namespace quant {

DorefaFakeQuantizer::DorefaFakeQuantizer(std::string name, QScheme scheme)
    : FakeQuantizer("DoReFa", std::move(name), scheme, nullptr) {
  if (scheme.is_unsigned) fail("DoReFa weights are signed; use a signed scheme");
  if (scheme.perChannel()) fail("DoReFa normalises the whole tensor; use a per-tensor scheme");
}

QParams DorefaFakeQuantizer::currentQParams() const {
  const double n = static_cast<double>((int64_t{1} << scheme().bits) - 1);
  return makeQParams({static_cast<float>(1.0 / n)}, {0});
}

at::Tensor DorefaFakeQuantizer::quantize(const at::Tensor& x) {
  const double n = static_cast<double>((int64_t{1} << scheme().bits) - 1);
  const at::Tensor t = at::tanh(x);
  // A tensor of zeros would divide by zero; the tiny floor leaves every other tensor unchanged.
  const at::Tensor r = t / (2.0 * at::clamp_min(t.abs().max(), 1e-12)) + 0.5;
  const at::Tensor scaled = r * n;
  const at::Tensor rounded = scaled + (at::round(scaled) - scaled).detach();
  return 2.0 * (rounded / n) - 1.0;
}

}  // namespace quant
}  // namespace qforge
