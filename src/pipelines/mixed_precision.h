// Mixed precision under a budget (`qforge quantize --bits-budget 5`, `--size-budget 2M`): one
// weight width per unit, among those the backend runs (its "alternatives"), so that the model's
// outputs lose the least while the weights fit the budget. For every width W the backend allows,
// the flow runs with all weights at W (a trial scored on the evaluation data: the uniform
// reference the choice must beat) and measures each unit's weight noise at W on the first
// samples: isolated (each weight quantizer alone, measured) or Fisher (predicted from gradients).
// algos/bit_allocation.h then picks the widths whose noise sums to the least within the budget,
// and a last trial scores the choice. The choice is a quantization config (a global width and one
// override per unit at another), written as tuned_config.json so it can be edited and replayed.
//
// The budget counts the weights of quantized units (units the config keeps float are outside
// it); units whose width the backend pins (first_last_bits) or the config sets keep it, and count.
// Activations keep the config's widths.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipelines/ptq_pipeline.h"
#include "pipelines/tuning_trial.h"

namespace qforge::pipelines {

struct MixedPrecisionOptions {
  // The PTQ settings of every trial, and the evaluation data they are scored on.
  PtqOptions ptq;
  std::optional<double> bits_budget;   // average bits per quantized weight element
  std::optional<int64_t> size_budget;  // bytes of quantized weights
  std::string ranking = "isolated";    // the noise per unit and width: isolated or fisher
  std::string metric = "auto";         // top1, sqnr, auto (TrialRunner)
  int64_t sensitivity_samples = 64;    // the first evaluation samples the noise is measured on
};

struct UnitPrecision {
  std::string unit;
  int64_t elements = 0;
  int bits = 0;
  bool fixed = false;           // the backend or the config sets its width
  std::map<int, double> noise;  // by width: its weights' output noise there
};

struct MixedPrecisionResult {
  std::string metric;  // top1 or sqnr
  std::optional<double> float_metric;
  std::string ranking;
  std::vector<int> widths;  // the weight widths tried
  int64_t budget_bits = 0;  // the budget in bits of quantized weights
  int64_t weight_elements = 0;
  int64_t total_bits = 0;  // the choice's
  double predicted_noise = 0;
  double signal = 0;  // the outputs' energy on the samples the noise was measured on
  std::vector<UnitPrecision> units;
  std::vector<TuningTrial> trials;             // uniform at each width, then the choice (the last)
  std::optional<double> uniform_interpolated;  // the uniform metric at the choice's bits
  double seconds = 0;

  const TuningTrial& chosen() const { return trials.back(); }
  double averageBits() const;  // of the choice, over quantized weight elements
};

// Throws qforge::Error (naming the flags) for settings that cannot work, before any trial: no
// or two budgets, a backend with one weight width; after the uniform trials, for a budget below
// what the narrowest widths take.
MixedPrecisionResult mixedPrecision(const MixedPrecisionOptions& options,
                                    const ProgressCallback& progress = {});

// The report's "mixed_precision" section.
nlohmann::json mixedPrecisionJson(const MixedPrecisionResult& result);

}  // namespace qforge::pipelines
