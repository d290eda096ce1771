// The state the Percentile and KL observers share: a histogram of |x| over every batch and the
// running [min, max]. A batch's summary is its own histogram (on its own power-of-two grid) with
// its min and max; folding merges them, so ranks folding each other's summaries hold one
// process's histogram bin for bin. Subclasses choose a clip t from the histogram; the range is
// [max(min, -t), min(max, t)]. Per-tensor only: the histogram is over the whole tensor.
#pragma once

#include "quant/abs_histogram.h"
#include "quant/observer.h"

namespace qforge {
namespace quant {

class AbsHistogramObserver : public Observer {
 public:
  const AbsHistogram& histogram() const { return histogram_; }

 protected:
  AbsHistogramObserver(std::string kind, std::string tensor_name, QScheme scheme, int64_t bins);

  BatchSummary summarizeBatch(const at::Tensor& x, const MinMax& stats) override;
  void foldBatch(const BatchSummary& summary) override;
  void resetState() override;
  // The observed range clipped to [-clip, clip].
  std::pair<at::Tensor, at::Tensor> clippedRange(double clip) const;

 private:
  AbsHistogram histogram_;
  float min_ = 0.0f, max_ = 0.0f;
};

}  // namespace quant
}  // namespace qforge
