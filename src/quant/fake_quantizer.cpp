#include "quant/fake_quantizer.h"

#include "core/error.h"
#include "core/memory_order.h"

namespace qforge {
namespace quant {

const char* toString(FakeQuantMode mode) {
  switch (mode) {
    case FakeQuantMode::Float:
      return "float";
    case FakeQuantMode::Calibration:
      return "calibration";
    case FakeQuantMode::Quantization:
      return "quantization";
    case FakeQuantMode::CalibrateAndQuantize:
      return "calibrate-and-quantize";
  }
  return "?";
}

FakeQuantizer::FakeQuantizer(std::string kind, std::string name, QScheme scheme,
                             std::unique_ptr<Observer> observer)
    : kind_(std::move(kind)),
      name_(std::move(name)),
      scheme_(scheme),
      observer_(std::move(observer)) {
  try {
    scheme_.validate();
  } catch (const Error& e) {
    fail(e.what());
  }
  if (observer_ != nullptr) {
    if (observer_->scheme().axis != scheme_.axis || observer_->scheme().bits != scheme_.bits ||
        observer_->scheme().is_unsigned != scheme_.is_unsigned ||
        observer_->scheme().symmetric != scheme_.symmetric) {
      fail("observer scheme (" + observer_->scheme().str() + ") differs from the quantizer's (" +
           scheme_.str() + ")");
    }
    observer_enabled_ = true;
    fake_quant_enabled_ = false;  // calibrate first
  }
}

void FakeQuantizer::fail(const std::string& message) const {
  throw Error(kind_ + " fake quantizer '" + name_ + "': " + message);
}

void FakeQuantizer::setMode(FakeQuantMode mode) {
  if ((mode == FakeQuantMode::Calibration || mode == FakeQuantMode::CalibrateAndQuantize) &&
      observer_ == nullptr) {
    fail(std::string("mode '") + toString(mode) +
         "' needs an observer, and this quantizer has none");
  }
  observer_enabled_ =
      mode == FakeQuantMode::Calibration || mode == FakeQuantMode::CalibrateAndQuantize;
  fake_quant_enabled_ =
      mode == FakeQuantMode::Quantization || mode == FakeQuantMode::CalibrateAndQuantize;
  // Pull calibration results now, so parameters() is complete before the first training step.
  if (fake_quant_enabled_) refreshFromObserver();
}

FakeQuantMode FakeQuantizer::mode() const {
  if (observer_enabled_) {
    return fake_quant_enabled_ ? FakeQuantMode::CalibrateAndQuantize : FakeQuantMode::Calibration;
  }
  return fake_quant_enabled_ ? FakeQuantMode::Quantization : FakeQuantMode::Float;
}

void FakeQuantizer::refreshFromObserver() {
  if (observer_ == nullptr || !observer_->hasData()) return;
  if (observer_->batches() == pulled_batches_) return;
  initFromObserver();
  pulled_batches_ = observer_->batches();
}

at::Tensor FakeQuantizer::forward(const at::Tensor& strided_x) {
  // A strided view (a channel slice of a channels-last activation) is made dense once, here: the
  // observer and the kernel read it without a copy of their own, and the convolution that reads
  // a quantizer's output, which needs it dense too, gets it ready.
  const at::Tensor x = denseInOwnLayout(strided_x);
  if (observer_enabled_ && observer_ != nullptr) observer_->observe(x);
  if (!fake_quant_enabled_) return x;
  refreshFromObserver();
  if (!hasParameters()) {
    fail("quantization is on but no parameters were calibrated or loaded; run calibration first");
  }
  return quantize(x);
}

QParams FakeQuantizer::qparams() {
  refreshFromObserver();
  if (!hasParameters()) fail("no quantization parameters yet; run calibration first");
  return currentQParams();
}

at::Tensor FakeQuantizer::stateEntry(const std::map<std::string, at::Tensor>& state,
                                     const std::string& key, int64_t numel) const {
  auto it = state.find(key);
  if (it == state.end() || !it->second.defined()) fail("state has no '" + key + "'");
  const at::Tensor& t = it->second;
  if (t.dim() != 1 || (numel >= 0 && t.numel() != numel)) {
    fail("state '" + key + "' has shape " + c10::str(t.sizes()) + ", expected [" +
         (numel >= 0 ? std::to_string(numel) : std::string("C")) + "]");
  }
  return t.detach().clone();
}

void setMode(const std::vector<FakeQuantizer*>& quantizers, FakeQuantMode mode) {
  for (FakeQuantizer* q : quantizers) {
    if (q != nullptr) q->setMode(mode);
  }
}

}  // namespace quant
}  // namespace qforge
