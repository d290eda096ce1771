// Histogram-based clipping at a quantile of |x|: over the whole stream (Percentile), or per batch
// with an exponential moving average of the clipped range (MQBench's EMAQuantileObserver).
// Per-tensor only: the histogram is over the whole tensor.
#pragma once

#include "quant/abs_histogram.h"
#include "quant/observer.h"
#include "quant/observers/abs_histogram_observer.h"

namespace qforge {
namespace quant {

class PercentileObserver : public AbsHistogramObserver {
 public:
  // `percentile` in (0, 100]: the clip t has that share of |x| at or below it; the range is
  // [max(min, -t), min(max, t)].
  PercentileObserver(std::string tensor_name, QScheme scheme, double percentile = 99.99);

 protected:
  std::pair<at::Tensor, at::Tensor> computeRange() const override;

 private:
  double percentile_;
};

class EmaQuantileObserver : public Observer {
 public:
  EmaQuantileObserver(std::string tensor_name, QScheme scheme, double percentile = 99.999,
                      double ratio = 0.9, int64_t bins = 2048);

 protected:
  BatchSummary summarizeBatch(const at::Tensor& x, const MinMax& stats) override;
  void foldBatch(const BatchSummary& summary) override;
  std::pair<at::Tensor, at::Tensor> computeRange() const override;
  void resetState() override;

 private:
  double percentile_;
  double ratio_;
  AbsHistogram batch_histogram_;  // scratch for one batch
  double min_ = 0.0, max_ = 0.0;
};

}  // namespace quant
}  // namespace qforge
