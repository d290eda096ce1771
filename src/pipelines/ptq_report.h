// What a PTQ pipeline run did, as data: everything `qforge quantize` prints and writes to
// report.json, which ptqReportJson turns into exactly that JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algos/bias_correction.h"
#include "algos/equalization.h"
#include "algos/reconstruction.h"
#include "passes/prepare.h"
#include "pipelines/scoring.h"

namespace qforge::pipelines {

struct CalibrationSummary {
  std::string data;  // the dataset's describe()
  int64_t batches = 0;
  int64_t samples = 0;
  int64_t batch_size = 0;
  std::optional<uint64_t> shuffle_seed;  // none: the source's first samples
  double seconds = 0;
};

// Float against quantized on one dataset.
struct Evaluation {
  std::string data;
  Scores float_scores, quantized_scores;
  double float_seconds = 0, quantized_seconds = 0;
};

struct ReconstructionSummary {
  algos::ReconstructionConfig config;  // as run: preset, settings file and overrides applied
  algos::ReconstructionReport result;
  int64_t samples = 0;  // calibration images reconstructed on
};

struct PtqReport {
  std::string model;      // the model file (or the name the caller gave an in-memory graph)
  std::string backend;    // the backend's name
  std::string algorithm;  // naive, adaround, brecq, qdrop
  CalibrationSummary calibration;
  std::vector<passes::UnitSummary> units;
  std::vector<std::string> float_ops;  // ops the backend leaves in float
  nlohmann::json quantizers;           // deploy::quantizerTable, also in quantizers.json
  std::optional<algos::EqualizationReport> equalization;
  std::optional<ReconstructionSummary> reconstruction;
  std::optional<algos::BiasCorrectionResult> bias_correction;
  std::optional<Evaluation> evaluation;
  std::optional<nlohmann::json> autotune;  // the trials (pipelines/autotune.h autotuneJson)
  // The widths chosen and the trials (pipelines/mixed_precision.h mixedPrecisionJson).
  std::optional<nlohmann::json> mixed_precision;
  std::vector<std::string> deploy_notes;  // what deploy did not write and why
  std::vector<std::string> files;         // every file written, report.json last
  double prepare_seconds = 0;
  double total_seconds = 0;
  int threads = 0;
  int world_size = 1;  // processes that calibrated and reconstructed together
  int rank = 0;
  int64_t peak_rss_bytes = 0;
};

// The report as `qforge quantize --json` prints it and report.json holds.
nlohmann::json ptqReportJson(const PtqReport& report);

}  // namespace qforge::pipelines
