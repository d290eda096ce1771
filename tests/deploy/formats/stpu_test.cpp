#include "deploy/formats/stpu.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

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
