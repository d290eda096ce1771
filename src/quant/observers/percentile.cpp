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
    : AbsHistogramObserver("Percentile", std::move(tensor_name), scheme,
                           AbsHistogram::kDefaultBins),
      percentile_(percentile) {
  if (!(percentile > 0.0 && percentile <= 100.0)) {
    fail("percentile " + std::to_string(percentile) + " is not in (0, 100]");
  }
}

std::pair<at::Tensor, at::Tensor> PercentileObserver::computeRange() const {
  return clippedRange(histogram().quantile(percentile_ / 100.0));
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

BatchSummary EmaQuantileObserver::summarizeBatch(const at::Tensor& x, const MinMax& stats) {
  batch_histogram_.clear();
  batch_histogram_.add(x, maxAbs(stats));
  const double clip = batch_histogram_.quantile(percentile_ / 100.0);
  return {at::tensor({std::max<double>(stats.min, -clip), std::min<double>(stats.max, clip)},
                     at::kDouble)};
}

void EmaQuantileObserver::foldBatch(const BatchSummary& summary) {
  const double lo = summary.at(0)[0].item<double>(), hi = summary.at(0)[1].item<double>();
  if (!hasFolded()) {
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
