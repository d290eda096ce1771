// Modes, whole-model switching, state round trips and buffer-reusing variants of the fake
// quantizer layer, with the fixed affine quantizer and QDrop.
#include "quant/fake_quantizer.h"

#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include "core/error.h"
#include "quant/fake_quantize.h"
#include "quant/fake_quantizers/fixed.h"
#include "quant/fake_quantizers/qdrop.h"
#include "quant/observers/minmax.h"

namespace qforge::quant {
namespace {

std::unique_ptr<FixedFakeQuantizer> fixedWithMinMax(const std::string& name, QScheme s) {
  return std::make_unique<FixedFakeQuantizer>(name, s, std::make_unique<MinMaxObserver>(name, s));
}

TEST(FakeQuantizerTest, CalibrationThenQuantization) {
  const QScheme s = QScheme::uint8Asymmetric();
  auto fq = fixedWithMinMax("act", s);
  EXPECT_EQ(fq->mode(), FakeQuantMode::Calibration);  // an observer means: calibrate first
  const at::Tensor a = at::tensor({-1.0f, 0.3f, 2.0f});
  const at::Tensor b = at::tensor({-3.0f, 0.7f});
  EXPECT_TRUE(at::equal(fq->forward(a), a));  // calibration passes values through
  EXPECT_TRUE(at::equal(fq->forward(b), b));
  fq->setMode(FakeQuantMode::Quantization);
  const QParams expected = qparamsFromMinMax(-3.0f, 2.0f, s);
  EXPECT_TRUE(at::equal(fq->forward(a), fakeQuantize(a, expected, s)));
  // Quantization mode does not observe: a wider batch leaves the parameters alone.
  fq->forward(at::tensor({100.0f}));
  EXPECT_TRUE(at::equal(fq->qparams().scale, expected.scale));
  fq->setMode(FakeQuantMode::Float);
  EXPECT_TRUE(at::equal(fq->forward(at::tensor({100.0f})), at::tensor({100.0f})));
}

TEST(FakeQuantizerTest, AChannelSliceOfAChannelsLastActivationComesOutDenseInItsLayout) {
  // The second half of a channel split, as ShuffleNet feeds its branches: a strided view.
  const at::Tensor whole = at::randn({2, 8, 5, 5}, at::TensorOptions().dtype(at::kFloat))
                               .contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor half = whole.slice(1, 4, 8);
  ASSERT_FALSE(half.is_non_overlapping_and_dense());
  const QScheme s = QScheme::uint8Asymmetric();
  auto fq = fixedWithMinMax("act", s);
  const at::Tensor observed = fq->forward(half);
  EXPECT_TRUE(observed.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(at::equal(observed, half));
  // The range is the slice's, not the whole tensor's.
  const QParams expected = qparamsFromMinMax(half.min().item<float>(), half.max().item<float>(), s);
  fq->setMode(FakeQuantMode::Quantization);
  EXPECT_TRUE(at::equal(fq->qparams().scale, expected.scale));
  const at::Tensor quantized = fq->forward(half);
  EXPECT_TRUE(quantized.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(at::equal(quantized, fakeQuantize(half.contiguous(), expected, s)));
  // A dense input is passed on as it is.
  fq->setMode(FakeQuantMode::Float);
  EXPECT_TRUE(fq->forward(whole).is_same(whole));
}

TEST(FakeQuantizerTest, CalibrateAndQuantizeFollowsTheObserver) {
  const QScheme s = QScheme::int8Symmetric();
  auto fq = fixedWithMinMax("act", s);
  fq->setMode(FakeQuantMode::CalibrateAndQuantize);
  const at::Tensor x = at::tensor({-1.0f, 0.5f, 1.0f});
  EXPECT_TRUE(at::equal(fq->forward(x), fakeQuantize(x, qparamsFromMinMax(-1, 1, s), s)));
  const at::Tensor wide = at::tensor({4.0f, 0.5f});
  EXPECT_TRUE(at::equal(fq->forward(wide), fakeQuantize(wide, qparamsFromMinMax(-1, 4, s), s)));
}

TEST(FakeQuantizerTest, WholeModelModeSwitchAndErrors) {
  auto a = fixedWithMinMax("conv1.weight", QScheme::int8Symmetric(true));
  auto b = fixedWithMinMax("conv1.output", QScheme::uint8Asymmetric());
  FixedFakeQuantizer no_observer("fc.weight", QScheme::int8Symmetric(), nullptr);
  setMode({a.get(), b.get()}, FakeQuantMode::Quantization);
  EXPECT_EQ(a->mode(), FakeQuantMode::Quantization);
  EXPECT_EQ(b->mode(), FakeQuantMode::Quantization);
  try {
    b->forward(at::ones({2}));
    ADD_FAILURE() << "quantizing without calibration must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Fixed fake quantizer 'conv1.output'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("run calibration first"), std::string::npos);
  }
  EXPECT_THROW(no_observer.setMode(FakeQuantMode::Calibration), Error);
  EXPECT_THROW(
      FixedFakeQuantizer("x", QScheme::int8Symmetric(),
                         std::make_unique<MinMaxObserver>("x", QScheme::uint8Asymmetric())),
      Error);
}

TEST(FakeQuantizerTest, StateRoundTripAndBufferVariants) {
  const QScheme s = QScheme::int8Symmetric(true);
  auto fq = fixedWithMinMax("w", s);
  at::manual_seed(1);
  const at::Tensor w = at::randn({4, 3, 3, 3});
  fq->forward(w);
  fq->setMode(FakeQuantMode::Quantization);
  const at::Tensor expected = fq->forward(w);
  FixedFakeQuantizer restored("w", s, nullptr);
  restored.loadState(fq->state());
  restored.setMode(FakeQuantMode::Quantization);
  EXPECT_TRUE(at::equal(restored.forward(w), expected));
  at::Tensor out = at::empty_like(w);
  restored.quantizeInto(w, out);
  EXPECT_TRUE(at::equal(out, expected));
  at::Tensor inplace = w.clone();
  restored.quantizeInPlace(inplace);
  EXPECT_TRUE(at::equal(inplace, expected));
  EXPECT_THROW(restored.loadState({{"scale", at::ones({4})}}), Error);
  EXPECT_THROW(restored.loadState({{"scale", at::ones({4})}, {"zero_point", at::zeros({3})}}),
               Error);
}

TEST(FakeQuantizerTest, GradientIsStraightThroughWithClipMask) {
  FixedFakeQuantizer fq("x", QScheme::int8Symmetric(), nullptr);
  fq.setQParams(makeQParams({0.1f}, {0}));
  const at::Tensor x = at::tensor({0.05f, 12.69f, 12.75f, -20.0f}).requires_grad_(true);
  torch::autograd::backward({fq.forward(x).sum()});
  EXPECT_TRUE(at::equal(x.grad(), at::tensor({1.0f, 1.0f, 0.0f, 0.0f})));
}

std::unique_ptr<FixedFakeQuantizer> coarse() {
  auto inner = std::make_unique<FixedFakeQuantizer>("act", QScheme::int8Symmetric(), nullptr);
  inner->setQParams(makeQParams({0.5f}, {0}));
  return inner;
}

TEST(QDropTest, MixesFloatAndQuantizedValues) {
  const at::Tensor x = at::linspace(-3.0, 3.0, 100001).to(at::kFloat);
  const at::Tensor quantized = fakeQuantize(x, makeQParams({0.5f}, {0}), QScheme::int8Symmetric());
  QDropFakeQuantizer never(coarse(), 0.0);
  never.setMode(FakeQuantMode::Quantization);
  EXPECT_TRUE(at::equal(never.forward(x), quantized));
  QDropFakeQuantizer always(coarse(), 1.0);
  always.setMode(FakeQuantMode::Quantization);
  EXPECT_TRUE(at::equal(always.forward(x), x));

  at::Generator gen = at::detail::createCPUGenerator(42);
  QDropFakeQuantizer half(coarse(), 0.3, gen);
  half.setMode(FakeQuantMode::Quantization);
  const at::Tensor xg = x.clone().requires_grad_(true);
  const at::Tensor y = half.forward(xg);
  // Every element is either its float or its quantized value; about 30% (of the elements where
  // the two differ) keep the float value.
  const at::Tensor is_float = y.detach() == x;
  const at::Tensor is_quant = y.detach() == quantized;
  EXPECT_TRUE((is_float | is_quant).all().item<bool>());
  const at::Tensor differ = x != quantized;
  const double float_share = (is_float & differ).sum().item<double>() / differ.sum().item<double>();
  EXPECT_NEAR(float_share, 0.3, 0.01);
  // Gradient: identity on float elements, the straight-through mask (all 1 here) on the others.
  torch::autograd::backward({y.sum()});
  EXPECT_TRUE(at::equal(xg.grad(), at::ones_like(x)));
  // The same generator seed gives the same mask.
  at::Generator gen2 = at::detail::createCPUGenerator(42);
  QDropFakeQuantizer again(coarse(), 0.3, gen2);
  again.setMode(FakeQuantMode::Quantization);
  EXPECT_TRUE(at::equal(again.forward(x), y.detach()));
  EXPECT_THROW(half.setDropProbability(1.5), Error);
  EXPECT_THROW(QDropFakeQuantizer(nullptr, 0.5), Error);
}

TEST(QDropTest, FloatModePassesThrough) {
  QDropFakeQuantizer q(coarse(), 0.5);
  q.setMode(FakeQuantMode::Float);
  const at::Tensor x = at::randn({100});
  EXPECT_TRUE(at::equal(q.forward(x), x));
}

}  // namespace
}  // namespace qforge::quant
