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

}  // namespace
}  // namespace qforge::testing
