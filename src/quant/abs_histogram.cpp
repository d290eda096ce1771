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

namespace {

// Widths below 2^-126 would make 1 / width overflow a float; values that small all land in bin 0.
constexpr int kSmallestWidthExponent = -126;

}  // namespace

void AbsHistogram::growTo(double max_abs) {
  const int64_t n = bins();
  if (width_ == 0.0) {
    // Zeros seen so far sit in bin 0 whatever the width becomes.
    // log2 may round either way near a power of two: settle on the exact smallest exponent.
    int exponent = static_cast<int>(std::floor(std::log2(max_abs / static_cast<double>(n))));
    exponent = std::max(kSmallestWidthExponent, exponent - 1);
    while (std::ldexp(1.0, exponent) * static_cast<double>(n) <= max_abs)
      ++exponent;
    width_ = std::ldexp(1.0, exponent);
    return;
  }
  while (max_abs >= width_ * static_cast<double>(n)) {
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
    // |x| * (1 / width) is exact (a power of two) and rounds down to the bin: bin k holds
    // [k width, (k + 1) width) at any width, so doubling the width later merges bins exactly.
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

void AbsHistogram::merge(const AbsHistogram& other) {
  require(other.bins() == bins(), "histogram merge: bin counts differ (" +
                                      std::to_string(other.bins()) + " and " +
                                      std::to_string(bins()) + ")");
  total_ += other.total_;
  if (other.width_ == 0.0) {
    counts_[0] += other.total_;
    return;
  }
  // Both widths are powers of two covering their streams: the wider one covers both.
  if (width_ < other.width_) growTo(other.width_ * static_cast<double>(bins()) * 0.5);
  const int64_t shift = std::llround(std::log2(width_ / other.width_));
  for (int64_t k = 0; k < bins(); ++k)
    counts_[k >> shift] += other.counts_[k];
  max_abs_ = std::max(max_abs_, other.max_abs_);
}

at::Tensor AbsHistogram::toTensor() const {
  at::Tensor state = at::empty({bins() + 3}, at::kDouble);
  double* out = state.data_ptr<double>();
  out[0] = width_;
  out[1] = total_;
  out[2] = max_abs_;
  std::copy(counts_.begin(), counts_.end(), out + 3);
  return state;
}

AbsHistogram AbsHistogram::fromTensor(const at::Tensor& state) {
  require(state.scalar_type() == at::kDouble && state.dim() == 1 && state.numel() >= 5,
          "histogram: a state tensor is a double vector [width, total, max_abs, counts...]");
  const at::Tensor s = state.contiguous();
  const double* in = s.data_ptr<double>();
  AbsHistogram h(s.numel() - 3);
  h.width_ = in[0];
  h.total_ = in[1];
  h.max_abs_ = in[2];
  std::copy(in + 3, in + s.numel(), h.counts_.begin());
  return h;
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
