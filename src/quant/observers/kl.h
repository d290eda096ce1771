// KL / entropy observer: TensorRT's entropy calibration on a histogram of |x| accumulated over all
// batches (2048 bins over [0, max|x|], 2^(b-1) quantized bins for signed grids, 2^b for unsigned
// ones). The clip t gives the range [max(min, -t), min(max, t)]. Per-tensor only.
#pragma once

#include "quant/abs_histogram.h"
#include "quant/entropy_calibration.h"
#include "quant/observer.h"
#include "quant/observers/abs_histogram_observer.h"

namespace qforge {
namespace quant {

class KlObserver : public AbsHistogramObserver {
 public:
  // quantized_bins = 0 derives the count from the scheme (qmax + 1).
  KlObserver(std::string tensor_name, QScheme scheme, int64_t bins = 2048,
             int64_t quantized_bins = 0);

  // The calibration result behind the current range (threshold, kept bins, divergence).
  EntropyCalibration calibration() const;
  // The 2048-bin histogram of |x| over [0, max|x|] the calibration runs on.
  std::vector<double> calibrationHistogram() const;
  double maxAbs() const { return histogram().maxAbs(); }

 protected:
  std::pair<at::Tensor, at::Tensor> computeRange() const override;

 private:
  int64_t bins_;
  int64_t quantized_bins_;
};

}  // namespace quant
}  // namespace qforge
