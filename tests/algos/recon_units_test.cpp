// Reconstruction units on a prepared residual CNN: which nodes form each layer and block, and
// that feeding a unit's entry value runs exactly what produces its exit value.
#include <gtest/gtest.h>

#include <algorithm>

#include "algos/recon_units.h"
#include "backends/backend_config.h"
#include "core/error.h"
#include "ir/onnx_import.h"
#include "passes/fake_quantize_node.h"
#include "support/checks.h"
#include "support/head_split_graph.h"
#include "support/quant_graphs.h"
#include "support/residual_graph.h"

namespace qforge::testing {
namespace {

using algos::findReconUnits;
using algos::ReconGranularity;
using algos::ReconUnit;

std::unique_ptr<passes::PreparedModel> preparedResidualCnn() {
  auto m = passes::prepare(residualCnn(), tinyBackend());
  calibrateOn(*m, at::randn({8, 2, 6, 6}));
  return m;
}

std::vector<std::string> weightedNames(const ReconUnit& u) {
  std::vector<std::string> names;
  for (const Node* n : u.weighted)
    names.push_back(n->name());
  return names;
}

TEST(ReconUnits, LayersEndAtTheNextQuantizerForkOrResidualAdd) {
  auto m = preparedResidualCnn();
  const auto units = findReconUnits(m->graph(), ReconGranularity::Layer);
  ASSERT_EQ(units.size(), 6u);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"x", "relu_a_out"},          {"relu_a_out", "relu_b_out"},
      {"relu_b_out", "conv_c_out"}, {"relu_add_out", "relu_d_out"},
      {"relu_d_out", "flat_out"},   {"flat_out", "y"}};
  const std::vector<std::string> anchors = {"conv_a", "conv_b", "conv_c", "conv_d", "conv_e", "fc"};
  for (size_t i = 0; i < units.size(); ++i) {
    SCOPED_TRACE(anchors[i]);
    EXPECT_EQ(units[i].entry, expected[i].first);
    EXPECT_EQ(units[i].exit, expected[i].second);
    EXPECT_EQ(weightedNames(units[i]), std::vector<std::string>{anchors[i]});
    EXPECT_EQ(units[i].weight_quantizers.size(), 1u);  // the bias stays float in this backend
    EXPECT_EQ(units[i].act_quantizers.size(), 1u);     // the layer's own input quantizer
    EXPECT_FALSE(units[i].residual);
  }
  // conv_e's chain runs to the Flatten.
  EXPECT_EQ(countOps(units[4].nodes, "GlobalAveragePool"), 1u);
}

TEST(ReconUnits, BlocksFollowTheResidualAndGroupPlainLayers) {
  auto m = preparedResidualCnn();
  const auto units = findReconUnits(m->graph(), ReconGranularity::Block, 3);
  ASSERT_EQ(units.size(), 3u);
  // Each block ends with the quantizer the next one reads through ("fq/<value>_out").
  EXPECT_EQ(weightedNames(units[0]), std::vector<std::string>{"conv_a"});
  EXPECT_EQ(units[0].entry, "x");
  EXPECT_EQ(units[0].exit, "fq/relu_a_out_out");
  EXPECT_EQ(weightedNames(units[1]), (std::vector<std::string>{"conv_b", "conv_c"}));
  EXPECT_TRUE(units[1].residual);
  EXPECT_EQ(units[1].entry, "fq/relu_a_out_out");
  EXPECT_EQ(units[1].exit, "fq/relu_add_out_out");
  EXPECT_EQ(countOps(units[1].nodes, "Add"), 1u);
  EXPECT_EQ(weightedNames(units[2]), (std::vector<std::string>{"conv_d", "conv_e", "fc"}));
  EXPECT_EQ(units[2].exit, "y");
  EXPECT_EQ(units[2].name, "conv_d..fc");

  // One layer per group: the plain layers stand alone, the weightless pool joins conv_e.
  const auto single = findReconUnits(m->graph(), ReconGranularity::Block, 1);
  ASSERT_EQ(single.size(), 5u);
  EXPECT_EQ(weightedNames(single[1]), (std::vector<std::string>{"conv_b", "conv_c"}));
  EXPECT_EQ(countOps(single[3].nodes, "GlobalAveragePool"), 1u);
  EXPECT_EQ(single[4].entry, "fq/flat_out_out");
  EXPECT_EQ(weightedNames(single[4]), std::vector<std::string>{"fc"});
}

TEST(ReconUnits, FeedingTheEntryRunsExactlyTheUnit) {
  auto m = preparedResidualCnn();
  const at::Tensor x = at::randn({4, 2, 6, 6});
  for (ReconGranularity g : {ReconGranularity::Layer, ReconGranularity::Block}) {
    for (const ReconUnit& u : findReconUnits(m->graph(), g)) {
      SCOPED_TRACE(u.name);
      TensorMap whole = m->executor().run({{"x", x}}, {u.entry, u.exit});
      TensorMap part = m->executor().run({{u.entry, whole.at(u.entry)}}, {u.exit});
      EXPECT_TRUE(at::equal(part.at(u.exit), whole.at(u.exit)));
      // Every node of the unit lies between the two values; nothing before the entry is in it.
      for (const Node* n : u.nodes)
        EXPECT_NE(n->output(0)->name(), u.entry);
    }
  }
}

// Reconstruction compares a unit's exit sample by sample, so a layer's chain ends before a
// Reshape that may fold the samples into another axis (-1) and before a Transpose that moves them
// (a ViT's head split); a Reshape copying axis 0 (0) is followed up to that Transpose.
TEST(ReconUnits, ALayerEndsBeforeAnOpThatMayMoveTheSamplesOffAxisZero) {
  for (int64_t first_dim : {int64_t{-1}, int64_t{0}}) {
    SCOPED_TRACE(first_dim);
    auto m = passes::prepare(headSplitGraph(first_dim),
                             tinyBackend({{"ops", {{"MatMul", "quantizable"}}}}));
    calibrateOn(*m, at::randn({4, 3, 16}));
    const auto layers = findReconUnits(m->graph(), ReconGranularity::Layer);
    ASSERT_EQ(layers.size(), 1u);
    EXPECT_EQ(weightedNames(layers[0]), std::vector<std::string>{"matmul"});
    EXPECT_EQ(layers[0].entry, "x");
    EXPECT_EQ(layers[0].exit, first_dim == 0 ? "heads" : "mm_out");
    EXPECT_EQ(countOps(layers[0].nodes, "Reshape"), first_dim == 0 ? 1u : 0u);
    EXPECT_EQ(countOps(layers[0].nodes, "Transpose"), 0u);
    // A block runs on to the merge of the heads, where the samples lead again.
    const auto blocks = findReconUnits(m->graph(), ReconGranularity::Block);
    ASSERT_EQ(blocks.size(), 1u);
    EXPECT_EQ(blocks[0].exit, "y");
    EXPECT_EQ(countOps(blocks[0].nodes, "Transpose"), 1u);
  }
}

TEST(ReconUnits, AGraphWithoutQuantizedWeightsHasNothingToReconstruct) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* r = g.addNode("Relu", {x}, {"y"}, "relu");
  g.addOutput(r->output(0));
  try {
    findReconUnits(g, ReconGranularity::Block);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nothing to reconstruct"), std::string::npos) << e.what();
  }
}

TEST(ReconUnits, NodesBetweenRefusesARegionWithASecondInput) {
  auto m = preparedResidualCnn();
  // From relu_b's output alone, the Add's other input (relu_a) cannot be computed.
  EXPECT_THROW(algos::nodesBetween(m->graph(), "relu_b_out", "relu_add_out"), Error);
}

}  // namespace
}  // namespace qforge::testing

namespace qforge::testing {
namespace {

// The zoo ViT on the Academic backend: the patch embedding, then each transformer block's
// attention and MLP halves (each closed by its residual Add), then the head.
TEST(ReconUnits, TheViTSplitsIntoAttentionAndMlpBlocks) {
  auto m = passes::prepare(importOnnxFile(std::string(QFORGE_SOURCE_DIR) + "/models/zoo/vit.onnx"),
                           backends::loadBackend("Academic"));
  m->setMode(quant::FakeQuantMode::Calibration);
  m->executor().run({{"image", at::rand({2, 1, 28, 28})}});
  const auto units = findReconUnits(m->graph(), ReconGranularity::Block);
  ASSERT_EQ(units.size(), 8u);
  EXPECT_EQ(weightedNames(units[0]), std::vector<std::string>{"/patch_embed/Conv"});
  for (int block = 0; block < 3; ++block) {
    const std::string p = "/blocks/blocks." + std::to_string(block);
    const ReconUnit& attn = units[1 + 2 * block];
    const ReconUnit& mlp = units[2 + 2 * block];
    EXPECT_EQ(weightedNames(attn),
              (std::vector<std::string>{p + "/attn/qkv/MatMul", p + "/attn/proj/MatMul"}));
    EXPECT_EQ(countOps(attn.nodes, "Softmax"), 1u);
    EXPECT_TRUE(attn.residual);
    EXPECT_EQ(weightedNames(mlp),
              (std::vector<std::string>{p + "/mlp/mlp.0/MatMul", p + "/mlp/mlp.2/MatMul"}));
    EXPECT_EQ(countOps(mlp.nodes, "Erf"), 1u);
  }
  EXPECT_EQ(weightedNames(units[7]), std::vector<std::string>{"/head/Gemm"});
}

// Every unit of the zoo ViT, layers (AdaRound) and blocks (BRECQ, QDrop), starts and ends at a
// value with one row per sample on axis 0: the qkv layers used to end at the head split's
// [3, N, heads, tokens, dim] Transpose.
TEST(ReconUnits, EveryViTUnitHasTheSamplesOnAxisZeroAtItsEntryAndExit) {
  auto m = passes::prepare(importOnnxFile(std::string(QFORGE_SOURCE_DIR) + "/models/zoo/vit.onnx"),
                           backends::loadBackend("Academic"));
  const at::Tensor images = at::rand({5, 1, 28, 28});
  m->setMode(quant::FakeQuantMode::Calibration);
  m->executor().run({{"image", images}});
  m->setMode(quant::FakeQuantMode::Float);
  int qkv_layers = 0;
  for (ReconGranularity g : {ReconGranularity::Layer, ReconGranularity::Block}) {
    const auto units = findReconUnits(m->graph(), g);
    ASSERT_EQ(units.size(), g == ReconGranularity::Layer ? 14u : 8u);
    for (const ReconUnit& u : units) {
      SCOPED_TRACE(u.name);
      const TensorMap values = m->executor().run({{"image", images}}, {u.entry, u.exit});
      EXPECT_EQ(values.at(u.entry).size(0), 5) << u.entry;
      EXPECT_EQ(values.at(u.exit).size(0), 5) << u.exit;
      // The qkv layer ends at its bias Add, before the Reshape into heads.
      const std::string qkv = "/attn/qkv/MatMul";
      if (g != ReconGranularity::Layer || u.name.size() < qkv.size() ||
          u.name.compare(u.name.size() - qkv.size(), qkv.size(), qkv) != 0) {
        continue;
      }
      ++qkv_layers;
      EXPECT_EQ(u.exit, u.name.substr(0, u.name.size() - qkv.size()) + "/attn/qkv/Add_output_0");
    }
  }
  EXPECT_EQ(qkv_layers, 3);
}

}  // namespace
}  // namespace qforge::testing
