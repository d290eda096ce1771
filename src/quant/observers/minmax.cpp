#include "quant/observers/minmax.h"

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
  widenRange(min_, max_, summary.at(0), summary.at(1));
}

std::pair<at::Tensor, at::Tensor> MinMaxObserver::computeRange() const {
  return {min_, max_};
}

void MinMaxObserver::resetState() {
  min_ = at::Tensor();
  max_ = at::Tensor();
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
  averageRange(min_, max_, summary.at(0), summary.at(1), ratio_);
}

std::pair<at::Tensor, at::Tensor> EmaMinMaxObserver::computeRange() const {
  return {min_.to(at::kFloat), max_.to(at::kFloat)};
}

void EmaMinMaxObserver::resetState() {
  min_ = at::Tensor();
  max_ = at::Tensor();
}

}  // namespace quant
}  // namespace qforge
