// Evaluation as one call, what `qforge eval` runs and what a Python binding calls: a model (an
// ONNX file, or a prepared model directory run as its simulated quantization) over a dataset,
// scored top-1/top-5 for classifiers, PSNR/MSE for image-to-image models or not at all
// (metric "none": only dump the outputs), optionally against a reference model's outputs (SQNR,
// cosine, differences in int8 steps of the reference's range), with throughput.
//
//   pipelines::EvalOptions o;
//   o.model_path = "out/resnet-trt";   // prepared directory: simulated quantization
//   o.data = "fashion-mnist:test";     // or a dataset the caller opened
//   nlohmann::json j = pipelines::evalReportJson(o, pipelines::runEval(o));
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipelines/model_data.h"
#include "pipelines/progress.h"
#include "pipelines/scoring.h"

namespace qforge::pipelines {

// The settings, one per `qforge eval` flag; messages about them name the flag.
struct EvalOptions {
  std::string model_path;  // ONNX file, or a prepared model directory (or its prepared.onnx)
  DataSource data = "fashion-mnist:test";
  int64_t limit = -1;  // -1: every sample
  int64_t batch = 100;
  std::string metric = "auto";  // auto, top1, psnr, none
  std::optional<uint64_t> shuffle_seed;
  double noise = 0;  // denoising: input + noise * N(0,1), scored against the clean sample
  uint64_t noise_seed = 0;
  double peak = 1.0;  // PSNR's peak signal value
  // How a source string's files are read (an opened dataset brings its own).
  std::string labels;  // labels of an IDX or stacked .npy source
  std::vector<double> mean{0.0};
  std::vector<double> std{1.0};
  int64_t resize = 0;
  int64_t crop_height = 0, crop_width = 0;
  int64_t channels = 0;  // 0: the model input's
  bool bgr = false;
  bool nhwc = false;
  std::string dump_outputs;   // a .npy file for every row of the first output; "" none
  std::string reference;      // another model run on the same feeds and compared with; "" none
  double iou_threshold = -1;  // with `reference`: IoU of maps thresholded here; < 0 none
};

// One output compared with the reference model's output at the same position.
struct ReferenceComparison {
  std::string output;
  double sqnr_db = 0;  // +inf when equal
  double cosine = 0;
  double max_steps = 0;
  double p99_steps = 0;
  double step = 0;                       // the int8 step of the reference's range
  std::optional<double> top1_agreement;  // classifier outputs
  std::optional<double> iou;
};

struct EvalReport {
  std::string data;          // the dataset's description
  Scores scores;             // metric as resolved ("auto" becomes top1, psnr or none)
  double seconds = 0;        // the whole loop: reading, batching, running, scoring
  double model_seconds = 0;  // running the model alone
  int threads = 1;
  std::vector<ReferenceComparison> reference;  // empty without a reference model
};

// Runs the model over the data. Bad settings, data or models throw qforge::Error before any
// output is written; progress comes as the stage "evaluate", in images.
EvalReport runEval(const EvalOptions& options, const ProgressCallback& progress = {});

// What `qforge eval --json` prints.
nlohmann::json evalReportJson(const EvalOptions& options, const EvalReport& report);

// "32" or "32x24" (height x width) as --crop takes it; throws naming --crop otherwise.
std::pair<int64_t, int64_t> parseCrop(const std::string& text);

}  // namespace qforge::pipelines
