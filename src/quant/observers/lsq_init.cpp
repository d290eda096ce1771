#include "quant/observers/lsq_init.h"

#include <algorithm>
#include <cmath>

#include "quant/observers/minmax.h"

namespace qforge {
namespace quant {

LsqInitObserver::LsqInitObserver(std::string tensor_name, QScheme scheme)
    : Observer("LsqInit", std::move(tensor_name), scheme, /*supports_per_channel=*/true) {}

BatchSummary LsqInitObserver::summarizeBatch(const at::Tensor& x, const MinMax& stats) {
  const at::Tensor rows =
      scheme().perChannel() ? channelRows(x, scheme().axis) : x.reshape({1, -1});
  const at::Tensor sums = rows.abs().sum(1, /*keepdim=*/false, at::kDouble);
  const at::Tensor lo = batchMinMax(x, stats, scheme()).first;
  return {sums, lo, at::full({1}, static_cast<double>(rows.size(1)), at::kDouble)};
}

void LsqInitObserver::foldBatch(const BatchSummary& summary) {
  const at::Tensor &sums = summary.at(0), &lo = summary.at(1);
  if (!abs_sum_.defined()) {
    abs_sum_ = sums;
    min_ = lo;
  } else {
    abs_sum_ = abs_sum_ + sums;
    min_ = at::minimum(min_, lo);
  }
  count_per_channel_ += summary.at(2)[0].item<double>();
}

QParams LsqInitObserver::computeQParams() const {
  const at::Tensor mean_abs = abs_sum_ / count_per_channel_;
  const double root = std::sqrt(static_cast<double>(scheme().qmax()));
  const int64_t c = mean_abs.numel();
  std::vector<float> scales(c);
  std::vector<int64_t> zero_points(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    float s = static_cast<float>(2.0 * mean_abs[ch].item<double>() / root);
    s = std::max(s, static_cast<float>(scheme().eps));
    if (scheme().power_of_two_scale) s = roundScaleToPowerOfTwo(s);
    scales[ch] = s;
    zero_points[ch] = zeroPointFor(s, min_[ch].item<float>(), scheme());
  }
  return makeQParams(std::move(scales), std::move(zero_points));
}

std::pair<at::Tensor, at::Tensor> LsqInitObserver::computeRange() const {
  const QParams p = computeQParams();
  const at::Tensor zp = p.zero_point.to(at::kFloat);
  return {(static_cast<float>(scheme().qmin()) - zp) * p.scale,
          (static_cast<float>(scheme().qmax()) - zp) * p.scale};
}

void LsqInitObserver::resetState() {
  abs_sum_ = min_ = at::Tensor();
  count_per_channel_ = 0.0;
}

}  // namespace quant
}  // namespace qforge
