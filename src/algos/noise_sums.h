// A run's outputs against a reference run's, as running sums over batches: SQNR and cosine
// similarity at the end. What analysis keeps per quantizer and verify per output.
#pragma once

#include <ATen/ATen.h>

namespace qforge::algos {

struct NoiseSums {
  double signal = 0;  // sum reference^2
  double noise = 0;   // sum (got - reference)^2
  double dot = 0;     // sum got * reference
  double got_energy = 0;

  // Returns got - reference in double, for callers that need the differences too.
  at::Tensor add(const at::Tensor& got, const at::Tensor& reference);
  void merge(const NoiseSums& other);
  double sqnrDb() const;  // +inf when noise is 0, -inf when only the reference is all zeros
  double cosine() const;  // 1 when both are all zeros, 0 when one is
};

}  // namespace qforge::algos
