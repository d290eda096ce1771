// Quantization-aware training of a calibrated prepared model: autograd through the FakeQuantize
// nodes into the float weights and the quantizers' own parameters (LSQ scales, PACT clipping
// values, DSQ's alpha, TQT's log thresholds), BatchNormalization trained with batch statistics
// (simulated folding where the backend folds BN, passes/qat_batchnorm.h) and frozen from a chosen
// epoch, SGD or Adam with a cosine or step schedule, checkpoints that let an interrupted run
// finish exactly as an uninterrupted one, and data parallelism over c10d (algos/distributed.h).
//
//   auto model = algos::prepareForQat(graph, backend);  // BN kept, simulated folding
//   algos::calibrate(*model, calib_loader, 16);
//   algos::QatTrainer trainer(*model, config);        // loss: cross entropy unless given
//   algos::QatReport r = trainer.train(train_data, loader_options);
//   trainer.finish();                                  // BN merged: deploy as any PTQ model
//
// The trainer is the loop; its parts live apart and are tested alone: settings (qat_config),
// learning rate and BN freezing per position (qat_schedule), what trains (qat_parameters),
// augmentation (qat_augment), the data-parallel collectives (qat_data_parallel), checkpoint
// contents and file (qat_checkpoint), and the optimizers (optimizer, sgd, adam).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algos/qat_augment.h"
#include "algos/qat_config.h"
#include "algos/qat_parameters.h"
#include "algos/qat_results.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "passes/prepare.h"

namespace qforge::passes {
struct BatchNormTraining;
}

namespace qforge::algos {

class ProcessGroup;
class Optimizer;

// The default loss: cross entropy of [batch, classes] scores against the batch labels, smoothed
// by `label_smoothing` in [0, 1).
at::Tensor crossEntropyLoss(const at::Tensor& output, const data::Batch& batch,
                            double label_smoothing = 0);
using QatLoss = std::function<at::Tensor(const at::Tensor& output, const data::Batch& batch)>;
// A term added to the loss that reads other values of the model (intermediate values a
// distillation compares, say), handed over in the order they were named.
using QatValuesTerm =
    std::function<at::Tensor(const std::vector<at::Tensor>& values, const data::Batch& batch)>;

// prepare() for QAT: BatchNormalization kept as its own op and, where the backend folds it into
// the layer before, rewritten into simulated folding (passes/qat_batchnorm.h) before any
// calibration, so that the weight quantizers calibrate on the weights BN folding will produce.
std::unique_ptr<passes::PreparedModel> prepareForQat(Graph graph,
                                                     const backends::BackendConfig& backend,
                                                     passes::PrepareOptions options = {});

class QatTrainer {
 public:
  // `model` must come from prepareForQat (or prepare with fold_batchnorm = false on a model the
  // backend does not fold BN for) and be calibrated. `group` (optional, kept by reference) spreads
  // batches over processes. No `loss`: crossEntropyLoss with the config's label smoothing.
  QatTrainer(passes::PreparedModel& model, QatConfig config, QatLoss loss = {},
             ProcessGroup* group = nullptr);
  ~QatTrainer();
  QatTrainer(const QatTrainer&) = delete;
  QatTrainer& operator=(const QatTrainer&) = delete;

  // The loss reads this value of the model (a distillation loss: the scores before the output's
  // Softmax) instead of the first output; throws naming a value the graph does not have.
  void readLossFrom(const std::string& value);

  // Each step also computes `values` and adds `term` of them to the loss; throws naming a value
  // the graph does not have.
  void addLossTerm(std::vector<std::string> values, QatValuesTerm term);

  // Continues from a checkpoint of a run with the same model and settings (throws naming the
  // settings that differ).
  void resume(const std::string& checkpoint_path);

  // Trains from the current position to config.epochs (or max_steps). `loader` gives the batch
  // layout (shape checks, limit); its batch size and shuffle seed are the trainer's. `evaluate`
  // runs after every epoch on rank 0 with BN in inference mode.
  QatReport train(std::shared_ptr<data::Dataset> dataset, data::LoaderOptions loader,
                  const QatProgress& progress = {},
                  const std::function<double(QatTrainer&)>& evaluate = {});

  // The model's output for `inputs` as deployed: no autograd, BN with running statistics.
  at::Tensor infer(const at::Tensor& inputs);

  // Ends training: gradients off, BN merged into the convolutions (the graph prepare() gives
  // with BN folded), so the model saves and deploys like a PTQ one. Returns BNs merged.
  int finish();

  passes::PreparedModel& model() { return model_; }
  const std::vector<at::Tensor>& parameters() const { return params_.tensors; }

 private:
  struct Run;  // one call of train(): its data, timing and report (qat.cpp)

  void buildOptimizer();
  std::vector<at::Tensor> batchNormStatistics() const;
  // Trains the current epoch from the current position; false when it ended before its last step
  // (a stop request or the step limit).
  bool trainEpoch(Run& run);
  // Forward, backward and one optimizer step on this rank's share of `global`; the step's loss.
  double trainStep(Run& run, data::Batch global, double lr);
  void reportStep(Run& run, double loss, double lr) const;
  // After an epoch's last step: BN statistics averaged, metrics summed over ranks, evaluation,
  // history, checkpoint.
  void closeEpoch(Run& run, double lr);
  void saveCheckpoint();

  passes::PreparedModel& model_;
  QatConfig config_;
  QatLoss loss_;
  std::string loss_value_;  // "" : the first output
  std::vector<std::string> term_values_;
  QatValuesTerm term_;  // empty: none
  ProcessGroup* group_;
  std::shared_ptr<passes::BatchNormTraining> bn_state_;
  std::unique_ptr<OpRegistry> registry_;
  std::unique_ptr<Executor> executor_;
  int batchnorms_simulated_ = 0;
  QatParameters params_;
  std::unique_ptr<Optimizer> optimizer_;  // SGD or Adam, per the config
  // Position.
  int64_t epoch_ = 0, step_in_epoch_ = 0, global_step_ = 0;
  // The unfinished epoch's sums: loss, correct, labelled, steps, seconds.
  std::array<double, 5> epoch_sums_{};
  std::vector<QatEpochResult> history_;
  bool resumed_ = false;
  bool finished_ = false;
};

}  // namespace qforge::algos
