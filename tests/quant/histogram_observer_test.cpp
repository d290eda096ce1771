// The growing |x| histogram and the quantile observers, against exact quantiles of constructed
// data (uniform grids, Laplace inverse-CDF points, outliers).
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "quant/abs_histogram.h"
#include "quant/observers/percentile.h"

namespace qforge::quant {
namespace {

// Exact q-quantile of |x| (the ceil(q * n)-th smallest), independent of the histogram. `below`
// and `above` receive the neighbouring samples: on discrete data every clip between them is a
// valid answer for a q within one sample of the requested one (99.9 / 100 is not exactly 0.999).
double exactAbsQuantile(const at::Tensor& x, double q, double* below = nullptr,
                        double* above = nullptr) {
  const at::Tensor sorted = std::get<0>(x.abs().to(at::kDouble).reshape({-1}).sort());
  const int64_t n = sorted.numel();
  const int64_t k = std::max<int64_t>(static_cast<int64_t>(std::ceil(q * n)) - 1, 0);
  if (below != nullptr) *below = sorted[std::max<int64_t>(k - 1, 0)].item<double>();
  if (above != nullptr) *above = sorted[std::min<int64_t>(k + 1, n - 1)].item<double>();
  return sorted[k].item<double>();
}

// Laplace(0, b) points at the quantiles (i + 0.5) / n: |x| = -b ln(1 - u) for the upper half.
at::Tensor laplacePoints(int64_t n, double b) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    const double u = (static_cast<double>(i) + 0.5) / static_cast<double>(n);
    v[i] = static_cast<float>(u < 0.5 ? b * std::log(2.0 * u) : -b * std::log(2.0 * (1.0 - u)));
  }
  return at::tensor(v);
}

TEST(AbsHistogramTest, GrowthMergesBinsExactly) {
  AbsHistogram h(8);
  // The smallest power-of-two width whose 8 bins cover 1.0 (strictly): 8 * 0.25 > 1.
  h.add(at::tensor({0.1f, -0.3f, 0.9f, 1.0f}), 1.0f);
  EXPECT_DOUBLE_EQ(h.binWidth(), 0.25);
  EXPECT_EQ(h.counts(), (std::vector<double>{1, 1, 0, 1, 1, 0, 0, 0}));
  h.add(at::tensor({3.0f, -2.5f}), 3.0f);  // top 2 -> 4: width 0.5, neighbours merged
  EXPECT_DOUBLE_EQ(h.binWidth(), 0.5);
  EXPECT_EQ(h.counts(), (std::vector<double>{2, 1, 1, 0, 0, 1, 1, 0}));
  EXPECT_DOUBLE_EQ(h.total(), 6.0);
  EXPECT_DOUBLE_EQ(h.maxAbs(), 3.0);
  // Resample onto 3 bins over [0, 3]: [0,1) holds 0.1, 0.3, 0.9; [1,2) holds 1.0; [2,3) holds
  // 2.5 and the 3.0 (mass at or beyond the top goes to the last bin).
  const std::vector<double> r = h.resample(3, 3.0);
  EXPECT_DOUBLE_EQ(r[0], 3.0);
  EXPECT_DOUBLE_EQ(r[1], 1.0);
  EXPECT_DOUBLE_EQ(r[2], 2.0);
}

TEST(AbsHistogramTest, ZerosBeforeRangeIsKnown) {
  AbsHistogram h(4);
  h.add(at::zeros({10}), 0.0f);
  EXPECT_DOUBLE_EQ(h.quantile(1.0), 0.0);
  h.add(at::tensor({4.0f}), 4.0f);  // 4 bins of 2 cover [0, 8): 4.0 is in the third
  EXPECT_EQ(h.counts(), (std::vector<double>{10, 0, 1, 0}));
  EXPECT_THROW(AbsHistogram(3), Error);
  EXPECT_THROW(h.quantile(0.0), Error);
}

// The histogram depends only on the values: streams cut anywhere and fed in any order, then merged,
// give the histogram of everything, bin for bin (what data-parallel calibration relies on).
TEST(AbsHistogramTest, MergedPartsEqualTheWholeStreamInAnyOrder) {
  const at::Tensor values = laplacePoints(30000, 1.5).index({at::randperm(30000, at::kLong)});
  const std::vector<at::Tensor> parts = {values.narrow(0, 0, 7000), values.narrow(0, 7000, 100),
                                         values.narrow(0, 7100, 22900) * 3.0f};
  auto maxAbs = [](const at::Tensor& t) { return t.abs().max().item<float>(); };
  AbsHistogram whole(1024);
  for (const at::Tensor& p : parts)
    whole.add(p, maxAbs(p));
  AbsHistogram reversed(1024);
  for (auto p = parts.rbegin(); p != parts.rend(); ++p)
    reversed.add(*p, maxAbs(*p));
  EXPECT_EQ(reversed.counts(), whole.counts());
  EXPECT_EQ(reversed.binWidth(), whole.binWidth());
  // Each part alone (its own, finer width), merged in two orders, through the tensor form.
  for (const std::vector<int>& order : {std::vector<int>{0, 1, 2}, std::vector<int>{2, 0, 1}}) {
    AbsHistogram merged(1024);
    for (int i : order) {
      AbsHistogram part(1024);
      part.add(parts[i], maxAbs(parts[i]));
      merged.merge(AbsHistogram::fromTensor(part.toTensor()));
    }
    EXPECT_EQ(merged.counts(), whole.counts());
    EXPECT_EQ(merged.binWidth(), whole.binWidth());
    EXPECT_EQ(merged.total(), 30000.0);
    EXPECT_EQ(merged.maxAbs(), whole.maxAbs());
  }
  // Independently of the histogram: bin k holds the values in [k width, (k + 1) width).
  const at::Tensor all = at::cat({parts[0], parts[1], parts[2]}).abs().to(at::kDouble);
  const double width = whole.binWidth();
  for (int64_t k : {0, 5, 100, 1023}) {
    const double expected =
        (all >= k * width).logical_and(all < (k + 1) * width).sum().item<double>();
    EXPECT_EQ(whole.counts()[k], expected) << "bin " << k;
  }
  EXPECT_LT(all.max().item<double>(), 1024 * width);
  EXPECT_GE(all.max().item<double>(), 512 * width);  // the smallest power of two that covers
  AbsHistogram other_size(512);
  EXPECT_THROW(whole.merge(other_size), Error);
}

TEST(PercentileObserverTest, UniformGridPicksTheKnownQuantile) {
  PercentileObserver obs("x", QScheme::int8Symmetric(), 99.0);
  const at::Tensor x = at::linspace(-1.0, 1.0, 200001);
  obs.observe(x);
  auto [lo, hi] = obs.range();
  EXPECT_NEAR(hi.item<float>(), 0.99, 1e-4);
  EXPECT_NEAR(lo.item<float>(), -0.99, 1e-4);
}

TEST(PercentileObserverTest, LaplaceQuantileAcrossGrowingBatches) {
  // Three batches with growing scale; the stream's quantile is computed exactly by sorting.
  PercentileObserver obs("x", QScheme::int8Symmetric(), 99.9);
  std::vector<at::Tensor> batches = {laplacePoints(100000, 1.0), laplacePoints(100000, 2.0),
                                     laplacePoints(100000, 4.0)};
  for (const at::Tensor& b : batches)
    obs.observe(b);
  double below = 0.0, above = 0.0;
  exactAbsQuantile(at::cat(batches), 0.999, &below, &above);
  auto [lo, hi] = obs.range();
  // The tail samples are ~10 bins apart: the clip must fall between the samples around the
  // quantile, give or take one bin.
  const double width = obs.histogram().binWidth();
  EXPECT_GE(hi.item<float>(), below - width);
  EXPECT_LE(hi.item<float>(), above + width);
  EXPECT_LT(above - below, 0.06);  // the bracket is tight: two tail samples
  EXPECT_EQ(lo.item<float>(), -hi.item<float>());
  // A single Laplace(0, 1) batch: the 99.9% quantile of |x| is ln(1000) = 6.9078.
  PercentileObserver single("x", QScheme::int8Symmetric(), 99.9);
  single.observe(laplacePoints(1000000, 1.0));
  EXPECT_NEAR(single.range().second.item<float>(), std::log(1000.0), 2e-3);
}

// A channels-last activation reaches the histogram through a view in memory order: its quantile
// is the one of the same values sorted, as for the NCHW tensor.
TEST(PercentileObserverTest, ChannelsLastActivationGivesTheQuantileOfItsValues) {
  const at::Tensor nchw = laplacePoints(4 * 9 * 10 * 10, 1.5).view({4, 9, 10, 10});
  const at::Tensor channels_last = nchw.contiguous(at::MemoryFormat::ChannelsLast);
  ASSERT_FALSE(channels_last.is_contiguous());
  PercentileObserver obs("x", QScheme::int8Symmetric(), 99.0);
  obs.observe(channels_last);
  double below = 0.0, above = 0.0;
  exactAbsQuantile(nchw, 0.99, &below, &above);
  const double width = obs.histogram().binWidth();
  const float hi = obs.range().second.item<float>();
  EXPECT_GE(hi, below - width);
  EXPECT_LE(hi, above + width);
}

TEST(PercentileObserverTest, IgnoresRareOutliers) {
  PercentileObserver obs("x", QScheme::uint8Asymmetric(), 99.9);
  at::Tensor x = at::linspace(0.0, 1.0, 100000);
  x.index_put_({at::arange(0, 100000, 20000)}, 1000.0f);  // 5 outliers = 0.005%
  obs.observe(x);
  auto [lo, hi] = obs.range();
  EXPECT_EQ(lo.item<float>(), x.min().item<float>());
  // Resolution is one bin of the histogram that had to stretch to 1000.
  const double width = obs.histogram().binWidth();
  EXPECT_LT(width, 2 * 1000.0 / 16384);
  EXPECT_NEAR(hi.item<float>(), exactAbsQuantile(x, 0.999), width);
  EXPECT_LT(hi.item<float>(), 1.0 + width);
}

TEST(EmaQuantileObserverTest, MovingAverageOfBatchQuantiles) {
  EmaQuantileObserver obs("x", QScheme::int8Symmetric(), 99.0, 0.5, 2048);
  const at::Tensor a = at::linspace(-1.0, 1.0, 100001);
  const at::Tensor b = at::linspace(-3.0, 3.0, 100001);
  obs.observe(a);
  obs.observe(b);
  const double qa = exactAbsQuantile(a, 0.99), qb = exactAbsQuantile(b, 0.99);
  auto [lo, hi] = obs.range();
  EXPECT_NEAR(hi.item<float>(), 0.5 * qa + 0.5 * qb, 3.0 / 2048);
  EXPECT_NEAR(lo.item<float>(), -(0.5 * qa + 0.5 * qb), 3.0 / 2048);
}

}  // namespace
}  // namespace qforge::quant
