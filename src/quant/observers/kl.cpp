#include "quant/observers/kl.h"

#include <algorithm>
#include <cmath>

namespace qforge {
namespace quant {

namespace {

// The internal histogram keeps 8 fine bins per calibration bin (4 to 8 over the observed range,
// its width being a power of two), so resampling splits at most one fine bin per calibration bin.
constexpr int64_t kOversampling = 8;

}  // namespace

KlObserver::KlObserver(std::string tensor_name, QScheme scheme, int64_t bins,
                       int64_t quantized_bins, bool keep_first_bin)
    : AbsHistogramObserver("Kl", std::move(tensor_name), scheme,
                           std::max<int64_t>(bins, 2) * kOversampling),
      bins_(bins),
      quantized_bins_(quantized_bins > 0 ? quantized_bins : scheme.qmax() + 1),
      keep_first_bin_(keep_first_bin) {
  if (quantized_bins_ < 2 || bins_ < quantized_bins_) {
    fail("need at least as many histogram bins (" + std::to_string(bins_) +
         ") as quantized bins (" + std::to_string(quantized_bins_) + ")");
  }
}

std::vector<double> KlObserver::calibrationHistogram() const {
  std::vector<double> hist = histogram().resample(bins_, histogram().maxAbs());
  if (!keep_first_bin_) hist[0] = 0.0;  // the largest |x| lies in the last bin, so some remain
  return hist;
}

EntropyCalibration KlObserver::calibration() const {
  if (!hasData()) fail("no data observed yet");
  if (histogram().maxAbs() == 0.0) return EntropyCalibration{bins_, 0.0, 0.0};
  return entropyCalibrate(calibrationHistogram(), histogram().maxAbs() / static_cast<double>(bins_),
                          quantized_bins_);
}

std::pair<at::Tensor, at::Tensor> KlObserver::computeRange() const {
  return clippedRange(calibration().threshold);
}

}  // namespace quant
}  // namespace qforge
