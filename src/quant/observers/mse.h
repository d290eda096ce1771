// Range search minimising the Lp quantization error on the observed batch: candidates shrink the
// batch's [min, max] by factors 1, 1 - step, 1 - 2 step, ... (MQBench's MSEObserver grid). The
// per-batch optimum is combined over batches as a running union (Mse) or an EMA (EmaMse).
// Per-tensor or per-channel.
#pragma once

#include "quant/observer.h"

namespace qforge {
namespace quant {

struct MseSearch {
  double p = 2.0;      // error norm exponent
  int64_t steps = 95;  // number of shrink factors tried
  double step = 0.01;  // shrink factor decrement
};

// Best [min, max] for one contiguous float32 tensor (per-tensor scheme) among the shrink grid.
std::pair<float, float> searchLpRange(const at::Tensor& x, float min_val, float max_val,
                                      const QScheme& scheme, const MseSearch& search);

class MseObserver : public Observer {
 public:
  MseObserver(std::string tensor_name, QScheme scheme, MseSearch search = {});

 protected:
  MseObserver(std::string kind, std::string tensor_name, QScheme scheme, MseSearch search);
  BatchSummary summarizeBatch(const at::Tensor& x, const MinMax& stats) override;
  void foldBatch(const BatchSummary& summary) override;
  std::pair<at::Tensor, at::Tensor> computeRange() const override;
  void resetState() override;
  std::pair<at::Tensor, at::Tensor> batchOptimum(const at::Tensor& x, const MinMax& stats) const;

  MseSearch search_;
  at::Tensor min_, max_;
};

class EmaMseObserver : public MseObserver {
 public:
  EmaMseObserver(std::string tensor_name, QScheme scheme, MseSearch search = {},
                 double ratio = 0.9);

 protected:
  void foldBatch(const BatchSummary& summary) override;

 private:
  double ratio_;
};

}  // namespace quant
}  // namespace qforge
