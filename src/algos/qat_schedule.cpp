#include "algos/qat_schedule.h"

#include <algorithm>
#include <cmath>

namespace qforge::algos {

double qatLearningRate(const QatConfig& config, int64_t global_step, int64_t epoch,
                       int64_t total_steps) {
  switch (config.schedule) {
    case QatSchedule::Constant:
      return config.lr;
    case QatSchedule::Cosine:
      return config.lr * 0.5 *
             (1.0 + std::cos(M_PI * static_cast<double>(global_step) /
                             static_cast<double>(std::max<int64_t>(total_steps, 1))));
    case QatSchedule::Step:
      return config.lr *
             std::pow(config.step_gamma, static_cast<double>(epoch / config.step_epochs));
  }
  return config.lr;
}

bool qatBatchNormTrains(const QatConfig& config, int64_t epoch) {
  return config.freeze_bn_epoch < 0 || epoch < config.freeze_bn_epoch;
}

}  // namespace qforge::algos
