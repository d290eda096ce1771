// What a QAT pipeline run did, as data: everything `qforge qat` prints and writes to report.json
// (qatReportJson gives exactly that JSON) and the per-epoch CSV.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algos/qat_results.h"
#include "pipelines/ptq_report.h"

namespace qforge::pipelines {

struct QatPipelineReport {
  std::string model;      // the model file (or the name the caller gave an in-memory graph)
  std::string backend;    // the backend's name
  std::string algorithm;  // --algo, or "backend default"
  std::string loss;       // "cross entropy", or "distillation (mse)" / "distillation (kl)"
  CalibrationSummary calibration;
  // Evaluation (rank 0, when asked): the data, and top-1 in percent of the float model and the
  // calibrated one (not on resume), and of the trained one (once finished).
  std::string eval_data;
  std::optional<double> float_top1, ptq_top1, qat_top1;
  algos::QatReport training;
  int64_t batch_size = 0;  // per rank
  int world_size = 1;
  int rank = 0;
  int threads = 0;
  std::string checkpoint;  // its path
  // Set once training finished (not when interrupted).
  std::optional<int> batchnorms_merged;
  std::vector<std::string> deploy_notes;
  std::vector<std::string> files;       // rank 0: every file written, report.json last
  std::optional<double> total_seconds;  // rank 0, once finished
};

// The report as `qforge qat --json` prints it and report.json holds; fields that are not set
// (interrupted, another rank) are left out.
nlohmann::json qatReportJson(const QatPipelineReport& report);

// The per-epoch metrics as CSV: epoch,loss,train_top1,eval_top1,lr,steps,bn_frozen,seconds.
std::string qatEpochsCsv(const std::vector<algos::QatEpochResult>& epochs);

}  // namespace qforge::pipelines
