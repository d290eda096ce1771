// Range = running minimum and maximum of everything observed (MinMax), or their exponential
// moving average over batches (EMA MinMax, MQBench's EMAMinMaxObserver). Per-tensor or per-channel.
#pragma once

#include "quant/observer.h"

namespace qforge {
namespace quant {

// A per-tensor running range, in double precision (meaningful once hasFolded()).
struct ScalarRange {
  double lo = 0.0, hi = 0.0;
};

class MinMaxObserver : public Observer {
 public:
  MinMaxObserver(std::string tensor_name, QScheme scheme);

 protected:
  BatchSummary summarizeBatch(const at::Tensor& x, const MinMax& stats) override;
  void foldBatch(const BatchSummary& summary) override;
  std::pair<at::Tensor, at::Tensor> computeRange() const override;
  void resetState() override;
  bool repeatIsNoOp() const override { return true; }
  bool foldRange(double lo, double hi) override;

 private:
  at::Tensor min_, max_;  // per-channel ranges; per-tensor ones are kept as scalars in range_
  ScalarRange range_;
};

class EmaMinMaxObserver : public Observer {
 public:
  // min <- ratio * min + (1 - ratio) * batch_min (the first batch initialises). ratio in [0, 1).
  EmaMinMaxObserver(std::string tensor_name, QScheme scheme, double ratio = 0.9);

 protected:
  BatchSummary summarizeBatch(const at::Tensor& x, const MinMax& stats) override;
  void foldBatch(const BatchSummary& summary) override;
  std::pair<at::Tensor, at::Tensor> computeRange() const override;
  void resetState() override;
  bool foldRange(double lo, double hi) override;

 private:
  double ratio_;
  at::Tensor min_, max_;  // per-channel, in double precision: many small EMA steps
  ScalarRange range_;     // per-tensor
};

// Per-tensor ([1]) or per-channel ([C]) min and max of one batch.
std::pair<at::Tensor, at::Tensor> batchMinMax(const at::Tensor& x, const MinMax& stats,
                                              const QScheme& scheme);

}  // namespace quant
}  // namespace qforge
