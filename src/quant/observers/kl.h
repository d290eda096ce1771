// KL / entropy observer: TensorRT's entropy calibration on a histogram of |x| accumulated over all
// batches (2048 bins over [0, max|x|], 2^(b-1) quantized bins for signed grids, 2^b for unsigned
// ones). The clip t gives the range [max(min, -t), min(max, t)]. Per-tensor only.
// Like TensorRT, the first bin is discarded before the search (NVIDIA's MLPerf calibration notes:
// it "typically contains a huge number of noise activations"): the zeros of a ReLU or of padding
// would otherwise make every wide range look costly and clip the tensor far into its values.
#pragma once

#include "quant/abs_histogram.h"
#include "quant/entropy_calibration.h"
#include "quant/observer.h"
#include "quant/observers/abs_histogram_observer.h"

namespace qforge {
namespace quant {

class KlObserver : public AbsHistogramObserver {
 public:
  // quantized_bins = 0 derives the count from the scheme (qmax + 1); keep_first_bin searches
  // the histogram as observed (the published algorithm, without TensorRT's discard).
  KlObserver(std::string tensor_name, QScheme scheme, int64_t bins = 2048,
             int64_t quantized_bins = 0, bool keep_first_bin = false);

  // The calibration result behind the current range (threshold, kept bins, divergence).
  EntropyCalibration calibration() const;
  // The 2048-bin histogram of |x| over [0, max|x|] the calibration runs on (first bin
  // discarded unless kept).
  std::vector<double> calibrationHistogram() const;
  double maxAbs() const { return histogram().maxAbs(); }

 protected:
  std::pair<at::Tensor, at::Tensor> computeRange() const override;

 private:
  int64_t bins_;
  int64_t quantized_bins_;
  bool keep_first_bin_;
};

}  // namespace quant
}  // namespace qforge
