#include "quant/observers/power_of_two.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "quant/affine_kernels.h"

namespace qforge {
namespace quant {

PowerOfTwoObserver::PowerOfTwoObserver(std::string tensor_name, QScheme scheme, Options options)
    : Observer("PowerOfTwo", std::move(tensor_name), scheme, /*supports_per_channel=*/false),
      options_(options) {
  if (options.search_steps < 1 || options.search_steps > 32) {
    fail("search_steps " + std::to_string(options.search_steps) + " is not in 1..32");
  }
}

int PowerOfTwoObserver::coveringLog2Scale(float min, float max) const {
  const double qmin = static_cast<double>(scheme().qmin());
  const double qmax = static_cast<double>(scheme().qmax());
  double needed = std::max<double>(max, 0.0) / qmax;
  if (qmin < 0.0) needed = std::max(needed, std::min<double>(min, 0.0) / qmin);
  if (!scheme().symmetric) {
    // Asymmetric grids spread the whole range over all levels.
    needed =
        std::min(needed, (std::max<double>(max, 0.0) - std::min<double>(min, 0.0)) / (qmax - qmin));
  }
  needed = std::max(needed, scheme().eps);
  return static_cast<int>(std::ceil(std::log2(needed)));
}

BatchSummary PowerOfTwoObserver::summarizeBatch(const at::Tensor& x, const MinMax& stats) {
  const float min = hasFolded() ? std::min(min_, stats.min) : stats.min;
  const float max = hasFolded() ? std::max(max_, stats.max) : stats.max;
  const int top = coveringLog2Scale(min, max);
  int best = top;
  if (options_.search_steps > 1) {
    double best_error = std::numeric_limits<double>::infinity();
    for (int k = top; k > top - options_.search_steps; --k) {
      const float scale = std::ldexp(1.0f, k);
      const int64_t zp = zeroPointFor(scale, min, scheme());
      const AffineGrid grid = makeAffineGrid(x, scheme(), {static_cast<double>(scale)},
                                             {static_cast<double>(zp)}, "power-of-two search");
      const double error = affineLpError(x, grid, 2.0)[0];
      if (error < best_error) {
        best_error = error;
        best = k;
      }
    }
  }
  return {at::tensor({stats.min, stats.max}, at::kFloat), at::full({1}, best, at::kLong)};
}

void PowerOfTwoObserver::foldBatch(const BatchSummary& summary) {
  const float lo = summary.at(0)[0].item<float>(), hi = summary.at(0)[1].item<float>();
  min_ = hasFolded() ? std::min(min_, lo) : lo;
  max_ = hasFolded() ? std::max(max_, hi) : hi;
  // Without a search the pick is the covering scale of the range so far, known here exactly.
  const int pick = options_.search_steps > 1 ? static_cast<int>(summary.at(1)[0].item<int64_t>())
                                             : coveringLog2Scale(min_, max_);
  last_pick_ = pick;
  ++pick_counts_[pick];
}

int PowerOfTwoObserver::chosenLog2Scale() const {
  int k = coveringLog2Scale(min_, max_);
  if (options_.search_steps > 1) {
    if (options_.selection == Selection::LastBatch) {
      k = last_pick_;
    } else {
      // Most frequent pick; ties go to the larger scale (less clipping).
      int64_t best_count = -1;
      for (auto it = pick_counts_.rbegin(); it != pick_counts_.rend(); ++it) {
        if (it->second > best_count) {
          best_count = it->second;
          k = it->first;
        }
      }
    }
  }
  if (options_.min_log2_scale) k = std::max(k, *options_.min_log2_scale);
  return k;
}

QParams PowerOfTwoObserver::computeQParams() const {
  const float scale = std::ldexp(1.0f, chosenLog2Scale());
  return makeQParams({scale}, {zeroPointFor(scale, min_, scheme())});
}

std::pair<at::Tensor, at::Tensor> PowerOfTwoObserver::computeRange() const {
  const QParams p = computeQParams();
  const double s = p.scaleValue();
  const double zp = static_cast<double>(p.zeroPointValue());
  return scalarRange((static_cast<double>(scheme().qmin()) - zp) * s,
                     (static_cast<double>(scheme().qmax()) - zp) * s);
}

void PowerOfTwoObserver::resetState() {
  pick_counts_.clear();
  last_pick_ = 0;
}

}  // namespace quant
}  // namespace qforge
