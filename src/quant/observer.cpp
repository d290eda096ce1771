#include "quant/observer.h"

#include <optional>

#include "core/error.h"
#include "core/memory_order.h"

namespace qforge {
namespace quant {

Observer::Observer(std::string kind, std::string tensor_name, QScheme scheme,
                   bool supports_per_channel)
    : kind_(std::move(kind)), tensor_name_(std::move(tensor_name)), scheme_(scheme) {
  try {
    scheme_.validate();
  } catch (const Error& e) {
    fail(e.what());
  }
  if (scheme_.perChannel() && !supports_per_channel) {
    fail("per-channel quantization (axis " + std::to_string(scheme_.axis) +
         ") is not supported by this observer; use a per-tensor scheme");
  }
}

void Observer::fail(const std::string& message) const {
  throw Error(kind_ + " observer of tensor '" + tensor_name_ + "': " + message);
}

void Observer::observe(const at::Tensor& x) {
  if (!x.defined()) fail("observed an undefined tensor");
  const int64_t seen = batches_ + held_.batches;
  if (x.numel() == 0) {
    ++(holding_ ? held_.empty_tensors : empty_tensors_);
    return;
  }
  if (repeatIsNoOp() && seen > 0 && x._version() == last_version_ &&
      last_seen_.lock().get() == x.unsafeGetTensorImpl()) {
    ++(holding_ ? held_.batches : batches_);  // the same values again: nothing to learn
    return;
  }
  // Only read here: a detached alias (a new TensorImpl) matters only to a tensor autograd tracks.
  at::Tensor data = x.requires_grad() ? x.detach() : x;
  if (data.scalar_type() != at::kFloat) data = data.to(at::kFloat);
  // Per-tensor statistics do not depend on where a value sits: a dense activation in any layout
  // (channels-last) is scanned where it is, and put in memory order (a view, no copy) only for
  // an observer that keeps more than its range.
  if (scheme_.perChannel() || !data.is_non_overlapping_and_dense()) data = data.contiguous();
  int64_t channels = 0;
  if (scheme_.perChannel()) {
    if (scheme_.axis >= data.dim()) {
      fail("per-channel axis " + std::to_string(scheme_.axis) +
           " does not exist in a tensor of rank " + std::to_string(data.dim()));
    }
    channels = data.size(scheme_.axis);
    const int64_t before = held_.channels > 0 ? held_.channels : channels_;
    if (seen > 0 && channels != before) {
      fail("channel count changed from " + std::to_string(before) + " to " +
           std::to_string(channels));
    }
  }
  const MinMax stats = finiteMinMax(data);
  if (!stats.finite) {
    fail("batch " + std::to_string(seen + 1) + " contains " + std::to_string(countNonFinite(data)) +
         " NaN/Inf values out of " + std::to_string(data.numel()) +
         "; quantization ranges need finite data");
  }
  if (!holding_ && !scheme_.perChannel() && foldRange(stats.min, stats.max)) {
    ++batches_;
    ++folded_;
  } else {
    holdOrFold(scheme_.perChannel() ? data : inMemoryOrder(data), stats, channels);
  }
  if (repeatIsNoOp()) {
    last_seen_ =
        c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(x.getIntrusivePtr());
    last_version_ = x._version();
  }
}

void Observer::holdOrFold(const at::Tensor& data, const MinMax& stats, int64_t channels) {
  HeldObservations one;
  one.batches = 1;
  one.channels = channels;
  one.summaries.push_back(summarizeBatch(data, stats));
  if (holding_) {
    held_.batches += 1;
    held_.channels = channels;
    held_.summaries.push_back(std::move(one.summaries.front()));
  } else {
    fold(one);
  }
}

HeldObservations Observer::takeHeld() {
  HeldObservations taken = std::move(held_);
  held_ = HeldObservations();
  return taken;
}

void Observer::fold(const HeldObservations& observed) {
  if (observed.channels > 0) {
    if (batches_ > 0 && scheme_.perChannel() && observed.channels != channels_) {
      fail("channel count changed from " + std::to_string(channels_) + " to " +
           std::to_string(observed.channels));
    }
    channels_ = observed.channels;
  }
  for (const BatchSummary& summary : observed.summaries) {
    foldBatch(summary);
    ++folded_;
  }
  batches_ += observed.batches;
  empty_tensors_ += observed.empty_tensors;
}

std::pair<at::Tensor, at::Tensor> Observer::range() const {
  if (!hasData()) fail("no data observed yet; run calibration batches before asking for a range");
  return computeRange();
}

QParams Observer::qparams() const {
  if (!hasData()) {
    fail("no data observed yet; run calibration batches before asking for quantization parameters");
  }
  try {
    return computeQParams();
  } catch (const Error& e) {
    // Errors raised through fail() already name the observer and tensor.
    if (std::string(e.what()).rfind(kind_ + " observer of tensor", 0) == 0) throw;
    fail(e.what());
  }
}

QParams Observer::computeQParams() const {
  auto [lo, hi] = computeRange();
  return qparamsFromMinMax(lo, hi, scheme_);
}

void Observer::reset() {
  last_seen_.reset();
  last_version_ = -1;
  batches_ = 0;
  empty_tensors_ = 0;
  channels_ = 1;
  folded_ = 0;
  held_ = HeldObservations();
  resetState();
}

namespace {

// A [1] tensor holding `value`, written directly: per-tensor observers make two per activation
// and batch, and at::full's dispatch cost more than the write.
template <typename T>
at::Tensor oneValue(double value) {
  at::Tensor t = at::empty({1}, c10::CppTypeToScalarType<T>::value);
  *t.data_ptr<T>() = static_cast<T>(value);
  return t;
}

// A [1] float or double tensor (what per-tensor observers keep) as a double.
std::optional<double> oneValueOf(const at::Tensor& t) {
  if (!t.defined() || t.dim() != 1 || t.numel() != 1) return std::nullopt;
  if (t.scalar_type() == at::kDouble) return *t.data_ptr<double>();
  if (t.scalar_type() == at::kFloat) return *t.data_ptr<float>();
  return std::nullopt;
}

}  // namespace

std::pair<at::Tensor, at::Tensor> Observer::scalarRange(double lo, double hi) {
  return {oneValue<float>(lo), oneValue<float>(hi)};
}

void Observer::widenRange(at::Tensor& min, at::Tensor& max, const at::Tensor& lo,
                          const at::Tensor& hi) {
  if (!min.defined()) {
    min = lo;
    max = hi;
    return;
  }
  min = at::minimum(min, lo);
  max = at::maximum(max, hi);
}

void Observer::averageRange(at::Tensor& min, at::Tensor& max, const at::Tensor& lo,
                            const at::Tensor& hi, double ratio) {
  // One value each (per-tensor ranges): the same IEEE double arithmetic as below, without the
  // ten ATen calls that cost about as much as observing a small activation.
  const std::optional<double> lo1 = oneValueOf(lo), hi1 = oneValueOf(hi);
  const std::optional<double> min1 = oneValueOf(min), max1 = oneValueOf(max);
  if (lo1 && hi1 && (!min.defined() || (min1 && max1 && min.scalar_type() == at::kDouble))) {
    min = oneValue<double>(min.defined() ? *min1 * ratio + *lo1 * (1.0 - ratio) : *lo1);
    max = oneValue<double>(max.defined() ? *max1 * ratio + *hi1 * (1.0 - ratio) : *hi1);
    return;
  }
  const at::Tensor lo_d = lo.to(at::kDouble), hi_d = hi.to(at::kDouble);
  if (!min.defined()) {
    min = lo_d;
    max = hi_d;
    return;
  }
  min = min * ratio + lo_d * (1.0 - ratio);
  max = max * ratio + hi_d * (1.0 - ratio);
}

void Observer::checkEmaRatio(double ratio) const {
  if (!(ratio >= 0.0 && ratio < 1.0)) {
    fail("EMA ratio " + std::to_string(ratio) + " is not in [0, 1)");
  }
}

}  // namespace quant
}  // namespace qforge
