#include "quant/observers/abs_histogram_observer.h"

#include <algorithm>
#include <cmath>

namespace qforge {
namespace quant {

AbsHistogramObserver::AbsHistogramObserver(std::string kind, std::string tensor_name,
                                           QScheme scheme, int64_t bins)
    : Observer(std::move(kind), std::move(tensor_name), scheme, /*supports_per_channel=*/false),
      histogram_(bins) {}

BatchSummary AbsHistogramObserver::summarizeBatch(const at::Tensor& x, const MinMax& stats) {
  AbsHistogram batch(histogram_.bins());
  batch.add(x, std::max(std::fabs(stats.min), std::fabs(stats.max)));
  return {batch.toTensor(), at::tensor({stats.min, stats.max}, at::kFloat)};
}

void AbsHistogramObserver::foldBatch(const BatchSummary& summary) {
  histogram_.merge(AbsHistogram::fromTensor(summary.at(0)));
  const float lo = summary.at(1)[0].item<float>(), hi = summary.at(1)[1].item<float>();
  min_ = hasFolded() ? std::min(min_, lo) : lo;
  max_ = hasFolded() ? std::max(max_, hi) : hi;
}

void AbsHistogramObserver::resetState() {
  histogram_.clear();
}

std::pair<at::Tensor, at::Tensor> AbsHistogramObserver::clippedRange(double clip) const {
  return scalarRange(std::max<double>(min_, -clip), std::min<double>(max_, clip));
}

}  // namespace quant
}  // namespace qforge
