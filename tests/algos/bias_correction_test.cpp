// Empirical bias correction: the closed form on one Gemm with 4-bit weights and float
// activations, the quantized output's mean error vanishing on a two-layer model, bias quantizers
// kept consistent, and the errors for an uncalibrated model or missing data.
#include "algos/bias_correction.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algos/calibrate.h"
#include "passes/fake_quantize_node.h"
#include "support/checks.h"
#include "support/quant_graphs.h"

namespace qforge::algos {
namespace {

using testing::errorOf;

// Samples held in memory, as the loader reads them.
class TensorDataset : public data::Dataset {
 public:
  explicit TensorDataset(at::Tensor samples) : samples_(std::move(samples)) {}
  int64_t size() const override { return samples_.size(0); }
  data::Sample get(int64_t index) override {
    return data::Sample{samples_[index].clone(), -1, "sample " + std::to_string(index)};
  }
  bool hasLabels() const override { return false; }
  std::string describe() const override { return "test tensors"; }

 private:
  at::Tensor samples_;
};

data::BatchLoader loaderOver(const at::Tensor& samples, int64_t batch_size) {
  data::LoaderOptions options;
  options.batch_size = batch_size;
  return data::BatchLoader(std::make_shared<TensorDataset>(samples), options);
}

// 4-bit symmetric per-channel weights; `patch` on top.
backends::BackendConfig fourBitWeights(const nlohmann::json& patch = nlohmann::json::object()) {
  nlohmann::json doc = testing::tinyBackendDocument({{"weight", {{"bits", 4}}}});
  doc.merge_patch(patch);
  return backends::parseBackendConfig(doc, "test backend");
}

// Only unit outputs are quantized: x reaches the Gemm in float, and the output's quantizer sits
// after the anchor's output, which is what bias correction measures.
const nlohmann::json kFloatInputs = {
    {"placement", {{"unit_inputs", false}, {"unit_outputs", true}}}};

const passes::QuantPoint& weightPoint(const passes::PreparedModel& m, const std::string& value) {
  for (const passes::QuantPoint& p : m.points()) {
    if (p.kind == passes::PointKind::Weight && p.value == value) return p;
  }
  throw Error("no weight point on " + value);
}

// Mean over batch (and spatial) axes of the model's output, per channel, in double.
at::Tensor outputMean(passes::PreparedModel& m, const at::Tensor& x, quant::FakeQuantMode mode) {
  m.setMode(mode);
  const at::Tensor y = m.executor().run({{"x", x}}).begin()->second.to(at::kDouble);
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < y.dim(); ++d)
    dims.push_back(d);
  return y.mean(dims);
}

// x[6] -> Gemm(W [4, 6], b) -> y
Graph singleGemm() {
  at::manual_seed(21);
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* fc = g.addNode(
      "Gemm", {x, g.addInitializer("W", at::randn({4, 6})), g.addInitializer("b", at::randn({4}))},
      {"y"}, "fc");
  fc->attributes.set(Attribute::makeInt("transB", 1));
  g.addOutput(fc->output(0));
  return g;
}

TEST(BiasCorrectionTest, SingleGemmGetsTheClosedFormCorrection) {
  auto model = passes::prepare(singleGemm(), fourBitWeights(kFloatInputs));
  ASSERT_EQ(model->points().size(), 2u);  // the weight and y
  at::manual_seed(22);
  const at::Tensor samples = at::randn({40, 6}) + at::linspace(-2, 3, 6);  // E[x] far from 0
  data::BatchLoader loader = loaderOver(samples, 16);
  calibrate(*model, loader, 10);
  const at::Tensor w = model->graph().value("W")->initializer().to(at::kDouble);
  const at::Tensor b = model->graph().value("b")->initializer().to(at::kDouble);

  loader.reset();
  const BiasCorrectionResult result = correctBias(*model, loader, 2);  // 32 of the 40 samples
  EXPECT_EQ(result.batches, 2);
  EXPECT_EQ(result.samples, 32);

  // W_q as the model quantizes it, checked against MinMax's 4-bit symmetric per-channel grid:
  // scale = max|w| / 7.5, integers in [-8, 7], within half a step of W. (Which way the extreme
  // element at exactly -7.5 steps rounds depends on dividing or multiplying by the reciprocal.)
  quant::FakeQuantizer* wq = model->quantizer(weightPoint(*model, "W").quantizer);
  const at::Tensor scale = wq->qparams().scale.to(at::kDouble).reshape({4, 1});
  EXPECT_TRUE(at::allclose(scale, w.abs().amax(1, true) / 7.5, 1e-6, 0));
  const at::Tensor w_q = wq->forward(w.to(at::kFloat)).to(at::kDouble);
  const at::Tensor levels = w_q / scale;
  EXPECT_TRUE(at::allclose(levels, at::round(levels), 0, 1e-4));
  EXPECT_GE(levels.min().item<double>(), -8 - 1e-4);
  EXPECT_LE(levels.max().item<double>(), 7 + 1e-4);
  EXPECT_TRUE(((w - w_q).abs() <= scale / 2 + 1e-6).all().item<bool>());
  const at::Tensor mean_x = samples.slice(0, 0, 32).to(at::kDouble).mean(0);
  const at::Tensor correction = (w - w_q).mv(mean_x);
  ASSERT_GT(correction.abs().max().item<double>(), 1e-2);  // 4 bits: a visible shift

  const at::Tensor corrected = model->graph().value("b")->initializer().to(at::kDouble);
  EXPECT_TRUE(at::allclose(corrected - b, correction, 0, 1e-5))
      << "applied " << (corrected - b) << "\nexpected " << correction;
  ASSERT_EQ(result.layers.size(), 1u);
  const CorrectedLayer& layer = result.layers[0];
  EXPECT_EQ(layer.unit, "fc");
  EXPECT_EQ(layer.op, "Gemm");
  EXPECT_EQ(layer.channels, 4);
  EXPECT_TRUE(layer.skipped.empty());
  EXPECT_FALSE(layer.bias_added);
  EXPECT_NEAR(layer.shift_before, correction.abs().max().item<double>(), 1e-5);
  EXPECT_LT(layer.shift_after, 1e-5);
  EXPECT_EQ(wq->mode(), quant::FakeQuantMode::Quantization);  // modes restored
}

TEST(BiasCorrectionTest, TwoLayersLoseTheirMeanError) {
  // conv1 (bias) -> Relu -> conv2 (no bias): 4-bit weights, 8-bit activations.
  auto model = passes::prepare(testing::convReluConv(23), fourBitWeights());
  at::manual_seed(24);
  const at::Tensor samples = at::randn({24, 2, 5, 5}) + 0.5;
  data::BatchLoader loader = loaderOver(samples, 8);
  calibrate(*model, loader, 3);
  const at::Tensor float_mean = outputMean(*model, samples, quant::FakeQuantMode::Float);
  const double before =
      (outputMean(*model, samples, quant::FakeQuantMode::Quantization) - float_mean)
          .abs()
          .max()
          .item<double>();

  loader.reset();
  std::vector<int64_t> progress;
  const BiasCorrectionResult result =
      correctBias(*model, loader, 3, [&](int64_t done, int64_t planned) {
        progress.push_back(done);
        EXPECT_EQ(planned, 2);
      });
  EXPECT_EQ(progress, (std::vector<int64_t>{1, 2}));
  const double after =
      (outputMean(*model, samples, quant::FakeQuantMode::Quantization) - float_mean)
          .abs()
          .max()
          .item<double>();
  EXPECT_GT(before, 1e-2);
  EXPECT_LT(after, 1e-5 * float_mean.abs().max().item<double>() + 1e-6) << "before " << before;

  ASSERT_EQ(result.layers.size(), 2u);
  EXPECT_EQ(result.layers[0].unit, "conv1");
  EXPECT_EQ(result.layers[1].unit, "conv2");
  EXPECT_FALSE(result.layers[0].bias_added);
  EXPECT_TRUE(result.layers[1].bias_added);  // conv2 had none: a zero bias was added
  ASSERT_NE(model->graph().findNode("conv2")->input(2), nullptr);
  for (const CorrectedLayer& layer : result.layers) {
    EXPECT_GT(layer.shift_before, 1e-3) << layer.unit;
    EXPECT_LT(layer.shift_after, 1e-5) << layer.unit;
  }
}

// The bias's own quantizer after correction: derived int32 biases follow the value, and an
// observed bias grid is re-fitted to it.
TEST(BiasCorrectionTest, BiasQuantizersStayConsistent) {
  for (const std::string mode : {"derived", "own"}) {
    SCOPED_TRACE(mode);
    nlohmann::json bias = {{"mode", mode}};
    if (mode == "own") bias = {{"mode", "own"}, {"bits", 8}, {"symmetric", true}};
    auto model = passes::prepare(testing::convReluConv(25),
                                 fourBitWeights({{"constraints", {{"bias", bias}}}}));
    const passes::QuantPoint* bias_point = nullptr;
    for (const passes::QuantPoint& p : model->points()) {
      if (p.kind == passes::PointKind::Bias) bias_point = &p;
    }
    ASSERT_NE(bias_point, nullptr);
    at::manual_seed(26);
    // Inputs with a large mean: conv1's correction moves its bias well past its old range.
    const at::Tensor samples = at::randn({16, 2, 5, 5}) + 3;
    data::BatchLoader loader = loaderOver(samples, 8);
    calibrate(*model, loader, 2);
    loader.reset();
    const BiasCorrectionResult result = correctBias(*model, loader, 2);

    quant::FakeQuantizer* q = model->quantizer(bias_point->quantizer);
    const at::Tensor b = model->graph().value(bias_point->value)->initializer();
    const double step = q->qparams().scale.max().item<double>();
    // What is left of conv1's shift is the bias's own rounding.
    EXPECT_GT(result.layers[0].shift_before, 10 * step);
    EXPECT_LE(result.layers[0].shift_after, step / 2 + 1e-5);
    // Not clipped: the quantized bias is within half a step of the corrected one.
    EXPECT_LE((q->forward(b) - b).abs().max().item<double>(), step / 2 + 1e-7);
  }
}

TEST(BiasCorrectionTest, MatMulIsReportedAsSkipped) {
  at::manual_seed(27);
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* mm = g.addNode("MatMul", {x, g.addInitializer("W", at::randn({6, 4}))}, {"y"}, "mm");
  g.addOutput(mm->output(0));
  auto model =
      passes::prepare(std::move(g), fourBitWeights({{"ops", {{"MatMul", "quantizable"}}}}));
  data::BatchLoader loader = loaderOver(at::randn({8, 6}), 8);
  calibrate(*model, loader, 1);
  loader.reset();
  const BiasCorrectionResult result = correctBias(*model, loader, 1);
  ASSERT_EQ(result.layers.size(), 1u);
  EXPECT_EQ(result.layers[0].op, "MatMul");
  EXPECT_NE(result.layers[0].skipped.find("MatMul has no bias input"), std::string::npos);
}

TEST(BiasCorrectionTest, BadInputIsAClearError) {
  auto model = passes::prepare(testing::convReluConv(28), fourBitWeights());
  data::BatchLoader loader = loaderOver(at::randn({8, 2, 5, 5}), 4);
  const std::string uncalibrated = errorOf([&] { correctBias(*model, loader, 2); });
  EXPECT_NE(uncalibrated.find("bias correction needs a calibrated model: quantizer '"),
            std::string::npos)
      << uncalibrated;
  EXPECT_NE(uncalibrated.find("run calibration first"), std::string::npos);

  calibrate(*model, loader, 2);  // reads the loader to its end
  EXPECT_EQ(errorOf([&] { correctBias(*model, loader, 2); }),
            "bias correction data test tensors yielded no batch");
  loader.reset();
  EXPECT_EQ(errorOf([&] { correctBias(*model, loader, 0); }),
            "bias correction needs at least one batch");
}

}  // namespace
}  // namespace qforge::algos
