// HardSwish written out (torch.onnx before opset 14: HardSigmoid(1/6, 1/2) times the same x):
// which pairs match, what they compute (ATen's hardswish), and that placement treats the pair as
// the HardSwish op, so an opset-11 export is quantized as its opset-14 export is.
#include "passes/hard_swish_pattern.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/backend_config.h"
#include "exec/executor.h"
#include "passes/quant_units.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

enum class Activation { WrittenOut, Op, SqueezeGate };

// x[2,3,6,6] -> Conv(w1[4,3,3,3], b1, pad 1) -> HardSwish (written out, the op, or a gate that
// scales the Conv's output by HardSigmoid of another value) -> Conv(w2[2,4,1,1]) -> y.
Graph convHardSwishConv(Activation activation, double alpha = 1.0 / 6.0, bool mul_x_first = false) {
  auto hard_swish = [&](Graph& g, Value* c) -> Value* {
    if (activation == Activation::Op)
      return g.addNode("HardSwish", {c}, {"h"}, "hard_swish")->output(0);
    Value* gate_input = c;
    if (activation == Activation::SqueezeGate)
      gate_input = g.addNode("ReduceMean", {c}, {"pooled"}, "pool")->output(0);
    Node* hs = g.addNode("HardSigmoid", {gate_input}, {"gate"}, "hard_sigmoid");
    hs->attributes.set(Attribute::makeFloat("alpha", static_cast<float>(alpha)));
    hs->attributes.set(Attribute::makeFloat("beta", 0.5f));
    return (mul_x_first ? g.addNode("Mul", {c, hs->output(0)}, {"h"}, "mul")
                        : g.addNode("Mul", {hs->output(0), c}, {"h"}, "mul"))
        ->output(0);
  };
  return convActivationConv(21, hard_swish, 14);  // HardSwish's first opset
}

TEST(HardSwishPattern, HardSigmoidOfXTimesXMatchesInEitherOperandOrder) {
  for (bool mul_x_first : {false, true}) {
    Graph g = convHardSwishConv(Activation::WrittenOut, 1.0 / 6.0, mul_x_first);
    EXPECT_EQ(namesOf(passes::matchDecomposedHardSwish(g, g.findNode("hard_sigmoid"))),
              (std::vector<std::string>{"hard_sigmoid", "mul"}));
    EXPECT_TRUE(passes::matchDecomposedHardSwish(g, g.findNode("mul")).empty());
  }
}

TEST(HardSwishPattern, OtherGatesDoNotMatch) {
  {
    // ONNX's default HardSigmoid (alpha 0.2) is no HardSwish gate.
    Graph g = convHardSwishConv(Activation::WrittenOut, 0.2);
    EXPECT_TRUE(passes::matchDecomposedHardSwish(g, g.findNode("hard_sigmoid")).empty());
  }
  {
    // Squeeze-excitation: the gate of one value scales another.
    Graph g = convHardSwishConv(Activation::SqueezeGate);
    EXPECT_TRUE(passes::matchDecomposedHardSwish(g, g.findNode("hard_sigmoid")).empty());
  }
  {
    Graph g = convHardSwishConv(Activation::WrittenOut);
    g.addOutput(g.value("gate"));  // the gate is read outside the pair
    EXPECT_TRUE(passes::matchDecomposedHardSwish(g, g.findNode("hard_sigmoid")).empty());
  }
}

TEST(HardSwishPattern, ThePairComputesHardSwish) {
  Graph g = convHardSwishConv(Activation::WrittenOut);
  g.addOutput(g.value("h"));
  at::manual_seed(2);
  const at::Tensor x = at::randn({2, 3, 6, 6}) * 3;
  const auto out = Executor(g).run({{"x", x}});
  const at::Tensor c = firstConvOf(g, x);
  EXPECT_TRUE(at::allclose(out.at("h"), at::hardswish(c), 1e-5, 1e-6));
}

// x[2,3,6,6] -> Conv(w1, b1, pad 1) -> c -> Add(c, 3) -> Clip(0, 6) -> then Mul by c and Div by 6
// (`sixth_first` false), or Mul by 1/6 and then Mul by c -> Conv(w2) -> y: Paddle2ONNX's HardSwish.
// `clip_attributes` writes the bounds as opset-9 attributes; `bound`, `shift` and `multiplier`
// bend the chain into what is no HardSwish.
struct ClippedSpec {
  bool sixth_first = false;
  bool clip_attributes = false;
  double shift = 3.0;
  double bound = 6.0;
  bool multiply_other = false;  // the Mul takes the Conv's input's Relu, not c
};

Graph convClippedHardSwishConv(ClippedSpec spec = {}) {
  Graph g = convHardSwishConv(Activation::Op);
  // Rebuild the activation: drop the HardSwish op, put the chain between "c" and "h".
  Node* op = g.findNode("hard_swish");
  Value* c = g.value("c");
  Value* other = spec.multiply_other ? g.addNode("Relu", {c}, {"r"}, "relu")->output(0) : c;
  Node* add = g.addNode("Add", {c, g.addInitializer("three", at::scalar_tensor(spec.shift))},
                        {"shifted"}, "add");
  Node* clip = nullptr;
  if (spec.clip_attributes) {
    clip = g.addNode("Clip", {add->output(0)}, {"relu6"}, "clip");
    clip->attributes.set(Attribute::makeFloat("min", 0.f));
    clip->attributes.set(Attribute::makeFloat("max", static_cast<float>(spec.bound)));
  } else {
    clip = g.addNode("Clip",
                     {add->output(0), g.addInitializer("lo", at::scalar_tensor(0.f)),
                      g.addInitializer("hi", at::scalar_tensor(static_cast<float>(spec.bound)))},
                     {"relu6"}, "clip");
  }
  Value* h = nullptr;
  if (spec.sixth_first) {
    Node* sixth =
        g.addNode("Mul", {clip->output(0), g.addInitializer("sixth", at::scalar_tensor(1.f / 6))},
                  {"gate"}, "scale");
    h = g.addNode("Mul", {other, sixth->output(0)}, {"h2"}, "mul")->output(0);
  } else {
    Node* product = g.addNode("Mul", {clip->output(0), other}, {"product"}, "mul");
    h = g.addNode("Div", {product->output(0), g.addInitializer("six", at::scalar_tensor(6.f))},
                  {"h2"}, "scale")
            ->output(0);
  }
  g.setInput(g.findNode("conv2"), 0, h);
  g.removeNode(op);
  return g;
}

TEST(HardSwishPattern, PaddlesClippedFormMatchesWithTheDivisionBeforeOrAfterTheMul) {
  for (bool sixth_first : {false, true}) {
    for (bool clip_attributes : {false, true}) {
      Graph g = convClippedHardSwishConv({sixth_first, clip_attributes});
      const std::vector<std::string> want =
          sixth_first ? std::vector<std::string>{"add", "clip", "scale", "mul"}
                      : std::vector<std::string>{"add", "clip", "mul", "scale"};
      EXPECT_EQ(namesOf(passes::matchClippedHardSwish(g, g.findNode("add"))), want)
          << sixth_first << clip_attributes;
      EXPECT_TRUE(passes::matchClippedHardSwish(g, g.findNode("clip")).empty());
    }
  }
}

TEST(HardSwishPattern, OtherClippedChainsDoNotMatch) {
  ClippedSpec shift2;
  shift2.shift = 2.0;
  ClippedSpec relu5;
  relu5.bound = 5.0;
  ClippedSpec other;
  other.multiply_other = true;
  for (const ClippedSpec& spec : {shift2, relu5, other}) {
    Graph g = convClippedHardSwishConv(spec);
    EXPECT_TRUE(passes::matchClippedHardSwish(g, g.findNode("add")).empty())
        << spec.shift << " " << spec.bound << " " << spec.multiply_other;
  }
  Graph g = convClippedHardSwishConv();
  g.addOutput(g.value("relu6"));  // the Relu6 is read outside the chain
  EXPECT_TRUE(passes::matchClippedHardSwish(g, g.findNode("add")).empty());
}

TEST(HardSwishPattern, TheClippedChainComputesHardSwish) {
  for (bool sixth_first : {false, true}) {
    Graph g = convClippedHardSwishConv({sixth_first, false});
    g.addOutput(g.value("h2"));
    at::manual_seed(2);
    const at::Tensor x = at::randn({2, 3, 6, 6}) * 3;
    const auto out = Executor(g).run({{"x", x}});
    const at::Tensor c = firstConvOf(g, x);
    EXPECT_TRUE(at::allclose(out.at("h2"), at::hardswish(c), 1e-5, 1e-6)) << sixth_first;
  }
}

// TensorRT lists no HardSwish: float between the convolutions, only what each Conv reads is
// quantized. QNN lists it: one unit reading the Conv's output and writing a quantized one.
TEST(HardSwishPattern, PlacementOfTheWrittenOutPairEqualsPlacementOfTheOp) {
  const Graph written = convHardSwishConv(Activation::WrittenOut);
  const Graph op = convHardSwishConv(Activation::Op);
  {
    const backends::BackendConfig trt = backends::loadBackend("TensorRT");
    const UnitPlacement a = placementOf(written, trt);
    EXPECT_EQ(a.units, (std::vector<std::string>{"Conv", "Conv"}));
    EXPECT_EQ(a.quantized, (std::vector<std::string>{"h", "x"}));
    EXPECT_EQ(a.quantized, placementOf(op, trt).quantized);
    const UnitPlacement clipped = placementOf(convClippedHardSwishConv(), trt);
    EXPECT_EQ(clipped.units, (std::vector<std::string>{"Conv", "Conv"}));
    EXPECT_EQ(clipped.quantized, (std::vector<std::string>{"h2", "x"}));
  }
  {
    const backends::BackendConfig qnn = backends::loadBackend("QNN");
    const UnitPlacement a = placementOf(written, qnn);
    const UnitPlacement b = placementOf(op, qnn);
    EXPECT_EQ(a.units, (std::vector<std::string>{"Conv", "HardSigmoid+Mul", "Conv"}));
    EXPECT_EQ(b.units, (std::vector<std::string>{"Conv", "HardSwish", "Conv"}));
    EXPECT_EQ(a.quantized, b.quantized);
    const UnitPlacement clipped = placementOf(convClippedHardSwishConv(), qnn);
    EXPECT_EQ(clipped.units, (std::vector<std::string>{"Conv", "Add+Clip+Mul+Div", "Conv"}));
    EXPECT_EQ(clipped.quantized, (std::vector<std::string>{"c", "h2", "x", "y"}));
  }
}

// The two exports quantized for TensorRT compute the same thing: FQ(hardswish(conv(FQ(x))))
// read by the second Conv, with the same scales after one calibration batch.
TEST(HardSwishPattern, BothExportsQuantizedForTensorRTGiveTheSameOutput) {
  at::manual_seed(4);
  const at::Tensor x = at::randn({2, 3, 6, 6}) * 2;
  at::Tensor y[2];
  size_t points[2];
  int i = 0;
  for (Activation a : {Activation::WrittenOut, Activation::Op}) {
    auto m = passes::prepare(convHardSwishConv(a), backends::loadBackend("TensorRT"));
    calibrateOn(*m, x);
    y[i] = m->executor().run({{"x", x}}).at("y");
    points[i++] = m->points().size();
  }
  EXPECT_EQ(points[0], 4u);  // x, the HardSwish's output, w1, w2
  EXPECT_EQ(points[1], points[0]);
  EXPECT_TRUE(at::allclose(y[0], y[1], 1e-5, 1e-5)) << (y[0] - y[1]).abs().max();
}

}  // namespace
}  // namespace qforge::testing
