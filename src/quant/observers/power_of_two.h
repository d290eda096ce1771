// Power-of-two scale observers for shift-only hardware (MQBench's MinMaxFloor and
// ModeMinMaxFloor). The largest candidate is the smallest 2^k that covers the running range
// without clipping, k = ceil(log2(max(min / qmin, max / qmax))); `search_steps` > 1 also tries
// 2^(k-1), 2^(k-2), ... and keeps the one with the least squared error on each batch. The result
// is the last batch's pick or the most frequent pick over batches. Per-tensor only.
//
// A batch's search reads the range of the batches before it: ranks of a data-parallel calibration
// search within their own running range, so with search_steps > 1 they approximate one process.
// Without a search the pick is recomputed as batches fold in, and N ranks give one's result.
#pragma once

#include <map>
#include <optional>

#include "quant/observer.h"

namespace qforge {
namespace quant {

class PowerOfTwoObserver : public Observer {
 public:
  enum class Selection { LastBatch, MostFrequent };
  struct Options {
    int64_t search_steps = 1;  // 1: no search, never clips
    Selection selection = Selection::LastBatch;
    std::optional<int> min_log2_scale;  // e.g. -12: scales below 2^-12 are raised to it
  };

  PowerOfTwoObserver(std::string tensor_name, QScheme scheme, Options options);
  PowerOfTwoObserver(std::string tensor_name, QScheme scheme)
      : PowerOfTwoObserver(std::move(tensor_name), scheme, Options{}) {}

  // log2 of the scale the observer would return now.
  int chosenLog2Scale() const;

 protected:
  BatchSummary summarizeBatch(const at::Tensor& x, const MinMax& stats) override;
  void foldBatch(const BatchSummary& summary) override;
  std::pair<at::Tensor, at::Tensor> computeRange() const override;
  QParams computeQParams() const override;
  void resetState() override;

 private:
  int coveringLog2Scale(float min, float max) const;

  Options options_;
  float min_ = 0.0f, max_ = 0.0f;
  int last_pick_ = 0;
  std::map<int, int64_t> pick_counts_;
};

}  // namespace quant
}  // namespace qforge
