// Range = mean +- k standard deviations of everything observed, intersected with the observed
// [min, max], so it only ever clips. (MQBench's ClipStdObserver takes the union instead, which
// never clips.) Moments are merged across batches with Chan's parallel formula. Per-tensor or
// per-channel.
#pragma once

#include "quant/observer.h"

namespace qforge {
namespace quant {

class ClipStdObserver : public Observer {
 public:
  ClipStdObserver(std::string tensor_name, QScheme scheme, double std_scale = 2.6);

 protected:
  BatchSummary summarizeBatch(const at::Tensor& x, const MinMax& stats) override;
  void foldBatch(const BatchSummary& summary) override;
  std::pair<at::Tensor, at::Tensor> computeRange() const override;
  void resetState() override;

 private:
  double std_scale_;
  at::Tensor count_, mean_, m2_;  // double, per channel
  at::Tensor min_, max_;
};

}  // namespace quant
}  // namespace qforge
