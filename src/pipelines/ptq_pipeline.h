// Post-training quantization as one call, what `qforge quantize` runs and what another program
// (or a Python binding) embedding qforge calls: optional cross-layer equalization of the float
// model, prepare for the backend, calibrate (naive PTQ), optionally reconstruct (AdaRound, BRECQ,
// QDrop) and correct biases, evaluate float against quantized, deploy, save the prepared model,
// and write quantizers.json and report.json.
//
//   pipelines::PtqOptions o;
//   o.model_path = "resnet.onnx";
//   o.backend = "TensorRT";
//   o.calib = my_dataset;            // or a source string: "fashion-mnist:train"
//   o.out = "out/resnet-trt";
//   pipelines::PtqResult r = pipelines::runPtqPipeline(o);
//   r.report.evaluation, r.model->executor() ...
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "algos/distributed.h"
#include "ir/graph.h"
#include "passes/prepare.h"
#include "passes/quant_config.h"
#include "pipelines/model_data.h"
#include "pipelines/progress.h"
#include "pipelines/ptq_report.h"

namespace qforge::pipelines {

// The settings, one per `qforge quantize` flag; messages about them name the flag.
struct PtqOptions {
  // The float model: read from `model_path`, or copied from `graph` (then `model_path` only names
  // it in the report). Neither is changed.
  std::string model_path;
  const Graph* graph = nullptr;
  std::string backend;  // a built-in backend's name or a backend .json file
  std::string config;   // a quantization config file (.json, .yaml); "" none
  std::optional<passes::QuantConfig> quant_config;  // a config in memory; wins over `config`
  DataSource calib = "fashion-mnist:train";
  int64_t calib_batches = 32;
  int64_t calib_batch = 64;
  // Calibrate on a random subset of the source (shuffled with this seed) rather than its first
  // calib_batches * calib_batch samples: sources sorted by class or scene otherwise calibrate on
  // one class.
  std::optional<uint64_t> calib_shuffle_seed;
  DataSource eval;          // empty: no evaluation
  int64_t eval_limit = -1;  // samples evaluated; negative or 0: all
  int64_t eval_batch = 100;
  std::string out;     // the output directory
  bool deploy = true;  // false: save the prepared model only (`qforge deploy` deploys it later)
  // Reconstruction after calibration: "naive" (none), "adaround", "brecq", "qdrop", with the
  // preset's settings overridden by `algo_config` (MQBench's keys, .json or .yaml) and then by
  // iters, recon_batch (0: keep), cache_limit ("4G", "512M", bytes; "": keep) and seed.
  std::string algo = "naive";
  int64_t iters = 0;
  int64_t recon_batch = 0;
  std::string algo_config;
  std::string cache_limit;
  uint64_t seed = 0;
  // The prepare pass list ("cle,constants-to-initializers,fold-bn"; --passes): names from
  // algos::builtinPasses(); empty: prepare()'s default. Graph passes only get the placement
  // passes appended.
  std::string passes;
  bool cle = false;                // cross-layer equalization before prepare (folds BN)
  bool cle_relu6_to_relu = false;  // cle, and ReLU6 between pairs replaced by ReLU
  bool bias_correction = false;    // empirical, on the calibration batches, after reconstruction
  // Accuracy-driven tuning (pipelines/autotune.h), on the `eval` data: with a target, trials
  // choose the config (written as tuned_config.json), and the flow runs with the chosen one.
  std::optional<double> target_drop;  // top-1 points
  std::optional<double> target_sqnr;  // output SQNR in dB against the float model
  std::string tune_metric = "auto";   // top1, sqnr, auto (script with metric_script)
  // An executable scoring the outputs (pipelines/metric_script.h): the metric of autotune and
  // mixed precision, with --target-drop in its units.
  std::string metric_script;
  std::string tune_ranking = "isolated";  // isolated, fisher (AutotuneOptions::ranking)
  int64_t max_trials = 20;
  double time_budget = 0;  // seconds; 0: none
  // Mixed precision (pipelines/mixed_precision.h), scored on the `eval` data: with a budget, one
  // weight width per unit among the backend's is chosen (tuned_config.json) and the flow runs
  // with it. `tune_ranking` and `tune_metric` apply.
  std::optional<double> bits_budget;  // average bits per quantized weight element
  std::string size_budget;            // bytes of quantized weights ("2M", "512K", a count)
  // Data parallel (--world-size, --rank, --master): every rank runs this same call; calibration
  // and reconstruction split the calibration batches over the ranks (c10d over TCP, Gloo), and
  // every rank ends with the same quantized model. Rank 0 alone evaluates and writes `out`.
  algos::DistributedOptions distributed;
};

struct PtqResult {
  PtqReport report;
  std::unique_ptr<passes::PreparedModel> model;  // calibrated (and reconstructed), as saved
};

// Prepares, calibrates, reconstructs, corrects biases and evaluates as runPtqPipeline does, in
// memory: nothing is written and `out` is not read (autotune's trials, analysis).
PtqResult quantizeModel(const PtqOptions& options, const ProgressCallback& progress = {});

// Runs the whole flow. Bad settings, data or models throw qforge::Error (one line) before the
// output directory is touched, as do a backend's constraints the quantized model breaks. Ranks
// other than 0 of a data-parallel run write nothing and return the report of their share.
PtqResult runPtqPipeline(const PtqOptions& options, const ProgressCallback& progress = {});

// The pass list prepare() runs for `options`: `passes` (or the default), with cle / cle-relu6
// first when --cle / --cle-relu6-to-relu ask for it.
std::string preparePassList(const PtqOptions& options);

// "4G", "512M", "64K", "1024B" or a byte count; throws naming --cache-limit otherwise.
int64_t parseByteSize(const std::string& text);

// The reconstruction settings `options` ask for (algo must not be "naive"), checked before any
// work: the preset, then the settings file, then the flags.
algos::ReconstructionConfig reconstructionSettings(const PtqOptions& options);

}  // namespace qforge::pipelines
