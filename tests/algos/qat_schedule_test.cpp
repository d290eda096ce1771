// The learning-rate schedules against their closed forms (PyTorch's CosineAnnealingLR with
// eta_min 0 and T_max the run's steps, StepLR per epoch), and BN freezing per epoch.
#include <gtest/gtest.h>

#include <cmath>

#include "algos/qat_schedule.h"

namespace qforge::testing {
namespace {

algos::QatConfig withSchedule(algos::QatSchedule schedule) {
  algos::QatConfig c;
  c.lr = 0.2;
  c.schedule = schedule;
  return c;
}

TEST(QatSchedule, CosineFollowsHalfACosineFromLrToZeroOverTheRun) {
  const algos::QatConfig c = withSchedule(algos::QatSchedule::Cosine);
  const int64_t total = 10;
  for (int64_t t = 0; t <= total; ++t) {
    // CosineAnnealingLR: eta_min + (base - eta_min) * (1 + cos(pi * t / T)) / 2.
    const double expected = 0.2 * (1 + std::cos(std::acos(-1.0) * t / total)) / 2;
    EXPECT_NEAR(algos::qatLearningRate(c, t, /*epoch=*/t / 3, total), expected, 1e-15) << t;
  }
  EXPECT_DOUBLE_EQ(algos::qatLearningRate(c, 0, 0, total), 0.2);
  EXPECT_NEAR(algos::qatLearningRate(c, 5, 0, total), 0.1, 1e-15);  // halfway: half the rate
  EXPECT_NEAR(algos::qatLearningRate(c, 10, 0, total), 0.0, 1e-15);
  // No division by zero before the run knows its length.
  EXPECT_DOUBLE_EQ(algos::qatLearningRate(c, 0, 0, 0), 0.2);
}

TEST(QatSchedule, StepDecaysByGammaEveryStepEpochsWhateverTheStep) {
  algos::QatConfig c = withSchedule(algos::QatSchedule::Step);
  c.step_epochs = 2;
  c.step_gamma = 0.5;
  const double expected[] = {0.2, 0.2, 0.1, 0.1, 0.05, 0.05, 0.025};
  for (int64_t epoch = 0; epoch < 7; ++epoch) {
    EXPECT_DOUBLE_EQ(algos::qatLearningRate(c, epoch * 100, epoch, 700), expected[epoch]) << epoch;
    EXPECT_DOUBLE_EQ(algos::qatLearningRate(c, epoch * 100 + 99, epoch, 700), expected[epoch]);
  }
}

TEST(QatSchedule, ConstantIsTheLearningRateThroughout) {
  const algos::QatConfig c = withSchedule(algos::QatSchedule::Constant);
  for (int64_t step : {0, 1, 57, 1000})
    EXPECT_DOUBLE_EQ(algos::qatLearningRate(c, step, step / 10, 1000), 0.2);
}

TEST(QatSchedule, BatchNormTrainsBeforeTheFreezeEpochOnly) {
  algos::QatConfig c;
  for (int64_t epoch = 0; epoch < 5; ++epoch)
    EXPECT_TRUE(algos::qatBatchNormTrains(c, epoch)) << "never frozen by default";
  c.freeze_bn_epoch = 2;
  EXPECT_TRUE(algos::qatBatchNormTrains(c, 0));
  EXPECT_TRUE(algos::qatBatchNormTrains(c, 1));
  EXPECT_FALSE(algos::qatBatchNormTrains(c, 2));
  EXPECT_FALSE(algos::qatBatchNormTrains(c, 3));
  c.freeze_bn_epoch = 0;
  EXPECT_FALSE(algos::qatBatchNormTrains(c, 0));
}

}  // namespace
}  // namespace qforge::testing
