#include "verify/output_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace qforge::verify {

bool isClassifierOutput(at::IntArrayRef shape, int64_t samples) {
  return shape.size() == 2 && shape[1] >= 2 && (samples < 0 || shape[0] == samples);
}

void DifferenceHistogram::add(const at::Tensor& absolute_differences) {
  const at::Tensor d = absolute_differences.to(at::kDouble).reshape({-1});
  if (d.numel() == 0) return;
  count_ += d.numel();
  max_ = std::max(max_, d.max().item<double>());
  const at::Tensor positive = d.masked_select(d > 0);
  zeros_ += d.numel() - positive.numel();
  if (positive.numel() == 0) return;
  // Bin k covers [2^(k/64 - 64), 2^((k+1)/64 - 64)).
  const at::Tensor index = ((positive.log2() + kOctaves / 2) * kPerOctave)
                               .floor()
                               .clamp(0, kPerOctave * kOctaves - 1)
                               .to(at::kLong);
  const at::Tensor counts = at::bincount(index, {}, kPerOctave * kOctaves);
  const int64_t* c = counts.data_ptr<int64_t>();
  for (int64_t k = 0; k < counts.numel(); ++k)
    bins_[k] += c[k];
}

double DifferenceHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  const int64_t rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(count_)));
  int64_t seen = zeros_;
  if (seen >= rank) return 0;
  for (size_t k = 0; k < bins_.size(); ++k) {
    seen += bins_[k];
    if (seen >= rank) {
      if (k + 1 == bins_.size()) return max_;  // the last bin also holds everything above it
      const double upper = std::exp2(static_cast<double>(k + 1) / kPerOctave - kOctaves / 2);
      return std::min(upper, max_);
    }
  }
  return max_;
}

double DifferenceHistogram::shareBelow(double bound) const {
  if (count_ == 0) return 1;
  int64_t below = zeros_;
  for (size_t k = 0; k < bins_.size(); ++k) {
    const double upper = std::exp2(static_cast<double>(k + 1) / kPerOctave - kOctaves / 2);
    if (upper > bound) break;
    below += bins_[k];
  }
  return static_cast<double>(below) / static_cast<double>(count_);
}

void OutputAccumulator::add(const at::Tensor& got, const at::Tensor& reference, int64_t samples) {
  if (got.sizes() != reference.sizes()) {
    if (shape_mismatches_++ == 0)
      shape_example_ = c10::str(got.sizes()) + " against " + c10::str(reference.sizes());
    samples_ += samples >= 0 ? samples : 1;
    return;
  }
  const at::Tensor g = got.to(at::kDouble), r = reference.to(at::kDouble);
  if (samples_ == 0) classifier_ = isClassifierOutput(got.sizes(), samples);
  samples_ += samples >= 0 ? samples : got.dim() > 0 ? got.size(0) : 1;
  if (classifier_) {
    const at::Tensor picked = r.gather(1, g.argmax(1, /*keepdim=*/true)).squeeze(1);
    const at::Tensor gaps = (std::get<0>(r.max(1)) - picked).contiguous();
    top1_gaps_.insert(top1_gaps_.end(), gaps.data_ptr<double>(),
                      gaps.data_ptr<double>() + gaps.numel());
  }
  const at::Tensor diff = sums_.add(g, r);
  max_abs_reference_ = std::max(max_abs_reference_, r.abs().max().item<double>());
  differences_.add(diff.abs());
  if (iou_threshold_) {
    const at::Tensor a = g > *iou_threshold_, b = r > *iou_threshold_;
    intersection_ += (a & b).sum().item<double>();
    union_ += (a | b).sum().item<double>();
  }
}

OutputComparison OutputAccumulator::finish(double step, const std::string& step_source) const {
  require(step > 0, "output '" + output_ + "': the quantization step must be positive");
  OutputComparison c;
  c.output = output_;
  c.classifier = classifier_;
  c.samples = samples_;
  c.top1_agree =
      std::count_if(top1_gaps_.begin(), top1_gaps_.end(), [&](double gap) { return gap <= step; });
  c.sqnr_db = sums_.sqnrDb();
  c.cosine = sums_.cosine();
  c.step = step;
  c.step_source = step_source;
  c.max_steps = differences_.max() / step;
  c.p99_steps = differences_.quantile(0.99) / step;
  c.exact_fraction = differences_.shareBelow(1e-3 * step);
  c.within_one_step_fraction = differences_.shareBelow(1.05 * step);
  if (iou_threshold_) c.iou = union_ > 0 ? intersection_ / union_ : 1.0;
  c.max_abs_reference = max_abs_reference_;
  c.shape_mismatches = shape_mismatches_;
  c.shape_example = shape_example_;
  if (shape_mismatches_ > 0 && differences_.count() == 0) {
    // Nothing was compared: no figure, rather than the "identical" of empty sums.
    c.sqnr_db = c.cosine = std::numeric_limits<double>::quiet_NaN();
  }
  return c;
}

}  // namespace qforge::verify
