// The custom-backend example (examples/custom_backend): ToyNPU's observer, fake quantizer,
// placement and writer, checked against values worked out by hand.
#include "custom_backend/toy_npu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "core/error.h"
#include "core/files.h"
#include "deploy/qdq_onnx.h"
#include "ir/onnx_import.h"
#include "passes/fake_quantize_node.h"
#include "quant/fake_quantize.h"
#include "support/checks.h"
#include "support/onnx_builder.h"

namespace qforge {
namespace {

using quant::QScheme;
using quant::RoundingMode;
using testing::errorOf;
using testing::OnnxBuilder;
constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

const std::string kToyNpuJson = QFORGE_SOURCE_DIR "/examples/custom_backend/toy_npu.json";

// Built-in registries with ToyNPU's additions, as the example's main() builds them.
struct ToyRegistries {
  quant::ObserverRegistry observers;
  quant::FakeQuantizerRegistry fake_quantizers;
  deploy::WriterRegistry writers;
  ToyRegistries() {
    quant::registerBuiltinObservers(observers);
    quant::registerBuiltinFakeQuantizers(fake_quantizers);
    deploy::registerBuiltinWriters(writers);
    toy_npu::registerToyNpu(observers, fake_quantizers, writers);
  }
  passes::PrepareOptions options() const {
    passes::PrepareOptions o;
    o.observers = &observers;
    o.fake_quantizers = &fake_quantizers;
    return o;
  }
};

QScheme signed6(int64_t axis = -1) {
  QScheme s;
  s.bits = 6;
  s.symmetric = true;
  s.axis = axis;
  s.rounding = RoundingMode::HalfAwayFromZero;
  return s;
}

QScheme unsigned8() {
  QScheme s = QScheme::uint8Asymmetric();
  s.rounding = RoundingMode::HalfAwayFromZero;
  return s;
}

std::vector<float> values(const at::Tensor& t) {
  const at::Tensor flat = t.detach().to(at::kFloat).contiguous().reshape({-1});
  return std::vector<float>(flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
}

TEST(ToyNpuObserverTest, RangeIsMeanPlusMinusThreeSigmaClippedToWhatWasSeen) {
  ToyRegistries r;
  // -2, 98 zeros and 100, in two batches: mean 0.98, population variance
  // (4 + 10000) / 100 - 0.98^2. The low end mean - 3 sigma < -2 clips to the first batch's min;
  // the high end lies inside the range.
  auto observer = r.observers.create("Toy3Sigma", "t", unsigned8());
  at::Tensor first = at::zeros({50}), second = at::zeros({50});
  first[0] = -2.0f;
  second[49] = 100.0f;
  observer->observe(first);
  observer->observe(second);
  auto [lo, hi] = observer->range();
  EXPECT_FLOAT_EQ(lo.item<float>(), -2.0f);
  EXPECT_FLOAT_EQ(hi.item<float>(), static_cast<float>(0.98 + 3.0 * std::sqrt(100.04 - 0.9604)));

  // Mostly 0 and 1: mean +- 3 sigma reaches past both ends, so the range is the first batch's
  // [min, max].
  auto clipped = r.observers.create("Toy3Sigma", "u", unsigned8());
  clipped->observe(at::tensor({0.0f, 1.0f}));
  clipped->observe(at::tensor({0.1f, 0.9f, 0.05f, 0.95f}));
  std::tie(lo, hi) = clipped->range();
  EXPECT_FLOAT_EQ(lo.item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(hi.item<float>(), 1.0f);
}

TEST(ToyNpuObserverTest, MatchesClosedFormOnGaussianDataAndHonoursSigmas) {
  ToyRegistries r;
  at::manual_seed(0);
  const at::Tensor x = at::randn({4000}) * 2.0 + 0.5;
  const double mean = x.to(at::kDouble).mean().item<double>();
  const double sigma = x.to(at::kDouble).std(/*unbiased=*/false).item<double>();
  for (double k : {3.0, 1.0}) {
    auto observer = r.observers.create("Toy3Sigma", "t", unsigned8(), {{"sigmas", k}});
    observer->observe(x.slice(0, 0, 1000));
    observer->observe(x.slice(0, 1000));
    auto [lo, hi] = observer->range();
    EXPECT_NEAR(lo.item<float>(), mean - k * sigma, 1e-5) << "sigmas " << k;
    EXPECT_NEAR(hi.item<float>(), mean + k * sigma, 1e-5) << "sigmas " << k;
  }
}

TEST(ToyNpuObserverTest, RefusesPerChannelAndNonPositiveSigmas) {
  ToyRegistries r;
  EXPECT_NE(errorOf([&] { r.observers.create("Toy3Sigma", "w", signed6(0)); }).find("per-channel"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              r.observers.create("Toy3Sigma", "t", unsigned8(), {{"sigmas", 0}});
            }).find("sigmas must be positive"),
            std::string::npos);
}

// A ToyShift quantizer over a MinMax observer that has seen `calibration`, now quantizing.
std::unique_ptr<quant::FakeQuantizer> calibrated(const ToyRegistries& r, const QScheme& scheme,
                                                 const at::Tensor& calibration) {
  auto q =
      r.fake_quantizers.create("ToyShift", "q", scheme, r.observers.create("MinMax", "q", scheme));
  q->forward(calibration);
  q->setMode(quant::FakeQuantMode::Quantization);
  return q;
}

TEST(ToyNpuFakeQuantizerTest, SignedGridPowerOfTwoScaleRoundsHalfAwayFromZero) {
  ToyRegistries r;
  // max |x| = 3.1: scale 3.1 / 31.5 rounded up to a power of two is 1/8; grid [-32, 31].
  auto q = calibrated(r, signed6(), at::tensor({-3.1f, 1.0f}));
  EXPECT_EQ(values(q->qparams().scale), std::vector<float>{0.125f});
  EXPECT_EQ(q->qparams().zero_point.item<int64_t>(), 0);
  // x / s = -1.5, 0.5, 1.5, -36 (clips), 31.2, 2.4, -0.5
  const at::Tensor x = at::tensor({-0.1875f, 0.0625f, 0.1875f, -4.5f, 3.9f, 0.3f, -0.0625f});
  EXPECT_EQ(values(q->forward(x)),
            (std::vector<float>{-0.25f, 0.125f, 0.25f, -4.0f, 3.875f, 0.25f, -0.125f}));
  // Just below a tie: x / s = 0.5 - 2^-25, where float's |v| + 0.5 would round up to 1.
  const float below_half = std::nextafter(0.0625f, 0.0f);
  EXPECT_EQ(values(q->forward(at::tensor({below_half, -below_half}))),
            (std::vector<float>{0.0f, 0.0f}));
  // The library's affine kernel with the same parameters and scheme agrees.
  const at::Tensor all =
      at::cat({x, at::tensor({below_half, -below_half}), at::linspace(-5, 5, 801)});
  EXPECT_TRUE(at::equal(q->forward(all), quant::fakeQuantize(all, q->qparams(), q->scheme())));
}

TEST(ToyNpuFakeQuantizerTest, UnsignedAsymmetricZeroPointFollowsTheRoundedScale) {
  ToyRegistries r;
  // Range [-1, 2.3]: scale 3.3 / 255 rounds up to 1/64; zero point 0 - round(-1 * 64) = 64.
  auto q = calibrated(r, unsigned8(), at::tensor({-1.0f, 2.3f}));
  EXPECT_EQ(values(q->qparams().scale), std::vector<float>{0.015625f});
  EXPECT_EQ(q->qparams().zero_point.item<int64_t>(), 64);
  // x / s = 32, -64.5 (-65 + 64 clips at 0), 160, 0.5
  EXPECT_EQ(values(q->forward(at::tensor({0.5f, -1.0078125f, 2.5f, 0.0078125f}))),
            (std::vector<float>{0.5f, -1.0f, 2.5f, 0.015625f}));
}

TEST(ToyNpuFakeQuantizerTest, PerChannelScalesAndStraightThroughGradient) {
  ToyRegistries r;
  // Channel 0: max 1 -> 1/31.5 -> 1/16. Channel 1: max 0.3 -> 0.3/31.5 -> 1/64.
  const at::Tensor w = at::tensor({1.0f, -0.5f, 0.03125f, 0.3f, -0.1f, 0.0078125f}).reshape({2, 3});
  auto q = calibrated(r, signed6(0), w);
  EXPECT_EQ(values(q->qparams().scale), (std::vector<float>{0.0625f, 0.015625f}));
  EXPECT_EQ(values(q->forward(w)),
            (std::vector<float>{1.0f, -0.5f, 0.0625f, 0.296875f, -0.09375f, 0.015625f}));

  auto t = calibrated(r, signed6(), at::tensor({-3.1f, 1.0f}));
  const at::Tensor x = at::tensor({-4.5f, 0.3f, 3.9f, 4.0f}).requires_grad_(true);
  t->forward(x).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<float>{0.0f, 1.0f, 1.0f, 0.0f}));  // -36, 32 clip
}

TEST(ToyNpuFakeQuantizerTest, StateRoundTripsAndOtherRoundingIsRefused) {
  ToyRegistries r;
  auto q = calibrated(r, unsigned8(), at::tensor({-1.0f, 2.3f}));
  auto loaded = r.fake_quantizers.create("ToyShift", "copy", unsigned8(), nullptr);
  loaded->loadState(q->state());
  const at::Tensor x = at::linspace(-2.0, 4.0, 97);
  EXPECT_TRUE(at::equal(loaded->forward(x), q->forward(x)));

  QScheme even = unsigned8();
  even.rounding = RoundingMode::HalfToEven;
  EXPECT_NE(errorOf([&] {
              r.fake_quantizers.create("ToyShift", "q", even, nullptr);
            }).find("half_away_from_zero"),
            std::string::npos);
}

// image[N,1,4,4] -> Conv(conv_w, conv_b) -> Relu -> Flatten -> Gemm(fc_w, fc_b, transB) -> logits
Graph convReluGemm() {
  OnnxBuilder b;
  b.input("image", kFloat, {-1, 1, 4, 4}).output("logits", kFloat, {-1, 3});
  b.initializer("conv_w",
                at::tensor({1.0f, -1.0f, 0.5f, -0.5f, 0.25f, 0.0f, 0.03125f, -0.09375f, 0.75f, 0.5f,
                            0.25f, -0.125f, 0.0f, 0.0f, 0.0f, 0.015625f, 0.0f, 0.1f})
                    .reshape({2, 1, 3, 3}));
  b.initializer("conv_b", at::tensor({0.1f, -0.2f}));
  const at::Tensor fc_w = at::stack({at::full({8}, 0.125f), at::tensor({0.25f, -0.25f}).repeat({4}),
                                     at::arange(8, at::kFloat) * 0.0625f - 0.25f});
  b.initializer("fc_w", fc_w);
  b.initializer("fc_b", at::tensor({0.0f, 0.5f, -0.5f}));
  b.node("Conv", {"image", "conv_w", "conv_b"}, {"conv"}, "conv");
  b.node("Relu", {"conv"}, {"relu"}, "relu");
  b.node("Flatten", {"relu"}, {"flat"}, "flatten");
  testing::addIntAttribute(b.node("Gemm", {"flat", "fc_w", "fc_b"}, {"logits"}, "fc"), "transB", 1);
  return importOnnxModel(b.model(), "");
}

TEST(ToyNpuPlacementTest, UnitOutputsAndTheGraphInputOnlyWithToyKinds) {
  ToyRegistries r;
  auto model = passes::prepare(convReluGemm(), backends::loadBackend(kToyNpuJson), r.options());
  ASSERT_EQ(model->units().size(), 2u);
  EXPECT_EQ(model->units()[0].ops, "Conv+Relu");
  EXPECT_EQ(model->units()[1].ops, "Gemm");

  // Graph input, then per unit its weight and its output; nothing on the Gemm's input (Flatten
  // passes the Relu output's quantizer through), nothing inside Conv+Relu, biases float.
  std::vector<std::string> names, kinds, points_values;
  for (const auto& p : model->points()) {
    names.push_back(p.quantizer);
    kinds.push_back(passes::toString(p.kind));
    points_values.push_back(p.value);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"image", "conv_w", "relu", "fc_w", "logits"}));
  EXPECT_EQ(kinds, (std::vector<std::string>{"activation", "weight", "activation", "weight",
                                             "activation"}));
  EXPECT_EQ(points_values, names);
  size_t fake_quantize_nodes = 0;
  for (const Node* n : model->graph().nodes())
    fake_quantize_nodes += passes::isFakeQuantize(n);
  EXPECT_EQ(fake_quantize_nodes, 5u);
  const Graph& g = model->graph();
  EXPECT_TRUE(passes::isFakeQuantize(g.findNode("conv")->input(0)->producer()));
  EXPECT_EQ(g.findNode("relu")->input(0)->producer()->name(), "conv");
  EXPECT_EQ(g.findNode("fc")->input(0)->producer()->name(), "flatten");
  EXPECT_TRUE(passes::isFakeQuantize(g.findNode("fc")->input(1)->producer()));
  EXPECT_FALSE(passes::isFakeQuantize(g.findNode("fc")->input(2)->producer()));

  for (const auto& p : model->points()) {
    quant::FakeQuantizer* q = model->quantizer(p.quantizer);
    EXPECT_EQ(q->kind(), "ToyShift") << p.quantizer;
    const bool weight = p.kind == passes::PointKind::Weight;
    EXPECT_EQ(q->observer()->kind(), weight ? "MinMax" : "Toy3Sigma") << p.quantizer;
    EXPECT_EQ(q->scheme().bits, weight ? 6 : 8) << p.quantizer;
    EXPECT_EQ(q->scheme().is_unsigned, !weight) << p.quantizer;
    EXPECT_EQ(q->scheme().axis, weight ? 0 : -1) << p.quantizer;
  }
}

TEST(ToyNpuPlacementTest, AUnitReadingAFloatOpsOutputGetsNoInputQuantizer) {
  // image -> Sigmoid (not a ToyNPU op: float) -> Gemm -> logits. Outputs-only placement leaves the
  // Gemm's input alone; an inputs-placing backend would quantize it.
  OnnxBuilder b;
  b.input("image", kFloat, {-1, 4}).output("logits", kFloat, {-1, 2});
  b.initializer("fc_w", at::ones({2, 4}));
  b.node("Sigmoid", {"image"}, {"squashed"}, "sigmoid");
  testing::addIntAttribute(b.node("Gemm", {"squashed", "fc_w"}, {"logits"}, "fc"), "transB", 1);
  ToyRegistries r;
  auto model = passes::prepare(importOnnxModel(b.model(), ""), backends::loadBackend(kToyNpuJson),
                               r.options());
  std::vector<std::string> names;
  for (const auto& p : model->points())
    names.push_back(p.quantizer);
  EXPECT_EQ(names, (std::vector<std::string>{"image", "fc_w", "logits"}));
  EXPECT_EQ(model->graph().findNode("fc")->input(0)->producer()->name(), "sigmoid");
  EXPECT_EQ(model->floatOps(), std::vector<std::string>{"Sigmoid x1: sigmoid"});
}

std::unique_ptr<passes::PreparedModel> calibratedToyModel(const ToyRegistries& r,
                                                          const backends::BackendConfig& backend) {
  auto model = passes::prepare(convReluGemm(), backend, r.options());
  model->setMode(quant::FakeQuantMode::Calibration);
  model->executor().run({{"image", (at::arange(16, at::kFloat) / 15.0f).reshape({1, 1, 4, 4})}});
  model->setMode(quant::FakeQuantMode::Quantization);
  return model;
}

// "shift S" and "zero_point Z" lines of a per-tensor quantizer, from its parameters.
std::string shiftAndZeroPoint(passes::PreparedModel& model, const std::string& name) {
  const quant::QParams p = model.quantizer(name)->qparams();
  const int shift = static_cast<int>(-std::log2(p.scaleValue()));
  EXPECT_EQ(std::ldexp(1.0f, -shift), p.scaleValue()) << name;
  return "shift " + std::to_string(shift) + "\nzero_point " + std::to_string(p.zeroPointValue()) +
         "\n";
}

TEST(ToyNpuWriterTest, WritesShiftsZeroPointsAndIntegerWeights) {
  ToyRegistries r;
  auto model = calibratedToyModel(r, backends::loadBackend(kToyNpuJson));
  const std::string dir = testing::makeTempDir("toy_npu_writer");
  const std::vector<std::string> files =
      r.writers.get("toy_npu")(*model, deploy::buildDeployModel(*model), dir);
  ASSERT_EQ(files, std::vector<std::string>{dir + "/toy_npu.params"});

  // image: 0..1 in 16 steps, mean 0.5 +- 3 sigma (0.92) clips to [0, 1]: 1/255 -> 1/128.
  // conv_w channel 0: max 1 -> 1/16; channel 1: max 0.5 -> 1/32; ties round away from zero.
  // fc_w rows: max 0.125 -> 1/128, max 0.25 -> 1/64 twice.
  const std::string expected =
      "# ToyNPU parameters: real = (q - zero_point) * 2^-shift\n"
      "quantizer image activation bits=8 unsigned=1 axis=-1\n"
      "shift 7\nzero_point 0\n"
      "quantizer conv_w weight bits=6 unsigned=0 axis=0\n"
      "shift 4 5\nzero_point 0 0\nshape 2 1 3 3\n"
      "levels 16 -16 8 -8 4 0 1 -2 12 16 8 -4 0 0 0 1 0 3\n"
      "quantizer relu activation bits=8 unsigned=1 axis=-1\n" +
      shiftAndZeroPoint(*model, "relu") +
      "quantizer fc_w weight bits=6 unsigned=0 axis=0\n"
      "shift 7 6 6\nzero_point 0 0 0\nshape 3 8\n"
      "levels 16 16 16 16 16 16 16 16 16 -16 16 -16 16 -16 16 -16 -16 -12 -8 -4 0 4 8 12\n"
      "quantizer logits activation bits=8 unsigned=1 axis=-1\n" +
      shiftAndZeroPoint(*model, "logits");
  EXPECT_EQ(readFile(files[0]), expected);
}

TEST(ToyNpuWriterTest, QdqExportComputesWhatThePreparedModelComputes) {
  // The built-in QDQ writer lowers ToyShift by its scheme (6 and 8 bits, half away from zero).
  ToyRegistries r;
  auto model = calibratedToyModel(r, backends::loadBackend(kToyNpuJson));
  at::manual_seed(1);
  const at::Tensor image = at::rand({8, 1, 4, 4}) * 1.2 - 0.1;
  const at::Tensor expected = model->executor().run({{"image", image}}).at("logits");
  const Graph qdq = deploy::toQdqGraph(*model);
  const at::Tensor logits = Executor(qdq).run({{"image", image}}).at("logits");
  EXPECT_TRUE(at::allclose(logits, expected, 0, 1e-6)) << (logits - expected).abs().max();
}

TEST(ToyNpuWriterTest, RefusesScalesThatAreNotShifts) {
  ToyRegistries r;
  backends::BackendConfig backend = backends::loadBackend(kToyNpuJson);
  backend.activation.fake_quantizer = "Fixed";
  auto model = calibratedToyModel(r, backend);
  const std::string message = errorOf([&] {
    r.writers.get("toy_npu")(*model, deploy::buildDeployModel(*model),
                             testing::makeTempDir("toy_npu_refuse"));
  });
  EXPECT_NE(message.find("quantizer 'image'"), std::string::npos) << message;
  EXPECT_NE(message.find("ToyShift"), std::string::npos) << message;
}

TEST(ToyNpuBackendFileTest, UnknownObserverKindIsNamedWithTheKnownOnes) {
  ToyRegistries r;
  const std::string path = testing::makeTempDir("toy_npu_typo") + "/typo.json";
  std::ofstream(path) << R"({"name": "ToyNPU typo", "extends": ")" << kToyNpuJson
                      << R"(", "activation": {"observer": "Toy3Sigmaa"}})";
  const backends::BackendConfig backend = backends::loadBackend(path);
  const std::string message =
      errorOf([&] { passes::prepare(convReluGemm(), backend, r.options()); });
  EXPECT_NE(message.find("unknown observer 'Toy3Sigmaa'"), std::string::npos) << message;
  EXPECT_NE(message.find("Toy3Sigma", message.find("known:")), std::string::npos) << message;
  EXPECT_NE(message.find("'image'"), std::string::npos) << message;

  // Forgetting to register the example's kinds names the first one the backend asks for.
  const std::string unregistered =
      errorOf([&] { passes::prepare(convReluGemm(), backends::loadBackend(kToyNpuJson)); });
  EXPECT_NE(unregistered.find("unknown observer 'Toy3Sigma'"), std::string::npos) << unregistered;
}

}  // namespace
}  // namespace qforge
