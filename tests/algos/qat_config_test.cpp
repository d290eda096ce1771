// QatConfig's names and checks: every setting out of range is one line naming it.
#include <gtest/gtest.h>

#include "algos/qat_config.h"
#include "support/checks.h"

namespace qforge::testing {
namespace {

TEST(QatConfig, NamesParseBackToTheirValues) {
  for (auto o : {algos::QatOptimizer::Sgd, algos::QatOptimizer::Adam})
    EXPECT_EQ(algos::parseQatOptimizer(algos::qatOptimizerName(o)), o);
  for (auto s :
       {algos::QatSchedule::Constant, algos::QatSchedule::Cosine, algos::QatSchedule::Step})
    EXPECT_EQ(algos::parseQatSchedule(algos::qatScheduleName(s)), s);
  EXPECT_EQ(algos::parseQatSchedule("constant"), algos::QatSchedule::Constant);
  EXPECT_EQ(errorOf([] { algos::parseQatOptimizer("rmsprop"); }),
            "unknown optimizer 'rmsprop'; known: sgd, adam");
  EXPECT_EQ(errorOf([] { algos::parseQatSchedule("linear"); }),
            "unknown learning-rate schedule 'linear'; known: cosine, step, none");
}

TEST(QatConfig, TheDefaultsAreValid) {
  EXPECT_EQ(errorOf([] { algos::validateQatConfig(algos::QatConfig{}, false); }), "(no error)");
  EXPECT_EQ(errorOf([] { algos::validateQatConfig(algos::QatConfig{}, true); }), "(no error)");
}

TEST(QatConfig, EverySettingOutOfRangeIsNamed) {
  const auto message = [](void (*change)(algos::QatConfig&), bool own_loss = false) {
    algos::QatConfig c;
    change(c);
    return errorOf([&] { algos::validateQatConfig(c, own_loss); });
  };
  EXPECT_NE(message([](algos::QatConfig& c) { c.epochs = 0; }).find("at least one epoch"),
            std::string::npos);
  EXPECT_NE(message([](algos::QatConfig& c) { c.batch_size = 0; }).find("batch size"),
            std::string::npos);
  EXPECT_NE(message([](algos::QatConfig& c) { c.lr = 0; }).find("learning rate must be positive"),
            std::string::npos);
  EXPECT_NE(message([](algos::QatConfig& c) { c.max_steps = -1; }).find("max_steps"),
            std::string::npos);
  EXPECT_NE(message([](algos::QatConfig& c) { c.step_epochs = 0; }).find("step schedule"),
            std::string::npos);
  EXPECT_NE(message([](algos::QatConfig& c) {
              c.quantizer_lr_scale = 0;
            }).find("quantizer learning-rate scale must be positive"),
            std::string::npos);
  EXPECT_NE(message([](algos::QatConfig& c) {
              c.quantizer_lr_scale = 10;
              c.optimizer = algos::QatOptimizer::Adam;
            }).find("needs SGD"),
            std::string::npos);
  EXPECT_EQ(message([](algos::QatConfig& c) { c.label_smoothing = 1; }),
            "label smoothing must be in [0, 1); got 1");
  EXPECT_NE(message([](algos::QatConfig& c) { c.label_smoothing = 0.1; }, /*own_loss=*/true)
                .find("label smoothing belongs to the default loss"),
            std::string::npos);
  EXPECT_EQ(message([](algos::QatConfig& c) { c.label_smoothing = 0.1; }), "(no error)");
}

}  // namespace
}  // namespace qforge::testing
