#include "quant/observers/kl.h"

#include <algorithm>
#include <cmath>

namespace qforge {
namespace quant {

namespace {

// The internal histogram keeps 8 fine bins per calibration bin (4 to 8 over the observed range,
// its width being a power of two), so resampling splits at most one fine bin per calibration bin.
constexpr int64_t kOversampling = 8;

}  // namespace

KlObserver::KlObserver(std::string tensor_name, QScheme scheme, int64_t bins,
                       int64_t quantized_bins)
    : Observer("Kl", std::move(tensor_name), scheme, /*supports_per_channel=*/false),
      bins_(bins),
      quantized_bins_(quantized_bins > 0 ? quantized_bins : scheme.qmax() + 1),
      histogram_(std::max<int64_t>(bins, 2) * kOversampling) {
  if (quantized_bins_ < 2 || bins_ < quantized_bins_) {
    fail("need at least as many histogram bins (" + std::to_string(bins_) +
         ") as quantized bins (" + std::to_string(quantized_bins_) + ")");
  }
}

BatchSummary KlObserver::summarizeBatch(const at::Tensor& x, const MinMax& stats) {
  AbsHistogram batch(histogram_.bins());
  batch.add(x, std::max(std::fabs(stats.min), std::fabs(stats.max)));
  return {batch.toTensor(), at::tensor({stats.min, stats.max}, at::kFloat)};
}

void KlObserver::foldBatch(const BatchSummary& summary) {
  histogram_.merge(AbsHistogram::fromTensor(summary.at(0)));
  const float lo = summary.at(1)[0].item<float>(), hi = summary.at(1)[1].item<float>();
  min_ = hasFolded() ? std::min(min_, lo) : lo;
  max_ = hasFolded() ? std::max(max_, hi) : hi;
}

std::vector<double> KlObserver::calibrationHistogram() const {
  return histogram_.resample(bins_, histogram_.maxAbs());
}

EntropyCalibration KlObserver::calibration() const {
  if (!hasData()) fail("no data observed yet");
  if (histogram_.maxAbs() == 0.0) return EntropyCalibration{bins_, 0.0, 0.0};
  return entropyCalibrate(calibrationHistogram(), histogram_.maxAbs() / static_cast<double>(bins_),
                          quantized_bins_);
}

std::pair<at::Tensor, at::Tensor> KlObserver::computeRange() const {
  const double clip = calibration().threshold;
  return scalarRange(std::max<double>(min_, -clip), std::min<double>(max_, clip));
}

void KlObserver::resetState() {
  histogram_.clear();
}

}  // namespace quant
}  // namespace qforge
