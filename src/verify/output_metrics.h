// How far one run's output is from a reference run's, accumulated batch by batch in constant
// memory: sums for SQNR and cosine similarity, a histogram of absolute differences for the
// largest and 99th-percentile difference and the shares of exact elements and of elements within
// one level (read in units of the
// output's quantization step at the end, when the step is known), top-1 agreement for
// classifier outputs, and the IoU of maps thresholded at a given level.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algos/noise_sums.h"

namespace qforge::verify {

// Class scores [batch, classes >= 2] are a classifier output: top-1 agreement means something
// there and nowhere else. With `samples` >= 0, the first dim must also be that many samples (a
// detector's boxes [detections, 4] are not class scores).
bool isClassifierOutput(at::IntArrayRef shape, int64_t samples = -1);

// Absolute differences in log-spaced bins (64 per octave, 2^-64 .. 2^64): quantiles to within
// 1.1% of the value, whatever the scale; exact zeros counted apart.
class DifferenceHistogram {
 public:
  void add(const at::Tensor& absolute_differences);
  int64_t count() const { return count_; }
  double max() const { return max_; }
  // The smallest bin edge at or above the q-quantile (clamped to max()).
  double quantile(double q) const;
  // Share of differences below `bound` (bins counted whole when their upper edge is <= bound).
  double shareBelow(double bound) const;

 private:
  static constexpr int kPerOctave = 64;
  static constexpr int kOctaves = 128;
  std::vector<int64_t> bins_ = std::vector<int64_t>(kPerOctave * kOctaves, 0);
  int64_t zeros_ = 0;
  int64_t count_ = 0;
  double max_ = 0;
};

struct OutputComparison {
  std::string output;
  bool classifier = false;
  int64_t samples = 0;
  // Classifier outputs only: samples whose picked class the reference scores within one step of
  // its own best (the same class, or a tie that one step of rounding can turn).
  int64_t top1_agree = 0;
  double sqnr_db = 0;  // 10 log10(sum ref^2 / sum (got - ref)^2); +inf when identical
  double cosine = 0;   // <got, ref> / (|got| |ref|), all elements of the run
  double step = 0;     // the quantization step the *_steps figures are in
  std::string step_source;
  double max_steps = 0;  // largest |got - ref| / step
  double p99_steps = 0;
  double exact_fraction = 0;  // |got - ref| < 1e-3 step
  // |got - ref| at most one level: below 1.05 steps, so that float noise on a one-level
  // difference still counts and two levels never do.
  double within_one_step_fraction = 0;
  std::optional<double> iou;  // of got > t and ref > t, when a threshold t was given
  double max_abs_reference = 0;
  // Batches whose shapes differed (a data-dependent output: detections kept after a score
  // threshold or NMS), left out of every figure above; the first such pair of shapes.
  int64_t shape_mismatches = 0;
  std::string shape_example;
};

class OutputAccumulator {
 public:
  // `iou_threshold`: also score the IoU of the maps thresholded there.
  explicit OutputAccumulator(std::string output, std::optional<double> iou_threshold = {})
      : output_(std::move(output)), iou_threshold_(iou_threshold) {}

  // One batch of both runs (batch axis first). `samples`: how many input samples the batch holds,
  // when known; an output whose first dim is not that count has no batch axis (a detector's
  // [detections, 4]) and counts as one sample per input sample. Runs whose shapes differ are
  // counted (OutputComparison::shape_mismatches), not compared.
  void add(const at::Tensor& got, const at::Tensor& reference, int64_t samples = -1);
  // The figures, with differences read in units of `step` (> 0).
  OutputComparison finish(double step, const std::string& step_source) const;
  double maxAbsReference() const { return max_abs_reference_; }
  int64_t samples() const { return samples_; }

 private:
  std::string output_;
  std::optional<double> iou_threshold_;
  bool classifier_ = false;
  int64_t samples_ = 0;
  // Per sample of a classifier output: how much lower the reference scores the class the run
  // picked than its own best (0 when they pick the same class).
  std::vector<double> top1_gaps_;
  algos::NoiseSums sums_;  // for SQNR and cosine
  double intersection_ = 0, union_ = 0;
  double max_abs_reference_ = 0;
  DifferenceHistogram differences_;
  int64_t shape_mismatches_ = 0;
  std::string shape_example_;
};

}  // namespace qforge::verify
