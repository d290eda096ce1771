// The settings of a QAT run (QatConfig) and their checks, apart from the trainer so that a
// pipeline, a checkpoint and a test can name them without the training loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace qforge::algos {

enum class QatOptimizer { Sgd, Adam };
enum class QatSchedule { Constant, Cosine, Step };

QatOptimizer parseQatOptimizer(const std::string& name);  // "sgd", "adam"
QatSchedule parseQatSchedule(const std::string& name);    // "none", "cosine", "step"
// The names the parsers take ("sgd", "none"), as checkpoints record them.
const char* qatOptimizerName(QatOptimizer optimizer);
const char* qatScheduleName(QatSchedule schedule);

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

// Throws qforge::Error with one line naming the first setting out of range. `own_loss`: the
// caller gives its own loss (then label smoothing, the default loss's, must stay 0).
void validateQatConfig(const QatConfig& config, bool own_loss);

// Throws unless `label_smoothing` is in [0, 1).
void requireLabelSmoothing(double label_smoothing);

}  // namespace qforge::algos
