// Accuracy-driven tuning (`qforge quantize --target-drop`, `--target-sqnr`): quantize, measure
// against the user's target on the evaluation data, and while it is missed try, one trial each,
// (1) the Mse observer for activations, then for weights, keeping what helps; (2) the most
// sensitive units (algos/sensitivity.h: isolated or Fisher noise, per unit its worst quantizer)
// moved to a wider width the backend allows, or kept float where it allows none: a prefix of
// the ranking that doubles until the target is met, then is bisected down to the shortest that
// meets it; (3) within that prefix, the weights of units whose activations cost more put back to
// the starting width, as many as still meet the target (least noisy first, bisected). Every trial
// is a full prepare + calibrate (+ reconstruction when asked) with its config, so the chosen config
// replays exactly with `qforge quantize --config`. Deterministic.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "passes/quant_config.h"
#include "pipelines/ptq_pipeline.h"
#include "pipelines/tuning_trial.h"

namespace qforge::pipelines {

struct AutotuneOptions {
  // The PTQ settings of every trial: model, backend, calibration, algorithm, and the evaluation
  // data the metric is measured on (eval, eval_limit, eval_batch). `config`/`quant_config` is
  // the starting config.
  PtqOptions ptq;
  // "top1" (labelled classifier data: the drop in points is the target), "sqnr" (dB of the
  // outputs against the float model's), or "auto": top1 when the data and model allow it.
  std::string metric = "auto";
  std::optional<double> target_drop;  // top1: largest drop in points
  std::optional<double> target_sqnr;  // sqnr: smallest SQNR in dB
  int64_t max_trials = 20;
  double time_budget = 0;  // seconds; 0: none
  // How the units are ranked for the fallback: "isolated" (each quantizer alone, measured: one
  // run per quantizer and sample, sees what a linearization misses) or "fisher" (predicted from
  // gradients, one backward pass per probe for all: for models with many quantizers).
  std::string ranking = "isolated";
  int64_t sensitivity_samples = 8;
};

struct AutotuneResult {
  std::string metric;  // as resolved
  std::optional<double> float_metric;
  double target = 0;
  std::vector<TuningTrial> trials;
  size_t best = 0;  // index into trials: the one meeting the target with the fewest wider or
                    // float units, then the fewest weight bits; else the best metric
  bool met = false;
  double seconds = 0;
  std::string note;  // why it stopped without meeting the target
};

// Runs the trials; throws qforge::Error for settings that cannot work (no evaluation data, no
// target, a top1 target on data without labels) before any trial.
AutotuneResult autotune(const AutotuneOptions& options, const ProgressCallback& progress = {});

// The "autotune" section of a report (what the HTML report draws).
nlohmann::json autotuneJson(const AutotuneResult& result);

}  // namespace qforge::pipelines
