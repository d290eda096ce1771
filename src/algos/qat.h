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
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "passes/prepare.h"

namespace qforge::passes {
struct BatchNormTraining;
}

namespace qforge::algos {

class ProcessGroup;
class Optimizer;

enum class QatOptimizer { Sgd, Adam };
enum class QatSchedule { Constant, Cosine, Step };

QatOptimizer parseQatOptimizer(const std::string& name);  // "sgd", "adam"
QatSchedule parseQatSchedule(const std::string& name);    // "none", "cosine", "step"

struct QatConfig {
  int64_t epochs = 1;
  int64_t batch_size = 64;  // per process; the global batch is batch_size * world size
  int64_t max_steps = 0;    // stop after this many optimizer steps in all (0: no limit)
  QatOptimizer optimizer = QatOptimizer::Sgd;
  double lr = 1e-3;
  double momentum = 0.9;    // SGD
  double weight_decay = 0;  // L2 on the weights of weighted ops (not biases, BN or quantizers)
  QatSchedule schedule = QatSchedule::Cosine;  // cosine: per step, from lr down to 0
  int64_t step_epochs = 1;                     // step: lr * step_gamma^(epoch / step_epochs)
  double step_gamma = 0.1;
  // From this epoch on (0-based), BN normalises with its running statistics and stops updating
  // them; -1: never frozen.
  int64_t freeze_bn_epoch = -1;
  // Data order: epoch e is shuffled with seed * 1000003 + e, so it does not depend on where a run
  // was interrupted.
  uint64_t seed = 0;
  // Augmentation of image batches [N, C, H, W], as the zoo models were trained: a random shift by
  // up to `augment_shift` pixels (zero padded) and a horizontal flip with probability 1/2, per
  // sample, drawn from a generator seeded by (seed, step): the same on every rank and on resume.
  int64_t augment_shift = 0;
  bool augment_flip = false;
  // The default loss's label smoothing, PyTorch's CrossEntropyLoss(label_smoothing): the target
  // puts 1 - e + e/K on the label and e/K on every class. Fine-tune with what the float model was
  // trained with; plain cross entropy on a model trained with smoothing drives its logits apart.
  double label_smoothing = 0;
  // False: only the quantizers' parameters train (weights, biases and BN stay as calibrated),
  // for grids fine enough that the float model needs no change (8 bits).
  bool train_weights = true;
  // SGD only: the quantizers' parameters learn at lr * quantizer_lr_scale. An SGD step moves a
  // scale by an absolute amount, which for the channels with the smallest weights can be most of
  // the scale (LSQ's gradient scale does not depend on the scale's size).
  double quantizer_lr_scale = 1.0;
  // Written atomically after every epoch, at the end, and when `stop` is set ("" : none).
  std::string checkpoint_path;
  // Checked after every step; when set, the trainer saves a checkpoint and returns (interrupted).
  const std::atomic<bool>* stop = nullptr;
};

// `images` [N, C, H, W] shifted by up to `shift` pixels (zero padded) and flipped horizontally
// with probability 1/2 when `flip`, each sample drawn from a generator seeded with `seed`.
at::Tensor augmentImages(const at::Tensor& images, int64_t shift, bool flip, uint64_t seed);

// The default loss: cross entropy of [batch, classes] scores against the batch labels, smoothed
// by `label_smoothing` in [0, 1).
at::Tensor crossEntropyLoss(const at::Tensor& output, const data::Batch& batch,
                            double label_smoothing = 0);
using QatLoss = std::function<at::Tensor(const at::Tensor& output, const data::Batch& batch)>;

struct QatStepInfo {
  int64_t epoch = 0, epochs = 0;
  int64_t step_in_epoch = 0, steps_per_epoch = 0;  // steps done in this epoch, of how many
  int64_t global_step = 0, total_steps = 0;
  double loss = 0;         // this step's
  double train_top1 = -1;  // over this epoch's steps so far (-1: no labels)
  double lr = 0;
  double seconds = 0;     // since this process started training
  int64_t steps_run = 0;  // steps this process ran (after a resume: not the skipped ones)
};
using QatProgress = std::function<void(const QatStepInfo&)>;

struct QatEpochResult {
  int64_t epoch = 0;
  double loss = 0;          // mean training loss over the epoch's steps
  double train_top1 = -1;   // on the training batches as they were trained (-1: no labels)
  double eval_metric = -1;  // what the evaluate callback returned (-1: none)
  double lr = 0;            // at the epoch's last step
  double seconds = 0;
  int64_t steps = 0;
  bool bn_frozen = false;
};

struct QatReport {
  std::vector<QatEpochResult> epochs;
  int64_t global_step = 0;   // optimizer steps in all, including before a resume
  int64_t steps_run = 0;     // steps this process ran
  int64_t samples_run = 0;   // samples this process trained on
  double train_seconds = 0;  // training loop wall time in this process (no evaluation)
  double step_ms = 0;        // mean wall time per step after the first five
  bool interrupted = false;  // stopped by QatConfig::stop; a checkpoint holds the position
  bool resumed = false;
  int64_t resumed_at_step = 0;
  int batchnorms_simulated = 0;  // Conv+BN pairs trained with simulated folding
  int64_t parameters = 0;        // trainable values (weights and quantizer parameters)
  int64_t quantizer_parameters = 0;
};

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
  const std::vector<at::Tensor>& parameters() const { return params_; }

 private:
  void collectParameters();
  // params_ after the initializers: every quantizer's parameters (again after loading state).
  void appendQuantizerParameters();
  void buildOptimizer();
  double learningRate(int64_t global_step, int64_t epoch, int64_t total_steps) const;
  void stepOptimizer(double lr);
  void averageGradients();
  void synchronizeBatchNormStatistics();
  void saveCheckpoint();
  std::string settingsJson() const;

  passes::PreparedModel& model_;
  QatConfig config_;
  QatLoss loss_;
  ProcessGroup* group_;
  std::shared_ptr<passes::BatchNormTraining> bn_state_;
  std::unique_ptr<OpRegistry> registry_;
  std::unique_ptr<Executor> executor_;
  int batchnorms_simulated_ = 0;
  std::vector<at::Tensor> params_;          // initializers first, then quantizer parameters
  size_t initializer_params_ = 0;           // how many of params_ are graph initializers
  std::vector<std::string> param_names_;    // for checkpoints and messages
  std::vector<bool> decays_;                // weight decay applies
  std::vector<bool> batch_scaled_grad_;     // LSQ activation scales (see averageGradients)
  std::vector<std::string> bn_statistics_;  // running mean/var initializers
  std::unique_ptr<Optimizer> optimizer_;    // SGD or Adam, per the config
  // Position.
  int64_t epoch_ = 0, step_in_epoch_ = 0, global_step_ = 0;
  // The unfinished epoch's sums: loss, correct, labelled, steps, seconds.
  std::array<double, 5> epoch_sums_{};
  std::vector<QatEpochResult> history_;
  bool resumed_ = false;
  bool finished_ = false;
};

}  // namespace qforge::algos
