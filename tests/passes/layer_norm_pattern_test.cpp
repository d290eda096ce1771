// The decomposed LayerNormalization (torch.onnx before opset 17): which subgraphs match, what
// they compute (ATen's layer_norm), and how placement treats them: as the backend treats the
// LayerNormalization op, one unit with quantizers only at its edges, or float; never a quantizer
// on the variance, which rounded small variances to zero and divided by zero.
#include "passes/layer_norm_pattern.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "exec/executor.h"
#include "passes/quant_units.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

struct NormSpec {
  bool affine = true;
  bool square_by_mul = false;  // Mul(d, d) instead of Pow(d, 2)
  double exponent = 2.0;
  std::vector<int64_t> second_axes = {-1};
};

// x[2,3,8] -> ReduceMean(-1) -> Sub -> Pow 2 -> ReduceMean -> Add 1e-5 -> Sqrt -> Div
//          [-> Mul gamma -> Add beta] -> y, every op named after its role.
Graph decomposedLayerNorm(const NormSpec& spec = {}) {
  at::manual_seed(3);
  Graph g;
  Value* x = g.addValue("x");
  x->type =
      TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(3), Dim::known(8)}};
  g.addInput(x);
  Node* mean = g.addNode("ReduceMean", {x}, {"mean"}, "mean");
  mean->attributes.set(Attribute::makeInts("axes", {-1}));
  Node* sub = g.addNode("Sub", {x, mean->output(0)}, {"d"}, "centre");
  Node* square =
      spec.square_by_mul
          ? g.addNode("Mul", {sub->output(0), sub->output(0)}, {"d2"}, "square")
          : g.addNode("Pow",
                      {sub->output(0), g.addInitializer("two", at::scalar_tensor(spec.exponent))},
                      {"d2"}, "square");
  Node* var = g.addNode("ReduceMean", {square->output(0)}, {"var"}, "variance");
  var->attributes.set(Attribute::makeInts("axes", spec.second_axes));
  Node* add = g.addNode("Add", {var->output(0), g.addInitializer("eps", at::scalar_tensor(1e-5f))},
                        {"var_eps"}, "add_eps");
  Node* sqrt = g.addNode("Sqrt", {add->output(0)}, {"std"}, "sqrt");
  Node* div = g.addNode("Div", {sub->output(0), sqrt->output(0)}, {"n"}, "normalize");
  Value* y = div->output(0);
  if (spec.affine) {
    Node* mul =
        g.addNode("Mul", {y, g.addInitializer("gamma", at::rand({8}) + 0.5)}, {"scaled"}, "scale");
    y = g.addNode("Add", {mul->output(0), g.addInitializer("beta", at::randn({8}))}, {"y"}, "bias")
            ->output(0);
  }
  g.addOutput(y);
  return g;
}

TEST(LayerNormPattern, TorchsDecompositionMatchesWithItsAffinePart) {
  Graph g = decomposedLayerNorm();
  EXPECT_EQ(namesOf(passes::matchDecomposedLayerNorm(g, g.findNode("mean"))),
            (std::vector<std::string>{"mean", "centre", "square", "variance", "add_eps", "sqrt",
                                      "normalize", "scale", "bias"}));
  // Only the first ReduceMean starts one.
  EXPECT_TRUE(passes::matchDecomposedLayerNorm(g, g.findNode("variance")).empty());
  EXPECT_TRUE(passes::matchDecomposedLayerNorm(g, g.findNode("centre")).empty());
}

TEST(LayerNormPattern, ASquareByMulAndNoAffinePartMatchToo) {
  Graph g = decomposedLayerNorm({/*affine=*/false, /*square_by_mul=*/true});
  EXPECT_EQ(namesOf(passes::matchDecomposedLayerNorm(g, g.findNode("mean"))),
            (std::vector<std::string>{"mean", "centre", "square", "variance", "add_eps", "sqrt",
                                      "normalize"}));
}

TEST(LayerNormPattern, WhatIsNotALayerNormDoesNotMatch) {
  {
    Graph g = decomposedLayerNorm({true, false, /*exponent=*/3.0});
    EXPECT_TRUE(passes::matchDecomposedLayerNorm(g, g.findNode("mean")).empty()) << "cube";
  }
  {
    Graph g = decomposedLayerNorm({true, false, 2.0, /*second_axes=*/{-2}});
    EXPECT_TRUE(passes::matchDecomposedLayerNorm(g, g.findNode("mean")).empty()) << "axes";
  }
  {
    Graph g = decomposedLayerNorm();
    g.addOutput(g.value("var"));  // the variance is read outside the pattern
    EXPECT_TRUE(passes::matchDecomposedLayerNorm(g, g.findNode("mean")).empty()) << "output";
  }
  {
    Graph g = decomposedLayerNorm();
    g.addOutput(g.addNode("Relu", {g.value("d")}, {"r"}, "third_reader")->output(0));
    EXPECT_TRUE(passes::matchDecomposedLayerNorm(g, g.findNode("mean")).empty()) << "reader";
  }
}

TEST(LayerNormPattern, TheMatchedSubgraphComputesLayerNorm) {
  Graph g = decomposedLayerNorm();
  const at::Tensor gamma = g.value("gamma")->initializer();
  const at::Tensor beta = g.value("beta")->initializer();
  const at::Tensor x = at::randn({2, 3, 8});
  const at::Tensor y = Executor(g).run({{"x", x}}).at("y");
  EXPECT_TRUE(at::allclose(y, at::layer_norm(x, {8}, gamma, beta, 1e-5), 1e-5, 1e-5));
}

// QNN-like output quantization, with or without LayerNormalization among its ops.
backends::BackendConfig layerNormBackend(bool layer_norm_quantizable) {
  nlohmann::json ops = {{"Add", "quantizable"},        {"Mul", "quantizable"},
                        {"Sub", "quantizable"},        {"Div", "quantizable"},
                        {"Pow", "quantizable"},        {"Sqrt", "quantizable"},
                        {"ReduceMean", "quantizable"}, {"LayerNormalization", "never"}};
  if (layer_norm_quantizable) ops["LayerNormalization"] = "quantizable";
  return outputQuantizingBackend(ops);
}

TEST(LayerNormPattern, PlacementTreatsItAsTheBackendTreatsLayerNormalization) {
  Graph g = decomposedLayerNorm();
  const auto units = passes::findQuantUnits(g, layerNormBackend(true));
  ASSERT_EQ(units.size(), 1u);
  EXPECT_EQ(units[0].ops(), "ReduceMean+Sub+Pow+ReduceMean+Add+Sqrt+Div+Mul+Add");
  EXPECT_EQ(units[0].pattern, "LayerNormalization, decomposed");
  EXPECT_EQ(units[0].output->name(), "y");
  ASSERT_EQ(units[0].activation_inputs.size(), 2u);  // x, read by the mean and the centring
  for (const Use& in : units[0].activation_inputs)
    EXPECT_EQ(in.node->input(in.index)->name(), "x");
  EXPECT_TRUE(units[0].weights.empty());

  // Without LayerNormalization the ops stay float, although Add, Mul, Div... are quantizable:
  // listed as float, or not listed at all (unlike an activation, never run as its pieces).
  EXPECT_TRUE(passes::findQuantUnits(g, layerNormBackend(false)).empty());
  backends::BackendConfig unlisted = layerNormBackend(false);
  unlisted.ops.erase("LayerNormalization");
  EXPECT_TRUE(passes::findQuantUnits(g, unlisted).empty());
}

// Rows of very small variance (2e-3 spread) beside rows of spread 10: a quantizer on the
// variance rounded the small ones to 0 and the division gave inf and NaN. As one unit the model
// computes FQ(layer_norm(FQ(x))), with MinMax ranges of the float values.
TEST(LayerNormPattern, ARowOfTinyVarianceStaysFiniteAndExact) {
  auto m = passes::prepare(decomposedLayerNorm(), layerNormBackend(true));
  at::Tensor x = at::randn({2, 3, 8}) * 10;
  x.select(1, 1).mul_(2e-4);
  calibrateOn(*m, x);
  const at::Tensor y = m->executor().run({{"x", x}}).at("y");
  EXPECT_TRUE(at::isfinite(y).all().item<bool>());
  EXPECT_EQ(m->points().size(), 2u);  // the input and the output, nothing inside

  Graph reference = decomposedLayerNorm();
  const auto fq = asymmetricFakeQuant;
  const at::Tensor gamma = reference.value("gamma")->initializer();
  const at::Tensor beta = reference.value("beta")->initializer();
  const at::Tensor float_y = at::layer_norm(x, {8}, gamma, beta, 1e-5);
  const at::Tensor want = fq(at::layer_norm(fq(x, x), {8}, gamma, beta, 1e-5), float_y);
  const double step = asymmetricScale(float_y);
  // At most one step apart where float rounding lands on the other side of a half step.
  EXPECT_LE((y - want).abs().max().item<double>(), step * 1.001);
  EXPECT_GT(at::eq(y, want).to(at::kFloat).mean().item<double>(), 0.99);
}

}  // namespace
}  // namespace qforge::testing
