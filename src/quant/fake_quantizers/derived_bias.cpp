#include "quant/fake_quantizers/derived_bias.h"

#include <cmath>

#include "quant/fake_quantize.h"

namespace qforge {
namespace quant {

namespace {
// The base class validates a QScheme, which tops out at 16 bits; the bias grid is wider and is
// applied here in double precision, so the base only holds a descriptive stand-in.
QScheme standIn() {
  QScheme s;
  s.bits = 16;
  s.symmetric = true;
  return s;
}
}  // namespace

DerivedBiasFakeQuantizer::DerivedBiasFakeQuantizer(std::string name, int bits, FakeQuantizer* input,
                                                   FakeQuantizer* weight)
    : FakeQuantizer("DerivedBias", std::move(name), standIn(), nullptr),
      bits_(bits),
      input_(input),
      weight_(weight) {
  if (bits < 8 || bits > 32) fail("bias bits must be 8..32, not " + std::to_string(bits));
  if (input_ == nullptr || weight_ == nullptr) fail("needs its input and weight quantizers");
}

bool DerivedBiasFakeQuantizer::hasParameters() const {
  return true;
}

QParams DerivedBiasFakeQuantizer::currentQParams() const {
  const at::Tensor s_in = input_->qparams().scale.to(at::kDouble);
  const at::Tensor s_w = weight_->qparams().scale.to(at::kDouble);
  if (s_in.numel() != 1) fail("the input quantizer must be per-tensor");
  const at::Tensor scale = (s_w * s_in).to(at::kFloat);
  return QParams{scale, at::zeros({scale.numel()}, at::kLong)};
}

at::Tensor DerivedBiasFakeQuantizer::levels(const at::Tensor& bias) const {
  return levels(bias, currentQParams().scale.to(at::kDouble));
}

at::Tensor DerivedBiasFakeQuantizer::levels(const at::Tensor& bias, const at::Tensor& scale) const {
  if (scale.numel() != 1 && scale.numel() != bias.numel()) {
    fail("bias has " + std::to_string(bias.numel()) + " values but the weight quantizer has " +
         std::to_string(scale.numel()) + " channels");
  }
  const double limit = std::ldexp(1.0, bits_ - 1);
  return at::clamp(at::round(bias.to(at::kDouble) / scale), -limit, limit - 1);
}

at::Tensor DerivedBiasFakeQuantizer::quantize(const at::Tensor& x) {
  const at::Tensor scale = currentQParams().scale.to(at::kDouble);
  const at::Tensor q = levels(x, scale) * scale;
  // Straight-through: the value is quantized, the gradient passes to the float bias.
  return straightThrough(x, q.to(x.scalar_type()));
}

}  // namespace quant
}  // namespace qforge
