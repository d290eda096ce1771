// GELU written out (torch.onnx before opset 20): which subgraphs match, what they compute
// (ATen's gelu), and how placement treats them: as the backend treats a Gelu op, one unit with
// quantizers only at its edges, or float; never a quantizer inside. With it, TensorRT's
// placement of a transformer MLP (MatMul + bias Add, GELU, MatMul + bias Add) quantizes what
// each product reads and nothing between a product and its bias.
#include "passes/gelu_pattern.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backend_config.h"
#include "exec/executor.h"
#include "passes/quant_units.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

struct GeluSpec {
  bool scale_by_mul = false;   // x * 1/sqrt(2) instead of x / sqrt(2)
  bool half_first = false;     // Mul 0.5 before the Mul by x
  bool swap_operands = false;  // constants and x as the first operand
  double one = 1.0;
  double half = 0.5;
};

Value* constant(Graph& g, const std::string& name, double v) {
  return g.addInitializer(name, at::scalar_tensor(v, at::kFloat));
}

// x[2,4,6] -> scale -> Erf -> Add one -> Mul x / Mul half -> y, every op named after its role.
Graph decomposedGelu(const GeluSpec& spec = {}) {
  Graph g;
  Value* x = g.addValue("x");
  x->type =
      TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(4), Dim::known(6)}};
  g.addInput(x);
  auto binary = [&](const char* op, Value* a, Value* b, const char* out, const char* name) {
    return spec.swap_operands ? g.addNode(op, {b, a}, {out}, name)
                              : g.addNode(op, {a, b}, {out}, name);
  };
  Node* scale = spec.scale_by_mul
                    ? binary("Mul", x, constant(g, "inv_sqrt2", 1.0 / std::sqrt(2.0)), "s", "scale")
                    : g.addNode("Div", {x, constant(g, "sqrt2", std::sqrt(2.0))}, {"s"}, "scale");
  Node* erf = g.addNode("Erf", {scale->output(0)}, {"e"}, "erf");
  Node* add = binary("Add", erf->output(0), constant(g, "one", spec.one), "e1", "add_one");
  Value* half = constant(g, "half", spec.half);
  Node* first = binary("Mul", add->output(0), spec.half_first ? half : x, "m", "first");
  Node* second = binary("Mul", first->output(0), spec.half_first ? x : half, "y", "second");
  g.addOutput(second->output(0));
  return g;
}

const std::vector<std::string> kChain = {"scale", "erf", "add_one", "first", "second"};

TEST(GeluPattern, TorchsDecompositionMatchesFromItsDivision) {
  Graph g = decomposedGelu();
  EXPECT_EQ(namesOf(passes::matchDecomposedGelu(g, g.findNode("scale"))), kChain);
  // Only the division starts one.
  EXPECT_TRUE(passes::matchDecomposedGelu(g, g.findNode("erf")).empty());
  EXPECT_TRUE(passes::matchDecomposedGelu(g, g.findNode("first")).empty());
}

TEST(GeluPattern, AMultiplicationByItsInverseEitherMulOrderAndSwappedOperandsMatchToo) {
  for (const GeluSpec spec : {GeluSpec{true}, GeluSpec{false, true}, GeluSpec{true, true, true},
                              GeluSpec{false, false, true}}) {
    Graph g = decomposedGelu(spec);
    EXPECT_EQ(namesOf(passes::matchDecomposedGelu(g, g.findNode("scale"))), kChain)
        << spec.scale_by_mul << spec.half_first << spec.swap_operands;
  }
}

TEST(GeluPattern, WhatIsNotAGeluDoesNotMatch) {
  {
    Graph g = decomposedGelu({false, false, false, /*one=*/2.0});
    EXPECT_TRUE(passes::matchDecomposedGelu(g, g.findNode("scale")).empty()) << "Add 2";
  }
  {
    Graph g = decomposedGelu({false, false, false, 1.0, /*half=*/0.25});
    EXPECT_TRUE(passes::matchDecomposedGelu(g, g.findNode("scale")).empty()) << "Mul 0.25";
  }
  {
    Graph g = decomposedGelu();
    g.setInput(g.findNode("scale"), 1, constant(g, "two", 2.0));
    EXPECT_TRUE(passes::matchDecomposedGelu(g, g.findNode("scale")).empty()) << "x / 2";
  }
  {
    Graph g = decomposedGelu();
    Value* other = g.addValue("other");
    g.addInput(other);
    g.setInput(g.findNode("first"), 1, other);
    EXPECT_TRUE(passes::matchDecomposedGelu(g, g.findNode("scale")).empty()) << "Mul by not x";
  }
  {
    Graph g = decomposedGelu();
    g.addOutput(g.value("e"));  // Erf's output is read outside the pattern
    EXPECT_TRUE(passes::matchDecomposedGelu(g, g.findNode("scale")).empty()) << "output";
  }
  {
    Graph g = decomposedGelu();
    g.addOutput(g.addNode("Relu", {g.value("e1")}, {"r"}, "second_reader")->output(0));
    EXPECT_TRUE(passes::matchDecomposedGelu(g, g.findNode("scale")).empty()) << "reader";
  }
}

TEST(GeluPattern, TheMatchedSubgraphComputesGelu) {
  for (const GeluSpec spec : {GeluSpec{}, GeluSpec{true, true, true}}) {
    Graph g = decomposedGelu(spec);
    const at::Tensor x = at::randn({2, 4, 6}) * 3;
    const at::Tensor y = Executor(g).run({{"x", x}}).at("y");
    EXPECT_TRUE(at::allclose(y, at::gelu(x), 1e-5, 1e-6));
  }
}

// QNN-like output quantization, with or without Gelu among its ops.
backends::BackendConfig geluBackend(bool gelu_quantizable) {
  nlohmann::json ops = {{"Add", "quantizable"},
                        {"Mul", "quantizable"},
                        {"Div", "quantizable"},
                        {"Erf", "quantizable"}};
  if (gelu_quantizable) ops["Gelu"] = "quantizable";
  return outputQuantizingBackend(ops);
}

TEST(GeluPattern, PlacementTreatsItAsTheBackendTreatsGelu) {
  Graph g = decomposedGelu();
  const auto units = passes::findQuantUnits(g, geluBackend(true));
  ASSERT_EQ(units.size(), 1u);
  EXPECT_EQ(units[0].ops(), "Div+Erf+Add+Mul+Mul");
  EXPECT_EQ(units[0].pattern, "Gelu, decomposed");
  EXPECT_EQ(units[0].output->name(), "y");
  ASSERT_EQ(units[0].activation_inputs.size(), 2u);  // x, read by the scale and the Mul by x
  for (const Use& in : units[0].activation_inputs)
    EXPECT_EQ(in.node->input(in.index)->name(), "x");

  // Gelu listed as float: the ops stay float, although Div, Erf, Add and Mul are quantizable.
  backends::BackendConfig float_gelu = geluBackend(false);
  float_gelu.ops["Gelu"].role = backends::OpRole::Never;
  EXPECT_TRUE(passes::findQuantUnits(g, float_gelu).empty());

  // Gelu not listed: a backend that quantizes every piece has no Gelu kernel and runs the pieces.
  std::vector<std::string> pieces;
  for (const passes::QuantUnit& u : passes::findQuantUnits(g, geluBackend(false)))
    pieces.push_back(u.ops());
  EXPECT_EQ(pieces, (std::vector<std::string>{"Div", "Erf", "Add", "Mul", "Mul"}));

  // One piece it does not quantize (Erf): no Gelu kernel either, but no quantizers inside.
  backends::BackendConfig no_erf = geluBackend(false);
  no_erf.ops.erase("Erf");
  EXPECT_TRUE(passes::findQuantUnits(g, no_erf).empty());
}

TEST(GeluPattern, AsOneUnitTheModelComputesTheQuantizedGeluOfTheQuantizedInput) {
  auto m = passes::prepare(decomposedGelu(), geluBackend(true));
  at::manual_seed(5);
  const at::Tensor x = at::randn({2, 4, 6}) * 3;
  calibrateOn(*m, x);
  const at::Tensor y = m->executor().run({{"x", x}}).at("y");
  EXPECT_EQ(m->points().size(), 2u);  // the input and the output, nothing inside

  const auto fq = asymmetricFakeQuant;
  const at::Tensor want = fq(at::gelu(fq(x, x)), at::gelu(x));
  const double step = asymmetricScale(at::gelu(x));
  // At most one step apart where float rounding lands on the other side of a half step.
  EXPECT_LE((y - want).abs().max().item<double>(), step * 1.001);
  // Elsewhere equal up to float rounding of the dequantized value.
  EXPECT_GT(((y - want).abs() <= 1e-6).to(at::kFloat).mean().item<double>(), 0.95);
}

// x[2,5,8] -> MatMul w1[8,16] -> Add b1 -> GELU -> MatMul w2[16,8] -> Add b2 [-> Add x] -> y:
// a transformer MLP as torch.onnx writes nn.Linear with 3-D input, with the residual optional.
Graph transformerMlp(bool residual) {
  at::manual_seed(11);
  Graph g;
  Value* x = g.addValue("x");
  x->type =
      TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(5), Dim::known(8)}};
  g.addInput(x);
  Node* fc1 =
      g.addNode("MatMul", {x, g.addInitializer("w1", at::randn({8, 16}) * 0.4)}, {"h0"}, "fc1");
  Node* bias1 = g.addNode("Add", {fc1->output(0), g.addInitializer("b1", at::randn({16}) * 0.1)},
                          {"h"}, "fc1_bias");
  Node* scale = g.addNode("Div", {bias1->output(0), constant(g, "sqrt2", std::sqrt(2.0))}, {"s"},
                          "gelu_scale");
  Node* erf = g.addNode("Erf", {scale->output(0)}, {"e"}, "gelu_erf");
  Node* add = g.addNode("Add", {erf->output(0), constant(g, "one", 1.0)}, {"e1"}, "gelu_add");
  Node* mul = g.addNode("Mul", {bias1->output(0), add->output(0)}, {"m"}, "gelu_mul");
  Node* half = g.addNode("Mul", {mul->output(0), constant(g, "half", 0.5)}, {"a"}, "gelu_half");
  Node* fc2 = g.addNode(
      "MatMul", {half->output(0), g.addInitializer("w2", at::randn({16, 8}) * 0.3)}, {"o0"}, "fc2");
  Node* bias2 = g.addNode("Add", {fc2->output(0), g.addInitializer("b2", at::randn({8}) * 0.1)},
                          {residual ? "o" : "y"}, "fc2_bias");
  Value* y = bias2->output(0);
  if (residual) y = g.addNode("Add", {y, x}, {"y"}, "residual")->output(0);
  g.addOutput(y);
  return g;
}

std::vector<std::string> unitOps(const std::vector<passes::QuantUnit>& units) {
  std::vector<std::string> ops;
  for (const passes::QuantUnit& u : units)
    ops.push_back(u.name + ":" + u.ops());
  return ops;
}

std::vector<std::string> quantizedValues(const passes::QuantUnit& unit) {
  std::vector<std::string> names;
  for (const Use& in : unit.activation_inputs)
    names.push_back(in.node->input(in.index)->name());
  return names;
}

TEST(GeluPattern, TensorRTQuantizesWhatEachProductOfAnMlpReadsAndNothingBeforeItsBias) {
  const backends::BackendConfig trt = backends::loadBackend("TensorRT");
  {
    const Graph g = transformerMlp(false);
    const auto units = passes::findQuantUnits(g, trt);
    EXPECT_EQ(unitOps(units), (std::vector<std::string>{"fc1:MatMul+Add", "fc2:MatMul+Add"}));
    ASSERT_EQ(units.size(), 2u);
    EXPECT_EQ(quantizedValues(units[0]), std::vector<std::string>{"x"});
    EXPECT_EQ(quantizedValues(units[1]), std::vector<std::string>{"a"});  // GELU's output
  }
  {
    // The residual Add is the next node after the bias: its own unit, both inputs quantized.
    const Graph g = transformerMlp(true);
    const auto units = passes::findQuantUnits(g, trt);
    EXPECT_EQ(unitOps(units),
              (std::vector<std::string>{"fc1:MatMul+Add", "fc2:MatMul+Add", "residual:Add"}));
    ASSERT_EQ(units.size(), 3u);
    EXPECT_EQ(quantizedValues(units[2]), (std::vector<std::string>{"o", "x"}));
  }
}

// TensorRT's closed form for one calibration batch: symmetric [-127, 127] activations with
// scale max|t| / 127 (its EMA starts at the first batch's range), weights per output column.
TEST(GeluPattern, TheTensorRTMlpComputesQuantizedProductsWithFloatBiasesAndAFloatGelu) {
  auto m = passes::prepare(transformerMlp(false), backends::loadBackend("TensorRT"));
  EXPECT_EQ(m->points().size(), 4u);  // x, GELU's output, w1, w2
  at::manual_seed(12);
  const at::Tensor x = at::randn({3, 5, 8});
  calibrateOn(*m, x);
  const at::Tensor y = m->executor().run({{"x", x}}).at("y");

  Graph reference = transformerMlp(false);
  auto weight = [&](const char* name) {
    const at::Tensor w = reference.value(name)->initializer();
    const at::Tensor scales = (w.abs().amax(0) / 127).to(at::kDouble);
    return at::fake_quantize_per_channel_affine(w, scales.to(at::kFloat),
                                                at::zeros({w.size(1)}, at::kInt), 1, -127, 127);
  };
  auto activation = [](const at::Tensor& t, const at::Tensor& range) {
    const double s = range.abs().max().item<double>() / 127;
    return at::fake_quantize_per_tensor_affine(t, static_cast<float>(s), 0, -127, 127);
  };
  const at::Tensor b1 = reference.value("b1")->initializer();
  const at::Tensor b2 = reference.value("b2")->initializer();
  const at::Tensor float_a = at::gelu(at::matmul(x, reference.value("w1")->initializer()) + b1);
  const at::Tensor a = at::gelu(at::matmul(activation(x, x), weight("w1")) + b1);
  const at::Tensor want = at::matmul(activation(a, float_a), weight("w2")) + b2;
  EXPECT_TRUE(at::allclose(y, want, 1e-4, 1e-4)) << (y - want).abs().max().item<double>();
}

}  // namespace
}  // namespace qforge::testing
