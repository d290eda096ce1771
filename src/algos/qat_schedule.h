// What a QAT config decides per step or epoch, as pure functions of the position, so a resumed run
// needs no saved schedule state: the learning rate and whether BatchNormalization still trains its
// statistics.
#pragma once

#include <cstdint>

#include "algos/qat_config.h"

namespace qforge::algos {

// The learning rate at `global_step` (0-based, counted over all epochs) of `total_steps`, in
// `epoch` (0-based): constant lr; cosine lr * (1 + cos(pi * step / total)) / 2; step
// lr * step_gamma^floor(epoch / step_epochs).
double qatLearningRate(const QatConfig& config, int64_t global_step, int64_t epoch,
                       int64_t total_steps);

// True while BN normalises with batch statistics and updates its running ones: before
// freeze_bn_epoch, or always when it is negative.
bool qatBatchNormTrains(const QatConfig& config, int64_t epoch);

}  // namespace qforge::algos
