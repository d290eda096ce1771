// Per-output comparison figures against closed forms: the SQNR and cosine of a known noise,
// nearest-rank percentiles of known differences, exact shares and shares within one level, IoU of
// known masks, top-1 only for class scores, and the same figures however the run is cut into
// batches.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "data/data_test_files.h"
#include "verify/output_metrics.h"

namespace qforge::verify {
namespace {

using testing::expectErrorWith;

TEST(OutputMetricsTest, SqnrAndCosineOfAKnownNoise) {
  // Reference 2 everywhere, noise +-0.02 alternating: SQNR = 10 log10(4 / 0.0004) = 40 dB;
  // cosine = sum(2 (2 +- 0.02)) / sqrt(4N * N (4 + 0.0004)) = 2 / sqrt(4.0004).
  const at::Tensor ref = at::full({8, 1, 5, 6}, 2.0f);
  const at::Tensor sign = (at::arange(ref.numel()) % 2 * 2 - 1).to(at::kFloat).reshape(ref.sizes());
  const at::Tensor got = ref + 0.02 * sign;
  OutputAccumulator a("map");
  a.add(got, ref);
  const OutputComparison c = a.finish(0.01, "given");
  EXPECT_FALSE(c.classifier);
  EXPECT_EQ(c.samples, 8);
  EXPECT_NEAR(c.sqnr_db, 40.0, 1e-4);
  EXPECT_NEAR(c.cosine, 2.0 / std::sqrt(4.0004), 1e-9);
  // Every difference is 0.02 = 2 steps of 0.01 (float32 rounding aside).
  EXPECT_NEAR(c.max_steps, 2.0, 1e-4);
  EXPECT_NEAR(c.p99_steps, 2.0, 2.0 * 0.011);
  EXPECT_EQ(c.exact_fraction, 0.0);
  EXPECT_EQ(c.step_source, "given");

  OutputAccumulator same("map");
  same.add(ref, ref);
  const OutputComparison s = same.finish(0.01, "");
  EXPECT_TRUE(std::isinf(s.sqnr_db) && s.sqnr_db > 0);
  EXPECT_DOUBLE_EQ(s.cosine, 1.0);
  EXPECT_EQ(s.exact_fraction, 1.0);
  EXPECT_EQ(s.max_steps, 0.0);
}

TEST(OutputMetricsTest, PercentilesAndExactSharesOfKnownDifferences) {
  // |d| = 0, 0.01, ..., 0.99 (100 values) in steps of 0.01: the nearest-rank 99th percentile
  // is the 99th smallest, 0.98 = 98 steps; the largest 99 steps; one exact element in 100.
  const at::Tensor d = at::arange(100, at::kDouble) * 0.01;
  const at::Tensor ref = at::zeros({4, 25}, at::kDouble);
  OutputAccumulator a("y");
  // In uneven batches: the figures do not depend on how the run is cut.
  a.add(d.reshape({4, 25}).slice(0, 0, 1), ref.slice(0, 0, 1));
  a.add(-d.reshape({4, 25}).slice(0, 1, 4), ref.slice(0, 1, 4));
  const OutputComparison c = a.finish(0.01, "");
  EXPECT_NEAR(c.p99_steps, 98.0, 98.0 * 0.011);
  EXPECT_GE(c.p99_steps, 98.0 - 1e-9);  // an upper bin edge, never below
  EXPECT_NEAR(c.max_steps, 99.0, 1e-9);
  EXPECT_DOUBLE_EQ(c.exact_fraction, 0.01);
  EXPECT_TRUE(std::isinf(c.sqnr_db) && c.sqnr_db < 0);  // a silent reference

  DifferenceHistogram h;
  h.add(at::tensor({0.0, 0.0, 1e-30, 1e30}));
  EXPECT_EQ(h.count(), 4);
  EXPECT_DOUBLE_EQ(h.quantile(0.5), 0.0);
  EXPECT_DOUBLE_EQ(h.quantile(1.0), 1e30);
  EXPECT_DOUBLE_EQ(h.shareBelow(1e-40), 0.5);
}

// The share within one level counts one-level differences with float noise on them and never two
// levels: of |d| = 0, 1, 1 + 1e-5, 1 - 1e-5, 1.02, 2, 2 - 1e-5 and 3 steps of 0.05, five.
TEST(OutputMetricsTest, TheShareWithinOneStepCountsOneLevelWithFloatNoiseAndNotTwo) {
  const double step = 0.05;
  const at::Tensor steps =
      at::tensor({0.0, 1.0, 1.0 + 1e-5, 1.0 - 1e-5, 1.02, 2.0, 2.0 - 1e-5, 3.0}, at::kDouble);
  OutputAccumulator a("y");
  a.add((steps * step).reshape({8, 1}), at::zeros({8, 1}, at::kDouble));
  const OutputComparison c = a.finish(step, "");
  EXPECT_DOUBLE_EQ(c.within_one_step_fraction, 5.0 / 8);
  EXPECT_DOUBLE_EQ(c.exact_fraction, 1.0 / 8);
  EXPECT_NEAR(c.max_steps, 3.0, 1e-9);
}

TEST(OutputMetricsTest, TopOneOnlyForClassScoresAndIouOfThresholdedMaps) {
  OutputAccumulator logits("logits");
  logits.add(at::tensor({3.0f, 1.0f, 0.0f, 2.0f, 0.0f, 5.0f}).reshape({3, 2}),
             at::tensor({2.0f, 1.0f, 1.0f, 0.0f, 1.0f, 4.0f}).reshape({3, 2}));
  const OutputComparison c = logits.finish(0.5, "");
  EXPECT_TRUE(c.classifier);
  EXPECT_EQ(c.top1_agree, 2);  // rows 0 and 2 agree; in row 1 the picked class is 1.0 lower
  // Within one step the reference cannot tell its classes apart: row 1's pick is 1.0 below the
  // best, which a step of 1.0 covers.
  EXPECT_EQ(logits.finish(1.0, "").top1_agree, 3);
  // Exact ties: any pick among equal best scores agrees.
  OutputAccumulator tied("logits");
  tied.add(at::tensor({0.0f, 0.0f, 0.0f}).reshape({1, 3}),
           at::tensor({0.0f, 0.0f, 0.0f}).reshape({1, 3}));
  EXPECT_EQ(tied.finish(1e-9, "").top1_agree, 1);
  EXPECT_FALSE(c.iou.has_value());
  EXPECT_TRUE(isClassifierOutput({7, 10}));
  EXPECT_FALSE(isClassifierOutput({7, 1}));
  EXPECT_FALSE(isClassifierOutput({7, 1, 4, 4}));

  // got > 0.5: {0, 1}; ref > 0.5: {0, 2}: IoU 1/3.
  OutputAccumulator map("mask", 0.5);
  map.add(at::tensor({0.9f, 0.7f, 0.1f, 0.2f}).reshape({1, 1, 2, 2}),
          at::tensor({0.8f, 0.3f, 0.6f, 0.0f}).reshape({1, 1, 2, 2}));
  const OutputComparison m = map.finish(1.0 / 255, "");
  EXPECT_FALSE(m.classifier);
  EXPECT_EQ(m.top1_agree, 0);
  ASSERT_TRUE(m.iou.has_value());
  EXPECT_NEAR(*m.iou, 1.0 / 3.0, 1e-12);
}

TEST(OutputMetricsTest, MismatchedShapesAreCountedAndLeftOutAndAZeroStepIsAnError) {
  // A detector's boxes: 3 kept against 2 in the second step; only the first step is compared.
  OutputAccumulator a("boxes");
  a.add(at::full({2, 4}, 1.0), at::full({2, 4}, 1.5), 1);
  a.add(at::zeros({3, 4}), at::zeros({2, 4}), 1);
  a.add(at::zeros({1, 4}), at::zeros({4, 4}), 1);
  const OutputComparison c = a.finish(0.25, "");
  EXPECT_EQ(c.shape_mismatches, 2);
  EXPECT_EQ(c.shape_example, "[3, 4] against [2, 4]");
  EXPECT_EQ(c.samples, 3);
  EXPECT_FALSE(c.classifier);           // [2, 4] rows are not the 1 sample
  EXPECT_NEAR(c.max_steps, 2.0, 1e-9);  // |1 - 1.5| / 0.25, from the first step alone
  EXPECT_NEAR(c.sqnr_db, 10 * std::log10(1.5 * 1.5 / 0.25), 1e-9);
  // No step of the same shape: no figures, not "identical".
  OutputAccumulator none("boxes");
  none.add(at::zeros({3, 4}), at::zeros({2, 4}), 1);
  EXPECT_TRUE(std::isnan(none.finish(1, "").sqnr_db));
  a.add(at::zeros({2, 3}), at::zeros({2, 3}));
  expectErrorWith([&] { a.finish(0, ""); }, {"output 'boxes'", "step"});
}

}  // namespace
}  // namespace qforge::verify
