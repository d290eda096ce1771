// Deployed accuracy = simulated accuracy, shown: the exported models run in ONNX Runtime and
// beside them qforge's fake-quant simulation (the prepared model) and its integer emulation of
// the QOperator model, on the same inputs, streamed batch by batch (memory does not grow with
// the number of samples). Reported per exported model and per model output: accuracy of each
// path, top-1 agreement for classifier outputs, SQNR and cosine similarity, differences in units
// of the output's quantization step, the IoU of thresholded maps on request; and when the paths
// disagree, the first quantized tensor where they differ by more than one step.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "data/loader.h"
#include "exec/op_info.h"
#include "passes/prepare.h"
#include "verify/ort_runner.h"
#include "verify/output_metrics.h"
#include "verify/quality_gap.h"
#include "verify/trace.h"

namespace qforge::verify {

struct VerifyOptions {
  OrtRunnerOptions ort;
  int64_t debug_samples = 8;  // samples traced tensor by tensor when paths disagree
  // Bytes of compared tensors a trace holds at once (verify/trace.h, TraceContext::chunk_bytes).
  int64_t trace_chunk_bytes = int64_t{1} << 30;
  // Pass criteria. Against the simulation (float arithmetic on the same grids): for classifier
  // outputs top-1 agreement and accuracy gap; for any other output SQNR, cosine similarity, the
  // 99th-percentile difference and, with iou_threshold, the IoU of the maps thresholded there.
  double min_agreement = 0.999;
  double max_accuracy_gap = 0.0005;  // 0.05 points, rounded up to whole samples (below)
  double min_sqnr_db = 30;
  double min_cosine = 0.999;
  double max_p99_steps = 1.0;
  std::optional<double> iou_threshold;
  double min_iou = 0.99;
  // When the first difference is rounding (at ties, or in ORT's fused kernel) and every compared
  // tensor, rerun on ORT's inputs, is within one step of ORT (no op differs on its own), failing
  // element-wise criteria are that rounding carried through a deep graph:
  // the QDQ model is then judged by quality instead, each output's SQNR against the float model
  // in ORT and in the simulation differing by at most this.
  double max_quality_gap_db = 1.0;
  bool waive_carried_rounding = true;  // false (--strict): element-wise criteria always judged
  // Against the emulation (the same integer arithmetic): exact output elements and the largest
  // difference, for every output.
  double min_exact = 0.999;
  double max_emulation_steps = 1.0;
  // Runs the QOperator model's integer kernels as ONNX Runtime does (exec/ort_emulation.h).
  const OpRegistry* emulation = nullptr;
};

// One exported model in ONNX Runtime against one of qforge's paths.
struct Comparison {
  std::string model;      // "qdq" or "qoperator"
  std::string reference;  // "simulation" or "emulation"
  int64_t samples = 0;
  std::vector<OutputComparison> outputs;  // one per model output
  // Over the outputs: top-1 agreement of the first classifier output (0 without one), the
  // largest max and p99 differences, the smallest exact share and share within one level.
  int64_t top1_agree = 0;
  double max_steps = 0;
  double p99_steps = 0;
  double exact_fraction = 0;
  double within_one_step_fraction = 0;
  std::optional<Divergence> divergence;
  // The first traced tensor differing at all, and the one with the largest share of elements
  // more than one level apart.
  std::optional<Divergence> first_difference;
  std::optional<Divergence> largest;
  // Tensors rerun on ORT's own inputs (QDQ model vs simulation, when levels differ), and the first
  // of them whose own ops give levels more than one apart: none means every difference beyond a
  // step was carried from one-step differences before it.
  int64_t rerun_tensors = 0;
  std::optional<Divergence> first_own_difference;
  // Whether the pass criteria apply: to the backend's deployed artifact (the QDQ model always,
  // the QOperator model when it is the backend's format); other comparisons are diagnostics.
  bool judged = true;
};

// One pass criterion as applied: "qdq model vs simulation", output 'y', sqnr_db 41.2 >= 30.
struct Criterion {
  std::string comparison;
  std::string output;
  std::string metric;  // top1_agreement, accuracy_gap, sqnr_db, cosine, p99_steps, iou, ...
  double value = 0;
  double threshold = 0;
  bool at_least = true;  // value >= threshold passes (else value <= threshold)
  bool passed = false;
  // Failed, but not counted: an element-wise criterion of a QDQ model whose differences were all
  // carried from rounding at ties (VerifyOptions::max_quality_gap_db judges it instead).
  bool waived = false;
};

struct VerifyReport {
  int64_t samples = 0;
  int64_t batch = 0;        // samples per streamed step
  int64_t fixed_batch = 0;  // the model's fixed batch dim (0: any)
  // The input has no batch axis: each sample is one run of the model (fixed_batch is then the
  // input's first dim, not a batch).
  bool whole_samples = false;
  double step = 0;          // the first output's quantization step
  std::string step_source;  // "output quantizer 'q'" or "int8 step of the output range"
  std::vector<std::pair<std::string, double>> accuracy;  // path -> top-1 (fraction)
  std::vector<Comparison> comparisons;
  std::vector<OutputQuality> quality;  // per output, when there is a QDQ model
  std::vector<Criterion> criteria;
  std::vector<std::string> notes;
  // Exported quantization parameters that differ from the prepared model's quantizers: "file:
  // tensor 't' (quantizer 'q'): scale 0.1 in the file, 0.05 in the prepared model".
  std::vector<std::string> parameter_mismatches;
  bool passed = false;
  std::vector<std::string> failures;  // which criterion failed, with the figure
};

// The accuracy gap verify allows over `samples` labelled samples: `max_gap` rounded up to whole
// samples. Accuracies over N samples move in steps of 1/N, so a limit finer than one step (0.05
// points at fewer than 2,000 samples) would admit no flipped answer at all, stricter than the
// top-1 agreement beside it; 0 stays 0.
double accuracyGapThreshold(double max_gap, int64_t samples);

// The comparison of ONNX Runtime's `model` ("qdq" or "qoperator") with qforge's integer emulation
// when every output meets the emulation criteria (exact share, largest difference), else nullptr.
// For the QDQ model verify then judges that comparison, and reports rather than judges the
// simulation's difference in steps: the runtime computes exactly what the emulation does, and
// the float simulation differs from that integer arithmetic by the kernels' requantization
// rounding.
const Comparison* exactEmulation(const std::vector<Comparison>& comparisons,
                                 const VerifyOptions& options, const std::string& model);

// `dir` holds deploy.json and the models it lists (deploy.h). `loader` yields the evaluation
// set (every model input; labels, when it has them, give accuracies); it is read once, one
// batch at a time.
VerifyReport verifyDeployment(passes::PreparedModel& model, const std::string& dir,
                              data::BatchLoader& loader, const VerifyOptions& options);

nlohmann::json toJson(const VerifyReport& report);

}  // namespace qforge::verify
