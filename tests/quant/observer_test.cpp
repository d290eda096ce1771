// Base-class contract (errors naming the tensor) and the moment/min-max observers, checked
// against closed-form answers on constructed data.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "quant/observers/clip_std.h"
#include "quant/observers/lsq_init.h"
#include "quant/observers/minmax.h"
#include "quant/observers/percentile.h"

namespace qforge::quant {
namespace {

void expectErrorContaining(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected a qforge::Error";
  } catch (const Error& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
}

QScheme uint8() {
  return QScheme::uint8Asymmetric();
}

TEST(ObserverTest, RefusesNonFiniteDataNamingTheTensor) {
  MinMaxObserver obs("conv1.output", uint8());
  obs.observe(at::tensor({1.0f, 2.0f}));
  expectErrorContaining(
      [&] {
        obs.observe(at::tensor({1.0f, NAN, 3.0f}));
      },
      {"MinMax observer of tensor 'conv1.output'", "batch 2", "1 NaN/Inf"});
  expectErrorContaining(
      [&] {
        obs.observe(at::tensor({-INFINITY, 0.0f, INFINITY}));
      },
      {"conv1.output", "2 NaN/Inf"});
  // Double input with a NaN deep inside a large tensor (the parallel scan must see it).
  at::Tensor big = at::zeros({300000}, at::kDouble);
  big[123457] = NAN;
  expectErrorContaining([&] { obs.observe(big); }, {"conv1.output", "NaN/Inf"});
  EXPECT_EQ(obs.batches(), 1);  // refused batches leave no trace
}

TEST(ObserverTest, RefusesQParamsWithoutData) {
  MinMaxObserver obs("fc.weight", uint8());
  expectErrorContaining([&] { obs.qparams(); }, {"fc.weight", "no data observed"});
  expectErrorContaining([&] { obs.range(); }, {"fc.weight", "no data observed"});
  obs.observe(at::empty({0}));  // empty batches are ignored
  EXPECT_FALSE(obs.hasData());
  obs.observe(at::tensor({1.0f}));
  EXPECT_NO_THROW(obs.qparams());
  obs.reset();
  EXPECT_THROW(obs.qparams(), Error);
}

TEST(ObserverTest, PerChannelChecks) {
  QScheme s = QScheme::int8Symmetric(true);
  s.axis = 2;
  MinMaxObserver obs("w", s);
  expectErrorContaining([&] { obs.observe(at::zeros({3, 4})); }, {"'w'", "axis 2 does not exist"});
  obs.observe(at::zeros({1, 1, 5}));
  expectErrorContaining(
      [&] {
        obs.observe(at::zeros({1, 1, 6}));
      },
      {"channel count changed from 5 to 6"});
  expectErrorContaining([&] { PercentileObserver("act", s); },
                        {"Percentile observer of tensor 'act'", "per-channel"});
  QScheme bad;
  bad.bits = 1;
  expectErrorContaining([&] { MinMaxObserver("act", bad); }, {"'act'", "bits=1"});
}

TEST(MinMaxObserverTest, RunningRangePerTensor) {
  MinMaxObserver obs("x", uint8());
  obs.observe(at::tensor({-1.0f, 0.5f, 2.0f}));
  obs.observe(at::tensor({-3.0f, 0.5f}));
  obs.observe(at::tensor({1, 2}, at::kInt));  // integer activations are fine
  auto [lo, hi] = obs.range();
  EXPECT_EQ(lo.item<float>(), -3.0f);
  EXPECT_EQ(hi.item<float>(), 2.0f);
  // scale = 5 / 255, zero point = 0 - round(-3 / scale) = 153.
  const QParams p = obs.qparams();
  EXPECT_FLOAT_EQ(p.scaleValue(), 5.0f / 255.0f);
  EXPECT_EQ(p.zeroPointValue(), 153);
}

TEST(MinMaxObserverTest, PerChannelOnAxis1) {
  QScheme s = QScheme::int8Symmetric();
  s.axis = 1;
  MinMaxObserver obs("w", s);
  // Channel c holds values c + {-2, ..., 2} * (c + 1) spread over the other axes.
  at::Tensor x = at::empty({5, 3, 2});
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t j = 0; j < 2; ++j)
        x[i][c][j] = c + (i - 2.0f) * (c + 1) + 0.1f * j;
    }
  }
  obs.observe(x);
  auto [lo, hi] = obs.range();
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_FLOAT_EQ(lo[c].item<float>(), c - 2.0f * (c + 1));
    EXPECT_FLOAT_EQ(hi[c].item<float>(), c + 2.0f * (c + 1) + 0.1f);
  }
  EXPECT_EQ(obs.qparams().numel(), 3);
}

// A channels-last activation (what convolutions leave) gives the ranges of its logical values:
// per tensor read in memory order, per channel on the axis its shape names.
TEST(MinMaxObserverTest, ChannelsLastTensorsGiveTheirLogicalRanges) {
  // Channel c holds c * 10 + (0 .. 11) spread over (n, h, w).
  const at::Tensor nchw = (at::arange(3, at::kFloat).view({1, 3, 1, 1}) * 10 +
                           at::arange(12, at::kFloat).view({2, 1, 2, 3}))
                              .contiguous();
  const at::Tensor x = nchw.contiguous(at::MemoryFormat::ChannelsLast);
  MinMaxObserver whole("x", uint8());
  whole.observe(x);
  auto [lo, hi] = whole.range();
  EXPECT_EQ(lo.item<float>(), 0.0f);
  EXPECT_EQ(hi.item<float>(), 31.0f);
  QScheme s = QScheme::int8Symmetric();
  s.axis = 1;
  MinMaxObserver channels("x", s);
  channels.observe(x);
  auto [clo, chi] = channels.range();
  EXPECT_TRUE(at::equal(clo, at::tensor({0.0f, 10.0f, 20.0f})));
  EXPECT_TRUE(at::equal(chi, at::tensor({11.0f, 21.0f, 31.0f})));
}

// Calibration feeds a weight's observer the same tensor on every batch. A running min/max learns
// nothing from it the second time, so the tensor is not read again until it changes: here a NaN
// written behind ATen's back (no version bump) goes unseen, while an in-place update through ATen
// (a new version) or another tensor with the same values is read.
TEST(MinMaxObserverTest, AnUnchangedTensorIsReadOnceAndAChangedOneAgain) {
  at::Tensor w = at::tensor({-1.0f, 2.0f, 0.5f});
  MinMaxObserver obs("w", uint8());
  obs.observe(w);
  w.data_ptr<float>()[2] = std::nanf("");
  obs.observe(w);  // not read: no NaN error
  EXPECT_EQ(obs.batches(), 2);
  w.data_ptr<float>()[2] = 0.5f;
  w.mul_(3.0f);  // version bump
  obs.observe(w);
  auto [lo, hi] = obs.range();
  EXPECT_EQ(lo.item<float>(), -3.0f);
  EXPECT_EQ(hi.item<float>(), 6.0f);
  expectErrorContaining([&] { obs.observe(at::tensor({1.0f, std::nanf("")})); }, {"NaN"});
  // EMA observers read every batch: averaging the same range again is not a no-op in general.
  EmaMinMaxObserver ema("a", uint8(), 0.5);
  at::Tensor a = at::tensor({0.0f, 4.0f});
  ema.observe(a);
  a.data_ptr<float>()[1] = std::nanf("");
  expectErrorContaining([&] { ema.observe(a); }, {"NaN"});
}

TEST(EmaMinMaxObserverTest, MovingAverageOfBatchRanges) {
  EmaMinMaxObserver obs("x", uint8(), 0.9);
  obs.observe(at::tensor({-1.0f, 1.0f}));
  obs.observe(at::tensor({-3.0f, 3.0f}));
  obs.observe(at::tensor({-2.0f, 5.0f}));
  auto [lo, hi] = obs.range();
  // min: -1 -> 0.9 * -1 + 0.1 * -3 = -1.2 -> 0.9 * -1.2 + 0.1 * -2 = -1.28; max: 1 -> 1.2 -> 1.58.
  EXPECT_NEAR(lo.item<float>(), -1.28f, 1e-6);
  EXPECT_NEAR(hi.item<float>(), 1.58f, 1e-6);
  EXPECT_THROW(EmaMinMaxObserver("x", uint8(), 1.0), Error);
}

// Per-tensor min/max observers keep their range as two doubles and fold each batch's range
// directly; data-parallel calibration holds summaries and folds them later. Both must give the
// double-precision recurrence rounded once to float32, bit for bit.
TEST(EmaMinMaxObserverTest, DirectAndHeldBatchesGiveTheDoubleRecurrenceExactly) {
  const std::vector<std::pair<float, float>> batches = {
      {-1.1f, 0.7f}, {-3.3f, 2.9f}, {-0.2f, 5.3f}, {-2.7f, 0.1f}};
  const double ratio = 0.83;
  double lo = batches[0].first, hi = batches[0].second;
  for (size_t b = 1; b < batches.size(); ++b) {
    lo = lo * ratio + static_cast<double>(batches[b].first) * (1.0 - ratio);
    hi = hi * ratio + static_cast<double>(batches[b].second) * (1.0 - ratio);
  }
  EmaMinMaxObserver direct("x", uint8(), ratio), held("x", uint8(), ratio);
  held.holdObservations(true);
  for (const auto& [bmin, bmax] : batches) {
    // A tensor autograd tracks is read as it is, without building anything on it.
    const at::Tensor x = at::tensor({bmax, 0.0f, bmin}).requires_grad_(true);
    direct.observe(x);
    held.observe(x);
    EXPECT_FALSE(x.grad_fn());
  }
  EXPECT_FALSE(held.hasData());  // held summaries are not folded yet
  held.fold(held.takeHeld());
  for (const EmaMinMaxObserver* obs : {&direct, &held}) {
    auto [rlo, rhi] = obs->range();
    EXPECT_EQ(rlo.scalar_type(), at::kFloat);
    EXPECT_EQ(rlo.item<float>(), static_cast<float>(lo));
    EXPECT_EQ(rhi.item<float>(), static_cast<float>(hi));
    EXPECT_EQ(obs->batches(), 4);
  }
}

TEST(MinMaxObserverTest, DirectAndHeldBatchesGiveTheSameRange) {
  MinMaxObserver direct("x", uint8()), held("x", uint8());
  held.holdObservations(true);
  for (const at::Tensor& x :
       {at::tensor({-1.5f, 2.25f}), at::tensor({-0.5f, 7.75f}), at::tensor({-4.125f, 1.0f})}) {
    direct.observe(x);
    held.observe(x);
  }
  held.fold(held.takeHeld());
  for (const MinMaxObserver* obs : {&direct, &held}) {
    auto [lo, hi] = obs->range();
    EXPECT_EQ(lo.item<float>(), -4.125f);
    EXPECT_EQ(hi.item<float>(), 7.75f);
  }
  direct.reset();
  EXPECT_FALSE(direct.hasData());
  direct.observe(at::tensor({3.0f, 4.0f}));
  EXPECT_EQ(direct.range().first.item<float>(), 3.0f);  // reset forgot the old range
}

// {-1, +1} x 1000 each plus one outlier at 100: mean and unbiased std from the textbook formula.
TEST(ClipStdObserverTest, ClipsOutliersAtMeanPlusKStd) {
  std::vector<float> values;
  for (int i = 0; i < 1000; ++i) {
    values.push_back(-1.0f);
    values.push_back(1.0f);
  }
  values.push_back(100.0f);
  const double n = static_cast<double>(values.size());
  double sum = 0.0, sumsq = 0.0;
  for (float v : values)
    sum += v;
  const double mean = sum / n;
  for (float v : values)
    sumsq += (v - mean) * (v - mean);
  const double std = std::sqrt(sumsq / (n - 1));
  const at::Tensor all = at::tensor(values);
  ClipStdObserver obs("x", QScheme::int8Symmetric(), 2.6);
  obs.observe(all.slice(0, 0, 777));  // two uneven batches: moments must merge exactly
  obs.observe(all.slice(0, 777));
  auto [lo, hi] = obs.range();
  EXPECT_NEAR(hi.item<float>(), mean + 2.6 * std, 1e-5);
  EXPECT_LT(hi.item<float>(), 100.0f);  // the outlier is clipped
  EXPECT_EQ(lo.item<float>(), -1.0f);   // mean - 2.6 std is below the minimum: min wins
}

TEST(ClipStdObserverTest, PerChannel) {
  QScheme s = QScheme::int8Symmetric(true);
  ClipStdObserver obs("w", s, 1.0);
  // Row 0: {0, 2} -> mean 1, std sqrt(2); row 1: {-4, 4} -> mean 0, std sqrt(32).
  obs.observe(at::tensor({0.0f, 2.0f, -4.0f, 4.0f}).reshape({2, 2}));
  auto [lo, hi] = obs.range();
  EXPECT_FLOAT_EQ(lo[0].item<float>(), 0.0f);  // 1 - 1.414 < 0 = min
  EXPECT_FLOAT_EQ(hi[0].item<float>(), 2.0f);
  EXPECT_FLOAT_EQ(lo[1].item<float>(), -4.0f);
  EXPECT_FLOAT_EQ(hi[1].item<float>(), 4.0f);
}

TEST(LsqInitObserverTest, TwiceMeanAbsOverRootQmax) {
  LsqInitObserver obs("x", QScheme::int8Symmetric());
  obs.observe(at::tensor({-2.0f, -1.0f}));
  obs.observe(at::tensor({1.0f, 2.0f}));
  const QParams p = obs.qparams();  // mean |x| = 1.5 -> 3 / sqrt(127)
  EXPECT_FLOAT_EQ(p.scaleValue(), static_cast<float>(3.0 / std::sqrt(127.0)));
  EXPECT_EQ(p.zeroPointValue(), 0);
  auto [lo, hi] = obs.range();
  EXPECT_FLOAT_EQ(hi.item<float>(), 127.0f * p.scaleValue());
  EXPECT_FLOAT_EQ(lo.item<float>(), -127.0f * p.scaleValue());

  LsqInitObserver per_channel("w", QScheme::int8Symmetric(true));
  per_channel.observe(at::tensor({1.0f, -3.0f, 0.5f, 0.5f}).reshape({2, 2}));
  const QParams pc = per_channel.qparams();
  EXPECT_FLOAT_EQ(pc.scale[0].item<float>(), static_cast<float>(4.0 / std::sqrt(127.0)));
  EXPECT_FLOAT_EQ(pc.scale[1].item<float>(), static_cast<float>(1.0 / std::sqrt(127.0)));
}

}  // namespace
}  // namespace qforge::quant
