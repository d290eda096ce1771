// The op table's facts per op family, asked about nodes through exec/op_traits.h. The weight
// layouts are checked against PyTorch: doubling one slice of the weight along the reported axis
// must change exactly the output channels that slice feeds, and the reported channel count must
// be the size of PyTorch's output. An op the table does not know has no facts.
#include "exec/op_traits.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/ort_emulation.h"

namespace qforge {
namespace {

using Layer = std::function<at::Tensor(const at::Tensor& weight)>;

// A graph at `opset` holding one `op_type` node that reads "x" and, in slot 1, the initializer
// `weight` (when defined).
struct OneNode {
  Graph graph;
  Node* node = nullptr;
  const OpInfo* info = nullptr;
};

void makeNode(OneNode& g, const std::string& op_type, const at::Tensor& weight,
              const std::vector<Attribute>& attributes = {}, int64_t opset = 13,
              const std::string& domain = "") {
  g.graph.model.opset_imports[""] = opset;
  std::vector<Value*> inputs{g.graph.addValue("x")};
  if (weight.defined()) inputs.push_back(g.graph.addInitializer("w", weight));
  g.node = g.graph.addNode(op_type, inputs, {"y"}, "node", domain);
  for (const Attribute& a : attributes)
    g.node->attributes.set(a);
  g.info = opInfoFor(g.graph, *g.node);
}

// The output channels (indices along `channel_dim` of layer(weight)) that change when slice
// `index` of the weight along `axis` is doubled.
std::vector<int64_t> channelsMovedBy(const Layer& layer, const at::Tensor& weight, int64_t axis,
                                     int64_t index, int64_t channel_dim) {
  at::Tensor scaled = weight.clone();
  scaled.select(axis, index).mul_(2);
  const at::Tensor diff = (layer(scaled) - layer(weight)).abs().movedim(channel_dim, 0);
  const at::Tensor moved = diff.reshape({diff.size(0), -1}).amax(1) > 1e-5;
  std::vector<int64_t> channels;
  for (int64_t c = 0; c < moved.size(0); ++c) {
    if (moved[c].item<bool>()) channels.push_back(c);
  }
  return channels;
}

// Positive inputs, so that no product vanishes by accident.
at::Tensor positive(at::IntArrayRef shape) {
  return at::rand(shape, at::kDouble) + 0.5;
}

TEST(OpTraits, ConvOutputChannelsAreWeightAxis0) {
  const at::Tensor w = positive({4, 2, 3, 3}), x = positive({1, 2, 5, 5});
  OneNode g;
  makeNode(g, "Conv", w);
  ASSERT_NE(g.info, nullptr);
  EXPECT_TRUE(isWeightInput(g.info, 1));
  EXPECT_FALSE(isWeightInput(g.info, 0));
  EXPECT_TRUE(isWeightedOp(g.info));
  const int64_t axis = weightChannelAxis(g.info, *g.node, 1, w);
  ASSERT_EQ(axis, 0);
  const Layer conv = [&](const at::Tensor& weight) { return at::conv2d(x, weight); };
  EXPECT_EQ(weightOutputChannels(g.info, *g.node, w), conv(w).size(1));
  EXPECT_EQ(channelsMovedBy(conv, w, axis, 2, 1), std::vector<int64_t>{2});
}

TEST(OpTraits, GroupedConvTransposeHasGroupTimesAxis1Channels) {
  // Weight [C_in = 4, C_out / group = 3, 2, 2] with group 2: 6 output channels; slice j of axis 1
  // feeds output channel j of each group.
  const at::Tensor w = positive({4, 3, 2, 2}), x = positive({1, 4, 3, 3});
  OneNode g;
  makeNode(g, "ConvTranspose", w, {Attribute::makeInt("group", 2)});
  ASSERT_NE(g.info, nullptr);
  const int64_t axis = weightChannelAxis(g.info, *g.node, 1, w);
  ASSERT_EQ(axis, 1);
  const Layer deconv = [&](const at::Tensor& weight) {
    return at::conv_transpose2d(x, weight, /*bias=*/{}, /*stride=*/{1, 1}, /*padding=*/{0, 0},
                                /*output_padding=*/{0, 0}, /*groups=*/2);
  };
  EXPECT_EQ(weightOutputChannels(g.info, *g.node, w), 6);
  EXPECT_EQ(deconv(w).size(1), 6);
  EXPECT_EQ(channelsMovedBy(deconv, w, axis, 1, 1), (std::vector<int64_t>{1, 4}));

  OneNode ungrouped;
  makeNode(ungrouped, "ConvTranspose", w);
  EXPECT_EQ(weightOutputChannels(ungrouped.info, *ungrouped.node, w), 3);
}

TEST(OpTraits, GemmOutputChannelsFollowTransB) {
  const at::Tensor a = positive({2, 5});
  for (const int64_t trans_b : {0, 1}) {
    SCOPED_TRACE(trans_b);
    const at::Tensor b = trans_b ? positive({3, 5}) : positive({5, 3});  // N = 3 columns out
    OneNode g;
    makeNode(g, "Gemm", b, {Attribute::makeInt("transB", trans_b)});
    ASSERT_NE(g.info, nullptr);
    const int64_t axis = weightChannelAxis(g.info, *g.node, 1, b);
    EXPECT_EQ(axis, trans_b ? 0 : 1);
    const Layer gemm = [&](const at::Tensor& w) { return at::matmul(a, trans_b ? w.t() : w); };
    EXPECT_EQ(weightOutputChannels(g.info, *g.node, b), gemm(b).size(1));
    EXPECT_EQ(channelsMovedBy(gemm, b, axis, 1, 1), std::vector<int64_t>{1});
    EXPECT_EQ(weightChannelAxis(g.info, *g.node, 2, b), -1);  // C is the bias, not a weight
  }
}

TEST(OpTraits, MatMulOutputChannelsAreTheLastAxis) {
  const at::Tensor a = positive({2, 4, 5}), b = positive({2, 5, 3});
  OneNode g;
  makeNode(g, "MatMul", b);
  ASSERT_NE(g.info, nullptr);
  const int64_t axis = weightChannelAxis(g.info, *g.node, 1, b);
  ASSERT_EQ(axis, 2);
  const Layer matmul = [&](const at::Tensor& w) { return at::matmul(a, w); };
  EXPECT_EQ(weightOutputChannels(g.info, *g.node, b), matmul(b).size(-1));
  EXPECT_EQ(channelsMovedBy(matmul, b, axis, 0, 2), std::vector<int64_t>{0});
  // A 1-D right operand has no channel axis.
  EXPECT_EQ(weightChannelAxis(g.info, *g.node, 1, positive({5})), -1);
  EXPECT_EQ(weightOutputChannels(g.info, *g.node, positive({5})), -1);
}

TEST(OpTraits, PReluSlopeIsAWeightWithoutChannels) {
  const at::Tensor slope = positive({3, 1, 1});
  OneNode g;
  makeNode(g, "PRelu", slope);
  ASSERT_NE(g.info, nullptr);
  EXPECT_TRUE(isWeightInput(g.info, 1));
  EXPECT_FALSE(isWeightedOp(g.info));
  EXPECT_EQ(weightChannelAxis(g.info, *g.node, 1, slope), -1);
  EXPECT_TRUE(g.info->combines_activations);
}

// The boolean facts of one op at `opset`, as op_traits answers them for a node.
std::map<std::string, bool> facts(const std::string& op_type, int64_t opset = 13) {
  OneNode g;
  makeNode(g, op_type, at::Tensor(), {}, opset);
  return {{"moves_data_only", movesDataOnly(g.graph, *g.node)},
          {"layout_only", isLayoutOnly(g.graph, *g.node)},
          {"moves_int8", movesInt8(g.graph, *g.node)},
          {"absorbs_batchnorm", absorbsBatchNorm(g.graph, *g.node)},
          {"combines_activations", combinesActivations(g.graph, *g.node)},
          {"shape_computation", isShapeComputation(g.graph, *g.node)}};
}

std::map<std::string, bool> only(std::vector<std::string> true_facts) {
  std::map<std::string, bool> all = facts("Relu");  // none of them
  for (auto& [name, value] : all)
    value = std::find(true_facts.begin(), true_facts.end(), name) != true_facts.end();
  return all;
}

TEST(OpTraits, BooleanFactsPerFamily) {
  EXPECT_EQ(facts("Relu"), only({}));
  EXPECT_EQ(facts("Conv"), only({"absorbs_batchnorm"}));
  EXPECT_EQ(facts("Gemm"), only({"absorbs_batchnorm"}));
  EXPECT_EQ(facts("MatMul"), only({"combines_activations"}));
  EXPECT_EQ(facts("Add"), only({"combines_activations"}));
  EXPECT_EQ(facts("Concat"), only({"moves_data_only", "combines_activations"}));
  for (const char* op : {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity"}) {
    EXPECT_EQ(facts(op), only({"moves_data_only", "layout_only", "moves_int8"})) << op;
  }
  // Inference Dropout is Identity, but ONNX types it float only.
  EXPECT_EQ(facts("Dropout"), only({"moves_data_only", "layout_only"}));
  // MaxPool selects values; ONNX gives it 8-bit data from opset 12.
  EXPECT_EQ(facts("MaxPool", 11), only({"moves_data_only"}));
  EXPECT_EQ(facts("MaxPool", 12), only({"moves_data_only", "moves_int8"}));
  for (const char* op : {"Gather", "Slice", "Split", "GlobalMaxPool", "ReduceMax"}) {
    EXPECT_EQ(facts(op), only({"moves_data_only"})) << op;
  }
  for (const char* op : {"Shape", "Constant", "ConstantOfShape", "Cast"}) {
    EXPECT_EQ(facts(op), only({"shape_computation"})) << op;
  }
  EXPECT_EQ(facts("AveragePool"), only({}));
}

OutputSign signOf(const std::string& op_type, const std::vector<Attribute>& attributes = {},
                  int64_t opset = 13) {
  OneNode g;
  makeNode(g, op_type, at::Tensor(), attributes, opset);
  return outputSign(g.info, *g.node);
}

TEST(OpTraits, OutputSignPerFamily) {
  for (const char* op : {"Relu", "Sigmoid", "Softmax"})
    EXPECT_EQ(signOf(op), OutputSign::NonNegative) << op;
  EXPECT_EQ(signOf("Add"), OutputSign::OfAllInputs);
  for (const char* op : {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Flatten",
                         "Reshape", "Transpose"}) {
    EXPECT_EQ(signOf(op), OutputSign::OfDataInput) << op;
  }
  for (const char* op : {"Tanh", "Sub", "Conv", "LeakyRelu", "LogSoftmax"})
    EXPECT_EQ(signOf(op), OutputSign::Unknown) << op;
  // Resize keeps the sign except in cubic mode, which overshoots.
  EXPECT_EQ(signOf("Resize", {Attribute::makeString("mode", "linear")}), OutputSign::OfDataInput);
  EXPECT_EQ(signOf("Resize", {Attribute::makeString("mode", "cubic")}), OutputSign::Unknown);
  EXPECT_EQ(signOf("Upsample", {}, 9), OutputSign::OfDataInput);
}

TEST(OpTraits, ClipSignFollowsItsLowerBound) {
  for (const double low : {0.0, -1.0}) {
    OneNode g;
    g.graph.model.opset_imports[""] = 13;
    Node* clip = g.graph.addNode(
        "Clip", {g.graph.addValue("x"), g.graph.addInitializer("low", at::full({}, low))}, {"y"});
    EXPECT_EQ(outputSign(opInfoFor(g.graph, *clip), *clip),
              low >= 0 ? OutputSign::NonNegative : OutputSign::Unknown);
  }
  // Opsets 6-10 give the bound as an attribute; without one, Clip may output anything.
  EXPECT_EQ(signOf("Clip", {Attribute::makeFloat("min", 0.0f)}, 6), OutputSign::NonNegative);
  EXPECT_EQ(signOf("Clip", {Attribute::makeFloat("min", -6.0f)}, 6), OutputSign::Unknown);
  EXPECT_EQ(signOf("Clip", {}, 6), OutputSign::Unknown);
}

TEST(OpTraits, UnknownOpsHaveNoFacts) {
  const at::Tensor w = positive({4, 2, 3, 3});
  OneNode custom, unknown, out_of_range;
  makeNode(custom, "Conv", w, {}, 13, "com.example");
  makeNode(unknown, "NoSuchOp", w);
  makeNode(out_of_range, "Resize", w, {}, 19);  // the table covers Resize 10-17
  for (const OneNode* g : {&custom, &unknown, &out_of_range}) {
    SCOPED_TRACE(g->node->describe());
    EXPECT_EQ(g->info, nullptr);
    EXPECT_FALSE(isWeightInput(g->info, 1));
    EXPECT_FALSE(isWeightedOp(g->info));
    EXPECT_EQ(weightChannelAxis(g->info, *g->node, 1, w), -1);
    EXPECT_EQ(weightOutputChannels(g->info, *g->node, w), -1);
    EXPECT_EQ(outputSign(g->info, *g->node), OutputSign::Unknown);
    EXPECT_FALSE(movesDataOnly(g->graph, *g->node));
    EXPECT_FALSE(isLayoutOnly(g->graph, *g->node));
    EXPECT_FALSE(movesInt8(g->graph, *g->node));
    EXPECT_FALSE(absorbsBatchNorm(g->graph, *g->node));
    EXPECT_FALSE(combinesActivations(g->graph, *g->node));
    EXPECT_FALSE(isShapeComputation(g->graph, *g->node));
  }
  EXPECT_EQ(opInfoFor("NoSuchOp", 13), nullptr);
  EXPECT_EQ(opInfoFor("Conv", 13), OpRegistry::builtin().find("", "Conv", 13));
}

// Facts are per op: its entries for different opset ranges agree (moves_int8 aside, which
// follows the types ONNX allows at each opset).
TEST(OpTraits, EveryEntryOfAnOpCarriesTheSameFacts) {
  std::map<std::string, const OpInfo*> first;
  for (const OpInfo& e : OpRegistry::builtin().entries()) {
    const std::string key = e.domain + "::" + e.op_type;
    auto [it, inserted] = first.emplace(key, &e);
    if (inserted) continue;
    const OpInfo& f = *it->second;
    SCOPED_TRACE(key + " from opset " + std::to_string(e.since_version));
    EXPECT_EQ(e.weight_inputs, f.weight_inputs);
    EXPECT_EQ(e.bias_input, f.bias_input);
    EXPECT_EQ(e.weight_layout, f.weight_layout);
    EXPECT_EQ(e.absorbs_batchnorm, f.absorbs_batchnorm);
    EXPECT_EQ(e.combines_activations, f.combines_activations);
    EXPECT_EQ(e.moves_data_only, f.moves_data_only);
    EXPECT_EQ(e.layout_only, f.layout_only);
    EXPECT_EQ(e.shape_computation, f.shape_computation);
    EXPECT_EQ(e.output_sign, f.output_sign);
    EXPECT_EQ(static_cast<bool>(e.output_sign_of), static_cast<bool>(f.output_sign_of));
  }
}

TEST(OpTraits, OrtEmulationKeepsTheFactsOfTheOpsItReplaces) {
  const OpInfo* matmul = ortEmulationRegistry().find("", "MatMul", 13);
  ASSERT_NE(matmul, nullptr);
  EXPECT_EQ(matmul->weight_inputs, std::vector<int>{1});
  EXPECT_EQ(matmul->weight_layout, WeightLayout::LastAxis);
  EXPECT_TRUE(matmul->combines_activations);
  const OpInfo* softmax = ortEmulationRegistry().find("", "Softmax", 13);
  ASSERT_NE(softmax, nullptr);
  EXPECT_EQ(softmax->output_sign, OutputSign::NonNegative);
  OpRegistry empty;
  EXPECT_THROW(
      empty.replaceLowering("", "MatMul", OpRegistry::builtin().find("", "MatMul", 13)->run),
      Error);
}

}  // namespace
}  // namespace qforge
