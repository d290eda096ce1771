#include "quant/observers/clip_std.h"

#include "quant/observers/minmax.h"

namespace qforge {
namespace quant {

ClipStdObserver::ClipStdObserver(std::string tensor_name, QScheme scheme, double std_scale)
    : Observer("ClipStd", std::move(tensor_name), scheme, /*supports_per_channel=*/true),
      std_scale_(std_scale) {
  if (!(std_scale > 0.0)) fail("std scale " + std::to_string(std_scale) + " must be positive");
}

BatchSummary ClipStdObserver::summarizeBatch(const at::Tensor& x, const MinMax& stats) {
  const at::Tensor rows =
      scheme().perChannel() ? channelRows(x, scheme().axis) : x.reshape({1, -1});
  const at::Tensor values = rows.to(at::kDouble);
  const at::Tensor n_b = at::full({rows.size(0)}, static_cast<double>(rows.size(1)), at::kDouble);
  const at::Tensor mean_b = values.mean(1);
  const at::Tensor m2_b = (values - mean_b.unsqueeze(1)).pow(2).sum(1);
  auto [lo, hi] = batchMinMax(x, stats, scheme());
  return {n_b, mean_b, m2_b, lo, hi};
}

void ClipStdObserver::foldBatch(const BatchSummary& summary) {
  const at::Tensor &n_b = summary.at(0), &mean_b = summary.at(1), &m2_b = summary.at(2);
  const at::Tensor &lo = summary.at(3), &hi = summary.at(4);
  if (!count_.defined()) {
    count_ = n_b;
    mean_ = mean_b;
    m2_ = m2_b;
    min_ = lo;
    max_ = hi;
    return;
  }
  const at::Tensor n = count_ + n_b;
  const at::Tensor delta = mean_b - mean_;
  mean_ = mean_ + delta * (n_b / n);
  m2_ = m2_ + m2_b + delta.pow(2) * (count_ * n_b / n);
  count_ = n;
  min_ = at::minimum(min_, lo);
  max_ = at::maximum(max_, hi);
}

std::pair<at::Tensor, at::Tensor> ClipStdObserver::computeRange() const {
  // Unbiased standard deviation, as torch.std.
  const at::Tensor std = (m2_ / at::clamp_min(count_ - 1.0, 1.0)).sqrt();
  const at::Tensor lo = at::maximum(min_.to(at::kDouble), mean_ - std_scale_ * std);
  const at::Tensor hi = at::minimum(max_.to(at::kDouble), mean_ + std_scale_ * std);
  return {lo.to(at::kFloat), hi.to(at::kFloat)};
}

void ClipStdObserver::resetState() {
  count_ = mean_ = m2_ = min_ = max_ = at::Tensor();
}

}  // namespace quant
}  // namespace qforge
