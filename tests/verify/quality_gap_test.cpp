// The quality gap between ORT's and the simulation's SQNR against the float model, and its spread
// over the samples verified, against closed forms: 10 log10 of noise power ratios, and the
// bootstrap interval of samples whose gaps point in opposite directions.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "verify/quality_gap.h"

namespace qforge::testing {
namespace {

// One sample's output: a reference of energy `signal`, and runs whose squared errors sum to
// `ort_noise` and `simulation_noise` (one element carries the error).
struct Sample {
  at::Tensor ort, simulation, reference;
};

Sample sample(double signal, double ort_noise, double simulation_noise) {
  at::Tensor reference = at::zeros({1, 4}, at::kDouble);
  reference[0][0] = std::sqrt(signal);
  at::Tensor ort = reference.clone(), simulation = reference.clone();
  ort[0][1] = std::sqrt(ort_noise);
  simulation[0][2] = std::sqrt(simulation_noise);
  return {ort, simulation, reference};
}

void addOne(verify::QualityGap& q, const Sample& s) {
  q.add(s.ort, s.simulation, s.reference, 1);
}

const double kThreeDb = 10 * std::log10(2.0);

// One sample gives the gap (the noise ratio) but nothing of how it moves between samples.
TEST(QualityGap, OneSampleSupportsNoGapAndItsGapIsTheNoiseRatio) {
  verify::QualityGap q("y");
  addOne(q, sample(100, 1, 2));
  const verify::OutputQuality r = q.finish();
  EXPECT_EQ(r.output, "y");
  EXPECT_EQ(r.samples, 1);
  EXPECT_NEAR(r.ort_sqnr_db, 20.0, 1e-9);
  EXPECT_NEAR(r.simulation_sqnr_db, 10 * std::log10(50.0), 1e-9);
  EXPECT_NEAR(r.gap_db, kThreeDb, 1e-9);
  EXPECT_TRUE(std::isinf(r.gap_low_db) && r.gap_low_db < 0);
  EXPECT_TRUE(std::isinf(r.gap_high_db) && r.gap_high_db > 0);
  EXPECT_EQ(r.supportedGapDb(), 0.0);
}

// One sample 6 dB better in ORT, one 6 dB better in the simulation: pooled they agree. Drawn
// again, either can come twice (the bootstrap's -6 to 6 dB), and Student's t interval of the two
// gaps (mean 0, standard deviation 6 sqrt 2, t = 6.314 at one degree of freedom) is wider still.
TEST(QualityGap, SamplesPointingBothWaysSupportNoGap) {
  verify::QualityGap q("y");
  addOne(q, sample(100, 1, 4));
  addOne(q, sample(100, 4, 1));
  const verify::OutputQuality r = q.finish();
  const double six = 10 * std::log10(4.0);
  EXPECT_NEAR(r.gap_db, 0.0, 1e-12);
  EXPECT_NEAR(r.gap_low_db, -6.314 * six, 1e-9);
  EXPECT_NEAR(r.gap_high_db, 6.314 * six, 1e-9);
  EXPECT_EQ(r.supportedGapDb(), 0.0);
}

// Two samples both favouring ORT, by 4 and 6 dB: the bootstrap's interval is just those two gaps
// (4 to 6 dB, "more than 1 dB however the samples are drawn again"), but two samples say little
// of the spread: Student's t gives 5 +- 6.314 * sqrt 2 / sqrt 2 = 5 +- 6.314, which holds 0.
TEST(QualityGap, TwoSamplesOnOneSideAreWidenedByStudentsT) {
  verify::QualityGap q("y");
  addOne(q, sample(100, 1, std::pow(10.0, 0.4)));
  addOne(q, sample(100, 1, std::pow(10.0, 0.6)));
  const verify::OutputQuality r = q.finish();
  EXPECT_NEAR(r.gap_low_db, 5.0 - 6.314, 1e-9);
  EXPECT_NEAR(r.gap_high_db, 5.0 + 6.314, 1e-9);
  EXPECT_EQ(r.supportedGapDb(), 0.0);
  // Eight samples alternating between the same two gaps: t = 1.895 at 7 degrees of freedom,
  // standard deviation sqrt(8 / 7), so 5 +- 1.895 * sqrt(8 / 7) / sqrt 8 = 5 +- 0.716.
  verify::QualityGap eight("y");
  for (int i = 0; i < 8; ++i)
    addOne(eight, sample(100, 1, std::pow(10.0, i % 2 ? 0.6 : 0.4)));
  const verify::OutputQuality e = eight.finish();
  EXPECT_NEAR(e.gap_low_db, 5.0 - 1.895 / std::sqrt(7.0), 1e-9);
  EXPECT_NEAR(e.supportedGapDb(), 5.0 - 1.895 / std::sqrt(7.0), 1e-9);
}

// Every sample 3 dB worse in the simulation (ORT ahead), whatever its own error: no redraw of the
// samples removes the gap.
TEST(QualityGap, AGapEverySampleShowsIsSupportedWhole) {
  verify::QualityGap q("y");
  at::manual_seed(3);
  const at::Tensor noise = at::rand({20}, at::kDouble) * 10 + 0.1;
  for (int64_t i = 0; i < 20; ++i) {
    const double n = noise[i].item<double>();
    addOne(q, sample(100, n, 2 * n));
  }
  const verify::OutputQuality r = q.finish();
  EXPECT_EQ(r.samples, 20);
  EXPECT_NEAR(r.gap_low_db, kThreeDb, 1e-9);
  EXPECT_NEAR(r.gap_high_db, kThreeDb, 1e-9);
  EXPECT_NEAR(r.supportedGapDb(), kThreeDb, 1e-9);
  // A batch of the same samples counts each row as a sample.
  verify::QualityGap batched("y");
  at::Tensor reference = at::full({20, 3}, 10.0, at::kDouble);
  at::Tensor ort = reference + noise.sqrt().unsqueeze(1) / std::sqrt(3.0);
  at::Tensor simulation = reference - (2 * noise).sqrt().unsqueeze(1) / std::sqrt(3.0);
  batched.add(ort, simulation, reference, 20);
  const verify::OutputQuality b = batched.finish();
  EXPECT_EQ(b.samples, 20);
  EXPECT_NEAR(b.gap_db, kThreeDb, 1e-9);
  EXPECT_NEAR(b.supportedGapDb(), kThreeDb, 1e-9);
}

TEST(QualityGap, OutputsWithoutBatchAxisAndDataDependentShapes) {
  verify::QualityGap q("boxes");
  // A detector's [detections, 4] for a batch of 2 samples: one unit.
  const at::Tensor reference = at::ones({5, 4}, at::kDouble);
  q.add(reference + 0.1, reference + 0.2, reference, 2);
  // Shapes that differ (ORT kept another number of boxes) are left out.
  q.add(at::ones({3, 4}), at::ones({5, 4}), reference, 2);
  const verify::OutputQuality r = q.finish();
  EXPECT_EQ(r.samples, 1);
  EXPECT_NEAR(r.gap_db, 10 * std::log10(4.0), 1e-9);
}

TEST(QualityGap, ExactRunsAndNoSamples) {
  verify::QualityGap exact("y");
  exact.add(at::ones({2, 3}), at::ones({2, 3}), at::ones({2, 3}), 2);
  verify::OutputQuality r = exact.finish();
  EXPECT_TRUE(std::isinf(r.ort_sqnr_db) && r.ort_sqnr_db > 0);
  EXPECT_EQ(r.gap_db, 0.0);
  EXPECT_EQ(r.supportedGapDb(), 0.0);

  // ORT exact on every sample, the simulation not: the gap is infinite however they are drawn
  // (the per-sample gaps are infinite, so no t interval widens it).
  verify::QualityGap ort_exact("y");
  addOne(ort_exact, sample(100, 0, 1));
  addOne(ort_exact, sample(100, 0, 2));
  r = ort_exact.finish();
  EXPECT_TRUE(std::isinf(r.gap_db) && r.gap_db > 0);
  EXPECT_TRUE(std::isinf(r.supportedGapDb()));

  const verify::OutputQuality none = verify::QualityGap("y").finish();
  EXPECT_EQ(none.samples, 0);
  EXPECT_EQ(none.supportedGapDb(), 0.0);
}

}  // namespace
}  // namespace qforge::testing
