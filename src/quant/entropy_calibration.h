// TensorRT's entropy calibration: choose the clipping threshold of |x| whose 2^(b-1)-level
// quantized distribution is closest in KL divergence to the observed one (Migacz, "8-bit Inference
// with TensorRT", GTC 2017). Works on a histogram; building the histogram is the observer's job.
#pragma once

#include <cstdint>
#include <vector>

namespace qforge {
namespace quant {

struct EntropyCalibration {
  int64_t kept_bins = 0;    // m: bins [0, m) are kept, everything above is clipped into bin m-1
  double threshold = 0.0;   // (m + 0.5) * bin_width, at most the histogram's top
  double divergence = 0.0;  // KL(P || Q) at m, in nats
};

// For every candidate m in [quantized_bins, hist.size()]:
//   P = hist[0, m) with the count of all bins >= m added to bin m-1 (outliers are clipped, not
//       dropped), normalised;
//   Q = hist[0, m) merged into `quantized_bins` groups of floor(m / quantized_bins) bins (the last
//       group takes the remainder), each group's count spread evenly over the bins of the group
//       where P is non-zero, normalised;
//   KL(P || Q) = sum over P > 0 of P ln(P / Q), infinite when Q = 0 < P.
// The smallest divergence wins (the smaller m on exact ties). O(hist.size() * quantized_bins)
// with prefix sums instead of the published O(hist.size()^2) loop.
// Throws qforge::Error for an empty histogram, negative counts or too few bins.
EntropyCalibration entropyCalibrate(const std::vector<double>& hist, double bin_width,
                                    int64_t quantized_bins);

}  // namespace quant
}  // namespace qforge
