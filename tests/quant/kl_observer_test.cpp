// Entropy (KL) calibration against a literal re-implementation of the published TensorRT
// algorithm (Migacz, GTC 2017, slides 31-35), written here without prefix sums, plus a
// hand-computed tiny case.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "quant/entropy_calibration.h"
#include "quant/observers/kl.h"

namespace qforge::quant {
namespace {

struct Reference {
  int64_t m;
  double kl;
};

// For i in [Q, N]: P = bins [0, i) with the outliers added to bin i-1, normalised; Q = bins [0, i)
// quantized into Q levels (groups of i / Q, remainder in the last), expanded over the non-zero
// bins of P, normalised; KL(P || Q), infinite where Q = 0 < P. Returns the minimising i.
Reference literalTensorRt(const std::vector<double>& hist, int64_t levels) {
  const int64_t n = static_cast<int64_t>(hist.size());
  Reference best{n, std::numeric_limits<double>::infinity()};
  for (int64_t i = levels; i <= n; ++i) {
    std::vector<double> p(hist.begin(), hist.begin() + i);
    double outliers = 0.0;
    for (int64_t j = i; j < n; ++j)
      outliers += hist[j];
    p[i - 1] += outliers;
    std::vector<double> q(i, 0.0);
    const int64_t merged = i / levels;
    for (int64_t g = 0; g < levels; ++g) {
      const int64_t start = g * merged;
      const int64_t stop = (g == levels - 1) ? i : start + merged;
      double sum = 0.0;
      int64_t nonzero = 0;
      for (int64_t j = start; j < stop; ++j) {
        sum += hist[j];
        nonzero += p[j] != 0.0;
      }
      for (int64_t j = start; j < stop; ++j) {
        if (p[j] != 0.0) q[j] = sum / static_cast<double>(nonzero);
      }
    }
    double sp = 0.0, sq = 0.0;
    for (int64_t j = 0; j < i; ++j) {
      sp += p[j];
      sq += q[j];
    }
    double kl = 0.0;
    for (int64_t j = 0; j < i; ++j) {
      if (p[j] == 0.0) continue;
      if (q[j] == 0.0) {
        kl = std::numeric_limits<double>::infinity();
        break;
      }
      kl += (p[j] / sp) * std::log((p[j] / sp) / (q[j] / sq));
    }
    if (kl < best.kl) best = {i, kl};
  }
  return best;
}

TEST(EntropyCalibrationTest, HandComputedTinyHistogram) {
  // hist [4, 2, 0, 1], 2 levels:
  //  m=2: P=[4,3]/7, Q=[4,2]/6            -> KL = 0.01962
  //  m=3: P=[4,2,1]/7, Q=[4,1,1]/6        -> KL = 0.04389
  //  m=4: P=[4,2,0,1]/7, Q=[3,3,0,1]/7    -> KL = 0.04854
  const EntropyCalibration r = entropyCalibrate({4, 2, 0, 1}, 0.5, 2);
  EXPECT_EQ(r.kept_bins, 2);
  const double kl2 =
      4.0 / 7 * std::log((4.0 / 7) / (4.0 / 6)) + 3.0 / 7 * std::log((3.0 / 7) / (2.0 / 6));
  EXPECT_NEAR(r.divergence, kl2, 1e-12);
  EXPECT_NEAR(r.divergence, 0.01962, 1e-5);
  EXPECT_DOUBLE_EQ(r.threshold, 2.5 * 0.5);
}

TEST(EntropyCalibrationTest, MatchesLiteralAlgorithmOnVariedHistograms) {
  at::manual_seed(8);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t n = trial < 6 ? 2048 : 300 + 37 * trial;
    const int64_t levels = trial < 6 ? 128 : 16;
    // Gaussian- or Laplace-shaped counts with noise, holes and a sparse far tail.
    const at::Tensor pos = at::arange(n, at::kDouble) / static_cast<double>(n);
    const double width = 0.05 + 0.03 * trial;
    at::Tensor shape = trial % 2 == 0 ? at::exp(-(pos / width).pow(2)) : at::exp(-pos / width);
    at::Tensor counts = at::floor(shape * 1e5 * (0.8 + 0.4 * at::rand({n}, at::kDouble)));
    counts = counts * (at::rand({n}, at::kDouble) > 0.05).to(at::kDouble);    // random holes
    counts.slice(0, n - 40) += at::floor(at::rand({40}, at::kDouble) * 3.0);  // tail outliers
    std::vector<double> hist(counts.data_ptr<double>(), counts.data_ptr<double>() + n);
    const Reference expected = literalTensorRt(hist, levels);
    const EntropyCalibration ours = entropyCalibrate(hist, 0.01, levels);
    EXPECT_EQ(ours.kept_bins, expected.m) << "trial " << trial;
    EXPECT_NEAR(ours.divergence, expected.kl, 1e-9 * std::max(1.0, expected.kl)) << trial;
    // (m + 0.5) bins, capped at the histogram's top when nothing is clipped.
    EXPECT_DOUBLE_EQ(ours.threshold, std::min((expected.m + 0.5) * 0.01, n * 0.01)) << trial;
  }
}

TEST(EntropyCalibrationTest, RejectsBadInput) {
  EXPECT_THROW(entropyCalibrate({0, 0, 0, 0}, 1.0, 2), Error);
  EXPECT_THROW(entropyCalibrate({1, 2}, 1.0, 4), Error);
  EXPECT_THROW(entropyCalibrate({1, -2, 3}, 1.0, 2), Error);
}

// The observer's 2048-bin histogram of |x| against one built here directly from the data, its
// first bin discarded as TensorRT does unless kept.
std::vector<double> directHistogram(const at::Tensor& x, int64_t bins, double top,
                                    bool keep_first_bin = false) {
  std::vector<double> h(bins, 0.0);
  const at::Tensor a = x.abs().to(at::kDouble).contiguous();
  const double* v = a.data_ptr<double>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    h[std::min<int64_t>(static_cast<int64_t>(v[i] / top * bins), bins - 1)] += 1.0;
  }
  if (!keep_first_bin) h[0] = 0.0;
  return h;
}

TEST(KlObserverTest, SingleBatchMatchesReferenceThreshold) {
  at::manual_seed(9);
  for (int trial = 0; trial < 3; ++trial) {
    const at::Tensor x = trial == 0 ? at::randn({200000})
                         : trial == 1
                             ? at::cat({at::randn({200000}), at::tensor({40.0f})})
                             : -at::log(at::rand({200000})) * (at::rand({200000}) - 0.5).sign();
    KlObserver obs("act", QScheme::int8Symmetric());
    obs.observe(x);
    const double amax = x.abs().max().item<double>();
    const Reference ref = literalTensorRt(directHistogram(x, 2048, amax), 128);
    const double ref_threshold = std::min((ref.m + 0.5) * amax / 2048, amax);
    const double width = amax / 2048;
    EXPECT_NEAR(obs.calibration().threshold, ref_threshold, 1.01 * width) << trial;
    auto [lo, hi] = obs.range();
    EXPECT_NEAR(hi.item<float>(), std::min<double>(ref_threshold, x.max().item<float>()),
                1.01 * width);
    EXPECT_NEAR(lo.item<float>(), std::max<double>(-ref_threshold, x.min().item<float>()),
                1.01 * width);
  }
}

TEST(KlObserverTest, GrowingStreamStaysCloseToExactHistogram) {
  at::manual_seed(10);
  KlObserver obs("act", QScheme::int8Symmetric());
  std::vector<at::Tensor> batches;
  for (int b = 0; b < 6; ++b) {
    batches.push_back(at::randn({50000}) * (1.0f + 0.4f * b));
    obs.observe(batches.back());
  }
  const at::Tensor all = at::cat(batches);
  const double amax = all.abs().max().item<double>();
  const Reference ref = literalTensorRt(directHistogram(all, 2048, amax), 128);
  EXPECT_NEAR(obs.calibration().threshold, std::min((ref.m + 0.5) * amax / 2048, amax),
              2.01 * amax / 2048);
}

// A ReLU's output: 60% exact zeros, the rest half-normal. Kept, the zeros' spike costs every wide
// range (the spike spreads over a wide first group), so the search clips deep into the values;
// discarded (TensorRT), the threshold is the literal algorithm's on the rest.
TEST(KlObserverTest, DiscardsTheFirstBinAsTensorRtDoes) {
  at::manual_seed(11);
  const at::Tensor normal = at::randn({200000}).abs();
  const at::Tensor x = normal * (at::rand({200000}) > 0.6).to(at::kFloat);
  const double amax = x.max().item<double>();
  const double width = amax / 2048;

  KlObserver discarding("relu", QScheme::int8Symmetric());
  discarding.observe(x);
  const Reference ref = literalTensorRt(directHistogram(x, 2048, amax), 128);
  EXPECT_NEAR(discarding.calibration().threshold, std::min((ref.m + 0.5) * width, amax),
              1.01 * width);

  KlObserver keeping("relu", QScheme::int8Symmetric(), 2048, 0, /*keep_first_bin=*/true);
  keeping.observe(x);
  const Reference kept = literalTensorRt(directHistogram(x, 2048, amax, true), 128);
  EXPECT_NEAR(keeping.calibration().threshold, std::min((kept.m + 0.5) * width, amax),
              1.01 * width);

  // What the discard is for: the share of the non-zero values each range clips.
  auto clippedShare = [&](double t) {
    const at::Tensor nonzero = x.masked_select(x > 0);
    return (nonzero > t).to(at::kDouble).mean().item<double>();
  };
  EXPECT_LT(clippedShare(discarding.calibration().threshold), 0.001);
  EXPECT_GT(clippedShare(keeping.calibration().threshold), 0.01);
}

TEST(KlObserverTest, UnsignedGridUsesAllLevelsAndRefusesPerChannel) {
  KlObserver obs("relu", QScheme::uint8Asymmetric());
  obs.observe(at::rand({10000}));
  const EntropyCalibration c = obs.calibration();
  EXPECT_GE(c.kept_bins, 256);  // 2^8 quantized bins for an unsigned grid
  EXPECT_GE(obs.range().first.item<float>(), 0.0f);
  EXPECT_THROW(KlObserver("w", QScheme::int8Symmetric(true)), Error);
}

}  // namespace
}  // namespace qforge::quant
