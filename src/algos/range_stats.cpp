#include "algos/range_stats.h"

#include <algorithm>
#include <cmath>

namespace qforge::algos {

namespace {

// Values farther than half a step outside [qmin, qmax] of `grid` (per channel along the scheme's
// axis when it has one).
int64_t countClipped(const at::Tensor& x, const quant::QParams& grid,
                     const quant::QScheme& scheme) {
  at::Tensor scale = grid.scale.to(at::kDouble);
  at::Tensor zero_point = grid.zero_point.to(at::kDouble);
  if (scheme.perChannel() && grid.numel() > 1) {
    scale = quant::alongAxis(scale, scheme.axis, x.dim());
    zero_point = quant::alongAxis(zero_point, scheme.axis, x.dim());
  }
  const at::Tensor low = (static_cast<double>(scheme.qmin()) - zero_point - 0.5) * scale;
  const at::Tensor high = (static_cast<double>(scheme.qmax()) - zero_point + 0.5) * scale;
  const at::Tensor wide = x.to(at::kDouble);
  return at::logical_or(wide<low, wide> high).sum().item<int64_t>();
}

double quantileOf(std::vector<float> sorted_copy, double q) {
  if (sorted_copy.empty()) return 0;
  const double position = q * static_cast<double>(sorted_copy.size() - 1);
  const auto below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted_copy.size() - 1);
  const double t = position - static_cast<double>(below);
  return sorted_copy[below] * (1 - t) + sorted_copy[above] * t;
}

}  // namespace

void RangeAccumulator::add(const at::Tensor& values, const std::optional<quant::QParams>& grid,
                           const quant::QScheme& scheme) {
  if (!values.defined() || values.numel() == 0) return;
  const at::Tensor flat = values.detach().reshape({-1}).to(at::kFloat).contiguous();
  const int64_t n = flat.numel();
  const double batch_min = flat.min().item<double>();
  const double batch_max = flat.max().item<double>();
  min_ = elements_ == 0 ? batch_min : std::min(min_, batch_min);
  max_ = elements_ == 0 ? batch_max : std::max(max_, batch_max);
  elements_ += n;
  if (grid && grid->defined()) {
    clipped_ += countClipped(values.detach(), *grid, scheme);
  } else {
    measured_clipping_ = false;
  }

  // A strided pick from a random offset, so a batch's values are all equally likely to be seen,
  // then reservoir replacement once the sample is full.
  const float* data = flat.data_ptr<float>();
  const int64_t take = std::min(n, kPerBatch);
  const int64_t stride = n / take;
  const int64_t offset = stride > 1 ? static_cast<int64_t>(random_() % stride) : 0;
  for (int64_t i = 0; i < take; ++i) {
    const float v = data[offset + i * stride];
    ++offered_;
    if (static_cast<int64_t>(sample_.size()) < kSampleCap) {
      sample_.push_back(v);
    } else {
      const uint64_t j = random_() % static_cast<uint64_t>(offered_);
      if (j < static_cast<uint64_t>(kSampleCap)) sample_[j] = v;
    }
  }
}

RangeSummary RangeAccumulator::finish() const {
  RangeSummary s;
  s.elements = elements_;
  if (elements_ == 0) return s;
  s.min = min_;
  s.max = max_;
  std::vector<float> sorted = sample_;
  std::sort(sorted.begin(), sorted.end());
  s.sampled = static_cast<int64_t>(sorted.size());
  s.p0_1 = quantileOf(sorted, 0.001);
  s.p99_9 = quantileOf(sorted, 0.999);
  const double bulk = std::max(std::abs(s.p0_1), std::abs(s.p99_9));
  const double extreme = std::max(std::abs(s.min), std::abs(s.max));
  s.outlier_ratio = bulk > 0 ? extreme / bulk : (extreme > 0 ? INFINITY : 1.0);
  if (measured_clipping_)
    s.clipped_fraction = static_cast<double>(clipped_) / static_cast<double>(elements_);
  s.histogram.assign(kBins, 0);
  const double width = s.max - s.min;
  for (float v : sorted) {
    int bin = width > 0 ? static_cast<int>((v - s.min) / width * kBins) : 0;
    s.histogram[std::clamp(bin, 0, kBins - 1)] += 1;
  }
  return s;
}

RangeSummary weightRange(const at::Tensor& weight, const std::optional<quant::QParams>& grid,
                         const quant::QScheme& scheme, int64_t channel_axis) {
  RangeAccumulator all;
  all.add(weight, grid, scheme);
  RangeSummary s = all.finish();
  if (weight.dim() >= 2 && channel_axis >= 0 && channel_axis < weight.dim() &&
      weight.size(channel_axis) >= 2) {
    const at::Tensor per_channel = weight.detach()
                                       .abs()
                                       .transpose(0, channel_axis)
                                       .reshape({weight.size(channel_axis), -1})
                                       .amax(1)
                                       .to(at::kDouble);
    const at::Tensor sorted = std::get<0>(per_channel.sort());
    const double median = sorted[(sorted.numel() - 1) / 2].item<double>();
    const double largest = sorted[-1].item<double>();
    s.channel_spread = median > 0 ? largest / median : (largest > 0 ? INFINITY : 1.0);
  }
  return s;
}

}  // namespace qforge::algos
