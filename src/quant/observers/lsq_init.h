// LSQ's scale initialisation (Esser et al. 2020): scale = 2 * mean(|x|) / sqrt(qmax), over all
// observed values (per channel when the scheme is). The range is the grid that scale spans.
#pragma once

#include "quant/observer.h"

namespace qforge {
namespace quant {

class LsqInitObserver : public Observer {
 public:
  LsqInitObserver(std::string tensor_name, QScheme scheme);

 protected:
  BatchSummary summarizeBatch(const at::Tensor& x, const MinMax& stats) override;
  void foldBatch(const BatchSummary& summary) override;
  std::pair<at::Tensor, at::Tensor> computeRange() const override;
  QParams computeQParams() const override;
  void resetState() override;

 private:
  at::Tensor abs_sum_;  // double, per channel
  double count_per_channel_ = 0.0;
  at::Tensor min_;
};

}  // namespace quant
}  // namespace qforge
