// One trial of a tuning search (autotune, mixed precision): the whole PTQ flow in memory with a
// config (pipelines::quantizeModel), scored on the evaluation data against the float model, with
// what the config costs: units kept float or widened, and the weights' bits. The searches decide
// what to try; the runner measures it the same way for both.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "algos/sensitivity.h"
#include "backends/backend_config.h"
#include "passes/quant_config.h"
#include "pipelines/ptq_pipeline.h"

namespace qforge::pipelines {

struct TuningTrial {
  int64_t trial = 0;  // 1-based
  std::string change;
  double metric = 0;           // top-1 %, SQNR dB or the metric script's figure
  std::optional<double> drop;  // top1, script: float - quantized
  bool met = false;            // set by the search
  int64_t float_units = 0;
  int64_t wide_units = 0;       // units a search override gave another width
  double avg_weight_bits = 0;   // over weight elements, float weights counting 32
  double base_width_share = 0;  // weight elements at the starting width
  int64_t weight_bytes = 0;     // the weights at their widths, float ones at 4 bytes
  double seconds = 0;
  nlohmann::json config;  // the trial's config (the starting one plus its changes)
};

// The weight elements of a prepared model by width (float units' weights at 32 bits).
std::map<int, int64_t> weightElementsByWidth(const passes::PreparedModel& model);

class TrialRunner {
 public:
  // Reads the evaluation data (`ptq.eval`, `eval_limit`, `eval_batch`), the backend and the
  // starting config (`quant_config`, else `config`). `metric` is top1, sqnr or auto (top1 when
  // the data has labels and the model's first output holds class scores; the script's figure
  // when `ptq.metric_script` names one: pipelines/metric_script.h). `stage` names the
  // progress events; `override_tag` starts the `where` of every override a search adds, so
  // trials count them as widened units. Throws qforge::Error without evaluation data; the first
  // trial throws for a top1 metric the data or model cannot give.
  TrialRunner(const PtqOptions& ptq, const std::string& metric, std::string stage,
              std::string override_tag, const ProgressCallback& progress);

  // Runs the flow with `config` and measures it; `total` is what the progress events count to.
  // The first trial resolves the metric (top1 or sqnr) and the float model's top-1.
  TuningTrial run(const std::string& change, const passes::QuantConfig& config, int64_t total,
                  PtqResult* result = nullptr);

  const std::vector<algos::AnalysisBatch>& batches() const { return batches_; }
  // The first batches holding at least `samples` samples (all when fewer): what sensitivity is
  // measured on.
  std::vector<algos::AnalysisBatch> firstBatches(int64_t samples) const;
  const std::string& describedData() const { return described_; }
  bool labelled() const { return labelled_; }  // every evaluation batch has labels
  const backends::BackendConfig& backend() const { return backend_; }
  const passes::QuantConfig& startConfig() const { return start_config_; }
  int startWeightBits() const;
  // top1, sqnr or script; empty before the first trial.
  const std::string& metric() const { return metric_; }
  std::optional<double> floatMetric() const { return float_metric_; }
  double secondsSinceStart() const { return secondsSince(start_); }
  int64_t trialsRun() const { return trials_run_; }

 private:
  PtqOptions ptq_;
  std::string requested_metric_, stage_, override_tag_;
  ProgressCallback progress_;
  Clock::time_point start_;
  passes::QuantConfig start_config_;
  backends::BackendConfig backend_;
  std::vector<algos::AnalysisBatch> batches_;
  std::vector<TensorMap> references_;  // the float outputs per batch, from the first trial
  std::string described_;
  bool labelled_ = true;
  std::string metric_;
  std::optional<double> float_metric_;
  double script_value_ = 0;  // the metric script's figure for the trial being run
  int64_t trials_run_ = 0;
};

// A trial as report.json holds it.
nlohmann::json tuningTrialJson(const TuningTrial& trial);

// A QuantConfig as the JSON its file format reads back (passes/quant_config.h).
nlohmann::json quantConfigJson(const passes::QuantConfig& config);

}  // namespace qforge::pipelines
