#include "quant/fake_quantizers/dorefa.h"

namespace qforge {
namespace quant {

namespace {

// The k-bit DoReFa levels (2j - n) / n, n = 2^k - 1, are every other integer of the restricted
// (k+1)-bit grid [-n, n] at scale 1/n; no k-bit grid with an integer zero point holds them (on
// [-2^(k-1), 2^(k-1) - 1] at scale 2/n the zero point would be n/2). The quantizer therefore
// describes itself with that grid, so deployment stores the levels exactly.
QScheme levelGrid(QScheme scheme) {
  // Unsigned or too wide: left for the constructor to refuse with its own message.
  if (scheme.bits >= 16 || scheme.is_unsigned) return scheme;
  scheme.bits += 1;
  scheme.symmetric = true;
  scheme.symmetric_range = true;
  scheme.full_range_clamp = false;
  return scheme;
}

}  // namespace

DorefaFakeQuantizer::DorefaFakeQuantizer(std::string name, QScheme scheme)
    : FakeQuantizer("DoReFa", std::move(name), levelGrid(scheme), nullptr),
      levels_(static_cast<double>((int64_t{1} << scheme.bits) - 1)) {
  if (scheme.is_unsigned) fail("DoReFa weights are signed; use a signed scheme");
  if (scheme.perChannel()) fail("DoReFa normalises the whole tensor; use a per-tensor scheme");
  if (scheme.bits >= 16) fail("DoReFa needs one bit more than its levels; use at most 15 bits");
}

QParams DorefaFakeQuantizer::currentQParams() const {
  return makeQParams({static_cast<float>(1.0 / levels_)}, {0});
}

at::Tensor DorefaFakeQuantizer::quantize(const at::Tensor& x) {
  const double n = levels_;
  const at::Tensor t = at::tanh(x);
  // A tensor of zeros would divide by zero; the tiny floor leaves every other tensor unchanged.
  const at::Tensor r = t / (2.0 * at::clamp_min(t.abs().max(), 1e-12)) + 0.5;
  const at::Tensor scaled = r * n;
  const at::Tensor rounded = scaled + (at::round(scaled) - scaled).detach();
  return 2.0 * (rounded / n) - 1.0;
}

}  // namespace quant
}  // namespace qforge
