// DSQ, DoReFa, AdaRound and NNIE log quantization: forward values against hand-computed or
// reference values, gradients against central finite differences of each method's surrogate.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>

#include "core/error.h"
#include "gradient_check.h"
#include "quant/fake_quantize.h"
#include "quant/fake_quantizers/adaround.h"
#include "quant/fake_quantizers/dorefa.h"
#include "quant/fake_quantizers/dsq.h"
#include "quant/fake_quantizers/nnie.h"
#include "quant/observers/minmax.h"

namespace qforge::quant {
namespace {

using testing::centralDifference;

std::vector<double> values(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kDouble).contiguous().reshape({-1});
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

TEST(DsqTest, ForwardIsTheHardQuantization) {
  QScheme s = QScheme::uint8Asymmetric();
  DsqFakeQuantizer dsq("act", s, nullptr, 0.2);
  const QParams params = makeQParams({0.05f}, {40});
  dsq.setQParams(params);
  dsq.setMode(FakeQuantMode::Quantization);
  at::manual_seed(1);
  const at::Tensor x = at::randn({5000}) * 4.0f;
  EXPECT_TRUE(at::equal(dsq.forward(x), fakeQuantize(x, params, s)));
}

// phi(v) = floor(v) + 0.5 + 0.5 tanh(k (v - floor(v) - 0.5)) / (1 - alpha), k = ln(2/alpha - 1),
// v = clamp(x/s + z); the forward rounds phi straight-through, so the surrogate is phi itself.
TEST(DsqTest, GradientsOfInputAndAlphaMatchFiniteDifferences) {
  const double scale = 0.1, zp = 3.0, alpha0 = 0.35;
  at::manual_seed(2);
  const at::Tensor x = at::randn({300}, at::kDouble);
  const at::Tensor w = at::randn({300}, at::kDouble);
  const at::Tensor xv = x.clone().requires_grad_(true);
  const at::Tensor alpha = at::full({1}, alpha0, at::kDouble).requires_grad_(true);
  const at::Tensor y = dsqFakeQuantize(xv, at::full({1}, scale, at::kDouble),
                                       at::full({1}, zp, at::kDouble), 0, 15, alpha);
  torch::autograd::backward({(y * w).sum()});
  const std::vector<double> xs = values(x), ws = values(w);
  auto phi = [&](double xi, double a) {
    const double v = std::clamp(xi / scale + zp, 0.0, 15.0);
    const double base = std::floor(std::clamp(xi / scale + zp, 0.0, 15.0));
    const double k = std::log(2.0 / a - 1.0);
    return base + 0.5 + 0.5 * std::tanh(k * (v - base - 0.5)) / (1.0 - a);
  };
  auto total = [&](double a) {
    double sum = 0.0;
    for (size_t i = 0; i < xs.size(); ++i)
      sum += ws[i] * (phi(xs[i], a) - zp) * scale;
    return sum;
  };
  EXPECT_NEAR(alpha.grad().item<double>(), centralDifference(total, alpha0), 1e-6);
  for (size_t i = 0; i < xs.size(); i += 5) {
    const double fd =
        ws[i] * scale * centralDifference([&](double v) { return phi(v, alpha0); }, xs[i], 1e-7);
    EXPECT_NEAR(xv.grad()[i].item<double>(), fd, 1e-5 * std::max(1.0, std::abs(fd))) << xs[i];
  }
  EXPECT_THROW(DsqFakeQuantizer("x", QScheme::int8Symmetric(), nullptr, 1.2), Error);
}

TEST(DorefaTest, HandComputedTwoBitWeights) {
  QScheme s = QScheme::int8Symmetric();
  s.bits = 2;
  DorefaFakeQuantizer dorefa("w", s);
  dorefa.setMode(FakeQuantMode::Quantization);
  // tanh = [-0.762, 0, 0.462, 0.964]; r = tanh / (2 * 0.964) + 0.5 = [0.105, 0.5, 0.740, 1];
  // 3r rounds (half to even) to [0, 2, 2, 3] -> 2 * level / 3 - 1.
  const at::Tensor y = dorefa.forward(at::tensor({-1.0f, 0.0f, 0.5f, 2.0f}));
  EXPECT_TRUE(at::allclose(y, at::tensor({-1.0f, 1.0f / 3, 1.0f / 3, 1.0f}), 0, 1e-6));
  EXPECT_FLOAT_EQ(dorefa.qparams().scaleValue(), 1.0f / 3);
  // The levels -3, -1, 1, 3 (times 1/3) live on the restricted 3-bit grid [-3, 3].
  EXPECT_EQ(dorefa.scheme().bits, 3);
  EXPECT_EQ(dorefa.scheme().qmin(), -3);
  EXPECT_EQ(dorefa.scheme().qmax(), 3);
  EXPECT_THROW(DorefaFakeQuantizer("w", QScheme::uint8Asymmetric()), Error);
}

TEST(DorefaTest, GradientMatchesFiniteDifferencesThroughTanhAndMax) {
  QScheme s = QScheme::int8Symmetric();
  s.bits = 3;
  DorefaFakeQuantizer dorefa("w", s);
  dorefa.setMode(FakeQuantMode::Quantization);
  at::manual_seed(3);
  const at::Tensor w0 = at::randn({40}, at::kDouble);
  const at::Tensor u = at::randn({40}, at::kDouble);
  const at::Tensor wv = w0.clone().requires_grad_(true);
  torch::autograd::backward({(dorefa.forward(wv) * u).sum()});
  const std::vector<double> ws = values(w0), us = values(u);
  const double n = 7.0;
  // Rounding offsets frozen at w0.
  double m0 = 0.0;
  for (double v : ws)
    m0 = std::max(m0, std::abs(std::tanh(v)));
  std::vector<double> c;
  for (double v : ws) {
    const double r = (std::tanh(v) / (2 * m0) + 0.5) * n;
    c.push_back(std::nearbyint(r) - r);
  }
  auto f = [&](const std::vector<double>& w) {
    double m = 0.0;
    for (double v : w)
      m = std::max(m, std::abs(std::tanh(v)));
    double sum = 0.0;
    for (size_t i = 0; i < w.size(); ++i) {
      sum += us[i] * (2.0 * ((std::tanh(w[i]) / (2 * m) + 0.5) * n + c[i]) / n - 1.0);
    }
    return sum;
  };
  for (size_t i = 0; i < ws.size(); ++i) {
    auto fi = [&](double v) {
      std::vector<double> w = ws;
      w[i] = v;
      return f(w);
    };
    EXPECT_NEAR(wv.grad()[i].item<double>(), centralDifference(fi, ws[i]), 1e-6) << i;
  }
}

TEST(AdaRoundTest, InitialisationReproducesRoundToNearest) {
  QScheme s = QScheme::int8Symmetric(true);
  s.bits = 4;
  s.rounding = RoundingMode::HalfUp;
  AdaRoundFakeQuantizer ada("w", s, std::make_unique<MinMaxObserver>("w", s));
  at::manual_seed(4);
  const at::Tensor w = at::randn({8, 3, 3, 3});
  ada.forward(w);  // calibrate per-channel min/max
  ada.setMode(FakeQuantMode::Quantization);
  const QParams params = ada.qparams();
  const at::Tensor nearest = fakeQuantize(w, params, s);
  EXPECT_TRUE(at::equal(ada.forward(w), nearest));  // before initRounding
  ada.initRounding(w);
  // h(V) equals the fractional part of w / s ...
  const at::Tensor ratio = w / params.scale.reshape({8, 1, 1, 1});
  EXPECT_TRUE(at::allclose(ada.softOffsets(), ratio - at::floor(ratio), 0, 1e-5));
  // ... so the hard mode rounds to nearest (ties up) ...
  ada.setRounding(AdaRoundFakeQuantizer::Rounding::Hard);
  EXPECT_TRUE(at::equal(ada.forward(w), nearest));
  // ... and the soft mode reproduces the unrounded weight inside the grid.
  ada.setRounding(AdaRoundFakeQuantizer::Rounding::Soft);
  EXPECT_TRUE(at::allclose(ada.forward(w), w, 0, 1e-5));
}

TEST(AdaRoundTest, RoundingVariableGradientAndRegularizer) {
  QScheme s = QScheme::int8Symmetric();
  s.bits = 3;  // restricted symmetric range [-3, 3]: some weights clip
  AdaRoundFakeQuantizer ada("w", s, nullptr);
  const double scale = 0.25;
  ada.setQParams(makeQParams({static_cast<float>(scale)}, {0}));
  at::manual_seed(5);
  const at::Tensor w = at::randn({200}, at::kDouble) * 0.6;
  ada.initRounding(w);
  {
    // Move V away from its initial values so h(V) is not the identity on the fraction.
    at::NoGradGuard no_grad;
    ada.roundingVariable().add_(at::randn({200}, at::kDouble) * 0.5);
  }
  const at::Tensor u = at::randn({200}, at::kDouble);
  torch::autograd::backward({(ada.forward(w) * u).sum()});
  const std::vector<double> ws = values(w), us = values(u), vs = values(ada.roundingVariable());
  auto h = [](double v) {
    return std::clamp(
        (AdaRoundFakeQuantizer::kZeta - AdaRoundFakeQuantizer::kGamma) / (1.0 + std::exp(-v)) +
            AdaRoundFakeQuantizer::kGamma,
        0.0, 1.0);
  };
  int checked = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const double base = std::floor(ws[i] / scale);
    auto f = [&](double v) { return us[i] * std::clamp(base + h(v), -3.0, 3.0) * scale; };
    const double hv = h(vs[i]);
    if (hv <= 0.0 || hv >= 1.0 || base + hv <= -3.0 || base + hv >= 3.0) continue;  // kinks
    ++checked;
    EXPECT_NEAR(ada.roundingVariable().grad()[i].item<double>(), centralDifference(f, vs[i]), 1e-6);
  }
  EXPECT_GT(checked, 100);
  double expected_reg = 0.0;
  for (double v : vs)
    expected_reg += 1.0 - std::pow(std::abs(2.0 * h(v) - 1.0), 3.0);
  EXPECT_NEAR(ada.roundingRegularizer(3.0).item<double>(), expected_reg, 1e-9);
  AdaRoundFakeQuantizer fresh("w", s, nullptr);
  EXPECT_THROW(fresh.setRounding(AdaRoundFakeQuantizer::Rounding::Hard), Error);
  EXPECT_THROW(fresh.initRounding(w), Error);  // no scale yet
}

TEST(NnieTest, HandComputedLogLevels) {
  // data_max = 1: z = -127, levels 2^((code - 127) / 16), code 0..127; zero below 2^(-143/16)
  // for positive values and above -2^(-142/16) for negative ones.
  const at::Tensor x =
      at::tensor({0.5, 0.6, 2.0, 1e-3, 0.0021, -0.5, -1e-9, -3.0, 0.0}, at::kDouble);
  const at::Tensor y = nnieLogQuantize(x, 1.0);
  const std::vector<double> expected = {0.5,
                                        std::exp2(-12.0 / 16),  // 16 log2 0.6 + 127 = 115.2
                                        1.0,
                                        0.0,
                                        std::exp2(-127.0 / 16),  // smallest level, code 0
                                        -0.5,
                                        0.0,
                                        -1.0,
                                        0.0};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(y[i].item<double>(), expected[i], 1e-12) << i;
  }
}

TEST(NnieTest, QuantizerUsesObservedMaxAndStraightThroughGradient) {
  const QScheme s = QScheme::int8Symmetric();
  NnieFakeQuantizer nnie("act", s, std::make_unique<MinMaxObserver>("act", s));
  nnie.forward(at::tensor({-4.0f, 3.0f}));
  nnie.setMode(FakeQuantMode::Quantization);
  EXPECT_DOUBLE_EQ(nnie.dataMax(), 4.0);
  const at::Tensor x = at::linspace(-5.0, 5.0, 101).requires_grad_(true);
  const at::Tensor y = nnie.forward(x);
  EXPECT_TRUE(at::equal(y.detach(), nnieLogQuantize(x.detach(), 4.0)));
  torch::autograd::backward({y.sum()});
  EXPECT_TRUE(at::equal(x.grad(), at::ones({101})));
  EXPECT_THROW(nnie.qparams(), Error);  // no affine parameters on a log grid
  EXPECT_THROW(nnieLogQuantize(x.detach(), 0.0), Error);
}

}  // namespace
}  // namespace qforge::quant
