// What a QAT run reports: per step (to a progress callback), per epoch, and for the whole call of
// QatTrainer::train.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace qforge::algos {

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

}  // namespace qforge::algos
