// `qforge analyze` as one call: which quantizers of a model cost its outputs the most, and what
// to change about them. The model is an ONNX file (prepared for a backend and calibrated here,
// as `qforge quantize` would) or a prepared model directory (analysed as calibrated). Over a few
// samples it measures each quantizer's isolated and leave-one-out sensitivity, its Fisher
// sensitivity, its own and accumulated noise and the range it sees (algos/sensitivity.h), ranks
// the culprits and gives each fixes drawn from what the backend allows (algos/fix_suggestions.h).
//
//   pipelines::AnalyzeOptions o;
//   o.model_path = "u2netp.onnx";
//   o.backend = "TensorRT";
//   o.calib = "folder:images";
//   nlohmann::json report = pipelines::runAnalysis(o).report;
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algos/sensitivity.h"
#include "passes/prepare.h"
#include "pipelines/model_data.h"
#include "pipelines/progress.h"

namespace qforge::pipelines {

// The settings, one per `qforge analyze` flag; messages about them name the flag.
struct AnalyzeOptions {
  // ONNX file or a prepared model directory; or the float model as `graph` (then `model_path`
  // only names it in the report), not changed.
  std::string model_path;
  const Graph* graph = nullptr;
  std::string backend;  // with an ONNX file: a built-in name or a backend .json
  std::string config;   // with an ONNX file: a quantization config (.json, .yaml)
  DataSource calib = "fashion-mnist:train";
  int64_t calib_batches = 8;
  int64_t calib_batch = 32;
  std::optional<uint64_t> calib_shuffle_seed;  // PtqOptions::calib_shuffle_seed
  DataSource data;                             // the samples analysed; empty: the calibration data
  int64_t samples = 32;
  int64_t batch = 8;  // samples per run (a fixed batch dim's size wins)
  bool isolated = true;
  bool leave_one_out = true;
  bool fisher = true;
  int64_t fisher_probes = 4;
  std::vector<std::string> outputs;  // outputs scored; empty: every float output
  int64_t top = 10;                  // culprits that get fixes
  uint64_t seed = 0;
};

struct AnalyzeResult {
  nlohmann::json report;  // what `qforge analyze --json` prints (schema in docs/ANALYZE.md)
  std::unique_ptr<passes::PreparedModel> model;  // calibrated, modes as they were
};

// The first `limit` samples (0: all) of `source` as runs of the model: `batch` samples each, or a
// fixed batch dim's size when the model has one; `described` gets the dataset's description.
std::vector<algos::AnalysisBatch> analysisBatches(const DataSource& source, const Graph& graph,
                                                  int64_t batch, int64_t limit,
                                                  std::string* described = nullptr);

// Bad settings, data or models throw qforge::Error (one line) before the analysis runs.
AnalyzeResult runAnalysis(const AnalyzeOptions& options, const ProgressCallback& progress = {});

// A quantization config (passes/quant_config.h) holding the first fix with an override of each
// ranked culprit, most harmful first: what `--write-config` writes.
nlohmann::json suggestedConfig(const nlohmann::json& report);

}  // namespace qforge::pipelines
