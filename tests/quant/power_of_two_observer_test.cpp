#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "quant/observers/power_of_two.h"

namespace qforge::quant {
namespace {

TEST(PowerOfTwoObserverTest, SmallestCoveringScale) {
  PowerOfTwoObserver obs("x", QScheme::int8Symmetric());  // [-127, 127]
  obs.observe(at::tensor({-3.0f, 5.0f}));
  // max(5 / 127, 3 / 127) = 0.0394 -> log2 = -4.67 -> 2^-4.
  EXPECT_EQ(obs.chosenLog2Scale(), -4);
  EXPECT_EQ(obs.qparams().scaleValue(), 0.0625f);
  EXPECT_EQ(obs.qparams().zeroPointValue(), 0);
  auto [lo, hi] = obs.range();
  EXPECT_FLOAT_EQ(hi.item<float>(), 127 * 0.0625f);
  EXPECT_GE(hi.item<float>(), 5.0f);  // never clips

  PowerOfTwoObserver u8("relu", QScheme::uint8Asymmetric());
  u8.observe(at::tensor({0.0f, 5.0f}));
  EXPECT_EQ(u8.qparams().scaleValue(), 0.03125f);  // 5 / 255 = 0.0196 -> 2^-5
  EXPECT_EQ(u8.qparams().zeroPointValue(), 0);
}

// Independent squared-error search over 2^k, 2^(k-1), ... for a [-127, 127] grid.
int bruteForceLog2(const at::Tensor& x, int top, int steps) {
  double best = std::numeric_limits<double>::infinity();
  int pick = top;
  const at::Tensor xd = x.to(at::kDouble);
  for (int k = top; k > top - steps; --k) {
    const double s = std::ldexp(1.0, k);
    const double err =
        ((at::clamp(at::round(xd / s), -127, 127) * s - xd).pow(2)).sum().item<double>();
    if (err < best) {
      best = err;
      pick = k;
    }
  }
  return pick;
}

TEST(PowerOfTwoObserverTest, SearchTradesClippingForResolution) {
  const at::Tensor x = at::cat({at::linspace(-1.0, 1.0, 10001), at::tensor({8.0f})});
  PowerOfTwoObserver::Options options;
  options.search_steps = 5;
  PowerOfTwoObserver obs("x", QScheme::int8Symmetric(), options);
  obs.observe(x);
  // Covering scale: 8 / 127 -> 2^-3.
  EXPECT_EQ(obs.chosenLog2Scale(), bruteForceLog2(x, -3, 5));
  EXPECT_LT(obs.chosenLog2Scale(), -3);
}

TEST(PowerOfTwoObserverTest, MostFrequentPickAndFloor) {
  PowerOfTwoObserver::Options options;
  options.search_steps = 4;
  options.selection = PowerOfTwoObserver::Selection::MostFrequent;
  PowerOfTwoObserver obs("x", QScheme::int8Symmetric(), options);
  // The running range stays [-3.9, 3.9] (covering scale 2^-5); the narrow batches prefer finer.
  const at::Tensor wide = at::linspace(-3.9, 3.9, 4001);
  const at::Tensor narrow = at::linspace(-0.5, 0.5, 4001);
  obs.observe(wide);
  const int wide_pick = obs.chosenLog2Scale();
  EXPECT_EQ(wide_pick, bruteForceLog2(wide, -5, 4));
  obs.observe(narrow);
  obs.observe(narrow);
  const int narrow_pick = bruteForceLog2(narrow, -5, 4);
  ASSERT_NE(wide_pick, narrow_pick);
  EXPECT_EQ(obs.chosenLog2Scale(), narrow_pick);  // two of three batches

  options.selection = PowerOfTwoObserver::Selection::LastBatch;
  options.min_log2_scale = -2;
  PowerOfTwoObserver floored("x", QScheme::int8Symmetric(), options);
  floored.observe(narrow);
  EXPECT_EQ(floored.chosenLog2Scale(), -2);
  options.search_steps = 0;
  EXPECT_THROW(PowerOfTwoObserver("x", QScheme::int8Symmetric(), options), Error);
}

}  // namespace
}  // namespace qforge::quant
