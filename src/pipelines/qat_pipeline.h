// Quantization-aware training as one call, what `qforge qat` runs and what another program
// embedding qforge calls: prepare the model for the backend with BN kept (simulated folding),
// calibrate the quantizers (their starting point), train (algos::QatTrainer) with a checkpoint
// after every epoch, merge BN, then save and deploy the model as the PTQ pipeline does. Before
// training, a PTQ preparation is deployed into a scratch directory, so that a backend or format
// refusal comes before the hours of training, not after.
//
//   pipelines::QatPipelineOptions o;
//   o.model_path = "resnet.onnx";
//   o.backend = "TensorRT";
//   o.data = my_training_set;          // or "fashion-mnist:train"
//   o.training.epochs = 2;
//   o.out = "out/resnet-qat";
//   pipelines::QatPipelineResult r = pipelines::runQatPipeline(o);
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "algos/distributed.h"
#include "algos/qat.h"
#include "algos/qat_config.h"
#include "ir/graph.h"
#include "passes/prepare.h"
#include "passes/quant_config.h"
#include "pipelines/model_data.h"
#include "pipelines/progress.h"
#include "pipelines/qat_pipeline_report.h"

namespace qforge::pipelines {

// The settings, one per `qforge qat` flag; messages about them name the flag.
struct QatPipelineOptions {
  // The float model (a classifier): read from `model_path`, or copied from `graph` (then
  // `model_path` only names it in the report). Neither is changed.
  std::string model_path;
  const Graph* graph = nullptr;
  std::string backend;  // a built-in backend's name or a backend .json file
  std::string config;   // a quantization config file (.json, .yaml); "" none
  // The prepare pass list (--passes; names from algos::builtinPasses()); "" : prepare()'s
  // default with BatchNormalization kept. Graph passes only get the placement passes appended.
  std::string passes;
  // The fake quantizers trained: lsq, lsq+, pact, dsq, dorefa, tqt; "" the backend's own.
  std::string algo;
  DataSource data = "fashion-mnist:train";
  // The training loss: "auto" (cross entropy when the data has labels and the model writes
  // [batch, classes] scores, else distillation: "kl" for a Softmax output, else "mse"),
  // "cross-entropy", "mse" or "kl" (both distill the float model's output: no labels needed).
  // Cross entropy and kl read the scores a final Softmax or LogSoftmax reads.
  std::string loss = "auto";
  double distill_temperature = 1.0;  // KL's softening temperature
  // Intermediate values distilled as well, whatever the loss: each value's MSE against the float
  // model's over the float value's mean square, averaged over them, times `distill_weight`.
  std::vector<std::string> distill_at;
  double distill_weight = 1.0;
  // A caller's own loss (a Python callable, say), named `custom_loss_name` in the report; it
  // wins over `loss`.
  algos::QatLoss custom_loss;
  std::string custom_loss_name = "caller's loss";
  int64_t limit = 0;  // training samples per epoch (0: all)
  // Epochs, batch size per rank, optimizer, schedule... The pipeline sets checkpoint_path
  // (OUT/checkpoint.pt); `stop` is the caller's (a signal handler's flag, say).
  algos::QatConfig training;
  // False: training.freeze_bn_epoch is a default, and a distilling run freezes BN from epoch 0.
  bool freeze_bn_epoch_given = false;
  DataSource calib;  // empty: `data`
  int64_t calib_batches = 16;
  int64_t calib_batch = 64;
  DataSource eval;  // empty: no evaluation
  int64_t eval_limit = 0;
  int64_t eval_batch = 200;
  std::string out;     // the output directory; "" : `resume`
  std::string resume;  // the output directory of an earlier run to continue from its checkpoint
  std::string csv;     // a file for the per-epoch metrics; "" none
  // Data parallel: this process's rank among world_size (c10d over TCP, Gloo). A caller with a
  // group of its own passes it as `group` (kept by reference) and `distributed` is not used.
  algos::DistributedOptions distributed;
  algos::ProcessGroup* group = nullptr;
  bool deploy = true;  // false: save the prepared model only
  // Called just before training starts and when it ends, however it ends: the CLI catches
  // SIGINT/SIGTERM only in between, where a stop request leaves a checkpoint; at any other time a
  // signal ends the process as usual.
  std::function<void()> training_starts, training_ends;
};

struct QatPipelineResult {
  QatPipelineReport report;
  // Trained, BN merged, as saved; when interrupted, the model as training left it (the
  // checkpoint holds the position).
  std::unique_ptr<passes::PreparedModel> model;
};

// Runs the whole flow; on rank 0 writes the files, report.json last. A stop request (the
// config's flag) ends training with a checkpoint: the report says interrupted and nothing else is
// written. Bad settings throw qforge::Error (one line) before any file is written.
QatPipelineResult runQatPipeline(const QatPipelineOptions& options,
                                 const ProgressCallback& progress = {});

// What `algo` puts on every weight and activation quantizer of `config` (the config's own choices
// win). Throws naming the known algorithms for an unknown one; "" changes nothing.
void applyQatAlgorithm(const std::string& algo, passes::QuantConfig& config);

}  // namespace qforge::pipelines
