#include "quant/observers/mse.h"

#include <limits>

#include "core/error.h"
#include "quant/affine_kernels.h"
#include "quant/observers/minmax.h"

namespace qforge {
namespace quant {

std::pair<float, float> searchLpRange(const at::Tensor& x, float min_val, float max_val,
                                      const QScheme& scheme, const MseSearch& search) {
  QScheme per_tensor = scheme;
  per_tensor.axis = -1;
  double best_error = std::numeric_limits<double>::infinity();
  std::pair<float, float> best{min_val, max_val};
  for (int64_t i = 0; i < search.steps; ++i) {
    const float factor = static_cast<float>(1.0 - static_cast<double>(i) * search.step);
    const float lo = min_val * factor;
    const float hi = max_val * factor;
    const QParams params = qparamsFromMinMax(lo, hi, per_tensor);
    const AffineGrid grid =
        makeAffineGrid(x, per_tensor, {static_cast<double>(params.scaleValue())},
                       {static_cast<double>(params.zeroPointValue())}, "MSE search");
    const double error = affineLpError(x, grid, search.p)[0];
    if (error < best_error) {
      best_error = error;
      best = {lo, hi};
    }
  }
  return best;
}

MseObserver::MseObserver(std::string tensor_name, QScheme scheme, MseSearch search)
    : MseObserver("Mse", std::move(tensor_name), scheme, search) {}

MseObserver::MseObserver(std::string kind, std::string tensor_name, QScheme scheme,
                         MseSearch search)
    : Observer(std::move(kind), std::move(tensor_name), scheme, /*supports_per_channel=*/true),
      search_(search) {
  if (!(search.p > 0.0)) fail("Lp norm exponent must be positive");
  if (search.steps < 1 || !(search.step > 0.0) ||
      !(static_cast<double>(search.steps - 1) * search.step < 1.0)) {
    fail("shrink grid must have >= 1 step and keep every factor above 0");
  }
}

std::pair<at::Tensor, at::Tensor> MseObserver::batchOptimum(const at::Tensor& x,
                                                            const MinMax& stats) const {
  if (!scheme().perChannel()) {
    auto [lo, hi] = searchLpRange(x, stats.min, stats.max, scheme(), search_);
    return scalarRange(lo, hi);
  }
  const at::Tensor rows = channelRows(x, scheme().axis).contiguous();
  auto [mins, maxs] = channelMinMax(x, scheme().axis);
  const int64_t c = rows.size(0);
  at::Tensor lo = at::empty({c}, at::kFloat), hi = at::empty({c}, at::kFloat);
  for (int64_t ch = 0; ch < c; ++ch) {
    auto [l, h] =
        searchLpRange(rows[ch], mins[ch].item<float>(), maxs[ch].item<float>(), scheme(), search_);
    lo[ch] = l;
    hi[ch] = h;
  }
  return {lo, hi};
}

BatchSummary MseObserver::summarizeBatch(const at::Tensor& x, const MinMax& stats) {
  auto [lo, hi] = batchOptimum(x, stats);
  return {lo, hi};
}

void MseObserver::foldBatch(const BatchSummary& summary) {
  widenRange(min_, max_, summary.at(0), summary.at(1));
}

std::pair<at::Tensor, at::Tensor> MseObserver::computeRange() const {
  return {min_.to(at::kFloat), max_.to(at::kFloat)};
}

void MseObserver::resetState() {
  min_ = at::Tensor();
  max_ = at::Tensor();
}

EmaMseObserver::EmaMseObserver(std::string tensor_name, QScheme scheme, MseSearch search,
                               double ratio)
    : MseObserver("EmaMse", std::move(tensor_name), scheme, search), ratio_(ratio) {
  checkEmaRatio(ratio);
}

void EmaMseObserver::foldBatch(const BatchSummary& summary) {
  averageRange(min_, max_, summary.at(0), summary.at(1), ratio_);
}

}  // namespace quant
}  // namespace qforge
