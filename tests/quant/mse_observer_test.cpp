// MSE/Lp range search against a brute-force search written here from the definition, and against
// data whose optimum is known in closed form.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "quant/observers/mse.h"

namespace qforge::quant {
namespace {

// Independent reference: the shrink grid of MQBench's MSEObserver with the grid formulas spelled
// out for a signed restricted-range symmetric grid and an unsigned asymmetric grid.
std::pair<float, float> bruteForce(const std::vector<float>& x, float lo, float hi, bool symmetric,
                                   double p, int steps = 95) {
  double best = std::numeric_limits<double>::infinity();
  std::pair<float, float> pick{lo, hi};
  for (int i = 0; i < steps; ++i) {
    const float f = static_cast<float>(1.0 - i * 0.01);
    const float l = lo * f, h = hi * f;
    float scale;
    float zp = 0.0f, qmin, qmax;
    if (symmetric) {
      scale = std::max(std::max(-std::min(l, 0.0f), std::max(h, 0.0f)) / 127.0f, 1.1920929e-07f);
      qmin = -127.0f;
      qmax = 127.0f;
    } else {
      scale = std::max((std::max(h, 0.0f) - std::min(l, 0.0f)) / 255.0f, 1.1920929e-07f);
      zp = std::clamp(-std::nearbyint(std::min(l, 0.0f) / scale), 0.0f, 255.0f);
      qmin = 0.0f;
      qmax = 255.0f;
    }
    double err = 0.0;
    for (float v : x) {
      const float q = std::clamp(std::nearbyint(v / scale) + zp, qmin, qmax);
      err += std::pow(std::fabs(static_cast<double>((q - zp) * scale - v)), p);
    }
    if (err < best) {
      best = err;
      pick = {l, h};
    }
  }
  return pick;
}

std::vector<float> toVector(const at::Tensor& t) {
  const at::Tensor c = t.contiguous().to(at::kFloat);
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

TEST(MseObserverTest, DataOnTheGridNeedsNoClipping) {
  // k * 0.01 for k in [-127, 127] is represented exactly with scale 0.01: zero error only there.
  MseObserver obs("x", QScheme::int8Symmetric());
  obs.observe(at::arange(-127, 128).to(at::kFloat) * 0.01f);
  auto [lo, hi] = obs.range();
  EXPECT_FLOAT_EQ(lo.item<float>(), -1.27f);
  EXPECT_FLOAT_EQ(hi.item<float>(), 1.27f);
  EXPECT_FLOAT_EQ(obs.qparams().scaleValue(), 0.01f);
}

TEST(MseObserverTest, OutlierIsClippedAsTheBruteForceSearchSays) {
  at::Tensor x = at::linspace(-1.0, 1.0, 20001);
  x = at::cat({x, at::tensor({50.0f})});
  for (double p : {2.0, 1.0, 2.4}) {
    MseSearch search;
    search.p = p;
    MseObserver obs("x", QScheme::int8Symmetric(), search);
    obs.observe(x);
    const auto expected = bruteForce(toVector(x), -1.0f, 50.0f, true, p);
    auto [lo, hi] = obs.range();
    EXPECT_EQ(lo.item<float>(), expected.first) << "p=" << p;
    EXPECT_EQ(hi.item<float>(), expected.second) << "p=" << p;
    EXPECT_LT(hi.item<float>(), 50.0f);
  }
}

TEST(MseObserverTest, AsymmetricGaussianMatchesBruteForce) {
  at::manual_seed(4);
  const at::Tensor x = at::randn({30000}).abs() * 2.0f - 0.3f;
  MseObserver obs("x", QScheme::uint8Asymmetric());
  obs.observe(x);
  const auto expected =
      bruteForce(toVector(x), x.min().item<float>(), x.max().item<float>(), false, 2.0);
  auto [lo, hi] = obs.range();
  EXPECT_EQ(lo.item<float>(), expected.first);
  EXPECT_EQ(hi.item<float>(), expected.second);
}

TEST(MseObserverTest, PerChannelSearchesEachChannel) {
  at::manual_seed(5);
  at::Tensor w = at::randn({3, 20001});
  w[1] = at::linspace(-1.0, 1.0, 20001);
  w[1][7] = 50.0f;  // only channel 1 has an outlier, far enough to be worth clipping
  QScheme s = QScheme::int8Symmetric(true);
  MseObserver obs("w", s);
  obs.observe(w);
  auto [lo, hi] = obs.range();
  for (int64_t c = 0; c < 3; ++c) {
    const auto expected =
        bruteForce(toVector(w[c]), w[c].min().item<float>(), w[c].max().item<float>(), true, 2.0);
    EXPECT_EQ(lo[c].item<float>(), expected.first) << c;
    EXPECT_EQ(hi[c].item<float>(), expected.second) << c;
  }
  EXPECT_LT(hi[1].item<float>(), 50.0f);
}

TEST(MseObserverTest, UnionAndEmaOverBatches) {
  const at::Tensor a = at::cat({at::linspace(-1.0, 1.0, 5001), at::tensor({9.0f})});
  const at::Tensor b = at::cat({at::linspace(-2.0, 2.0, 5001), at::tensor({-20.0f})});
  const auto pa = bruteForce(toVector(a), -1.0f, 9.0f, true, 2.0);
  const auto pb = bruteForce(toVector(b), -20.0f, 2.0f, true, 2.0);
  MseObserver running("x", QScheme::int8Symmetric());
  running.observe(a);
  running.observe(b);
  EXPECT_EQ(running.range().first.item<float>(), std::min(pa.first, pb.first));
  EXPECT_EQ(running.range().second.item<float>(), std::max(pa.second, pb.second));
  EmaMseObserver ema("x", QScheme::int8Symmetric(), MseSearch{}, 0.75);
  ema.observe(a);
  ema.observe(b);
  EXPECT_NEAR(ema.range().first.item<float>(), 0.75 * pa.first + 0.25 * pb.first, 1e-5);
  EXPECT_NEAR(ema.range().second.item<float>(), 0.75 * pa.second + 0.25 * pb.second, 1e-5);
}

TEST(MseObserverTest, RejectsBadSearchGrids) {
  MseSearch bad;
  bad.steps = 101;  // factor 1 - 100 * 0.01 = 0 would collapse the range
  EXPECT_THROW(MseObserver("x", QScheme::int8Symmetric(), bad), Error);
  bad = MseSearch{};
  bad.p = 0.0;
  EXPECT_THROW(MseObserver("x", QScheme::int8Symmetric(), bad), Error);
}

}  // namespace
}  // namespace qforge::quant
