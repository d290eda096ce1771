// The accuracy gap verify allows: the limit in whole samples, since accuracies over N samples move
// in steps of 1/N (closed forms: k samples of N is k / N).
#include <gtest/gtest.h>

#include "verify/verify.h"

namespace qforge::verify {
namespace {

TEST(AccuracyGapThreshold, ALimitFinerThanOneSampleAdmitsOneSample) {
  // 0.05 points of 1,000 images is half an image: one flipped answer moves accuracy by 0.1.
  EXPECT_DOUBLE_EQ(accuracyGapThreshold(0.0005, 1000), 1.0 / 1000);
  EXPECT_DOUBLE_EQ(accuracyGapThreshold(0.0005, 64), 1.0 / 64);
}

TEST(AccuracyGapThreshold, ALimitOfWholeSamplesStaysAsGiven) {
  // 0.05 points of 10,000 images is 5 images.
  EXPECT_DOUBLE_EQ(accuracyGapThreshold(0.0005, 10000), 5.0 / 10000);
  EXPECT_DOUBLE_EQ(accuracyGapThreshold(0.01, 200), 2.0 / 200);
  // 7 points of 100 is 7 samples, though 0.07 * 100 is 7.000000000000001 in doubles.
  EXPECT_DOUBLE_EQ(accuracyGapThreshold(0.07, 100), 7.0 / 100);
}

TEST(AccuracyGapThreshold, APartSampleRoundsUpToTheNextWholeOne) {
  EXPECT_DOUBLE_EQ(accuracyGapThreshold(0.0005, 3000), 2.0 / 3000);  // 1.5 samples
  EXPECT_DOUBLE_EQ(accuracyGapThreshold(0.0005, 2001), 2.0 / 2001);  // 1.0005 samples
}

TEST(AccuracyGapThreshold, ZeroStaysZeroAndNoSamplesKeepTheLimit) {
  EXPECT_EQ(accuracyGapThreshold(0, 1000), 0);
  EXPECT_EQ(accuracyGapThreshold(0.0005, 0), 0.0005);
}

}  // namespace
}  // namespace qforge::verify
