#include "algos/qat_config.h"

#include <c10/util/StringUtil.h>

#include "core/error.h"

namespace qforge::algos {

QatOptimizer parseQatOptimizer(const std::string& name) {
  if (name == "sgd") return QatOptimizer::Sgd;
  if (name == "adam") return QatOptimizer::Adam;
  throw Error("unknown optimizer '" + name + "'; known: sgd, adam");
}

QatSchedule parseQatSchedule(const std::string& name) {
  if (name == "none" || name == "constant") return QatSchedule::Constant;
  if (name == "cosine") return QatSchedule::Cosine;
  if (name == "step") return QatSchedule::Step;
  throw Error("unknown learning-rate schedule '" + name + "'; known: cosine, step, none");
}

const char* qatOptimizerName(QatOptimizer optimizer) {
  return optimizer == QatOptimizer::Sgd ? "sgd" : "adam";
}

const char* qatScheduleName(QatSchedule schedule) {
  return schedule == QatSchedule::Cosine ? "cosine"
         : schedule == QatSchedule::Step ? "step"
                                         : "none";
}

void requireLabelSmoothing(double label_smoothing) {
  require(label_smoothing >= 0 && label_smoothing < 1,
          "label smoothing must be in [0, 1); got " + c10::str(label_smoothing));
}

void validateQatConfig(const QatConfig& config, bool own_loss) {
  require(config.epochs >= 1, "QAT needs at least one epoch");
  require(config.batch_size >= 1, "the QAT batch size must be at least 1");
  require(config.lr > 0, "the learning rate must be positive");
  require(config.max_steps >= 0, "max_steps must not be negative");
  require(config.step_epochs >= 1, "the step schedule's step must be at least one epoch");
  require(config.quantizer_lr_scale > 0, "the quantizer learning-rate scale must be positive");
  require(config.quantizer_lr_scale == 1.0 || config.optimizer == QatOptimizer::Sgd,
          "a quantizer learning-rate scale needs SGD (Adam's steps do not follow the gradient's "
          "size)");
  requireLabelSmoothing(config.label_smoothing);
  require(!own_loss || config.label_smoothing == 0,
          "label smoothing belongs to the default loss; a loss of your own smooths (or not) "
          "itself: leave label_smoothing at 0");
}

}  // namespace qforge::algos
