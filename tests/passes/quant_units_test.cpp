// Quantization units: fusion patterns, the sole-reader rule, activation inputs and weight axes.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "passes/quant_units.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

using passes::findQuantUnits;

TEST(QuantUnits, LongestMatchingPatternFormsTheUnit) {
  Graph g = convReluConv();
  auto units = findQuantUnits(g, tinyBackend());
  ASSERT_EQ(units.size(), 2u);
  EXPECT_EQ(units[0].ops(), "Conv+Relu");
  EXPECT_EQ(units[0].pattern, "Conv, Relu?");
  EXPECT_EQ(units[0].output->name(), "r");
  ASSERT_EQ(units[0].activation_inputs.size(), 1u);
  EXPECT_EQ(units[0].activation_inputs[0].index, 0u);
  ASSERT_EQ(units[0].weights.size(), 1u);
  EXPECT_EQ(units[0].weights[0].index, 1u);
  EXPECT_EQ(units[0].bias.index, 2u);
  EXPECT_EQ(units[1].ops(), "Conv");
  EXPECT_EQ(units[1].bias.node, nullptr);
}

TEST(QuantUnits, AnOutputWithASecondReaderIsNotFused) {
  Graph g = convReluConv();
  g.addOutput(g.value("c1"));  // conv1's output is now also a graph output
  auto units = findQuantUnits(g, tinyBackend());
  ASSERT_EQ(units.size(), 2u);
  EXPECT_EQ(units[0].ops(), "Conv");  // Relu stays outside
}

TEST(QuantUnits, ResidualAddJoinsTheConvAndItsOtherInputBecomesAUnitInput) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* c = g.addNode("Conv", {x, g.addInitializer("w", at::randn({2, 2, 1, 1}))}, {"c"}, "conv");
  Node* add = g.addNode("Add", {c->output(0), x}, {"a"}, "add");
  Node* relu = g.addNode("Relu", {add->output(0)}, {"y"}, "relu");
  g.addOutput(relu->output(0));
  auto units =
      findQuantUnits(g, tinyBackend({{"fusions", {{"Conv", "Add", "Relu?"}, {"Conv", "Relu?"}}}}));
  ASSERT_EQ(units.size(), 1u);
  EXPECT_EQ(units[0].ops(), "Conv+Add+Relu");
  ASSERT_EQ(units[0].activation_inputs.size(), 2u);
  EXPECT_EQ(units[0].activation_inputs[0].node->name(), "conv");
  EXPECT_EQ(units[0].activation_inputs[1].node->name(), "add");
  EXPECT_EQ(units[0].activation_inputs[1].index, 1u);
}

TEST(QuantUnits, UnlistedOpsFormNoUnitUnlessTheConfigAddsThem) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* m = g.addNode("Mul", {x, x}, {"y"}, "mul");
  g.addOutput(m->output(0));
  EXPECT_TRUE(findQuantUnits(g, tinyBackend()).empty());
  auto units = findQuantUnits(g, tinyBackend(), {"Mul"});
  ASSERT_EQ(units.size(), 1u);
  EXPECT_EQ(units[0].activation_inputs.size(), 2u);  // both operands are activations
}

TEST(QuantUnits, NeverRoleWinsOverExtraQuantizable) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* s = g.addNode("Shape", {x}, {"y"}, "shape");
  g.addOutput(s->output(0));
  auto units = findQuantUnits(g, tinyBackend({{"ops", {{"Shape", "never"}}}}), {"Shape"});
  EXPECT_TRUE(units.empty());
}

TEST(QuantUnits, WeightChannelAxisFollowsTheOpsLayout) {
  Graph g;
  Value* x = g.addValue("x");
  const at::Tensor w4 = at::zeros({4, 2, 3, 3});
  const at::Tensor w2 = at::zeros({8, 4});
  Node* conv = g.addNode("Conv", {x, g.addInitializer("a", w4)}, {"c"});
  Node* deconv = g.addNode("ConvTranspose", {x, g.addInitializer("b", w4)}, {"d"});
  Node* gemm = g.addNode("Gemm", {x, g.addInitializer("e", w2)}, {"g"});
  Node* gemm_t = g.addNode("Gemm", {x, g.addInitializer("f", w2)}, {"h"});
  gemm_t->attributes.set(Attribute::makeInt("transB", 1));
  Node* matmul = g.addNode("MatMul", {x, g.addInitializer("m", at::zeros({2, 8, 4}))}, {"k"});
  EXPECT_EQ(passes::weightChannelAxis(*conv, 1, w4), 0);
  EXPECT_EQ(passes::weightChannelAxis(*deconv, 1, w4), 1);
  EXPECT_EQ(passes::weightChannelAxis(*gemm, 1, w2), 1);    // B is [K, N]
  EXPECT_EQ(passes::weightChannelAxis(*gemm_t, 1, w2), 0);  // B is [N, K]
  EXPECT_EQ(passes::weightChannelAxis(*matmul, 1, at::zeros({2, 8, 4})), 2);
  EXPECT_EQ(passes::weightChannelAxis(*conv, 1, at::zeros({4})), -1);
}

}  // namespace
}  // namespace qforge::testing
