// Deployed accuracy = simulated accuracy, shown: the exported models run in ONNX Runtime and
// beside them qforge's fake-quant simulation (the prepared model) and its integer emulation of
// the QOperator model, on the same inputs. Reported per exported model: accuracy of each path,
// top-1 agreement, output differences in units of the output's quantization step, and when the
// paths disagree the first quantized tensor where they differ by more than one step.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "passes/prepare.h"
#include "verify/ort_runner.h"

namespace qforge::verify {

struct VerifyOptions {
  OrtRunnerOptions ort;
  int64_t batch = 256;        // qforge's batch; ORT gets the same
  int64_t debug_samples = 8;  // samples traced tensor by tensor when paths disagree
  // Pass criteria. Against the simulation (float arithmetic on the same grids): top-1 agreement
  // and accuracy gap. Against the emulation (the same integer arithmetic): exact output elements
  // and the largest difference.
  double min_agreement = 0.999;
  double max_accuracy_gap = 0.0005;  // 0.05 points
  double min_exact = 0.999;
  double max_emulation_steps = 1.0;
  // Runs the QOperator model's integer kernels as ONNX Runtime does (exec/ort_emulation.h).
  const OpRegistry* emulation = nullptr;
};

// Where two runs of the same model first differ by more than one quantization step.
struct Divergence {
  std::string quantizer;  // the prepared model's quantizer ("" for a QOperator-only tensor)
  std::string tensor;     // the integer tensor in the exported model
  double max_steps = 0;   // largest difference on the traced samples, in levels
  int64_t index = 0;      // position among the compared tensors (graph order)
  int64_t compared = 0;   // how many tensors were compared
  double share_off = 0;   // share of its elements more than one level apart
};

// One exported model in ONNX Runtime against one of qforge's paths.
struct Comparison {
  std::string model;      // "qdq" or "qoperator"
  std::string reference;  // "simulation" or "emulation"
  int64_t samples = 0;
  int64_t top1_agree = 0;
  double max_steps = 0;  // |ort - reference| / step, over every output element
  double p99_steps = 0;
  double exact_fraction = 0;  // elements equal within 1e-3 of a step
  std::optional<Divergence> divergence;
  // The first traced tensor differing at all, and the one with the largest share of elements
  // more than one level apart.
  std::optional<Divergence> first_difference;
  std::optional<Divergence> largest;
  // Whether the pass criteria apply: to the backend's deployed artifact (the QDQ model always,
  // the QOperator model when it is the backend's format); other comparisons are diagnostics.
  bool judged = true;
};

struct VerifyReport {
  int64_t samples = 0;
  double step = 0;          // the output's quantization step
  std::string step_source;  // "output quantizer 'q'" or "int8 step of the output range"
  std::vector<std::pair<std::string, double>> accuracy;  // path -> top-1 (fraction)
  std::vector<Comparison> comparisons;
  std::vector<std::string> notes;
  // Exported quantization parameters that differ from the prepared model's quantizers: "file:
  // tensor 't' (quantizer 'q'): scale 0.1 in the file, 0.05 in the prepared model".
  std::vector<std::string> parameter_mismatches;
  bool passed = false;
  std::vector<std::string> failures;  // which criterion failed, with the figure
};

// `dir` holds deploy.json and the models it lists (deploy.h). `inputs` is the whole evaluation
// set [N, ...] and `labels` its classes [N] (may be undefined: then no accuracy).
VerifyReport verifyDeployment(passes::PreparedModel& model, const std::string& dir,
                              const at::Tensor& inputs, const at::Tensor& labels,
                              const VerifyOptions& options);

nlohmann::json toJson(const VerifyReport& report);

}  // namespace qforge::verify
