// How far ONNX Runtime's quantization error and the simulation's lie apart, each measured against
// the float model: the SQNR of each over all verified samples, their difference, and how much of
// that difference depends on which samples were verified. When every difference between the two
// runs is rounding carried through a deep graph, some samples come out better in ORT and some in
// the simulation (U^2-NetP on TensorRT_NLP, 16 photographs: from 2.9 dB in ORT's favour to 4.4 dB
// in the simulation's), and a gap pooled over 2 samples is mostly which 2 they were.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace qforge::verify {

// One output's quality in both runs (see QualityGap::finish).
struct OutputQuality {
  std::string output;
  double ort_sqnr_db = 0;
  double simulation_sqnr_db = 0;
  int64_t samples = 0;  // the units resampled: samples, or batches of an output without batch axis
  // ort_sqnr_db - simulation_sqnr_db, and its 90% interval: the samples drawn again with
  // replacement (bootstrap), widened to Student's t interval of the per-sample gaps where that is
  // wider (few samples); unbounded for one sample.
  double gap_db = 0;
  double gap_low_db = 0;
  double gap_high_db = 0;
  // The smallest |gap| inside the interval (0 when it holds 0): what the samples show for sure.
  double supportedGapDb() const;
};

class QualityGap {
 public:
  explicit QualityGap(std::string output) : output_(std::move(output)) {}

  // One batch of the three runs of one output. `samples`: the input samples in the batch; an
  // output whose first dim is another count has no batch axis and the batch is one unit. A batch
  // whose shapes differ (a data-dependent output) is left out.
  void add(const at::Tensor& ort, const at::Tensor& simulation, const at::Tensor& reference,
           int64_t samples);
  OutputQuality finish() const;

 private:
  struct Unit {
    double signal = 0;     // sum reference^2
    double ort_noise = 0;  // sum (ort - reference)^2
    double simulation_noise = 0;
  };
  std::string output_;
  std::vector<Unit> units_;
};

}  // namespace qforge::verify
