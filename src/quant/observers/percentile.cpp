#include "quant/observers/percentile.h"

#include <algorithm>
#include <cmath>

namespace qforge {
namespace quant {

namespace {

float maxAbs(const MinMax& stats) {
  return std::max(std::fabs(stats.min), std::fabs(stats.max));
}

}  // namespace

PercentileObserver::PercentileObserver(std::string tensor_name, QScheme scheme, double percentile)
    : Observer("Percentile", std::move(tensor_name), scheme, /*supports_per_channel=*/false),
      percentile_(percentile) {
  if (!(percentile > 0.0 && percentile <= 100.0)) {
    fail("percentile " + std::to_string(percentile) + " is not in (0, 100]");
  }
}

void PercentileObserver::observeBatch(const at::Tensor& x, const MinMax& stats) {
  histogram_.add(x, maxAbs(stats));
  min_ = hasData() ? std::min(min_, stats.min) : stats.min;
  max_ = hasData() ? std::max(max_, stats.max) : stats.max;
}

std::pair<at::Tensor, at::Tensor> PercentileObserver::computeRange() const {
  const double clip = histogram_.quantile(percentile_ / 100.0);
  return scalarRange(std::max<double>(min_, -clip), std::min<double>(max_, clip));
}

void PercentileObserver::resetState() {
  histogram_.clear();
}

EmaQuantileObserver::EmaQuantileObserver(std::string tensor_name, QScheme scheme, double percentile,
                                         double ratio, int64_t bins)
    : Observer("EmaQuantile", std::move(tensor_name), scheme, /*supports_per_channel=*/false),
      percentile_(percentile),
      ratio_(ratio),
      batch_histogram_(bins) {
  if (!(percentile > 0.0 && percentile <= 100.0)) {
    fail("percentile " + std::to_string(percentile) + " is not in (0, 100]");
  }
  checkEmaRatio(ratio);
}

void EmaQuantileObserver::observeBatch(const at::Tensor& x, const MinMax& stats) {
  batch_histogram_.clear();
  batch_histogram_.add(x, maxAbs(stats));
  const double clip = batch_histogram_.quantile(percentile_ / 100.0);
  const double lo = std::max<double>(stats.min, -clip);
  const double hi = std::min<double>(stats.max, clip);
  if (!hasData()) {
    min_ = lo;
    max_ = hi;
  } else {
    min_ = ratio_ * min_ + (1.0 - ratio_) * lo;
    max_ = ratio_ * max_ + (1.0 - ratio_) * hi;
  }
}

std::pair<at::Tensor, at::Tensor> EmaQuantileObserver::computeRange() const {
  return scalarRange(min_, max_);
}

void EmaQuantileObserver::resetState() {
  batch_histogram_.clear();
}

}  // namespace quant
}  // namespace qforge
