// LSQ / LSQ+, TQT and PACT: forward values and gradients of every learnable parameter against
// central finite differences (double precision) of each method's straight-through surrogate,
// written out here from the papers' definitions.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>

#include "core/error.h"
#include "gradient_check.h"
#include "quant/fake_quantize.h"
#include "quant/fake_quantizers/lsq.h"
#include "quant/fake_quantizers/pact.h"
#include "quant/fake_quantizers/tqt.h"
#include "quant/observers/lsq_init.h"
#include "quant/observers/minmax.h"
#include "quant/registry.h"

namespace qforge::quant {
namespace {

using testing::centralDifference;

std::vector<double> values(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kDouble).contiguous().reshape({-1});
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// LSQ surrogate: round(v) -> v + c with c frozen at the evaluation point, and the same for the
// rounding of the zero point: F(s, z) = sum w (clamp(x/s + c + z~, qmin, qmax) - z~) s,
// z~ = z + (clamp(round(z0)) - z0).
struct LsqSurrogate {
  std::vector<double> x, w, c;
  double s0, z0, zc;
  double qmin, qmax;

  LsqSurrogate(std::vector<double> xs, std::vector<double> ws, double s, double z, double lo,
               double hi)
      : x(std::move(xs)), w(std::move(ws)), s0(s), z0(z), qmin(lo), qmax(hi) {
    zc = std::clamp(std::nearbyint(z0), qmin, qmax) - z0;
    for (double xi : x)
      c.push_back(std::nearbyint(xi / s0) - xi / s0);
  }
  double operator()(double s, double z) const {
    double sum = 0.0;
    const double zu = z + zc;
    for (size_t i = 0; i < x.size(); ++i) {
      sum += w[i] * (std::clamp(x[i] / s + c[i] + zu, qmin, qmax) - zu) * s;
    }
    return sum;
  }
  // Elements sitting exactly on the first or last level are at a kink of the surrogate.
  bool onEdge(size_t i) const {
    const double level = std::nearbyint(x[i] / s0) + std::clamp(std::nearbyint(z0), qmin, qmax);
    return level == qmin || level == qmax;
  }
};

TEST(LsqTest, ScaleAndZeroPointGradientsMatchFiniteDifferences) {
  QScheme s;
  s.bits = 4;
  s.symmetric = false;
  s.is_unsigned = true;
  at::manual_seed(3);
  // Values spread over the grid and beyond it on both sides, none on the edge levels.
  at::Tensor x = at::randn({400}, at::kDouble) * 0.6 + 0.4;
  const double s0 = 0.13, z0 = 5.3;
  LsqSurrogate probe(values(x), values(x), s0, z0, 0, 15);
  std::vector<int64_t> keep;
  for (size_t i = 0; i < probe.x.size(); ++i) {
    if (!probe.onEdge(i)) keep.push_back(static_cast<int64_t>(i));
  }
  x = x.index_select(0, at::tensor(keep));
  const at::Tensor w = at::randn({x.numel()}, at::kDouble);
  for (double factor : {1.0, 0.25}) {
    const at::Tensor xv = x.clone().requires_grad_(true);
    const at::Tensor scale = at::full({1}, s0, at::kDouble).requires_grad_(true);
    const at::Tensor zp = at::full({1}, z0, at::kDouble).requires_grad_(true);
    torch::autograd::backward({(learnableFakeQuantize(xv, scale, zp, s, factor) * w).sum()});
    const LsqSurrogate f(values(x), values(w), s0, z0, 0, 15);
    const double fd_s = centralDifference([&](double v) { return f(v, z0); }, s0);
    const double fd_z = centralDifference([&](double v) { return f(s0, v); }, z0);
    EXPECT_NEAR(scale.grad().item<double>(), factor * fd_s, 1e-6 * std::max(1.0, std::abs(fd_s)));
    EXPECT_NEAR(zp.grad().item<double>(), factor * fd_z, 1e-6 * std::max(1.0, std::abs(fd_z)));
    // Some elements are clipped on each side, so both gradient branches are exercised.
    EXPECT_TRUE((xv.grad() == 0).any().item<bool>());
    for (int64_t i = 0; i < x.numel(); i += 7) {
      const auto fx = [&](double v) {
        std::vector<double> xs = values(x);
        xs[i] = v;
        LsqSurrogate g = f;
        g.x = xs;
        return g(s0, z0);
      };
      EXPECT_NEAR(xv.grad()[i].item<double>(), centralDifference(fx, x[i].item<double>()), 1e-6);
    }
  }
}

TEST(LsqTest, PerChannelGradientsMatchFiniteDifferences) {
  QScheme s = QScheme::int8Symmetric();
  s.bits = 3;  // [-3, 3]: plenty of clipping
  s.axis = 0;
  at::manual_seed(4);
  const at::Tensor x = at::randn({3, 50}, at::kDouble);
  const std::vector<double> s0 = {0.21, 0.33, 0.57};
  // Zero weight on elements that land exactly on the edge levels (kinks of the surrogate).
  const at::Tensor levels = at::round(x / at::tensor(s0, at::kDouble).unsqueeze(1));
  const at::Tensor w = at::randn({3, 50}, at::kDouble) * (levels.abs() != 3).to(at::kDouble);
  const at::Tensor scale = at::tensor(s0, at::kDouble).requires_grad_(true);
  const at::Tensor zp = at::zeros({3}, at::kDouble).requires_grad_(true);
  torch::autograd::backward({(learnableFakeQuantize(x, scale, zp, s, 1.0) * w).sum()});
  for (int64_t c = 0; c < 3; ++c) {
    const LsqSurrogate f(values(x[c]), values(w[c]), s0[c], 0.0, -3, 3);
    EXPECT_NEAR(scale.grad()[c].item<double>(),
                centralDifference([&](double v) { return f(v, 0.0); }, s0[c]), 1e-6)
        << c;
    EXPECT_NEAR(zp.grad()[c].item<double>(),
                centralDifference([&](double v) { return f(s0[c], v); }, 0.0), 1e-6)
        << c;
  }
}

TEST(LsqTest, QuantizerAppliesGradScaleAndKeepsParametersOnOptimizerPath) {
  const QScheme s = QScheme::int8Symmetric();
  LsqFakeQuantizer lsq("w", s, std::make_unique<LsqInitObserver>("w", s));
  at::manual_seed(5);
  const at::Tensor x = at::randn({64, 10});
  lsq.forward(x);  // calibration: 2 mean|x| / sqrt(127)
  lsq.setMode(FakeQuantMode::Quantization);
  const at::Tensor y = lsq.forward(x);
  const float s0 = static_cast<float>(2.0 * x.abs().mean().item<double>() / std::sqrt(127.0));
  EXPECT_NEAR(lsq.scale().item<float>(), s0, 1e-6);
  ASSERT_EQ(lsq.parameters().size(), 1u);  // LSQ learns only the scale
  torch::autograd::backward({y.sum()});
  // Same gradient as the functional form with g = 1 / sqrt(640 * 127).
  const at::Tensor scale = at::full({1}, lsq.scale().item<float>()).requires_grad_(true);
  torch::autograd::backward({learnableFakeQuantize(x, scale, at::zeros({1}), s, 1.0).sum()});
  EXPECT_NEAR(lsq.scale().grad().item<float>(),
              scale.grad().item<float>() / std::sqrt(640.0 * 127.0), 1e-6);
  // An optimizer step through the held parameter is seen by the next forward.
  const at::Tensor held = lsq.parameters()[0];
  const float before = held.item<float>();
  {
    at::NoGradGuard no_grad;
    held.mul_(2.0);
  }
  EXPECT_TRUE(
      at::equal(lsq.forward(x).detach(), fakeQuantize(x, makeQParams({2 * before}, {0}), s)));
}

// Per-channel scales: the factor counts the elements each scale sees (the default), or the
// whole tensor as PyTorch's _LearnableFakeQuantize does, through the registry's option.
TEST(LsqTest, PerChannelGradScaleCountsChannelOrWholeTensor) {
  QScheme s = QScheme::int8Symmetric();
  s.axis = 0;
  at::manual_seed(6);
  const at::Tensor x = at::randn({4, 30});
  const at::Tensor scale = (x.abs().amax({1}) / 127.0).requires_grad_(true);
  torch::autograd::backward({learnableFakeQuantize(x, scale, at::zeros({4}), s, 1.0).sum()});
  const at::Tensor raw = scale.grad().clone();
  for (const bool per_channel : {true, false}) {
    FakeQuantizerRegistry registry;
    registerBuiltinFakeQuantizers(registry);
    const auto lsq = registry.create("LSQ", "w", s, std::make_unique<MinMaxObserver>("w", s),
                                     {{"grad_scale_per_channel", per_channel ? 1.0 : 0.0}});
    lsq->forward(x);
    lsq->setMode(FakeQuantMode::Quantization);
    torch::autograd::backward({lsq->forward(x).sum()});
    const at::Tensor learned = lsq->parameters()[0];
    ASSERT_TRUE(at::allclose(learned.detach(), scale.detach()));
    const double counted = per_channel ? 30.0 : 120.0;
    EXPECT_TRUE(at::allclose(learned.grad(), raw / std::sqrt(counted * 127.0), 1e-5, 1e-9))
        << "per_channel " << per_channel;
  }
}

TEST(LsqTest, SharedQuantizerSurvivesTwoForwardsBeforeBackward) {
  // A weight quantizer applied twice in one step (shared weights): the parameter maintenance at
  // the start of each forward must not invalidate the graph of the first one.
  const QScheme s = QScheme::uint8Asymmetric();
  LsqFakeQuantizer::Options options;
  options.learn_zero_point = true;
  LsqFakeQuantizer lsq("w", s, nullptr, options);
  lsq.setQParams(makeQParams({0.1f}, {3}));
  const at::Tensor x = at::linspace(-1.0, 30.0, 200);
  const at::Tensor y = lsq.forward(x) + lsq.forward(x * 0.5);
  EXPECT_NO_THROW(torch::autograd::backward({y.sum()}));
  EXPECT_TRUE(lsq.scale().grad().defined());
  // A scale pushed negative by an optimizer step is repaired before the next forward.
  {
    at::NoGradGuard no_grad;
    lsq.scale().fill_(-0.2f);
  }
  lsq.forward(x);
  EXPECT_FLOAT_EQ(lsq.scale().item<float>(), 0.2f);
}

TEST(LsqPlusTest, LearnsZeroPointOnAsymmetricSchemes) {
  const QScheme s = QScheme::uint8Asymmetric();
  LsqFakeQuantizer::Options options;
  options.learn_zero_point = true;
  LsqFakeQuantizer lsq("act", s, std::make_unique<MinMaxObserver>("act", s), options);
  EXPECT_EQ(lsq.kind(), "LSQ+");
  const at::Tensor x = at::linspace(-1.0, 3.0, 1000);
  lsq.forward(x);
  lsq.setMode(FakeQuantMode::Quantization);
  ASSERT_EQ(lsq.parameters().size(), 2u);
  // The forward equals ATen's learnable fake quantize with the same parameters.
  const at::Tensor y = lsq.forward(x * 1.5);
  const at::Tensor ref = at::_fake_quantize_learnable_per_tensor_affine(
      x * 1.5, lsq.scale().detach(), lsq.zeroPoint().detach(), 0, 255, 1.0);
  EXPECT_TRUE(at::equal(y.detach(), ref));
  torch::autograd::backward({y.sum()});
  EXPECT_NE(lsq.zeroPoint().grad().item<float>(), 0.0f);  // clipped values pull the zero point
  EXPECT_THROW(
      LsqFakeQuantizer("w", QScheme::int8Symmetric(),
                       std::make_unique<MinMaxObserver>("w", QScheme::int8Symmetric()), options),
      Error);
}

// TQT surrogate: s(l) = 2^(l + (ceil(l0) - l0)) / 128 (ceil straight-through), round frozen.
TEST(TqtTest, Log2ThresholdGradientMatchesFiniteDifferences) {
  QScheme s;
  s.symmetric = true;  // int8 [-128, 127]
  TqtFakeQuantizer tqt("act", s, nullptr);
  const double l0 = 1.3;  // threshold 2^1.3 -> 2^2 = 4, scale 4 / 128
  tqt.setThreshold(std::exp2(l0));
  tqt.setMode(FakeQuantMode::Quantization);
  at::manual_seed(6);
  const at::Tensor x = at::randn({2000}, at::kDouble) * 2.0;
  const at::Tensor levels = at::round(x * 32.0);
  // Zero weight on the edge levels, where the surrogate has a kink.
  const at::Tensor w =
      at::randn({2000}, at::kDouble) * ((levels != -128) & (levels != 127)).to(at::kDouble);
  const at::Tensor xv = x.clone().requires_grad_(true);
  const at::Tensor y = tqt.forward(xv);
  EXPECT_TRUE(at::equal(y.detach(), fakeQuantize(x, makeQParams({4.0f / 128}, {0}), s)));
  torch::autograd::backward({(y * w).sum()});
  const double l_used = static_cast<double>(static_cast<float>(l0));  // parameter is float32
  const double s0 = 4.0 / 128;
  const std::vector<double> xs = values(x), ws = values(w);
  const auto f = [&](double l) {
    const double scale = std::exp2(l + (std::ceil(l_used) - l_used)) / 128.0;
    double sum = 0.0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double c = std::nearbyint(xs[i] / s0) - xs[i] / s0;
      sum += ws[i] * std::clamp(xs[i] / scale + c, -128.0, 127.0) * scale;
    }
    return sum;
  };
  const double fd = centralDifference(f, l_used);
  EXPECT_NEAR(tqt.log2Threshold().grad().item<float>(), fd, 1e-5 * std::max(1.0, std::abs(fd)));
  EXPECT_TRUE((xv.grad() == 0).any().item<bool>());  // values beyond 4 are clipped
}

TEST(TqtTest, ThresholdActuallyTrains) {
  // Threshold initialised far too wide for N(0, 1) at 4 bits; gradient descent on the
  // quantization MSE must pull it in and reduce the error.
  QScheme s;
  s.bits = 4;
  s.symmetric = true;
  TqtFakeQuantizer tqt("act", s, nullptr);
  tqt.setThreshold(64.0);
  tqt.setMode(FakeQuantMode::Quantization);
  at::manual_seed(7);
  const at::Tensor x = at::randn({20000});
  auto loss = [&] { return (tqt.forward(x) - x).pow(2).mean(); };
  const double initial = loss().item<double>();
  for (int step = 0; step < 300; ++step) {
    at::Tensor l = loss();
    torch::autograd::backward({l});
    at::NoGradGuard no_grad;
    at::Tensor p = tqt.log2Threshold();
    // Normalised step, as the paper recommends (Adam-like scale invariance).
    p.sub_(0.02 * p.grad().sign());
    p.grad().zero_();
  }
  const double trained = loss().item<double>();
  EXPECT_LT(tqt.log2Threshold().item<float>(), 3.5f);  // from log2(64) = 6 down to ~2-3
  EXPECT_LT(trained, 0.2 * initial);
}

TEST(TqtTest, InitialisesFromObserverAndRefusesAsymmetric) {
  const QScheme s = QScheme::int8Symmetric();
  TqtFakeQuantizer tqt("act", s, std::make_unique<MinMaxObserver>("act", s));
  tqt.forward(at::tensor({-3.0f, 5.0f}));
  tqt.setMode(FakeQuantMode::Quantization);
  EXPECT_FLOAT_EQ(tqt.qparams().scaleValue(), 8.0f / 128);  // t = 5 -> 2^3
  EXPECT_THROW(TqtFakeQuantizer("x", QScheme::uint8Asymmetric(), nullptr), Error);
  EXPECT_THROW(TqtFakeQuantizer("x", QScheme::int8Symmetric(true), nullptr), Error);
  TqtFakeQuantizer fresh("x", s, nullptr);
  fresh.setMode(FakeQuantMode::Quantization);
  EXPECT_THROW(fresh.forward(at::ones({2})), Error);
}

// PACT surrogate: the quantizer is the identity, y = clamp(x, lo, hi).
TEST(PactTest, AlphaGradientsMatchFiniteDifferences) {
  at::manual_seed(8);
  const at::Tensor x = at::randn({3000}, at::kDouble) * 3.0;
  const at::Tensor w = at::randn({3000}, at::kDouble);
  const std::vector<double> xs = values(x), ws = values(w);
  const double alpha0 = 2.5;
  struct Case {
    QScheme scheme;
    const char* label;
  };
  QScheme asym;
  asym.symmetric = false;
  for (const Case& c : {Case{QScheme::uint8Asymmetric(), "unsigned"},
                        Case{QScheme::int8Symmetric(), "symmetric"}, Case{asym, "asymmetric"}}) {
    PactFakeQuantizer pact("act", c.scheme, alpha0);
    pact.setMode(FakeQuantMode::Quantization);
    const at::Tensor xv = x.clone().requires_grad_(true);
    const at::Tensor y = pact.forward(xv);
    torch::autograd::backward({(y * w).sum()});
    const double beta0 = pact.beta().defined() ? pact.beta().item<double>() : 0.0;
    auto range = [&](double a, double b) -> std::pair<double, double> {
      if (c.scheme.is_unsigned) return {0.0, a};
      if (c.scheme.symmetric) return {-a, a};
      return {b, a};
    };
    auto f = [&](double a, double b) {
      auto [lo, hi] = range(a, b);
      double sum = 0.0;
      for (size_t i = 0; i < xs.size(); ++i)
        sum += ws[i] * std::clamp(xs[i], lo, hi);
      return sum;
    };
    const double fd_alpha = centralDifference([&](double a) { return f(a, beta0); }, alpha0);
    EXPECT_NEAR(pact.alpha().grad().item<float>(), fd_alpha, 1e-4) << c.label;
    if (pact.beta().defined()) {
      const double fd_beta = centralDifference([&](double b) { return f(alpha0, b); }, beta0);
      EXPECT_NEAR(pact.beta().grad().item<float>(), fd_beta, 1e-4) << c.label;
    }
    auto [lo, hi] = range(alpha0, beta0);
    EXPECT_TRUE(at::equal(xv.grad(), w * ((x > lo) & (x < hi)).to(at::kDouble))) << c.label;
    // Forward: clip, then quantize on the grid of the clip range.
    const at::Tensor expected = fakeQuantize(
        at::clamp(x, lo, hi),
        qparamsFromMinMax(static_cast<float>(lo), static_cast<float>(hi), c.scheme), c.scheme);
    EXPECT_TRUE(at::equal(y.detach(), expected)) << c.label;
  }
}

TEST(PactTest, ObserverInitialisesAlphaAndStateRoundTrips) {
  const QScheme s = QScheme::uint8Asymmetric();
  PactFakeQuantizer pact("relu", s, 10.0, std::make_unique<MinMaxObserver>("relu", s));
  pact.forward(at::tensor({0.0f, 3.5f}));
  pact.setMode(FakeQuantMode::Quantization);
  pact.forward(at::ones({1}));
  EXPECT_FLOAT_EQ(pact.alpha().item<float>(), 3.5f);
  PactFakeQuantizer copy("relu", s, 1.0);
  copy.loadState(pact.state());
  EXPECT_FLOAT_EQ(copy.alpha().item<float>(), 3.5f);
  EXPECT_THROW(PactFakeQuantizer("x", QScheme::int8Symmetric(true), 1.0), Error);
  EXPECT_THROW(PactFakeQuantizer("x", s, -1.0), Error);
}

}  // namespace
}  // namespace qforge::quant
