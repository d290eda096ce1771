// Histogram of |x| over a stream of batches whose range may grow. Bins have equal width over
// [0, bins * width); when a batch reaches the top, the width doubles by merging neighbouring bins,
// which is exact (no re-interpolation of old counts, unlike PyTorch's HistogramObserver). The width
// is always a power of two, the smallest whose bins cover everything seen: so the counts depend
// only on the values, not on which batch came first, and histograms of separate streams merge into
// exactly the histogram of their union (data-parallel calibration). The fine internal resolution
// (16384 bins by default) is resampled to the resolution an algorithm needs.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace qforge {
namespace quant {

class AbsHistogram {
 public:
  static constexpr int64_t kDefaultBins = 16384;
  explicit AbsHistogram(int64_t bins = kDefaultBins);

  // Adds |x| for a contiguous float32 tensor whose largest |value| is `max_abs` (finite; the
  // caller computed it in its min/max pass).
  void add(const at::Tensor& x, float max_abs);
  // Adds another histogram's counts (same bin count): the result is the histogram of both streams.
  void merge(const AbsHistogram& other);

  int64_t bins() const { return static_cast<int64_t>(counts_.size()); }
  double binWidth() const { return width_; }
  double total() const { return total_; }
  double maxAbs() const { return max_abs_; }
  const std::vector<double>& counts() const { return counts_; }

  // Counts on `n` equal bins over [0, top], spreading each internal bin uniformly over its width;
  // internal mass beyond `top` goes into the last bin.
  std::vector<double> resample(int64_t n, double top) const;

  // Smallest t such that a fraction `q` (0..1] of the values has |x| <= t, interpolating linearly
  // inside the bin where the cumulative count crosses q * total.
  double quantile(double q) const;

  void clear();

  // The whole state as a double tensor [width, total, max_abs, counts...], and back: what
  // data-parallel ranks exchange.
  at::Tensor toTensor() const;
  static AbsHistogram fromTensor(const at::Tensor& state);

 private:
  // Doubles the width until bins * width > max_abs (the first call picks the smallest such power
  // of two).
  void growTo(double max_abs);

  std::vector<double> counts_;
  double width_ = 0.0;  // a power of two; 0 until a batch with a non-zero value arrives
  double total_ = 0.0;
  double max_abs_ = 0.0;
  std::vector<uint32_t> scratch_;  // per-chunk counts, kept to avoid reallocating per batch
};

}  // namespace quant
}  // namespace qforge
