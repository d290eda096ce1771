// Naive post-training calibration: observers watch `batches` batches of real data flow through
// the prepared model in float, then every quantizer switches to quantization with what its
// observer saw. Data parallel over a ProcessGroup: rank r runs batches r, r + N, r + 2N, ...,
// and after each round the observers of all ranks fold in what every rank saw
// (algos/calibration_sync.h), so every rank ends with the qparams one process would compute.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "data/loader.h"
#include "passes/prepare.h"

namespace qforge::algos {

class ProcessGroup;

// Called after each batch with (batches done, batches planned, samples done).
using CalibrationProgress = std::function<void(int64_t, int64_t, int64_t)>;

struct CalibrationResult {
  int64_t batches = 0;
  int64_t samples = 0;
  double seconds = 0;
};

// Feeds up to `batches` batches from `loader` (from its current position) to the model's
// inputs (every one, from the batch's feeds; in runs of a fixed batch dim's size). Throws
// qforge::Error when the loader yields nothing, and names every quantizer that saw no data (a value
// the calibration data never reached). With a group of N ranks, each runs its share of the same
// loader's batches; the result counts every rank's.
CalibrationResult calibrate(passes::PreparedModel& model, data::BatchLoader& loader,
                            int64_t batches, const CalibrationProgress& progress = {},
                            ProcessGroup* group = nullptr);

// Throws "<purpose> needs a calibrated model: quantizer '...' has no parameters yet; run
// calibration first" for the first affine quantizer without scale and zero point.
void requireCalibrated(passes::PreparedModel& model, const std::string& purpose);

// The model's single data input (initializers excluded); throws naming them when there are more.
// Evaluation and calibration both feed this one.
const Value& dataInput(const Graph& graph);

}  // namespace qforge::algos
