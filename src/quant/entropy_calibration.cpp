#include "quant/entropy_calibration.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"

namespace qforge {
namespace quant {

namespace {

double xlogx(double v) {
  return v > 0.0 ? v * std::log(v) : 0.0;
}

}  // namespace

EntropyCalibration entropyCalibrate(const std::vector<double>& hist, double bin_width,
                                    int64_t quantized_bins) {
  const int64_t n = static_cast<int64_t>(hist.size());
  require(quantized_bins >= 2 && n >= quantized_bins,
          "entropy calibration: need at least " + std::to_string(quantized_bins) +
              " histogram bins, got " + std::to_string(n));
  require(bin_width > 0.0, "entropy calibration: bin width must be positive");
  // Prefix sums over the first k bins: counts, non-zero bins and sum of c ln c.
  std::vector<double> count(n + 1, 0.0), plogp(n + 1, 0.0);
  std::vector<int64_t> nonzero(n + 1, 0);
  for (int64_t k = 0; k < n; ++k) {
    require(hist[k] >= 0.0 && std::isfinite(hist[k]),
            "entropy calibration: histogram counts must be finite and non-negative");
    count[k + 1] = count[k] + hist[k];
    nonzero[k + 1] = nonzero[k] + (hist[k] > 0.0 ? 1 : 0);
    plogp[k + 1] = plogp[k] + xlogx(hist[k]);
  }
  const double total = count[n];
  require(total > 0.0, "entropy calibration: the histogram is empty");

  EntropyCalibration best;
  best.kept_bins = n;
  best.divergence = std::numeric_limits<double>::infinity();
  for (int64_t m = quantized_bins; m <= n; ++m) {
    const double outliers = total - count[m];
    const double p_last = hist[m - 1] + outliers;
    // sum p ln p over P (unnormalised): bins [0, m-1) unchanged, bin m-1 with the outliers.
    const double sum_plogp = plogp[m - 1] + xlogx(p_last);
    const int64_t merged = m / quantized_bins;
    double sum_plogq = 0.0;
    bool infinite = false;
    for (int64_t g = 0; g < quantized_bins; ++g) {
      const int64_t start = g * merged;
      const bool last = g == quantized_bins - 1;
      const int64_t stop = last ? m : start + merged;
      const double group_count = count[stop] - count[start];
      double group_p = group_count;
      int64_t group_nonzero = nonzero[stop] - nonzero[start];
      if (last) {
        // P's last bin carries the outliers, so it may be non-zero where hist is not.
        group_p += outliers;
        group_nonzero += (p_last > 0.0 ? 1 : 0) - (hist[m - 1] > 0.0 ? 1 : 0);
      }
      if (group_nonzero == 0) continue;
      if (group_count == 0.0) {
        infinite = true;  // Q = 0 on bins where P > 0
        break;
      }
      sum_plogq += group_p * std::log(group_count / static_cast<double>(group_nonzero));
    }
    if (infinite) continue;
    // KL = sum (p/S_P) ln((p/S_P) / (q/S_Q)) with S_P = total and S_Q = count[m].
    const double kl = (sum_plogp - sum_plogq) / total - std::log(total) + std::log(count[m]);
    if (kl < best.divergence) {
      best.divergence = kl;
      best.kept_bins = m;
    }
  }
  const double top = static_cast<double>(n) * bin_width;
  best.threshold = std::min((static_cast<double>(best.kept_bins) + 0.5) * bin_width, top);
  return best;
}

}  // namespace quant
}  // namespace qforge
