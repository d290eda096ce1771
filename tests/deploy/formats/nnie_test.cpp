#include "deploy/formats/nnie.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "deploy/formats/format_tables.h"

namespace qforge::deploy::formats {
namespace {

using testing::expectErrorWith;

TensorEncoding logGrid(const std::string& tensor, double data_max) {
  TensorEncoding e;
  e.tensor = tensor;
  e.affine = false;
  e.state["data_max"] = {data_max};
  return e;
}

// in -> Conv(conv1) -> c -> Relu(relu1) -> r -> Resize(up) -> u -> Add(add1, u, r) -> o
//                                            r -> Conv(dw, group 2) -> d
DeployModel nnieModel() {
  DeployModel m;
  Graph& g = m.graph;
  Value* in = g.addValue("in");
  g.addInput(in);
  Value* w = g.addInitializer("w", at::ones({2, 1, 1, 1}));
  Node* conv = g.addNode("Conv", {in, w}, {"c"}, "conv1");
  Node* relu = g.addNode("Relu", {conv->output(0)}, {"r"}, "relu1");
  Value* scales = g.addInitializer("scales", at::full({4}, 2.0));
  Node* up = g.addNode("Resize", {relu->output(0), nullptr, scales}, {"u"}, "up");
  Node* add = g.addNode("Add", {up->output(0), relu->output(0)}, {"o"}, "add1");
  Value* dw_w = g.addInitializer("dw_w", at::ones({2, 1, 1, 1}));
  Node* dw = g.addNode("Conv", {relu->output(0), dw_w}, {"d"}, "dw");
  dw->attributes.set(Attribute::makeInt("group", 2));
  g.addOutput(add->output(0));
  g.addOutput(dw->output(0));
  m.table.tensors = {logGrid("in", 4.0), logGrid("r", 2.0), logGrid("u", 8.0)};
  return m;
}

TEST(NnieFormat, GfpqParamDictGolden) {
  // Per layer, the data_max of each quantized input; Relu is excluded, the grouped conv is
  // skipped, the Resize lists its data input and repeats as up_permute_0.
  const std::string expected = R"({
    "nnie": {
        "gfpq_param_dict": {
            "conv1": [
                4.0
            ],
            "up": [
                2.0
            ],
            "up_permute_0": [
                2.0
            ],
            "add1": [
                8.0,
                2.0
            ]
        }
    }
}
)";
  EXPECT_EQ(nnieGfpqParams(nnieModel()), expected);
}

TEST(NnieFormat, RoundTripThroughTheGraph) {
  const DeployModel m = nnieModel();
  const QuantTable back = parseNnieGfpqParams(nnieGfpqParams(m), "g.json", m.graph);
  ASSERT_EQ(back.tensors.size(), 3u);
  for (const TensorEncoding& original : m.table.tensors) {
    const TensorEncoding* e = back.find(original.tensor);
    ASSERT_NE(e, nullptr) << original.tensor;
    EXPECT_FALSE(e->affine);
    EXPECT_EQ(e->state.at("data_max"), original.state.at("data_max"));
  }
}

TEST(NnieFormat, RefusalsAndMalformedFiles) {
  DeployModel affine = nnieModel();
  affine.table.tensors[1] = testing::symmetricActivation("r");
  expectErrorWith([&] { nnieGfpqParams(affine); }, {"'r'", "data_max"});
  const DeployModel m = nnieModel();
  expectErrorWith(
      [&] {
        parseNnieGfpqParams(R"({"nnie": {"gfpq_param_dict": {"nope": [1.0]}}})", "g.json", m.graph);
      },
      {"g.json", "nnie.gfpq_param_dict.nope", "no such layer"});
  expectErrorWith(
      [&] {
        parseNnieGfpqParams(R"({"nnie": {"gfpq_param_dict": {"add1": [1.0]}}})", "g.json", m.graph);
      },
      {"g.json", "nnie.gfpq_param_dict.add1", "1 values for 2"});
  expectErrorWith(
      [] { parseNnieGfpqDict(R"({"nnie": {"gfpq_param_dict": {"a": [-1]}}})", "g.json"); },
      {"g.json", "nnie.gfpq_param_dict.a[0]", "positive"});
}

}  // namespace
}  // namespace qforge::deploy::formats
