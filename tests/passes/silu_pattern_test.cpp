// SiLU written out (Sigmoid(x) times the same x, how every exporter writes nn.SiLU below ONNX
// opset 24): which pairs match, what they compute (ATen's silu), and where placement puts the
// quantizers: one unit when the backend lists Swish, the pieces when it quantizes Sigmoid and Mul
// on their own, else float between TensorRT's convolutions as MQBench leaves nn.SiLU.
#include "passes/silu_pattern.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/backend_config.h"
#include "exec/executor.h"
#include "passes/quant_units.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

enum class Activation { WrittenOut, SqueezeGate, OtherOperand };

// x[2,3,6,6] -> Conv(w1[4,3,3,3], b1, pad 1) -> Sigmoid(c) * c (or a gate that scales c by the
// Sigmoid of its mean, or Sigmoid(c) times Relu(c)) -> Conv(w2[2,4,1,1]) -> y.
Graph convSiluConv(Activation activation = Activation::WrittenOut, bool mul_x_first = false) {
  return convActivationConv(31, [&](Graph& g, Value* c) {
    Value* gate_input = c;
    if (activation == Activation::SqueezeGate)
      gate_input = g.addNode("ReduceMean", {c}, {"pooled"}, "pool")->output(0);
    Value* gate = g.addNode("Sigmoid", {gate_input}, {"gate"}, "sigmoid")->output(0);
    Value* scaled = c;
    if (activation == Activation::OtherOperand)
      scaled = g.addNode("Relu", {c}, {"r"}, "relu")->output(0);
    return (mul_x_first ? g.addNode("Mul", {scaled, gate}, {"h"}, "mul")
                        : g.addNode("Mul", {gate, scaled}, {"h"}, "mul"))
        ->output(0);
  });
}

TEST(SiluPattern, SigmoidOfXTimesXMatchesInEitherOperandOrder) {
  for (bool mul_x_first : {false, true}) {
    Graph g = convSiluConv(Activation::WrittenOut, mul_x_first);
    EXPECT_EQ(namesOf(passes::matchDecomposedSilu(g, g.findNode("sigmoid"))),
              (std::vector<std::string>{"sigmoid", "mul"}));
    EXPECT_TRUE(passes::matchDecomposedSilu(g, g.findNode("mul")).empty());
    EXPECT_TRUE(passes::matchDecomposedSilu(g, g.findNode("conv1")).empty());
  }
}

TEST(SiluPattern, OtherGatesDoNotMatch) {
  {
    // Squeeze-excitation: the Sigmoid of one value scales another.
    Graph g = convSiluConv(Activation::SqueezeGate);
    EXPECT_TRUE(passes::matchDecomposedSilu(g, g.findNode("sigmoid")).empty());
  }
  {
    // The Sigmoid of c scales a different value computed from c.
    Graph g = convSiluConv(Activation::OtherOperand);
    EXPECT_TRUE(passes::matchDecomposedSilu(g, g.findNode("sigmoid")).empty());
  }
  {
    Graph g = convSiluConv();
    g.addOutput(g.value("gate"));  // the gate is read outside the pair
    EXPECT_TRUE(passes::matchDecomposedSilu(g, g.findNode("sigmoid")).empty());
  }
}

TEST(SiluPattern, ThePairComputesSilu) {
  Graph g = convSiluConv();
  g.addOutput(g.value("h"));
  at::manual_seed(3);
  const at::Tensor x = at::randn({2, 3, 6, 6}) * 3;
  const auto out = Executor(g).run({{"x", x}});
  const at::Tensor c = firstConvOf(g, x);
  EXPECT_TRUE(at::allclose(out.at("h"), at::silu(c), 1e-5, 1e-6));
}

// TensorRT lists Mul but no Sigmoid: the SiLU is float, as nn.SiLU is in MQBench and inside
// TensorRT's convolution, so only what each Conv reads is quantized.
TEST(SiluPattern, TensorRTLeavesTheSiluFloatBetweenItsConvolutions) {
  const UnitPlacement p = placementOf(convSiluConv(), backends::loadBackend("TensorRT"));
  EXPECT_EQ(p.units, (std::vector<std::string>{"Conv", "Conv"}));
  EXPECT_EQ(p.quantized, (std::vector<std::string>{"h", "x"}));
}

// ONNX Runtime lists Sigmoid and Mul (its quantizer writes QLinearSigmoid and QLinearMul), so the
// pieces keep their own quantizers; a squeeze-excitation gate is placed the same way on TensorRT.
TEST(SiluPattern, BackendsThatQuantizeSigmoidAndMulKeepThePieces) {
  const UnitPlacement p = placementOf(convSiluConv(), backends::loadBackend("ONNXRuntime"));
  EXPECT_EQ(p.units, (std::vector<std::string>{"Conv", "Sigmoid", "Mul", "Conv"}));
  EXPECT_EQ(p.quantized, (std::vector<std::string>{"c", "gate", "h", "x"}));

  const UnitPlacement gate =
      placementOf(convSiluConv(Activation::SqueezeGate), backends::loadBackend("TensorRT"));
  EXPECT_EQ(gate.units, (std::vector<std::string>{"Conv", "Mul", "Conv"}));
  EXPECT_EQ(gate.quantized, (std::vector<std::string>{"c", "gate", "h", "x"}));
}

TEST(SiluPattern, ABackendListingSwishGetsOneUnitAndOneWithAFloatSigmoidGetsFloat) {
  const Graph g = convSiluConv();
  const auto units = passes::findQuantUnits(
      g, outputQuantizingBackend({{"Conv", "quantizable"}, {"Swish", "quantizable"}}));
  ASSERT_EQ(units.size(), 3u);
  EXPECT_EQ(units[1].ops(), "Sigmoid+Mul");
  EXPECT_EQ(units[1].pattern, "Swish, decomposed");
  const UnitPlacement swish =
      placementOf(g, outputQuantizingBackend({{"Conv", "quantizable"}, {"Swish", "quantizable"}}));
  EXPECT_EQ(swish.quantized, (std::vector<std::string>{"c", "h", "x", "y"}));

  // Sigmoid is float on this backend: no kernel runs the pieces in integers either.
  const UnitPlacement float_sigmoid =
      placementOf(g, outputQuantizingBackend(
                         {{"Conv", "quantizable"}, {"Mul", "quantizable"}, {"Sigmoid", "never"}}));
  EXPECT_EQ(float_sigmoid.units, (std::vector<std::string>{"Conv", "Conv"}));
  EXPECT_EQ(float_sigmoid.quantized, (std::vector<std::string>{"c", "h", "x", "y"}));

  // Swish listed as float beats pieces the backend would quantize.
  const UnitPlacement float_swish = placementOf(
      g, outputQuantizingBackend({{"Conv", "quantizable"},
                                  {"Mul", "quantizable"},
                                  {"Swish", "never"}}));  // the tiny backend's Sigmoid is fixed
  EXPECT_EQ(float_swish.units, (std::vector<std::string>{"Conv", "Conv"}));
}

// TensorRT's closed form after one calibration batch: symmetric [-127, 127] activations with scale
// max|t| / 127 of the float values calibration saw, weights per output channel, a float SiLU.
TEST(SiluPattern, TheTensorRTModelComputesQuantizedConvolutionsAroundAFloatSilu) {
  auto m = passes::prepare(convSiluConv(), backends::loadBackend("TensorRT"));
  EXPECT_EQ(m->points().size(), 4u);  // x, the SiLU's output, w1, w2
  at::manual_seed(13);
  const at::Tensor x = at::randn({2, 3, 6, 6}) * 2;
  calibrateOn(*m, x);
  const at::Tensor y = m->executor().run({{"x", x}}).at("y");

  const Graph reference = convSiluConv();
  auto weight = [&](const char* name) {
    const at::Tensor w = reference.value(name)->initializer();
    const at::Tensor scales = w.abs().reshape({w.size(0), -1}).amax(1) / 127;
    return at::fake_quantize_per_channel_affine(w, scales, at::zeros({w.size(0)}, at::kInt), 0,
                                                -127, 127);
  };
  auto activation = [](const at::Tensor& t, const at::Tensor& range) {
    const double s = range.abs().max().item<double>() / 127;
    return at::fake_quantize_per_tensor_affine(t, static_cast<float>(s), 0, -127, 127);
  };
  const at::Tensor b1 = reference.value("b1")->initializer();
  const at::Tensor float_h = at::silu(firstConvOf(reference, x));
  const at::Tensor h = at::silu(at::conv2d(activation(x, x), weight("w1"), b1, 1, 1));
  const at::Tensor want = at::conv2d(activation(h, float_h), weight("w2"));
  EXPECT_TRUE(at::allclose(y, want, 1e-4, 1e-4)) << (y - want).abs().max().item<double>();
}

}  // namespace
}  // namespace qforge::testing
