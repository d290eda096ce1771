// The range of the values one quantizer sees, summarised for the analysis report: extremes,
// 0.1/99.9 percentiles, how far the extremes stand out of the bulk (outlier ratio), the share of
// values the calibrated grid clips, a histogram, and for weights how unequal the output channels'
// ranges are. Activations are accumulated over batches in constant memory: exact extremes and
// clip counts, percentiles and histogram from a seeded sample of the values.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "quant/qparams.h"
#include "quant/qscheme.h"

namespace qforge::algos {

struct RangeSummary {
  int64_t elements = 0;
  double min = 0, max = 0;
  double p0_1 = 0, p99_9 = 0;  // of the sample
  // max(|min|, |max|) / max(|p0_1|, |p99_9|): >= 1; large when a few values set a MinMax range.
  double outlier_ratio = 1;
  // Share of values farther than half a step outside the grid's range; nullopt without an
  // affine grid (NNIE's logarithmic one) to measure against.
  std::optional<double> clipped_fraction;
  // Weights: the largest output channel's max |w| over the median channel's.
  std::optional<double> channel_spread;
  // Histogram of the sample over [min, max].
  std::vector<int64_t> histogram;
  int64_t sampled = 0;  // values the percentiles and histogram come from
};

class RangeAccumulator {
 public:
  static constexpr int64_t kSampleCap = 1 << 16;
  static constexpr int64_t kPerBatch = 1 << 13;
  static constexpr int kBins = 64;

  explicit RangeAccumulator(uint64_t seed = 0) : random_(seed) {}

  // One tensor's values; `grid` (with its scheme) counts what it clips.
  void add(const at::Tensor& values, const std::optional<quant::QParams>& grid,
           const quant::QScheme& scheme);
  bool empty() const { return elements_ == 0; }
  RangeSummary finish() const;

 private:
  std::mt19937_64 random_;
  int64_t elements_ = 0;
  int64_t clipped_ = 0;
  bool measured_clipping_ = true;
  double min_ = 0, max_ = 0;
  int64_t offered_ = 0;  // values offered to the sample so far
  std::vector<float> sample_;
};

// A weight tensor's summary, with its channel spread along `channel_axis` (rank >= 2).
RangeSummary weightRange(const at::Tensor& weight, const std::optional<quant::QParams>& grid,
                         const quant::QScheme& scheme, int64_t channel_axis);

}  // namespace qforge::algos
