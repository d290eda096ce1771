#include "quant/observers/minmax.h"

#include <algorithm>

namespace qforge {
namespace quant {

std::pair<at::Tensor, at::Tensor> batchMinMax(const at::Tensor& x, const MinMax& stats,
                                              const QScheme& scheme) {
  if (scheme.perChannel()) return channelMinMax(x, scheme.axis);
  return Observer::scalarRange(stats.min, stats.max);
}

MinMaxObserver::MinMaxObserver(std::string tensor_name, QScheme scheme)
    : Observer("MinMax", std::move(tensor_name), scheme, /*supports_per_channel=*/true) {}

BatchSummary MinMaxObserver::summarizeBatch(const at::Tensor& x, const MinMax& stats) {
  auto [lo, hi] = batchMinMax(x, stats, scheme());
  return {lo, hi};
}

void MinMaxObserver::foldBatch(const BatchSummary& summary) {
  if (scheme().perChannel()) {
    widenRange(min_, max_, summary.at(0), summary.at(1));
  } else {
    foldRange(summary.at(0).item<double>(), summary.at(1).item<double>());
  }
}

bool MinMaxObserver::foldRange(double lo, double hi) {
  range_.lo = hasFolded() ? std::min(range_.lo, lo) : lo;
  range_.hi = hasFolded() ? std::max(range_.hi, hi) : hi;
  return true;
}

std::pair<at::Tensor, at::Tensor> MinMaxObserver::computeRange() const {
  if (scheme().perChannel()) return {min_, max_};
  return scalarRange(range_.lo, range_.hi);
}

void MinMaxObserver::resetState() {
  min_ = at::Tensor();
  max_ = at::Tensor();
  range_ = ScalarRange();
}

EmaMinMaxObserver::EmaMinMaxObserver(std::string tensor_name, QScheme scheme, double ratio)
    : Observer("EmaMinMax", std::move(tensor_name), scheme, /*supports_per_channel=*/true),
      ratio_(ratio) {
  checkEmaRatio(ratio);
}

BatchSummary EmaMinMaxObserver::summarizeBatch(const at::Tensor& x, const MinMax& stats) {
  auto [lo, hi] = batchMinMax(x, stats, scheme());
  return {lo, hi};
}

void EmaMinMaxObserver::foldBatch(const BatchSummary& summary) {
  if (scheme().perChannel()) {
    averageRange(min_, max_, summary.at(0), summary.at(1), ratio_);
  } else {
    foldRange(summary.at(0).item<double>(), summary.at(1).item<double>());
  }
}

bool EmaMinMaxObserver::foldRange(double lo, double hi) {
  range_.lo = hasFolded() ? range_.lo * ratio_ + lo * (1.0 - ratio_) : lo;
  range_.hi = hasFolded() ? range_.hi * ratio_ + hi * (1.0 - ratio_) : hi;
  return true;
}

std::pair<at::Tensor, at::Tensor> EmaMinMaxObserver::computeRange() const {
  if (scheme().perChannel()) return {min_.to(at::kFloat), max_.to(at::kFloat)};
  return scalarRange(range_.lo, range_.hi);  // rounded to float32, as min_.to(kFloat) would
}

void EmaMinMaxObserver::resetState() {
  min_ = at::Tensor();
  max_ = at::Tensor();
  range_ = ScalarRange();
}

}  // namespace quant
}  // namespace qforge
