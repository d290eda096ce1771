#include "quant/abs_histogram.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "quant/affine_kernels.h"

namespace qforge {
namespace quant {

AbsHistogram::AbsHistogram(int64_t bins) {
  require(bins >= 2 && bins % 2 == 0,
          "histogram: bin count must be an even number >= 2, got " + std::to_string(bins));
  counts_.assign(bins, 0.0);
}

void AbsHistogram::clear() {
  std::fill(counts_.begin(), counts_.end(), 0.0);
  width_ = 0.0;
  total_ = 0.0;
  max_abs_ = 0.0;
}

void AbsHistogram::growTo(double max_abs) {
  const int64_t n = bins();
  if (width_ == 0.0) {
    // Zeros seen so far sit in bin 0 whatever the width becomes.
    width_ = max_abs / static_cast<double>(n);
    return;
  }
  while (max_abs > width_ * static_cast<double>(n)) {
    for (int64_t i = 0; i < n / 2; ++i)
      counts_[i] = counts_[2 * i] + counts_[2 * i + 1];
    std::fill(counts_.begin() + n / 2, counts_.end(), 0.0);
    width_ *= 2.0;
  }
}

void AbsHistogram::add(const at::Tensor& x, float max_abs) {
  require(x.scalar_type() == at::kFloat && x.is_contiguous(),
          "histogram: expects a contiguous float32 tensor");
  const int64_t n = x.numel();
  if (n == 0) return;
  if (max_abs > 0.0f) growTo(max_abs);
  max_abs_ = std::max(max_abs_, static_cast<double>(max_abs));
  total_ += static_cast<double>(n);
  const int64_t nbins = bins();
  if (width_ == 0.0) {
    counts_[0] += static_cast<double>(n);
    return;
  }
  const float inv_width = static_cast<float>(1.0 / width_);
  const float* data = x.data_ptr<float>();
  const int64_t grain = 65536;
  const int64_t chunks = chunkCount(n, grain);
  scratch_.assign(static_cast<size_t>(chunks * nbins), 0u);
  forEachChunk(n, grain, [&](int64_t chunk, int64_t b, int64_t e) {
    uint32_t* h = scratch_.data() + chunk * nbins;
    // |x| * (1 / width) rounds down to the bin; the top value (and float rounding just above a
    // boundary) lands in the last bin.
    const float last = static_cast<float>(nbins - 1);
    for (int64_t i = b; i < e; ++i) {
      float pos = std::fabs(data[i]) * inv_width;
      pos = pos < last ? pos : last;
      ++h[static_cast<int32_t>(pos)];
    }
  });
  for (int64_t c = 0; c < chunks; ++c) {
    const uint32_t* h = scratch_.data() + c * nbins;
    for (int64_t i = 0; i < nbins; ++i)
      counts_[i] += static_cast<double>(h[i]);
  }
}

std::vector<double> AbsHistogram::resample(int64_t n, double top) const {
  require(n > 0 && top > 0.0, "histogram resample: need a positive bin count and range");
  std::vector<double> out(n, 0.0);
  const double out_width = top / static_cast<double>(n);
  if (width_ == 0.0) {
    out[0] = total_;
    return out;
  }
  for (int64_t k = 0; k < bins(); ++k) {
    const double count = counts_[k];
    if (count == 0.0) continue;
    double lo = static_cast<double>(k) * width_;
    const double hi = lo + width_;
    if (lo >= top) {
      out[n - 1] += count;
      continue;
    }
    // Spread this bin's count over the output bins it overlaps, proportionally to overlap.
    int64_t j = std::min<int64_t>(static_cast<int64_t>(lo / out_width), n - 1);
    while (lo < hi) {
      const double j_hi = (j == n - 1) ? hi : std::min(hi, static_cast<double>(j + 1) * out_width);
      out[j] += count * (j_hi - lo) / width_;
      lo = j_hi;
      ++j;
      if (j >= n) break;
    }
  }
  return out;
}

double AbsHistogram::quantile(double q) const {
  require(q > 0.0 && q <= 1.0, "histogram quantile: q=" + std::to_string(q) + " is not in (0, 1]");
  require(total_ > 0.0, "histogram quantile: the histogram is empty");
  if (width_ == 0.0) return 0.0;
  const double target = q * total_;
  double cumulative = 0.0;
  for (int64_t k = 0; k < bins(); ++k) {
    const double next = cumulative + counts_[k];
    if (next >= target && counts_[k] > 0.0) {
      const double fraction = (target - cumulative) / counts_[k];
      const double t = (static_cast<double>(k) + fraction) * width_;
      return std::min(t, max_abs_);
    }
    cumulative = next;
  }
  return max_abs_;
}

}  // namespace quant
}  // namespace qforge
