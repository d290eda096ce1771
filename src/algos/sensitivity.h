// Which quantizers of a calibrated model cost its outputs the most. Over a few batches of data,
// against the float model's outputs on the same batches:
//   isolated       only this quantizer on: the noise it brings alone;
//   leave-one-out  every quantizer on except this one: what turning it off would win;
//   Fisher         the output noise this quantizer alone is predicted to bring, from gradients
//                  (E over v ~ N(0, I) of (v^T J delta)^2 = |J delta|^2, J the output's Jacobian
//                  at this point and delta its quantization error there): the empirical Fisher of
//                  a Gaussian output, one backward pass per probe for every quantizer at once;
//   local          its own rounding and clipping on what it sees with every quantizer on;
//   accumulated    what it outputs with every quantizer on, against the float model's value there;
//   range          extremes, percentiles, clipping and channel spread of what it sees in float.
// The model's quantizer modes are restored afterwards.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "algos/noise_sums.h"
#include "algos/range_stats.h"
#include "exec/executor.h"
#include "passes/prepare.h"

namespace qforge::algos {

struct QuantizerSensitivity {
  std::string quantizer;
  std::optional<NoiseSums> isolated;
  std::optional<NoiseSums> leave_one_out;
  std::optional<double> fisher;  // predicted output noise power (in NoiseSums::noise's units)
  // With Fisher: <e, J d> summed over the samples, e the outputs' error with every quantizer on,
  // J the outputs' Jacobian at this quantizer and d its error there (both with every quantizer
  // on); and what leaving this quantizer out is predicted to take off the outputs' noise,
  // 2 <e, J d> - fisher (exact for a linear model).
  std::optional<double> error_alignment;
  std::optional<double> fisher_gain;
  std::optional<NoiseSums> local;
  std::optional<NoiseSums> accumulated;
  std::optional<RangeSummary> range;
};

struct SensitivityOptions {
  bool isolated = true;
  bool leave_one_out = true;
  bool fisher = false;
  int64_t fisher_probes = 4;  // random output directions per batch
  uint64_t seed = 0;
  // The outputs scored (the model's float outputs when empty).
  std::vector<std::string> outputs;
  // The quantizers measured isolated and left out (every one when empty); a name the model does
  // not have is an error.
  std::vector<std::string> measured;
  // The float model's outputs per batch from an earlier analysis of the same data (its
  // `references`, kept with `keep_references`): the float runs are skipped, and with them the
  // activations' ranges and accumulated noise. For scoring many configs of one model.
  const std::vector<TensorMap>* references = nullptr;
  bool keep_references = false;
  bool keep_outputs = false;  // the scored outputs with every quantizer on, per batch
};

// One run's feeds by input name, and the samples' labels when the data has them (top-1).
struct AnalysisBatch {
  TensorMap feeds;
  at::Tensor labels;
};

struct SensitivityResult {
  std::vector<std::string> outputs;              // the outputs scored
  NoiseSums quantized;                           // every quantizer on
  std::vector<QuantizerSensitivity> quantizers;  // in model.quantizers() order
  int64_t samples = 0;
  int64_t runs = 0;                          // model runs made
  std::vector<TensorMap> references;         // with keep_references: the float outputs per batch
  std::vector<TensorMap> quantized_outputs;  // with keep_outputs
  // Top-1 of the first scored output, float and with every quantizer on, when it holds class
  // scores and every batch has labels.
  std::optional<int64_t> float_top1, quantized_top1;

  // Those counts in percent of the samples; nullopt without them.
  std::optional<double> top1Percent(bool quantized) const;
};

// Called after each model run with (runs done, runs planned, what ran).
using SensitivityProgress = std::function<void(int64_t, int64_t, const std::string&)>;

// Each batch is one run of the model (a fixed batch dim's size when the model has one). Throws
// qforge::Error when the model is not calibrated, when there is no batch or when an output named in
// `options` is not a float output of the model.
SensitivityResult analyzeSensitivity(passes::PreparedModel& model,
                                     const std::vector<AnalysisBatch>& batches,
                                     const SensitivityOptions& options,
                                     const SensitivityProgress& progress = {});

// Spearman's rank correlation of two equally long lists (ties get their average rank); nullopt
// for fewer than 3 pairs or a list without spread.
std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace qforge::algos
