// Empirical bias correction (Nagel et al. 2019, section 4.2, the variant with data): quantizing
// a layer's weights shifts the mean of its output, E[W_q x] - E[W x] = (W_q - W) E[x], and the
// shift adds up through the network. On a prepared and calibrated model, each weighted layer in
// topological order gets the per-output-channel mean of its output over real data in the float
// model and in the quantized one (with the earlier layers already corrected), and its bias
// absorbs the difference: b -= E[y_q] - E[y_fp].
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/loader.h"
#include "passes/prepare.h"

namespace qforge::algos {

// What happened to one weighted unit. Shifts are max over output channels of
// |E[y_q] - E[y_fp]| of the anchor node's output.
struct CorrectedLayer {
  std::string unit;
  std::string node;  // the anchor (describe() form)
  std::string op;
  int64_t channels = 0;
  double shift_before = 0;
  double shift_after = 0;
  // The node had no bias and got a zero one to correct. It is float: no bias quantizer is added,
  // whatever the backend's bias rule (ONNX Runtime's QOperator export still rounds it to int32).
  bool bias_added = false;
  std::string skipped;  // why the unit was left alone; empty when corrected
};

struct BiasCorrectionResult {
  std::vector<CorrectedLayer> layers;  // weighted units, in topological order
  int64_t batches = 0;
  int64_t samples = 0;
  double seconds = 0;
};

// Called after each corrected layer with (layers done, layers planned).
using BiasCorrectionProgress = std::function<void(int64_t, int64_t)>;

// Corrects the biases of `model`'s Conv, ConvTranspose and Gemm units with an initializer weight
// over the first `batches` batches `loader` yields (from its current position; they are held in
// memory, as every layer runs over the same ones). MatMul units are reported as skipped (no bias
// input), and so are units the config keeps float. A bias with its own quantizer stays consistent:
// derived int32 biases follow the new value; a bias quantizer with an observer re-observes it. Each
// quantizer's mode is restored at the end.
//
// Throws qforge::Error when a quantizer has no parameters (the model was not calibrated), when
// `batches` < 1 or the loader yields nothing. A bias that is computed (not an initializer) or a
// Gemm C that varies along rows leaves its unit skipped, with the reason.
BiasCorrectionResult correctBias(passes::PreparedModel& model, data::BatchLoader& loader,
                                 int64_t batches, const BiasCorrectionProgress& progress = {});

}  // namespace qforge::algos
