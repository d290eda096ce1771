#include "quant/fake_quantizers/qdrop.h"

#include "core/error.h"

namespace qforge {
namespace quant {

namespace {

const FakeQuantizer& checked(const std::unique_ptr<FakeQuantizer>& inner) {
  if (inner == nullptr) throw Error("QDrop fake quantizer: needs a quantizer to wrap");
  return *inner;
}

}  // namespace

QDropFakeQuantizer::QDropFakeQuantizer(std::unique_ptr<FakeQuantizer> inner,
                                       double drop_probability,
                                       std::optional<at::Generator> generator)
    : FakeQuantizer("QDrop", checked(inner).name(), checked(inner).scheme(), nullptr),
      inner_(std::move(inner)),
      drop_probability_(0.0),
      generator_(std::move(generator)) {
  setDropProbability(drop_probability);
}

void QDropFakeQuantizer::setDropProbability(double p) {
  if (!(p >= 0.0 && p <= 1.0)) fail("drop probability " + std::to_string(p) + " is not in [0, 1]");
  drop_probability_ = p;
}

void QDropFakeQuantizer::setMode(FakeQuantMode mode) {
  inner_->setMode(mode);
}

at::Tensor QDropFakeQuantizer::forward(const at::Tensor& x) {
  const at::Tensor quantized = inner_->forward(x);
  if (!inner_->fakeQuantEnabled() || drop_probability_ == 0.0) return quantized;
  const c10::optional<at::Generator> generator =
      generator_ ? c10::optional<at::Generator>(*generator_) : c10::nullopt;
  const at::Tensor u = at::rand(x.sizes(), generator, x.options().requires_grad(false));
  return at::where(u < drop_probability_, x, quantized);
}

}  // namespace quant
}  // namespace qforge
