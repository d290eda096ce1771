#include "deploy/formats/stpu.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "deploy/formats/format_support.h"
#include "deploy/formats/format_tables.h"

namespace qforge::deploy::formats {
namespace {

using testing::expectErrorWith;

// in -> Conv(conv1, w[2,4,1,1], b) -> c -> Relu(relu1) -> r
DeployModel stpuModel() {
  DeployModel m;
  Graph& g = m.graph;
  Value* in = g.addValue("in");
  g.addInput(in);
  Value* w = g.addInitializer("w", at::ones({2, 4, 1, 1}));
  Value* b = g.addInitializer("b", at::zeros({2}));
  Node* conv = g.addNode("Conv", {in, w, b}, {"c"}, "conv1");
  Node* relu = g.addNode("Relu", {conv->output(0)}, {"r"}, "relu1");
  g.addOutput(relu->output(0));
  m.table.tensors = {
      testing::symmetricActivation("in", 0.015625),
      testing::encoding("w", TensorRole::Weight, -127, 127, {0.0078125}, {0}),
      testing::symmetricActivation("r", 0.03125),
  };
  return m;
}

TEST(StpuFormat, MinMaxGolden) {
  // min/max = -/+127 * scale; weights keyed "<node>_weights"; bias alpha = s_w * s_in = 2^-13;
  // the Relu's range moves to the Conv output with
  // emin = e(max(sqrt(4) * 1.984375 * 0.9921875, 3.96875)) - 10 = (1 + 127) - 10 = 118.
  const std::string expected = R"({
    "in": {
        "min": -1.984375,
        "max": 1.984375
    },
    "conv1_weights": {
        "min": -0.9921875,
        "max": 0.9921875
    },
    "r": {
        "min": -3.96875,
        "max": 3.96875
    },
    "conv1_bias": {
        "alpha": 0.0001220703125,
        "zero_point": 0
    },
    "c": {
        "min": -3.96875,
        "max": 3.96875,
        "emin": 118
    }
}
)";
  EXPECT_EQ(stpuMinMax(stpuModel()), expected);
}

TEST(StpuFormat, ExponentMatchesIeeeSingle) {
  EXPECT_EQ(stpuExponent(0.0), 0);
  EXPECT_EQ(stpuExponent(1.0), 127);
  EXPECT_EQ(stpuExponent(3.96875), 128);
  EXPECT_EQ(stpuExponent(-0.5), 126);
  EXPECT_EQ(stpuExponent(1e-40), 1);
  EXPECT_EQ(stpuExponent(1e300), 254);
}

TEST(StpuFormat, RoundTripThroughTheGraph) {
  const DeployModel m = stpuModel();
  const QuantTable back = parseStpuMinMax(stpuMinMax(m), "s.json", m.graph);
  for (const TensorEncoding& original : m.table.tensors) {
    const TensorEncoding* e = back.find(original.tensor);
    ASSERT_NE(e, nullptr) << original.tensor;
    testing::expectSameEncoding(*e, original);
  }
}

// in -> ConvTranspose(deconv1, wt[2,2,1,1], bt) -> d -> PRelu(prelu1, slope) -> p
//    -> MatMul(mm1, m[2,2]) -> y: every op the table gives a weight, one with a bias.
DeployModel weightedLayersModel() {
  DeployModel m;
  Graph& g = m.graph;
  Value* in = g.addValue("in");
  g.addInput(in);
  Node* deconv = g.addNode(
      "ConvTranspose",
      {in, g.addInitializer("wt", at::ones({2, 2, 1, 1})), g.addInitializer("bt", at::zeros({2}))},
      {"d"}, "deconv1");
  Node* prelu =
      g.addNode("PRelu", {deconv->output(0), g.addInitializer("slope", at::ones({2, 1, 1}))}, {"p"},
                "prelu1");
  Node* mm = g.addNode("MatMul", {prelu->output(0), g.addInitializer("m", at::ones({2, 2}))}, {"y"},
                       "mm1");
  g.addOutput(mm->output(0));
  m.table.tensors = {
      testing::symmetricActivation("in", 0.015625),
      testing::encoding("wt", TensorRole::Weight, -127, 127, {0.0078125}, {0}),
      testing::symmetricActivation("d", 0.03125),
      testing::encoding("slope", TensorRole::Weight, -127, 127, {0.00390625}, {0}),
      testing::symmetricActivation("p", 0.03125),
      testing::encoding("m", TensorRole::Weight, -127, 127, {0.0078125}, {0}),
      testing::symmetricActivation("y", 0.0625),
  };
  return m;
}

TEST(StpuFormat, EveryWeightOfTheOpTableIsItsLayersWeightsAndEveryBiasIsDerived) {
  // As deploy_stpu.py keys LAYER_HAS_WEIGHT (Conv, ConvTranspose, Gemm, PRelu) and writes the
  // bias of Conv, ConvTranspose and Gemm; MatMul's constant operand is a weight like Gemm's.
  const DeployModel m = weightedLayersModel();
  const OrderedJson params = parseOrderedJson(stpuMinMax(m), "stpu");
  const std::vector<std::pair<std::string, double>> weights = {{"deconv1_weights", 127 * 0.0078125},
                                                               {"prelu1_weights", 127 * 0.00390625},
                                                               {"mm1_weights", 127 * 0.0078125}};
  for (const auto& [key, amax] : weights) {
    ASSERT_TRUE(params.contains(key)) << key;
    EXPECT_EQ(params.at(key).at("min").get<double>(), -amax) << key;
    EXPECT_EQ(params.at(key).at("max").get<double>(), amax) << key;
  }
  // alpha = s_w * s_in = 2^-7 * 2^-6.
  ASSERT_TRUE(params.contains("deconv1_bias"));
  EXPECT_EQ(params.at("deconv1_bias").at("alpha").get<double>(), 0.0078125 * 0.015625);
  EXPECT_FALSE(params.contains("prelu1_bias"));
  EXPECT_FALSE(params.contains("mm1_bias"));

  const QuantTable back = parseStpuMinMax(stpuMinMax(m), "s.json", m.graph);
  for (const TensorEncoding& original : m.table.tensors) {
    const TensorEncoding* e = back.find(original.tensor);
    ASSERT_NE(e, nullptr) << original.tensor;
    testing::expectSameEncoding(*e, original);
  }
  // A layer without weights has no "<node>_weights", even with a second input.
  expectErrorWith(
      [&] {
        parseStpuMinMax(R"({"relu1_weights": {"min": -1, "max": 1}})", "s.json", stpuModel().graph);
      },
      {"s.json", "relu1_weights", "no such layer"});
  DeployModel add = stpuModel();
  add.graph.addNode("Add", {add.graph.value("r"), add.graph.value("in")}, {"sum"}, "add1");
  expectErrorWith(
      [&] { parseStpuMinMax(R"({"add1_weights": {"min": -1, "max": 1}})", "s.json", add.graph); },
      {"s.json", "add1_weights", "no such layer"});
}

TEST(StpuFormat, RefusalsAndMalformedFiles) {
  DeployModel asym = stpuModel();
  asym.table.tensors[0] = testing::asymmetricActivation("in");
  expectErrorWith([&] { stpuMinMax(asym); }, {"'in'", "zero point 16"});
  const DeployModel m = stpuModel();
  expectErrorWith([&] { parseStpuMinMax(R"({"in": {"min": -1}})", "s.json", m.graph); },
                  {"s.json", "in.max", "missing"});
  expectErrorWith([&] { parseStpuMinMax(R"({"in": {"min": -1, "max": 2}})", "s.json", m.graph); },
                  {"s.json", "'in'", "symmetric"});
  expectErrorWith(
      [&] { parseStpuMinMax(R"({"x_weights": {"min": -1, "max": 1}})", "s.json", m.graph); },
      {"s.json", "x_weights", "no such layer"});
}

}  // namespace
}  // namespace qforge::deploy::formats
